"""Saving and reading back each kind of entry: what is checked, which columns are filled,
and the content's form (the file as given, or canonical JSON)."""

from __future__ import annotations

import hashlib
import json
import math
from functools import cache
from pathlib import Path

import pandas as pd

from library.entries import Saved
from library.errors import LibraryError
from library.store import Library
from simulator.errors import InputError

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
        facts={"page": str(page)},
    )


def load_scenario(lib: Library, name: str) -> tuple[str, dict[str, str]]:
    """(page, query parameters) of the kept scenario `name`."""
    value = json.loads(lib.content("scenario", name))
    return value["page"], value["params"]


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
        facts={"rows": len(rows)},
    )


def load_report(lib: Library, name: str) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """(rows, outputs as computed, model version) of the kept report `name`."""
    value = json.loads(lib.content("report", name))
    return pd.DataFrame(value["rows"]), pd.DataFrame(value["outputs"]), value["model_version"]


def save_validation(
    lib: Library, name: str, errors: pd.DataFrame, figures: dict[str, float], *, notes="", who=None
) -> Saved:
    """A `validate` run: its per-case errors (CSV) and its headline figures, one row each,
    so a figure can be followed from run to run."""
    bad = [m for m, v in figures.items() if not math.isfinite(float(v))]
    if bad:
        raise InputError(f"figure '{bad[0]}' is not a finite number", field="figures")
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
