"""Loaders for the plain-text catalogs in `data/`: GPUs, models and acceptance priors.

Each row becomes a frozen dataclass from `simulator.inputs.specs`; a bad row raises
`InputError` naming the file, the row and the field.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import os
import typing
from functools import cache
from pathlib import Path
from typing import Any

from simulator.errors import InputError, not_a_number
from simulator.inputs.specs import WEIGHT_DTYPES, GPUSpec, ModelSpec

DATA_DIR = Path(__file__).resolve().parent.parent.parent / "data"
GPUS_CSV = DATA_DIR / "gpus.csv"
MODELS_CSV = DATA_DIR / "models.csv"
PRIORS_CSV = DATA_DIR / "acceptance_priors.csv"

_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no", ""}
MAX_CATALOG_BYTES = 16 * 1024 * 1024
"""A catalog is a few hundred rows of text (the bundled ones are under 100 kB)."""
DOC_COLUMNS = frozenset({"notes", "price_source"})
"""Columns a catalog may carry for its readers only: the simulator does not read them."""
LIMITS = {
    "memory_gb": 100_000.0,
    "hbm_bandwidth_gbps": 1e6,
    "bf16_tflops": 1e6,
    "fp8_tflops": 1e6,
    "int8_tops": 1e6,
    "interconnect_gbps": 1e6,
    "price_usd_per_hr": 1e5,
    "total_params": 1e14,
    "active_params": 1e14,
    "num_layers": 10_000,
    "hidden_size": 1 << 20,
    "num_attention_heads": 1 << 16,
    "num_kv_heads": 1 << 16,
    "head_dim": 1 << 16,
    "intermediate_size": 1 << 22,
    "vocab_size": 1 << 24,
    "num_experts": 1 << 16,
    "experts_per_token": 1 << 16,
    "moe_intermediate_size": 1 << 22,
    "num_shared_experts": 1 << 16,
    "num_dense_layers": 10_000,
    "kv_lora_rank": 1 << 16,
    "qk_rope_head_dim": 1 << 16,
    "v_head_dim": 1 << 16,
    "max_position_embeddings": 1 << 30,
}
"""Largest value of each numeric column: 100 to 1,000 times today's largest GPU or model,
and small enough that products of them (bytes of weights and KV cache, FLOPs) stay finite
and exact where they are counts."""
MINIMUMS = {
    "hbm_bandwidth_gbps": 1e-3,
    "bf16_tflops": 1e-3,
    "fp8_tflops": 1e-3,
    "int8_tops": 1e-3,
    "interconnect_gbps": 1e-3,
}
"""Smallest value above 0 of each rate column (GB/s, TFLOP/s, TOPS): 1 MB/s and 1 GFLOP/s
are far below any accelerator or CPU, and bytes or FLOPs divided by them stay finite. A
subnormal rate (1e-310 GB/s) passed `> 0` and made every step time infinite. 0 itself is
refused as a required rate by `load_gpus`, and means "not given" in the optional ones."""


def _read_rows(path: Path) -> list[tuple[int, dict[str, str]]]:
    """Rows as (spreadsheet row number, {column: text}); header names are stripped, and a
    header naming a column twice or a row with more values than the header is refused."""
    file = str(path)
    try:
        if path.is_dir():
            raise InputError("is a folder; give a CSV file", file=file)
        if path.stat().st_size > MAX_CATALOG_BYTES:
            raise InputError(f"is larger than {MAX_CATALOG_BYTES:,} bytes", file=file)
        with open(path, newline="", encoding="utf-8") as fh:
            records = list(csv.reader(fh))
    except FileNotFoundError:
        raise InputError("file not found", file=file) from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"not a readable CSV file ({exc})", file=file) from None
    except OSError as exc:
        raise InputError(f"cannot be read ({exc.strerror or exc})", file=file) from None
    if not records or not records[0]:
        raise InputError("empty file, expected a header row", file=file)
    header = [h.strip() for h in records[0]]
    for i, name in enumerate(header):
        if name in header[:i]:
            raise InputError("column appears twice in the header", file=file, row=1, field=name)
    rows = []
    for i, values in enumerate(records[1:]):
        if not values:
            continue
        if len(values) > len(header):
            raise InputError(
                f"has {len(values)} values but the header names {len(header)} columns",
                file=file,
                row=i + 2,
            )
        padded = values + [""] * (len(header) - len(values))
        rows.append((i + 2, dict(zip(header, padded, strict=True))))
    return rows


def _convert(value: str | None, typ: Any, *, required: bool, file: str, row: int, field: str):
    text = (value or "").strip()
    if text == "":
        if required:
            raise InputError("is empty but required", file=file, row=row, field=field)
        return None
    if typ is bool:
        low = text.lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise InputError(f"'{text}' is not true/false", file=file, row=row, field=field)
    if typ in (int, float):
        try:
            number = float(text)
        except ValueError:
            raise InputError(not_a_number(text), file=file, row=row, field=field) from None
        if not math.isfinite(number) or number < 0:
            raise InputError(
                f"{text[:40]} must be a finite number >= 0", file=file, row=row, field=field
            )
        most = LIMITS.get(field, 1e15)
        if number > most:
            raise InputError(f"{text[:40]} must be <= {most:g}", file=file, row=row, field=field)
        least = MINIMUMS.get(field, 0.0)
        if 0 < number < least:
            raise InputError(
                f"{text[:40]} must be at least {least:g}", file=file, row=row, field=field
            )
        if typ is int:
            if number != int(number):
                raise InputError(f"{text} must be a whole number", file=file, row=row, field=field)
            return int(number)
        return number
    return text


def _scalar_type(hint: Any) -> type:
    """The scalar type of a field annotation: `float | None` -> float."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if args else hint


def _load(path: Path, cls: type, required: set[str]) -> dict[str, Any]:
    file = str(path)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = {
        name: (
            bool
            if "bool" in str(f.type)
            else int
            if str(f.type).startswith("int")
            else float
            if "float" in str(f.type)
            else str
        )
        for name, f in fields.items()
    }
    out: dict[str, Any] = {}
    rows = _read_rows(path)
    columns = list(rows[0][1]) if rows else []
    unknown = [c for c in columns if c not in fields and c not in DOC_COLUMNS]
    if unknown:
        shown = unknown[0][:80]
        raise InputError(
            f"'{shown}' is not a column of this catalog (columns: "
            f"{', '.join([*fields, *sorted(DOC_COLUMNS)])})",
            file=file,
            row=1,
            field=shown,
        )
    for row_no, row in rows:
        missing = required - {k for k in row if k}
        if missing:
            raise InputError(
                f"missing column(s) {sorted(missing)}", file=file, row=1, field=sorted(missing)[0]
            )
        kwargs = {}
        for name in fields:
            if name not in row:
                continue
            value = _convert(
                row[name], hints[name], required=name in required, file=file, row=row_no, field=name
            )
            if value is not None:
                kwargs[name] = value
        ident = kwargs["id"]
        if ident in out:
            raise InputError(f"duplicate id '{ident}'", file=file, row=row_no, field="id")
        out[ident] = cls(**kwargs)
    return out


_GPU_REQUIRED = {
    "id",
    "name",
    "memory_gb",
    "hbm_bandwidth_gbps",
    "bf16_tflops",
    "interconnect_gbps",
}
_MODEL_REQUIRED = {
    "id",
    "name",
    "tokenizer",
    "total_params",
    "active_params",
    "num_layers",
    "hidden_size",
    "num_attention_heads",
    "num_kv_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
}


def load_gpus(path: str | Path = GPUS_CSV) -> dict[str, GPUSpec]:
    """GPU catalog keyed by id. Raises `InputError` on a bad row."""
    gpus = _load(Path(path), GPUSpec, _GPU_REQUIRED)
    for row_no, gpu in enumerate(gpus.values(), start=2):
        # A replica of several GPUs talks over the interconnect: 0 would make it free.
        for name in ("memory_gb", "hbm_bandwidth_gbps", "bf16_tflops", "interconnect_gbps"):
            if getattr(gpu, name) <= 0:
                raise InputError("must be > 0", file=str(path), row=row_no, field=name)
    return gpus


def load_models(path: str | Path = MODELS_CSV) -> dict[str, ModelSpec]:
    """Model catalog keyed by id. Raises `InputError` on a bad or inconsistent row."""
    models = _load(Path(path), ModelSpec, _MODEL_REQUIRED)
    file = str(path)
    for row_no, m in enumerate(models.values(), start=2):
        for name in (
            "total_params",
            "active_params",
            "num_layers",
            "hidden_size",
            "num_attention_heads",
            "num_kv_heads",
            "head_dim",
            "vocab_size",
        ):
            if getattr(m, name) <= 0:
                raise InputError("must be > 0", file=file, row=row_no, field=name)
        if m.checkpoint_dtype not in WEIGHT_DTYPES:
            raise InputError(
                f"'{m.checkpoint_dtype}' is not one of {', '.join(WEIGHT_DTYPES)}",
                file=file,
                row=row_no,
                field="checkpoint_dtype",
            )
        if m.active_params > m.total_params:
            raise InputError("exceeds total_params", file=file, row=row_no, field="active_params")
        # Every token reads its embedding row and multiplies through the output head, so
        # fewer active parameters than those would leave a negative matmul count.
        embeddings = m.embedding_params
        if m.active_params < embeddings:
            raise InputError(
                f"{m.active_params:,} is fewer than the {embeddings:,} parameters of the "
                "embeddings and output head (vocab_size x hidden_size, twice unless tied)",
                file=file,
                row=row_no,
                field="active_params",
            )
        if m.num_attention_heads % m.num_kv_heads:
            raise InputError(
                f"{m.num_attention_heads} heads are not a multiple of {m.num_kv_heads} KV heads",
                file=file,
                row=row_no,
                field="num_kv_heads",
            )
        if m.is_moe and not (0 < m.experts_per_token <= m.num_experts):
            raise InputError(
                "must be in 1..num_experts for an MoE model",
                file=file,
                row=row_no,
                field="experts_per_token",
            )
        if m.is_moe and m.moe_intermediate_size <= 0:
            raise InputError(
                "must be > 0 for an MoE model", file=file, row=row_no, field="moe_intermediate_size"
            )
        if m.num_dense_layers > m.num_layers:
            raise InputError(
                f"exceeds num_layers {m.num_layers}",
                file=file,
                row=row_no,
                field="num_dense_layers",
            )
        if m.is_moe and m.always_active_params < embeddings:
            raise InputError(
                f"{m.total_params:,} leaves {m.always_active_params:,} parameters besides the "
                f"routed experts ({m.num_experts} x 3 x hidden_size x moe_intermediate_size x "
                f"{m.num_moe_layers} MoE layers), fewer than the {embeddings:,} of the embeddings",
                file=file,
                row=row_no,
                field="total_params",
            )
    return models


@cache
def default_gpus() -> dict[str, GPUSpec]:
    return load_gpus()


BUNDLED_SKIPPED: dict[str, str] = {}
"""Hugging Face id -> why its aiconfigurator-core config is not in `default_models()`
(an architecture `simulator.inputs.hf_config` does not price, or an id the CSV or an
earlier config already holds)."""

_SHAPE_FIELDS = (
    "num_layers",
    "hidden_size",
    "num_attention_heads",
    "num_kv_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    "num_experts",
    "experts_per_token",
    "moe_intermediate_size",
    "kv_lora_rank",
    "tie_word_embeddings",
)
"""What makes two catalog entries the same network for aiconfigurator-core's engine
(an instruct tune and its base model are)."""


def _bundled_cache() -> Path | None:
    """The file that keeps `bundled_models()` between processes (parsing the package's
    7.9 MB of configs takes ~150 ms; reading this back, ~3 ms): named by the package's
    version and folder and by this reader's source, so either changing starts afresh."""
    import hashlib
    import importlib.util

    spec = importlib.util.find_spec("aiconfigurator_core")
    if spec is None or spec.origin is None:
        return None
    from simulator.inputs import hf_config

    key = hashlib.sha256(str(Path(spec.origin).parent).encode())
    for path in (Path(hf_config.__file__), Path(__file__)):
        key.update(path.read_bytes())
    key.update(hf_config.aic_version().encode())
    return hf_config.cache_dir().parent / f"bundled-models-{key.hexdigest()[:16]}.json"


def _read_bundled_cache(path: Path | None) -> dict[str, ModelSpec] | None:
    import json

    try:
        kept = json.loads(path.read_text(encoding="utf-8")) if path else None
        models = {k: ModelSpec(**v) for k, v in kept["models"].items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
    # A local folder aiconfigurator-core builds from may have been cleared since.
    if any(m.aic_model.startswith("/") and not Path(m.aic_model).is_dir() for m in models.values()):
        return None
    BUNDLED_SKIPPED.update(kept.get("skipped", {}))
    return models


def _write_bundled_cache(path: Path | None, models: dict[str, ModelSpec]) -> None:
    import json
    import os

    if path is None:
        return
    text = json.dumps(
        {
            "models": {k: dataclasses.asdict(m) for k, m in models.items()},
            "skipped": BUNDLED_SKIPPED,
        }
    )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass


@cache
def bundled_models() -> dict[str, ModelSpec]:
    """One entry per config.json aiconfigurator-core ships, keyed by the repo name
    lowercased ("deepseek-v3", "gpt-oss-120b"). A config this reader does not price is
    left out, its reason in `BUNDLED_SKIPPED`; nothing here raises. Kept on disk
    between processes (`_bundled_cache`)."""
    path = _bundled_cache()
    kept = _read_bundled_cache(path)
    if kept is not None:
        return kept
    out = _parse_bundled()
    _write_bundled_cache(path, out)
    return out


def _parse_bundled() -> dict[str, ModelSpec]:
    from simulator.inputs.hf_config import bundled_configs, read_bundled

    out: dict[str, ModelSpec] = {}
    for hf_id, path in bundled_configs().items():
        try:
            spec = read_bundled(hf_id, path)
        except (InputError, OSError) as exc:
            BUNDLED_SKIPPED[hf_id] = str(exc)
            continue
        if spec.id in out:
            BUNDLED_SKIPPED[hf_id] = f"id '{spec.id}' is already {out[spec.id].hf_repo}"
            continue
        out[spec.id] = spec
    return out


def _with_aic_model(row: ModelSpec, bundled: dict[str, ModelSpec]) -> ModelSpec:
    """A hand-written row with the `aic_model` of the bundled config of its `hf_repo`, or
    of the same network (same shape, same checkpoint dtype) where the package ships
    that under another id."""
    if row.aic_model or not row.hf_repo:
        return row
    repo = row.hf_repo.lower()
    same = [m for m in bundled.values() if m.hf_repo.lower() == repo and m.aic_model]
    if not same:
        shape = tuple(getattr(row, f) for f in _SHAPE_FIELDS)
        same = [
            m
            for m in bundled.values()
            if m.aic_model
            and m.checkpoint_dtype == row.checkpoint_dtype
            and tuple(getattr(m, f) for f in _SHAPE_FIELDS) == shape
        ]
    if not same:
        return row
    return dataclasses.replace(row, aic_model=same[0].aic_model)


@cache
def default_models() -> dict[str, ModelSpec]:
    """The hand-written catalog (data/models.csv) and one entry per config.json
    aiconfigurator-core ships (`bundled_models`); the CSV wins where both hold an id."""
    return {**with_bundled(load_models()), **configured_models()}


MODEL_CONFIG_HELP = (
    "a Hugging Face config.json (or a folder holding one, with its hf_quant_config.json) "
    "whose model scenarios may name as target or draft, by the repo name of its "
    "_name_or_path lowercased, else its folder's (repeatable)"
)
MODEL_CONFIGS_ENV = "SPECPLAN_MODEL_CONFIGS"
"""config.json files or folders (os.pathsep between) whose models join every catalog of
this process and of the processes it starts (the search's Ray workers); set by
`use_model_configs` from the CLI's --model-config."""


def use_model_configs(paths) -> dict[str, ModelSpec]:
    """Read each config.json (a file or a folder holding one, a hf_quant_config.json beside
    it read too) and make its model part of `default_models()` and `catalog_models()` in
    this process and its children, under the id its `_name_or_path` or folder gives; a
    config's model replaces a catalog model of the same id. The models by id. Raises
    `InputError` naming the file and the field, or two configs of one id."""
    text = os.pathsep.join(str(Path(p).expanduser().resolve()) for p in paths)
    models = _read_configs(text)
    os.environ[MODEL_CONFIGS_ENV] = text
    configured_models.cache_clear()
    default_models.cache_clear()
    return models


@cache
def configured_models() -> dict[str, ModelSpec]:
    """The models of the configs `MODEL_CONFIGS_ENV` names (`use_model_configs`)."""
    return _read_configs(os.environ.get(MODEL_CONFIGS_ENV, ""))


def _read_configs(text: str) -> dict[str, ModelSpec]:
    from simulator.inputs.hf_config import read_config_file

    out: dict[str, ModelSpec] = {}
    for path in (p for p in text.split(os.pathsep) if p):
        spec = read_config_file(path)
        if spec.id in out:
            raise InputError(
                f"gives the id '{spec.id}' that another --model-config gives; rename one's "
                "folder or its _name_or_path",
                file=path,
                field="--model-config",
            )
        out[spec.id] = spec
    return out


def with_bundled(rows: dict[str, ModelSpec]) -> dict[str, ModelSpec]:
    """A model catalog's rows, each with the `aic_model` of its bundled config (the engine
    then prices MoE and MLA rows from its kernel tables), and every bundled config the
    catalog does not hold by id."""
    bundled = bundled_models()
    for ident in rows.keys() & bundled.keys():
        BUNDLED_SKIPPED.setdefault(bundled[ident].hf_repo, f"id '{ident}' is in the catalog CSV")
    out = {k: _with_aic_model(m, bundled) for k, m in rows.items()}
    out.update({k: m for k, m in bundled.items() if k not in rows})
    return out


def catalog_models(path: str | Path = MODELS_CSV) -> dict[str, ModelSpec]:
    """The models a `--models` catalog CSV gives the CLI: the bundled catalog for the
    default path, else that file's rows `with_bundled`. Raises `InputError` as
    `load_models` does."""
    if Path(path).resolve() == MODELS_CSV.resolve():
        return default_models()
    return {**with_bundled(load_models(path)), **configured_models()}


def _snapshot_repo(name: str) -> str:
    """The repo a local checkpoint path names: Hugging Face's cache layout
    (.../models--org--name/snapshots/<rev>) gives 'org/name', any other folder its
    own name."""
    parts = [p for p in name.replace("\\", "/").split("/") if p]
    for i, part in enumerate(parts):
        if (
            part.startswith("models--")
            and part.count("--") >= 2
            and (i + 1 == len(parts) or parts[i + 1] == "snapshots")
        ):
            return part[len("models--") :].replace("--", "/", 1)
    return parts[-1] if parts else ""


def resolve_model(name: str, models: dict[str, ModelSpec]) -> str | None:
    """The id in `models` that `name` means: a catalog id, a Hugging Face id
    ("deepseek-ai/DeepSeek-R1", any case) or a local checkpoint folder whose path ends
    in the repo name (".../models--moonshotai--Kimi-K2.5/snapshots/abc", "/data/Kimi-K2.5/");
    None where none matches."""
    text = str(name or "").strip()
    if not text:
        return None
    if text in models:
        return text
    lower = {k.lower(): k for k in models}
    if text.lower() in lower:
        return lower[text.lower()]
    local = text.startswith(("/", ".", "~")) or "\\" in text or text.count("/") > 1
    repo = _snapshot_repo(text) if local else text.rstrip("/")
    by_repo = {m.hf_repo.lower(): k for k, m in models.items() if m.hf_repo}
    if repo.lower() in by_repo:
        return by_repo[repo.lower()]
    tail = repo.rsplit("/", 1)[-1].lower()
    if tail in lower:
        return lower[tail]
    tails = {}
    for key, m in models.items():
        if m.hf_repo:
            tails.setdefault(m.hf_repo.rsplit("/", 1)[-1].lower(), key)
    return tails.get(tail)


def load_acceptance_priors(path: str | Path = PRIORS_CSV) -> list[dict[str, str]]:
    """Published acceptance figures per workload and method, as rows of strings."""
    return [row for _, row in _read_rows(Path(path))]


CURVES_CSV = DATA_DIR / "acceptance_curves.csv"

MTP_REUSE_P1 = 0.85
"""DeepSeek-V3's MTP module accepts its token 85% to 90% of the time (technical report,
sec. 5.4.3, arXiv 2412.19437); the lower end."""
MTP_REUSE_TAU7 = 3.20
"""The same depth-1 module reused autoregressively for K=7 gives tau 3.20 at temperature 0
(nebius/MTP-DeepSeek-V3-0324 model card, original MTP row)."""


def load_acceptance_curves(path: str | Path = CURVES_CSV) -> list[dict[str, str]]:
    """Public per-position acceptance curves, one row each (see data/README.md)."""
    return [row for _, row in _read_rows(Path(path))]


@cache
def method_decays() -> dict[str, Any]:
    """Each method's decay of acceptance with position, fitted on its public curves.

    `acceptance.fit_decay` per method over data/acceptance_curves.csv with rho capped at 1:
    a planner does not carry a conditional acceptance that rises with depth (MTP-8 on
    GSM8K, n-grams on code edits and our greedy CPU pair show one) to other workloads, so
    those methods extend as i.i.d. A method without curves (Medusa) is i.i.d. The MTP
    decay's reuse past the trained depth solves `MTP_REUSE_TAU7` from `MTP_REUSE_P1`.
    """
    import numpy as np

    from simulator.model.acceptance import (
        IID,
        Decay,
        curve_taus,
        fit_decay,
        positions_from_p1,
        tau_from_positions,
    )

    by_method: dict[str, list[dict[int, float]]] = {}
    for row in load_acceptance_curves():
        by_method.setdefault(row["method"], []).append(curve_taus(row["kind"], row["values"]))
    out: dict[str, Any] = {}
    for method, curves in by_method.items():
        decay, _ = fit_decay(curves, max_rho=1.0)
        out[method] = decay
    reuse = np.linspace(0.3, 1.0, 701)
    taus = tau_from_positions(
        positions_from_p1(np.full(reuse.size, MTP_REUSE_P1), 7, Decay(depth=1, reuse_rho=reuse)),
        7,
    )
    mtp = out.get("mtp", IID)
    out["mtp"] = dataclasses.replace(
        mtp, depth=1.0, reuse_rho=float(reuse[np.argmin(np.abs(taus - MTP_REUSE_TAU7))])
    )
    return out


def method_decay(method: str, mtp_depth: float = 1.0):
    """`method_decays()[method]` (i.i.d. for a method without public curves), with an MTP
    checkpoint's trained depth."""
    from simulator.model.acceptance import IID

    decay = method_decays().get(method, IID)
    if method == "mtp":
        decay = dataclasses.replace(decay, depth=float(mtp_depth))
    return decay
