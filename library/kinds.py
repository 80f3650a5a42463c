"""Saving and reading back each kind of entry: what is checked, which columns are filled,
and the content's form (the file as given, or canonical JSON)."""

from __future__ import annotations

import hashlib
import json
import math
from functools import cache
from pathlib import Path

import pandas as pd

from library.entries import Saved, check_figures
from library.errors import LibraryError
from library.jsontext import parse_json
from library.store import Library
from simulator.errors import InputError
from simulator.inputs import scenarios

DEFAULT_ENGINE = next(c.default for c in scenarios.COLUMNS if c.name == "engine")
"""The engine of a scenario or report row that names none (the scenario table's default)."""
MAX_CELL = 1e308
"""Largest number a report's cell may hold (a float's range)."""
SIMULATOR_DIR = Path(__file__).resolve().parent.parent / "simulator"


@cache
def model_version() -> str:
    """SpecPlan's model version: the first 12 hex digits of the sha256 of simulator/*.py,
    so a report says which model computed it, with or without git."""
    h = hashlib.sha256()
    for path in sorted(SIMULATOR_DIR.glob("*.py")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def canonical_json(value) -> bytes:
    """JSON with sorted keys and no spaces: equal values give equal bytes (and hash)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def save_profile(lib: Library, name: str, data: bytes, *, notes: str = "", who=None) -> Saved:
    """A specplan.profile/v1 file (JSON or CSV), checked field by field before it is kept."""
    from simulator.inputs.profile import load_profile

    profile = load_profile(bytes(data), name=f"'{name[:80]}'")
    return lib.save(
        "profile",
        name,
        bytes(data),
        notes=notes,
        who=who,
        device=profile.device.name[:200],
        model=", ".join(m.id for m in profile.models)[:500],
        facts={
            "kind": profile.device.kind,
            "dtype": profile.settings.dtype,
            "measurements": len(profile.measurements),
            "created": str(profile.created or ""),
        },
    )


def load_profile_entry(lib: Library, name: str):
    """The kept profile `name`, parsed (`simulator.inputs.profile.Profile`)."""
    from simulator.inputs.profile import load_profile

    return load_profile(lib.content("profile", name), name=f"'{name[:80]}'")


def save_benchmark(
    lib: Library,
    name: str,
    data: bytes,
    *,
    device: str,
    engine: str,
    engine_version: str,
    model: str = "",
    notes: str = "",
    who=None,
) -> Saved:
    """An engine's benchmark result file, kept as uploaded, with its device, engine and
    engine version (each required)."""
    for field, value in (("device", device), ("engine", engine), ("version", engine_version)):
        if not str(value).strip():
            raise LibraryError(f"an engine result needs its {field}", field=field)
    return lib.save(
        "benchmark",
        name,
        bytes(data),
        notes=notes,
        who=who,
        device=device,
        engine=engine,
        engine_version=engine_version,
        model=model,
    )


def save_scrape(
    lib: Library, name: str, raw: str | bytes, *, k: int | None = None, notes="", who=None
) -> Saved:
    """A vLLM /metrics scrape: the raw text, and the rates parsed from it in `facts`."""
    from simulator.inputs.metrics import parse_vllm_metrics

    raw = raw.encode() if isinstance(raw, str) else bytes(raw)
    m = parse_vllm_metrics(raw, k=k, source=name[:80])
    facts = {
        "alpha": float(m.alpha),
        "mean_accepted_tokens": float(m.mean_accepted_tokens),
        "k": int(m.k),
        "draft_acceptance_rate": float(m.draft_acceptance_rate),
        "acceptance_per_position": m.acceptance_per_position,
    }
    return lib.save("scrape", name, raw, notes=notes, who=who, facts=facts)


def save_scenario(
    lib: Library, name: str, page: str, params: dict[str, str], *, notes="", who=None
) -> Saved:
    """The state a dashboard link carries: its page and query parameters (strings)."""
    clean = {str(k): str(v) for k, v in params.items()}
    content = canonical_json({"page": str(page), "params": clean})
    return lib.save(
        "scenario",
        name,
        content,
        notes=notes,
        who=who,
        device=clean.get("gpu", ""),
        model=clean.get("target", ""),
        engine=clean.get("engine") or DEFAULT_ENGINE,
        facts={"page": str(page)},
    )


def _entry_json(content: bytes, label: str) -> dict:
    """A scenario's or report's content: a JSON object, else LibraryError."""
    value = parse_json(content, label, field="content", allow_nan=False)
    if not isinstance(value, dict):
        raise LibraryError("is not a JSON object", file=label, field="content")
    return value


def scenario_value(content: bytes, label: str) -> tuple[str, dict[str, str]]:
    """(page, query parameters) of a scenario's content, checked as `save_scenario`
    writes it: {"page": text, "params": {text: text}}."""
    value = _entry_json(content, label)
    page, params = value.get("page"), value.get("params")
    if not isinstance(page, str):
        raise LibraryError("missing or not text", file=label, field="page")
    if not isinstance(params, dict):
        raise LibraryError("missing or not an object", file=label, field="params")
    bad = [k for k, v in params.items() if not isinstance(v, str)]
    if bad:
        raise LibraryError(f"'{bad[0][:80]}' is not text", file=label, field="params")
    return page, params


def load_scenario(lib: Library, name: str) -> tuple[str, dict[str, str]]:
    """(page, query parameters) of the kept scenario `name`; LibraryError, naming the
    field, when its content is not a scenario."""
    return scenario_value(lib.content("scenario", name), f"scenario '{name[:80]}'")


def _records(df: pd.DataFrame) -> list[dict]:
    """Rows as JSON-safe dicts: NaN and infinities become None."""
    out = []
    for row in df.to_dict(orient="records"):
        out.append(
            {
                str(k): (None if isinstance(v, float) and not math.isfinite(v) else _plain(v))
                for k, v in row.items()
            }
        )
    return out


def _plain(value):
    if hasattr(value, "item"):
        return value.item()
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def save_report(
    lib: Library,
    name: str,
    rows: pd.DataFrame,
    outputs: pd.DataFrame,
    *,
    notes: str = "",
    who=None,
) -> Saved:
    """A Reports table: the edited rows and the outputs as computed, with the model
    version that computed them."""
    version = model_version()
    content = canonical_json(
        {"rows": _records(rows), "outputs": _records(outputs), "model_version": version}
    )
    return lib.save(
        "report",
        name,
        content,
        notes=notes,
        who=who,
        model_version=version,
        model=", ".join(sorted({str(t) for t in rows.get("target", [])}))[:500],
        device=", ".join(sorted({str(g) for g in rows.get("gpu", [])}))[:200],
        engine=", ".join(sorted({str(g) for g in rows.get("engine", [DEFAULT_ENGINE])}))[:64],
        facts={"rows": len(rows)},
    )


def _cell_ok(value) -> bool:
    if value is None or isinstance(value, str | bool):
        return True
    return isinstance(value, int | float) and abs(value) <= MAX_CELL


def _table(value, label: str, field: str) -> pd.DataFrame:
    if not isinstance(value, list) or not all(isinstance(r, dict) for r in value):
        raise LibraryError("missing or not a list of rows (objects)", file=label, field=field)
    for i, row in enumerate(value, start=1):
        bad = [k for k, v in row.items() if not _cell_ok(v)]
        if bad:
            raise LibraryError(
                f"row {i}'s '{bad[0][:80]}' is not text or a finite number",
                file=label,
                field=field,
            )
    return pd.DataFrame(value)


def report_value(content: bytes, label: str) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """(rows, outputs, model version) of a report's content, checked as `save_report`
    writes it: lists of rows whose cells are text or finite numbers, and a version."""
    value = _entry_json(content, label)
    rows = _table(value.get("rows"), label, "rows")
    outputs = _table(value.get("outputs"), label, "outputs")
    version = value.get("model_version")
    if not isinstance(version, str):
        raise LibraryError("missing or not text", file=label, field="model_version")
    return rows, outputs, version


def load_report(lib: Library, name: str) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """(rows, outputs as computed, model version) of the kept report `name`;
    LibraryError, naming the field, when its content is not a report."""
    return report_value(lib.content("report", name), f"report '{name[:80]}'")


def save_validation(
    lib: Library, name: str, errors: pd.DataFrame, figures: dict[str, float], *, notes="", who=None
) -> Saved:
    """A `validate` run: its per-case errors (CSV) and its headline figures, one row each,
    so a figure can be followed from run to run."""
    figures = check_figures(figures)
    return lib.save(
        "validation",
        name,
        errors.to_csv(index=False).encode(),
        notes=notes,
        who=who,
        model_version=model_version(),
        figures=figures,
        facts={"cases": len(errors)},
    )


# ---------------------------------------------------------------- a user's own model
MODEL_CONTENT_KEYS = ("config", "hf_quant_config")
"""A model entry's content: canonical JSON of {"config": config.json's text as given,
"hf_quant_config": hf_quant_config.json's text or null}; the same two files give the same
bytes, so saving them twice keeps one entry."""


def _text(data: str | bytes, source: str) -> str:
    if isinstance(data, str):
        return data
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"is not UTF-8 text (byte {exc.start})", file=source) from None


def model_content(config: str | bytes, quant: str | bytes | None = None) -> bytes:
    """The content a model entry keeps for these files (`MODEL_CONTENT_KEYS`)."""
    quant_text = None if quant is None else _text(quant, "hf_quant_config.json")
    return canonical_json(
        {"config": _text(config, "config.json"), "hf_quant_config": quant_text or None}
    )


def model_files(content: bytes, source: str = "model entry") -> tuple[str, str | None]:
    """(config.json text, hf_quant_config.json text or None) of a model entry's content."""
    value = parse_json(content, source, field="content")
    if not isinstance(value, dict) or set(value) != set(MODEL_CONTENT_KEYS):
        raise LibraryError(
            "a model entry is an object with the keys 'config' and 'hf_quant_config'",
            file=source,
            field="content",
        )
    config, quant = value["config"], value["hf_quant_config"]
    if not isinstance(config, str) or not (quant is None or isinstance(quant, str)):
        raise LibraryError(
            "'config' must be config.json's text, 'hf_quant_config' its text or null",
            file=source,
            field="content",
        )
    return config, quant


def read_model(config: str | bytes, quant: str | bytes | None = None, *, model_id: str):
    """The `ModelSpec` of a config.json (and hf_quant_config.json), checked field by field
    by `simulator.inputs.hf_config.read_config`; InputError names the field."""
    from simulator.inputs.hf_config import read_config

    return read_config(config, quant or None, model_id=model_id, source="config.json")


def _model_columns(spec, quant: str | None) -> dict:
    """What a model entry shows beside its content: the model's name, and its shape."""
    return {
        "model": str(spec.name)[:500],
        "facts": {
            "total_params": int(spec.total_params),
            "active_params": int(spec.active_params),
            "num_layers": int(spec.num_layers),
            "hidden_size": int(spec.hidden_size),
            "moe": bool(spec.is_moe),
            "mla": bool(spec.is_mla),
            "checkpoint_dtype": str(spec.checkpoint_dtype),
            "hf_quant_config": quant is not None,
        },
    }


def save_model(
    lib: Library,
    name: str,
    config: str | bytes,
    quant: str | bytes | None = None,
    *,
    notes: str = "",
    who=None,
) -> Saved:
    """A user's own model: its config.json (and hf_quant_config.json) text, read by the
    same parser the dashboard plans with before it is kept."""
    content = model_content(config, quant)
    config_text, quant_text = model_files(content)
    spec = read_model(config_text, quant_text, model_id=str(name).strip() or "model")
    return lib.save(
        "model", name, content, notes=notes, who=who, **_model_columns(spec, quant_text)
    )


def load_model_entry(lib: Library, name: str, *, model_id: str):
    """The kept model `name` as a `ModelSpec` with the id `model_id`."""
    config, quant = model_files(lib.content("model", name), source=f"model '{name[:80]}'")
    return read_model(config, quant, model_id=model_id)


def checked_columns(kind: str, name: str, content: bytes, facts: dict | None = None) -> dict:
    """The columns a kind derives from its content, the content checked as that kind's
    own save checks it (or as it writes it): what `library import` of an export keeps in
    place of the export's own (which anyone may have edited). `facts`, the export's, give
    a scrape its K where the scrape cannot tell it. {} where nothing is derived."""
    label = f"'{name[:80]}'"
    if kind == "profile":
        from simulator.inputs.profile import load_profile

        profile = load_profile(bytes(content), name=label)
        return {
            "device": profile.device.name[:200],
            "model": ", ".join(m.id for m in profile.models)[:500],
        }
    if kind == "scrape":
        from simulator.inputs.metrics import parse_vllm_metrics

        k = (facts or {}).get("k")
        k = k if isinstance(k, int) and not isinstance(k, bool) else None
        parse_vllm_metrics(bytes(content), k=k, source=name[:80])
        return {}
    if kind == "model":
        config, quant = model_files(content, source=f"model {label}")
        spec = read_model(config, quant, model_id=name.strip() or "model")
        return _model_columns(spec, quant)
    if kind == "scenario":
        scenario_value(content, f"scenario {label}")
    elif kind == "report":
        report_value(content, f"report {label}")
    elif kind == "validation":
        _text(content, f"validation {label}")
    return {}
