"""Loaders for the plain-text catalogs in `data/`: GPUs, models and acceptance priors.

Each row becomes a frozen dataclass from `simulator.inputs.specs`; a bad row raises
`InputError` naming the file, the row and the field.
"""

from __future__ import annotations

import csv
import dataclasses
import math
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


@cache
def default_models() -> dict[str, ModelSpec]:
    return load_models()


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
