"""The scenario table: its columns, their defaults, and validation of user input.

One row per scenario. `normalise_scenarios` fills documented defaults and rejects bad
input with an `InputError` that names the row (1-based, header excluded) and the column.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

import numpy as np
import pandas as pd

from simulator.errors import InputError
from simulator.specs import KV_DTYPES, METHODS, WEIGHT_DTYPES, GPUSpec, ModelSpec
from simulator.steady import SERVING_MODES

K_LIMIT = 16
"""Largest K accepted: engines allow more, but past 16 the model's answers mean nothing."""

ACCEPTANCE_COLUMNS = ("acceptance_rate", "mean_accepted_tokens", "acceptance_per_position")


@dataclass(frozen=True)
class Column:
    name: str
    default: object
    help: str


COLUMNS: tuple[Column, ...] = (
    Column("target", None, "target model id from data/models.csv (required)"),
    Column(
        "method",
        "none",
        "none, draft_model, eagle (EAGLE-1/2), eagle3, medusa, mtp or ngram",
    ),
    Column("draft", "", "draft model id when method is draft_model"),
    Column("gpu", None, "GPU id from data/gpus.csv (required)"),
    Column("num_gpus", 1, "tensor-parallel degree of one replica"),
    Column("weight_dtype", "bf16", "bf16, fp16, fp8, int8 or int4"),
    Column("kv_dtype", "bf16", "bf16, fp16 or fp8"),
    Column("k", None, "speculative tokens per step; default 0 with method none, else 3"),
    Column("acceptance_rate", None, "i.i.d. per-token acceptance alpha in [0, 1]"),
    Column("mean_accepted_tokens", None, "tau, tokens per target step incl. bonus, [1, k+1]"),
    Column("acceptance_per_position", None, "p1;p2;... per-position rates, non-increasing"),
    Column(
        "medusa_heads",
        4,
        "heads of a Medusa checkpoint: K cannot exceed it (4 in vLLM's Medusa tests and "
        "TensorRT-LLM's default)",
    ),
    Column(
        "mtp_depth",
        1,
        "MTP modules the checkpoint was trained with (DeepSeek-V3: 1); positions past it "
        "reuse the last module and lose acceptance quickly",
    ),
    Column(
        "draft_context_len",
        None,
        "tokens of context the draft attends over: a compressed draft cache (StreamingLLM or "
        "SnapKV window, as MagicDec drafts); default the full context",
    ),
    Column("verify_tokens", None, "tokens verified per sequence per step; default k+1"),
    Column(
        "batch_size",
        1,
        "concurrent requests (a closed loop, vllm bench serve --max-concurrency)",
    ),
    Column(
        "request_rate",
        None,
        "requests per second arriving at one replica (an open loop); replaces batch_size: "
        "the mean concurrency follows from Little's law",
    ),
    Column("prompt_len", 1024, "prompt tokens per request"),
    Column("output_len", 256, "generated tokens per request"),
    Column("gpu_hourly_usd", None, "price per GPU-hour; default the catalog's"),
    Column("gpu_memory_utilization", 0.9, "fraction of VRAM the engine may use (vLLM's)"),
    Column(
        "temperature",
        0.0,
        "sampling temperature; 0 is greedy, above 0 pays the rejection sampler's vocabulary "
        "passes (vllm bench serve samples greedily unless told otherwise)",
    ),
    Column(
        "serving",
        "steady",
        "steady: continuous batching, each step also prefills the prompts of the requests "
        "that replace finished ones; decode_only: the isolated decode step",
    ),
)
INPUT_COLUMNS = tuple(c.name for c in COLUMNS)
DEFAULT_K_SPECULATIVE = 3
"""vLLM's documentation examples use 3 speculative tokens for EAGLE and draft models."""

_INT_COLUMNS = (
    "num_gpus",
    "k",
    "verify_tokens",
    "batch_size",
    "prompt_len",
    "output_len",
    "draft_context_len",
    "medusa_heads",
    "mtp_depth",
)
_FLOAT_COLUMNS = (
    "acceptance_rate",
    "mean_accepted_tokens",
    "gpu_hourly_usd",
    "gpu_memory_utilization",
    "temperature",
    "request_rate",
)


_ALIASES = {"alpha": "acceptance_rate", "tau": "mean_accepted_tokens", "model": "target"}
"""Names people write for an input column, the first two being its output counterparts."""


def _hint(name: str, known, given) -> str:
    """'did you mean ...?' naming the closest known column (case-insensitive) that the
    table lacks, or where the columns are listed."""
    lower = {k.lower(): k for k in known}
    close = difflib.get_close_matches(name.lower(), list(lower), n=1)
    guess = _ALIASES.get(name.lower()) or (lower[close[0]] if close else None)
    if guess and guess not in given:
        return f"did you mean '{guess}'?"
    return "python -m simulator columns lists the input columns"


def check_columns(columns, source: str, *, outputs=(), extra=()) -> None:
    """Refuse a header that is not a scenario column, naming it and the nearest known name.

    `outputs` are the columns a prediction writes, refused as such; `extra` are further
    names the caller reads. Headers are compared stripped of whitespace.
    """
    known = (*INPUT_COLUMNS, *extra)
    given = [str(c).strip() for c in columns]
    for position, name in enumerate(given, start=1):
        if name in known:
            continue
        if not name or name.startswith("Unnamed: "):
            raise InputError(
                f"column {position} has a blank header; name it or delete it", file=source
            )
        what = f"unknown column '{name}'"
        if name in outputs:
            what = f"'{name}' is an output column, not an input"
        raise InputError(f"{what}; {_hint(name, known, given)}", file=source, field=name)


class _Checker:
    def __init__(self, source: str, row_offset: int = 0):
        self.source = source
        self.row_offset = row_offset

    def fail_where(self, mask, column: str, message) -> None:
        mask = np.asarray(mask, dtype=bool)
        if mask.any():
            i = int(np.argmax(mask))
            text = message(i) if callable(message) else message
            raise InputError(text, file=self.source, row=self.row_offset + i + 1, field=column)


def _blank(series: pd.Series) -> np.ndarray:
    """True where a cell is missing or only whitespace; text is checked once per value."""
    if pd.api.types.is_numeric_dtype(series.dtype):
        return series.isna().to_numpy()
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    empty = np.array([str(u).strip() == "" for u in uniques] + [True], dtype=bool)
    return empty[codes]


def _text(series: pd.Series, default: str, *, lower: bool = False) -> pd.Series:
    """A text column as a Categorical of stripped strings, blanks replaced by `default`."""
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    cleaned = [str(u).strip().lower() if lower else str(u).strip() for u in uniques]
    cleaned = [c if c else default for c in cleaned] + [default]
    cats = pd.Index(cleaned).unique()
    lookup = cats.get_indexer(cleaned)
    return pd.Series(pd.Categorical.from_codes(lookup[codes], categories=cats), index=series.index)


def _numeric(df: pd.DataFrame, column: str, check: _Checker) -> pd.Series:
    raw = df[column]
    if pd.api.types.is_numeric_dtype(raw.dtype) and not pd.api.types.is_bool_dtype(raw.dtype):
        values = raw.astype(float)
    else:
        values = pd.to_numeric(raw, errors="coerce").astype(float)
        blank = _blank(raw)
        bad = values.isna().to_numpy() & ~blank
        check.fail_where(bad, column, lambda i: f"'{raw.iloc[i]}' is not a number")
    inf = np.isinf(values.to_numpy())
    check.fail_where(inf, column, "must be finite")
    return values


def parse_positions(series: pd.Series, check: _Checker) -> np.ndarray:
    """'p1;p2;...' strings to a (rows, max_len) float array padded with NaN."""
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    parsed: list[list[float]] = []
    for u in uniques:
        key = str(u).strip()
        first = int(np.argmax(codes == len(parsed)))
        if key == "" or key.lower() == "nan":
            parsed.append([])
            continue
        try:
            values = [float(part) for part in key.replace(",", ";").split(";") if part.strip()]
        except ValueError:
            raise InputError(
                f"'{key}' is not a list of numbers separated by ';'",
                file=check.source,
                row=check.row_offset + first + 1,
                field="acceptance_per_position",
            ) from None
        arr = np.array(values)
        if not values or not np.all(np.isfinite(arr)) or arr.min() < 0 or arr.max() > 1:
            raise InputError(
                f"'{key}' must hold rates in [0, 1]",
                file=check.source,
                row=check.row_offset + first + 1,
                field="acceptance_per_position",
            )
        if np.any(np.diff(arr) > 1e-9):
            raise InputError(
                f"'{key}' must be non-increasing: position i+1 cannot be "
                "accepted more often than position i",
                file=check.source,
                row=check.row_offset + first + 1,
                field="acceptance_per_position",
            )
        parsed.append(values)
    width = max((len(r) for r in parsed), default=0)
    table = np.full((len(parsed) + 1, max(width, 1)), np.nan)
    for i, r in enumerate(parsed):
        table[i, : len(r)] = r
    return table[codes]


def normalise_scenarios(
    df: pd.DataFrame,
    gpus: dict[str, GPUSpec],
    models: dict[str, ModelSpec],
    *,
    source: str = "scenarios",
    row_offset: int = 0,
):
    """Validate a scenario table and fill its defaults.

    Returns (table with every input column, per-position array of shape (rows, n) with
    NaN where not given). Raises `InputError` on the first bad cell; `row_offset` shifts
    the row numbers it reports when `df` is a block of a larger table.
    """
    check = _Checker(source, row_offset)
    if not isinstance(df, pd.DataFrame):
        raise InputError("expected a table of scenarios", file=source)
    if len(df) == 0:
        raise InputError("holds no scenario rows", file=source)
    df = df.copy()
    df.columns = [str(c).strip() for c in df.columns]
    for col in ("target", "gpu"):
        if col not in df.columns:
            raise InputError(
                f"missing required column; the columns are {list(INPUT_COLUMNS)}",
                file=source,
                field=col,
            )
    batch_given = (
        ~_blank(df["batch_size"]) if "batch_size" in df.columns else np.zeros(len(df), bool)
    )
    for c in COLUMNS:
        if c.name not in df.columns:
            df[c.name] = c.default if c.default is not None else np.nan

    for col in ("target", "method", "draft", "gpu", "weight_dtype", "kv_dtype", "serving"):
        default = next(c.default for c in COLUMNS if c.name == col)
        df[col] = _text(df[col], default or "", lower=col in ("method", "serving"))

    check.fail_where(df["target"].eq("").to_numpy(), "target", "is empty; give a model id")
    check.fail_where(
        ~df["target"].isin(models).to_numpy(),
        "target",
        lambda i: f"unknown model '{df['target'].iloc[i]}'; known: {', '.join(sorted(models))}",
    )
    check.fail_where(
        ~df["gpu"].isin(gpus).to_numpy(),
        "gpu",
        lambda i: f"unknown GPU '{df['gpu'].iloc[i]}'; known: {', '.join(sorted(gpus))}",
    )
    check.fail_where(
        ~df["method"].isin(METHODS).to_numpy(),
        "method",
        lambda i: f"unknown method '{df['method'].iloc[i]}'; use one of {', '.join(METHODS)}",
    )
    check.fail_where(
        ~df["weight_dtype"].isin(WEIGHT_DTYPES).to_numpy(),
        "weight_dtype",
        lambda i: f"'{df['weight_dtype'].iloc[i]}' is not one of {', '.join(WEIGHT_DTYPES)}",
    )
    check.fail_where(
        ~df["kv_dtype"].isin(KV_DTYPES).to_numpy(),
        "kv_dtype",
        lambda i: f"'{df['kv_dtype'].iloc[i]}' is not one of {', '.join(KV_DTYPES)}",
    )
    check.fail_where(
        ~df["serving"].isin(SERVING_MODES).to_numpy(),
        "serving",
        lambda i: f"'{df['serving'].iloc[i]}' is not one of {', '.join(SERVING_MODES)}",
    )
    is_draft = df["method"].eq("draft_model").to_numpy()
    check.fail_where(
        is_draft & df["draft"].eq("").to_numpy(),
        "draft",
        "is empty; method draft_model needs a draft model id",
    )
    check.fail_where(
        is_draft & ~df["draft"].isin(models).to_numpy(),
        "draft",
        lambda i: f"unknown model '{df['draft'].iloc[i]}'; known: {', '.join(sorted(models))}",
    )

    nums = {col: _numeric(df, col, check) for col in (*_INT_COLUMNS, *_FLOAT_COLUMNS)}
    spec = ~df["method"].eq("none").to_numpy()
    k = nums["k"].to_numpy()
    k = np.where(np.isnan(k), np.where(spec, DEFAULT_K_SPECULATIVE, 0), k)
    k = np.where(spec, k, 0)
    check.fail_where(
        spec & ((k < 1) | (k > K_LIMIT)),
        "k",
        lambda i: f"{k[i]:g} is out of range: use 1..{K_LIMIT} with method {df['method'].iloc[i]}",
    )
    rate = nums["request_rate"].to_numpy()
    check.fail_where(~np.isnan(rate) & (rate <= 0), "request_rate", "must be above 0")
    check.fail_where(
        ~np.isnan(rate) & batch_given,
        "request_rate",
        "give batch_size (a closed loop) or request_rate (an open loop), not both",
    )
    for col, default in (
        ("num_gpus", 1),
        ("batch_size", 1),
        ("prompt_len", 1024),
        ("output_len", 256),
        ("gpu_memory_utilization", 0.9),
        ("temperature", 0.0),
        ("medusa_heads", 4),
        ("mtp_depth", 1),
    ):
        nums[col] = nums[col].fillna(default)
    for col in _INT_COLUMNS:
        v = nums[col].to_numpy()
        check.fail_where(~np.isnan(v) & (v < 0), col, lambda i, v=v: f"{v[i]:g} is negative")
        check.fail_where(
            ~np.isnan(v) & (v != np.round(v)),
            col,
            lambda i, v=v: f"{v[i]:g} must be a whole number",
        )
    for col in ("num_gpus", "batch_size", "output_len", "draft_context_len", "medusa_heads"):
        check.fail_where(nums[col].to_numpy() < 1, col, "must be at least 1")
    check.fail_where(nums["mtp_depth"].to_numpy() < 1, "mtp_depth", "must be at least 1")
    util = nums["gpu_memory_utilization"].to_numpy()
    check.fail_where(
        (util <= 0) | (util > 1),
        "gpu_memory_utilization",
        lambda i: f"{util[i]:g} must be in (0, 1]",
    )
    temperature = nums["temperature"].to_numpy()
    check.fail_where(temperature < 0, "temperature", lambda i: f"{temperature[i]:g} is negative")
    price = nums["gpu_hourly_usd"].to_numpy()
    check.fail_where(price < 0, "gpu_hourly_usd", lambda i: f"{price[i]:g} is negative")

    given = np.stack([~_blank(df[c]) for c in ACCEPTANCE_COLUMNS], axis=1)
    count = given.sum(axis=1)
    check.fail_where(
        spec & (count == 0),
        "acceptance_rate",
        "give one of acceptance_rate, mean_accepted_tokens or "
        "acceptance_per_position for a speculative method",
    )
    check.fail_where(
        spec & (count > 1),
        "acceptance_rate",
        lambda i: (
            "give exactly one of acceptance_rate, mean_accepted_tokens, "
            "acceptance_per_position; this row has "
            + ", ".join(c for c, g in zip(ACCEPTANCE_COLUMNS, given[i], strict=True) if g)
        ),
    )
    alpha = nums["acceptance_rate"].to_numpy()
    check.fail_where(
        spec & ((alpha < 0) | (alpha > 1)),
        "acceptance_rate",
        lambda i: f"{alpha[i]:g} is outside [0, 1]",
    )
    tau = nums["mean_accepted_tokens"].to_numpy()
    check.fail_where(
        spec & ((tau < 1) | (tau > k + 1)),
        "mean_accepted_tokens",
        lambda i: f"{tau[i]:g} is outside [1, k+1] = [1, {k[i] + 1:g}]",
    )
    positions = parse_positions(df["acceptance_per_position"].where(spec, ""), check)

    verify = nums["verify_tokens"].to_numpy()
    verify = np.where(np.isnan(verify), k + 1, verify)
    check.fail_where(
        verify < k + 1,
        "verify_tokens",
        lambda i: f"{verify[i]:g} must be at least k+1 = {k[i] + 1:g}",
    )

    for col in _INT_COLUMNS:
        nums[col] = pd.Series(nums[col].to_numpy(), index=df.index)
    nums["k"] = pd.Series(k, index=df.index)
    nums["verify_tokens"] = pd.Series(verify, index=df.index)
    for col, series in nums.items():
        df[col] = series.to_numpy()
    for col in _INT_COLUMNS:
        if col != "draft_context_len":  # optional: NaN means the full context
            df[col] = df[col].astype(np.int64)
    catalog_price = df["gpu"].map(
        {
            g: (s.price_usd_per_hr if s.price_usd_per_hr is not None else np.nan)
            for g, s in gpus.items()
        }
    )
    df["gpu_hourly_usd"] = df["gpu_hourly_usd"].fillna(catalog_price).astype(float)
    # Every block of a large table gets the same categories, so blocks concatenate as
    # categoricals; a draft named on a row that does not use one is dropped.
    known = pd.Index(["", *models])
    remap = known.get_indexer(df["draft"].cat.categories)
    codes = remap[df["draft"].cat.codes.to_numpy()]
    df["draft"] = pd.Categorical.from_codes(
        np.where(is_draft & (codes >= 0), codes, 0), categories=known
    )
    for col, known in (
        ("target", list(models)),
        ("gpu", list(gpus)),
        ("method", METHODS),
        ("weight_dtype", WEIGHT_DTYPES),
        ("kv_dtype", KV_DTYPES),
        ("serving", SERVING_MODES),
    ):
        df[col] = df[col].cat.set_categories(list(known))
    return df, positions
