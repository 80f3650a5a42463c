"""The scenario table: its columns, their defaults, and validation of user input.

One row per scenario. `normalise_scenarios` fills documented defaults and rejects bad
input with an `InputError` that names the row (1-based from the first row of data, plus
the `row_offset` a caller gives: the command line counts a CSV file's header as row 1) and
the column.
"""

from __future__ import annotations

import decimal
import difflib
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from simulator.errors import InputError, not_a_number
from simulator.inputs.specs import KV_DTYPES, METHODS, WEIGHT_DTYPES, GPUSpec, ModelSpec
from simulator.kernels.tables import (
    ENGINE_CHOICES,
    engine_versions,
    engine_versions_of,
    host_only,
    prices_version,
)
from simulator.model.steady import SERVING_MODES

if TYPE_CHECKING:
    import pandas as pd

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
    Column(
        "num_gpus",
        1,
        "GPUs of one replica; given alone, its tensor-parallel degree (= tp_size x "
        "attention_dp_size where those are given)",
    ),
    Column("tp_size", None, "tensor-parallel degree of the attention (default num_gpus)"),
    Column(
        "attention_dp_size",
        1,
        "attention data-parallel ranks of one replica (SGLang --enable-dp-attention, vLLM "
        "--data-parallel-size with expert parallelism): each rank attends over its own "
        "share of the batch",
    ),
    Column(
        "moe_ep_size",
        1,
        "GPUs the routed experts are spread over (expert parallelism; MoE targets)",
    ),
    Column(
        "moe_tp_size",
        None,
        "tensor-parallel degree of each expert; default the replica's GPUs / moe_ep_size",
    ),
    Column(
        "weight_dtype",
        None,
        "bf16, fp16, fp8, int8 or int4; default the dtype the target's weights are released "
        "in (data/models.csv checkpoint_dtype: fp8 for DeepSeek-V3, bf16 for the others)",
    ),
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
        "max_num_seqs",
        None,
        "requests the replica runs at once, as launched (vLLM --max-num-seqs, SGLang "
        "--max-running-requests, TensorRT-LLM --max_batch_size); default the engine's own "
        "(data/engine_admission.csv: SGLang 48 with speculation)",
    ),
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
    Column(
        "engine",
        "vllm",
        "serving engine: vllm, sglang or trtllm (their measured kernel tables price the "
        "steps, with the engine's host costs, and set the launch flags), or other (an engine "
        "without tables: the roofline prices it)",
    ),
    Column(
        "engine_version",
        "",
        "version of the engine's kernel tables (e.g. 0.24.0); default the newest bundled for "
        "the GPU (`simulator columns` lists them)",
    ),
)
INPUT_COLUMNS = tuple(c.name for c in COLUMNS)
LAYOUT_COLUMNS = ("tp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")
"""The replica's parallel layout; without them, num_gpus is the tensor-parallel degree."""


def on_gpus(row: dict, num_gpus: int) -> dict:
    """A scenario row moved to `num_gpus` GPUs per replica in plain tensor parallelism: its
    layout columns go (a layout of the old count would not add up to the new one)."""
    out = {c: v for c, v in row.items() if c not in LAYOUT_COLUMNS}
    out["num_gpus"] = num_gpus
    return out


DEFAULT_K_SPECULATIVE = 3
"""vLLM's documentation examples use 3 speculative tokens for EAGLE and draft models."""

_INT_COLUMNS = (
    "num_gpus",
    "tp_size",
    "attention_dp_size",
    "moe_ep_size",
    "moe_tp_size",
    "k",
    "verify_tokens",
    "batch_size",
    "prompt_len",
    "output_len",
    "draft_context_len",
    "max_num_seqs",
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


LIMITS: dict[str, tuple[float, str]] = {
    "num_gpus": (4096, "a tensor-parallel group larger than any machine built"),
    "tp_size": (4096, "a tensor-parallel group larger than any machine built"),
    "attention_dp_size": (4096, "a replica larger than any machine built"),
    "moe_ep_size": (4096, "a replica larger than any machine built"),
    "moe_tp_size": (4096, "a replica larger than any machine built"),
    "verify_tokens": (65_536, "a verification tree far beyond any published one"),
    "batch_size": (1_000_000, "a million concurrent requests on one replica"),
    "prompt_len": (100_000_000, "ten times the longest context window in the catalog"),
    "output_len": (100_000_000, "ten times the longest context window in the catalog"),
    "draft_context_len": (100_000_000, "ten times the longest context window in the catalog"),
    "max_num_seqs": (1_000_000, "a million concurrent requests on one replica"),
    "medusa_heads": (64, "Medusa checkpoints carry 3 to 5 heads"),
    "mtp_depth": (64, "DeepSeek-V3 trains one MTP module"),
    "request_rate": (1e9, "a billion requests per second on one replica"),
    "gpu_hourly_usd": (1e6, "a million dollars per GPU-hour"),
    "temperature": (100.0, "sampling is uniform long before this"),
}
"""Largest value each numeric column accepts, and why: far beyond any real deployment, yet
small enough that every figure stays finite (2**63 would wrap an integer negative, 1e300
tokens overflow the FLOP count). `k` has its own `K_LIMIT`."""

POSITIONS_LIMIT = 64
"""Most per-position rates one cell may list: K is at most `K_LIMIT`, and each listed
position costs a column of the (rows, positions) array."""

TEXT_COLUMNS = (
    "target",
    "method",
    "draft",
    "gpu",
    "weight_dtype",
    "kv_dtype",
    "serving",
    "engine",
    "engine_version",
)
NUMERIC_COLUMNS = _INT_COLUMNS + _FLOAT_COLUMNS
"""Columns read as numbers and as text (what a columnar reader may type on reading)."""
_DEFAULT = {c.name: c.default for c in COLUMNS}


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
    import pandas as pd

    if pd.api.types.is_numeric_dtype(series.dtype):
        return series.isna().to_numpy()
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    empty = np.array([str(u).strip() == "" for u in uniques] + [True], dtype=bool)
    return empty[codes]


def _factorize(series: pd.Series) -> tuple[np.ndarray, list]:
    """(codes, unique values) of a column, -1 for missing; a Categorical's own codes."""
    import pandas as pd

    if isinstance(series.dtype, pd.CategoricalDtype):
        return series.cat.codes.to_numpy(), list(series.cat.categories)
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    return codes, list(uniques)


@dataclass
class _Text:
    """A text column as codes into `known` (-1: not a known value) and its cleaned values."""

    codes: np.ndarray
    cleaned: list[str]
    raw: np.ndarray  # codes into `cleaned`

    def value(self, i: int) -> str:
        return self.cleaned[self.raw[i]]


def _text(series: pd.Series | None, n: int, known, default: str, lower: bool, alias=None) -> _Text:
    """Stripped (and for some columns lower-cased) text, blanks replaced by `default`,
    coded against `known` (a value it lacks through `alias(value) -> known value | None`
    where given); an absent column costs no parsing."""
    index = {name: i for i, name in enumerate(known)}
    if series is None:
        return _Text(np.full(n, index.get(default, -1), np.int16), [default], np.zeros(n, np.int8))
    codes, uniques = _factorize(series)
    cleaned = [str(u).strip().lower() if lower else str(u).strip() for u in uniques]
    cleaned = [c if c else default for c in cleaned] + [default]
    lookup = np.array(
        [index.get(c, index.get(alias(c), -1) if alias and c else -1) for c in cleaned],
        dtype=np.int16,
    )
    raw = np.where(codes < 0, len(cleaned) - 1, codes)
    return _Text(lookup[raw], cleaned, raw)


def _numeric(series: pd.Series | None, n: int, column: str, check: _Checker):
    """A numeric column as float64 (NaN: blank) and where it was given."""
    import pandas as pd

    if series is None:
        return np.full(n, np.nan), None
    if pd.api.types.is_numeric_dtype(series.dtype) and not pd.api.types.is_bool_dtype(series.dtype):
        values = series.to_numpy(dtype=float, na_value=np.nan)
    else:
        values = to_floats(series)
        blank = _blank(series)
        bad = np.isnan(values) & ~blank
        check.fail_where(bad, column, lambda i: not_a_number(series.iloc[i]))
    check.fail_where(np.isinf(values), column, "must be finite")
    return values, ~np.isnan(values)


def to_floats(series: pd.Series) -> np.ndarray:
    """Cells as float64: NaN where blank or not a number; an integer too large for a float
    (pandas holds it as a Python int, and `to_numeric` then raises) is infinite."""
    import pandas as pd

    try:
        return pd.to_numeric(series, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    except (OverflowError, TypeError, ValueError):
        return _to_float(series)


def _to_float(series: pd.Series) -> np.ndarray:
    """Cells to floats one distinct value at a time: an integer too large for a float is
    infinite (refused as such), text that is not a number NaN (refused as not a number)."""
    codes, uniques = _factorize(series)
    table = np.full(len(uniques) + 1, np.nan)
    for i, u in enumerate(uniques):
        try:
            table[i] = float(u)
        except OverflowError:
            table[i] = np.inf if not str(u).strip().startswith("-") else -np.inf
        except (TypeError, ValueError):
            pass
    return table[codes]


def parse_positions(series: pd.Series, check: _Checker, rows=None) -> np.ndarray:
    """'p1;p2;...' strings to a (rows, max_len) float array padded with NaN.

    Only the rows in the boolean mask `rows` (default all) are read; the others get NaN.
    The text 'nan' is refused: a missing cell is blank, not a rate.
    """
    codes, uniques = _factorize(series)
    if rows is not None:
        codes = np.where(rows, codes, -1)
    used = np.zeros(len(uniques) + 1, bool)
    used[codes] = True
    parsed: list[list[float]] = []
    for j, u in enumerate(uniques):
        key = str(u).strip()
        if not used[j] or key == "":
            parsed.append([])
            continue
        first = int(np.argmax(codes == j))

        def fail(text: str, first=first) -> None:
            raise InputError(
                text,
                file=check.source,
                row=check.row_offset + first + 1,
                field="acceptance_per_position",
            )

        try:
            values = [float(part) for part in key.replace(",", ";").split(";") if part.strip()]
        except ValueError:
            fail(f"'{key}' is not a list of numbers separated by ';'")
        if len(values) > POSITIONS_LIMIT:
            fail(f"'{key}' gives {len(values)} positions, more than {POSITIONS_LIMIT}")
        arr = np.array(values)
        if not values or not np.all(np.isfinite(arr)) or arr.min() < 0 or arr.max() > 1:
            fail(f"'{key}' must hold rates in [0, 1]")
        if np.any(np.diff(arr) > 1e-9):
            fail(
                f"'{key}' must be non-increasing: position i+1 cannot be "
                "accepted more often than position i"
            )
        parsed.append(values)
    width = max((len(r) for r in parsed), default=0)
    table = np.full((len(parsed) + 1, max(width, 1)), np.nan)
    for i, r in enumerate(parsed):
        table[i, : len(r)] = r
    return table[codes]


_DTYPES: dict[tuple, object] = {}


def categorical(codes: np.ndarray, categories) -> pd.Categorical:
    """A Categorical from codes, its dtype built once per list of categories (building
    one checks every category, which dominates a small table's cost)."""
    import pandas as pd

    key = tuple(categories)
    dtype = _DTYPES.get(key)
    if dtype is None:
        if len(_DTYPES) > 256:
            _DTYPES.clear()
        dtype = _DTYPES[key] = pd.CategoricalDtype(list(categories))
    return pd.Categorical.from_codes(codes, dtype=dtype)


@dataclass
class ScenarioArrays:
    """A validated scenario table as numpy arrays, every default filled.

    `codes[c]` indexes `categories[c]` for each text column; `values[c]` is float64 for
    every numeric column (whole numbers included; NaN where optional and not given);
    `positions` is (rows, n) per-position acceptance, NaN where not given, or None when no
    row gives one; `positions_column` the input column as given (None when absent).
    `constant` names the columns of `codes` and `values` that hold one value on every row
    (absent from the input and filled with a fixed default), which need no reordering.
    `ignored` holds, per row, bits for the given values its method does not use
    (`IGNORED_MESSAGES` spells them), or is None when no row has one.
    """

    n: int
    codes: dict[str, np.ndarray]
    categories: dict[str, list[str]]
    values: dict[str, np.ndarray]
    positions: np.ndarray | None
    positions_column: object
    constant: frozenset[str] = frozenset()
    ignored: np.ndarray | None = None

    def take(self, rows) -> ScenarioArrays:
        """The rows at the integer indices `rows`."""
        return ScenarioArrays(
            n=len(rows),
            codes={c: v[rows] for c, v in self.codes.items()},
            categories=self.categories,
            values={c: v[rows] for c, v in self.values.items()},
            positions=None if self.positions is None else self.positions[rows],
            positions_column=None,
            constant=self.constant,
            ignored=None if self.ignored is None else self.ignored[rows],
        )

    def columns(self) -> dict:
        """Every input column, in `INPUT_COLUMNS` order: text as Categoricals of the
        catalog's ids, whole numbers as int64 (draft_context_len and max_num_seqs: float,
        NaN = full, the engine's default)."""
        out = {}
        for c in INPUT_COLUMNS:
            if c in self.codes:
                out[c] = categorical(self.codes[c], self.categories[c])
            elif c == "acceptance_per_position":
                col = self.positions_column
                out[c] = np.full(self.n, np.nan) if col is None else col
            elif c in _INT_COLUMNS and c not in ("draft_context_len", "max_num_seqs"):
                out[c] = self.values[c].astype(np.int64)
            else:
                out[c] = self.values[c]
        return out

    def frame(self) -> pd.DataFrame:
        """`columns` as a DataFrame."""
        import pandas as pd

        return pd.DataFrame(self.columns(), copy=False)


def _columns(df: pd.DataFrame, source: str, row_offset: int = 0) -> dict[str, pd.Series]:
    """The table's columns by stripped name; a name given twice, or a column whose cells are
    neither text nor numbers, is refused."""
    names = [str(c).strip() for c in df.columns]
    seen: dict[str, int] = {}
    for position, name in enumerate(names, start=1):
        if name in seen:
            raise InputError(
                f"column '{name}' appears twice (columns {seen[name]} and {position}); keep one",
                file=source,
                field=name,
            )
        seen[name] = position
    # The labels are distinct (their stripped names are), so each selects one column.
    cols = {name: df[label] for name, label in zip(names, df.columns, strict=True)}
    for name, series in cols.items():
        _check_cells(series, name, source, row_offset)
    return cols


def _kind_of(cell) -> str:
    """What a cell that is neither text nor a number holds, in words."""
    import datetime

    if isinstance(cell, (bool, np.bool_)):
        return "a true/false value"
    if isinstance(cell, (list, tuple, np.ndarray)):
        return "a list"
    if isinstance(cell, dict):
        return "a mapping"
    if isinstance(cell, (bytes, bytearray)):
        return "a bytes value"
    if isinstance(
        cell, (datetime.date, datetime.time, datetime.timedelta, np.datetime64, np.timedelta64)
    ):
        return "a date or time"
    return f"a {type(cell).__name__}"


_CELL_KINDS = ("string", "empty", "integer", "floating", "mixed-integer-float", "decimal")
"""What `pandas.api.types.infer_dtype` may call a column of text or numbers."""


def _check_cells(series: pd.Series, column: str, source: str, row_offset: int) -> None:
    """Refuse a column whose cells are neither text nor numbers: dates and durations (which
    pandas would read as nanosecond counts), true/false in a numeric column, and lists,
    mappings or bytes (a Parquet file or a DataFrame can hold them), naming the first."""
    import pandas as pd

    kind = series.dtype.kind
    if kind in "mM" or isinstance(series.dtype, (pd.PeriodDtype, pd.IntervalDtype)):
        raise InputError(
            f"holds dates or times ({series.dtype}); give numbers or text",
            file=source,
            field=column,
        )
    if pd.api.types.is_bool_dtype(series.dtype):
        if column in NUMERIC_COLUMNS:
            raise InputError("holds true/false values; give numbers", file=source, field=column)
        return
    if isinstance(series.dtype, pd.CategoricalDtype):
        categories = pd.Series(series.cat.categories)
        if len(categories):
            codes = series.cat.codes.to_numpy()
            try:
                _check_cells(categories, column, source, 0)
            except InputError as exc:
                if exc.row is None:
                    raise
                first = int(np.argmax(codes == exc.row - 1))
                raise InputError(
                    exc.bare_message, file=source, row=row_offset + first + 1, field=column
                ) from None
        return
    if kind != "O":
        return
    inferred = pd.api.types.infer_dtype(series, skipna=True)
    if inferred in _CELL_KINDS or (inferred == "boolean" and column not in NUMERIC_COLUMNS):
        return
    numeric = column in NUMERIC_COLUMNS
    for i, cell in enumerate(series.array):
        if (
            cell is None
            or cell is pd.NA
            or cell is pd.NaT
            or isinstance(cell, str)
            or (
                isinstance(cell, (int, float, np.number, np.bool_, decimal.Decimal))
                and not (numeric and isinstance(cell, (bool, np.bool_)))
            )
        ):
            continue
        raise InputError(
            f"{_kind_of(cell)} is neither a number nor text",
            file=source,
            row=row_offset + i + 1,
            field=column,
        )


IGNORED_MESSAGES = (
    "method none uses no k, acceptance, verify_tokens, draft or draft_context_len: "
    "the given ones were ignored",
    "draft is used only by method draft_model: the given one was ignored",
    "medusa_heads (method medusa only), mtp_depth (mtp only) or draft_context_len (methods "
    "whose draft keeps a KV cache) given for another method: ignored",
    "engine_version has no kernel tables for this GPU: priced on the roofline",
    "engine_version has no kernel tables of its own: its kernels are priced from the "
    "nearest bundled version's, its host costs are its own",
)
"""Warnings for values a row gives that its method does not use, bit i = message i."""
_NO_TABLES, _HOST_ONLY = 3, 4
"""The bits of the engine-version warnings."""


def _ignored(method_codes, draft_codes, values, given, positions_given) -> np.ndarray | None:
    """Per row, the bits of `IGNORED_MESSAGES` for values given that the row's method does
    not use (a k of 0 on a row of method none is what it uses, not ignored); None when
    no row has any. `given[c]` is None for an absent column, else where a cell is filled;
    an absent column costs no pass over the rows."""

    def any_of(*terms):
        terms = [t for t in terms if t is not None]
        return functools.reduce(np.logical_or, terms) if terms else None

    def where(rows, mask):
        return None if mask is None else rows & mask

    def method_is(name):
        return method_codes == METHODS.index(name)

    k_given = None if given["k"] is None else given["k"] & (values["k"] != 0)
    named_draft = draft_codes != 0  # any text but blank, known or not
    unused = any_of(
        given["acceptance_rate"],
        given["mean_accepted_tokens"],
        given["verify_tokens"],
        given["draft_context_len"],
        positions_given if positions_given.any() else None,
        k_given,
        named_draft,
    )
    none = method_is("none")
    masks = (
        none & unused,
        ~none & ~method_is("draft_model") & named_draft,
        any_of(
            where(~method_is("medusa"), given["medusa_heads"]),
            where(~method_is("mtp"), given["mtp_depth"]),
            # Medusa heads and n-gram lookup keep no draft KV cache: no window to set.
            where(method_is("medusa") | method_is("ngram"), given["draft_context_len"]),
        ),
    )
    if not any(m is not None and m.any() for m in masks):
        return None
    bits = np.zeros(len(method_codes), dtype=np.int64)
    for i, m in enumerate(masks):
        if m is not None:
            bits |= m.astype(np.int64) << i
    return bits


def validate_scenarios(
    df: pd.DataFrame,
    gpus: dict[str, GPUSpec],
    models: dict[str, ModelSpec],
    *,
    source: str = "scenarios",
    row_offset: int = 0,
) -> ScenarioArrays:
    """Validate a scenario table and fill its defaults, as numpy arrays.

    Raises `InputError` on the first bad cell; `row_offset` shifts the row numbers it
    reports when `df` is a block of a larger table.
    """
    import pandas as pd

    check = _Checker(source, row_offset)
    if not isinstance(df, pd.DataFrame):
        raise InputError("expected a table of scenarios", file=source)
    n = len(df)
    if n == 0:
        raise InputError("holds no scenario rows", file=source)
    cols = _columns(df, source, row_offset)
    for col in ("target", "gpu"):
        if col not in cols:
            raise InputError(
                f"missing required column; the columns are {list(INPUT_COLUMNS)}",
                file=source,
                field=col,
            )
    text, known = _check_text(cols, n, gpus, models, check)
    method, draft, gpu = text["method"], text["draft"], text["gpu"]
    is_draft = method.codes == METHODS.index("draft_model")
    spec = method.codes != METHODS.index("none")
    values, given, k = _check_numbers(cols, n, method, spec, check)
    price = values["gpu_hourly_usd"]
    positions, ignored, pos_col = _check_acceptance(
        cols, n, method, draft, values, given, spec, k, check
    )
    verify = values["verify_tokens"]
    verify = np.where(np.isnan(verify), k + 1, verify)
    check.fail_where(
        verify < k + 1,
        "verify_tokens",
        lambda i: f"{verify[i]:g} must be at least k+1 = {k[i] + 1:g}",
    )
    values["k"] = k
    values["verify_tokens"] = verify
    catalog_price = np.array(
        [s.price_usd_per_hr if s.price_usd_per_hr is not None else np.nan for s in gpus.values()]
    )
    values["gpu_hourly_usd"] = np.where(np.isnan(price), catalog_price[gpu.codes], price)
    # A draft named on a row that does not use one is dropped (`ignored` warns of it).
    codes = {c: text[c].codes for c in TEXT_COLUMNS}
    codes["draft"] = np.where(is_draft & (draft.codes >= 0), draft.codes, 0).astype(np.int16)
    for flagged, message in (
        (untabled_versions(codes, known), _NO_TABLES),
        (host_only_versions(codes, known), _HOST_ONLY),
    ):
        if flagged.any():
            bit = flagged.astype(np.int64) << message
            ignored = bit if ignored is None else ignored | bit
    # Defaults that differ by row (the layout's follow num_gpus, and num_gpus tp_size).
    derived = ("k", "verify_tokens", "gpu_hourly_usd", "num_gpus", "tp_size", "moe_tp_size")
    constant = {c for c in TEXT_COLUMNS if c not in cols}
    constant |= {c for c, g in given.items() if g is None and c not in derived}
    released = codes["weight_dtype"]
    if (released != released[0]).any():  # absent, and targets released in different dtypes
        constant.discard("weight_dtype")
    return ScenarioArrays(
        n=n,
        codes=codes,
        categories=known,
        values=values,
        positions=positions,
        positions_column=None if pos_col is None else pos_col.array,
        constant=frozenset(constant),
        ignored=ignored,
    )


def _check_text(cols, n: int, gpus, models, check: _Checker):
    """The text columns as codes, every unknown id refused: (text columns, known ids)."""
    known = {
        "target": list(models),
        "method": list(METHODS),
        "draft": ["", *models],
        "gpu": list(gpus),
        "weight_dtype": list(WEIGHT_DTYPES),
        "kv_dtype": list(KV_DTYPES),
        "serving": list(SERVING_MODES),
        "engine": list(ENGINE_CHOICES),
        "engine_version": ["", *engine_versions()],
    }
    from simulator.inputs.catalog import resolve_model

    def model_id(name: str) -> str | None:  # a Hugging Face id or checkpoint path
        return resolve_model(name, models)

    text = {
        c: _text(
            cols.get(c),
            n,
            known[c],
            _DEFAULT[c] or "",
            c in ("method", "serving", "engine"),
            model_id if c in ("target", "draft") else None,
        )
        for c in TEXT_COLUMNS
    }
    target, method, draft, gpu = (text[c] for c in ("target", "method", "draft", "gpu"))
    empty = np.array([c == "" for c in target.cleaned])[target.raw]
    check.fail_where(empty, "target", "is empty; give a model id")
    check.fail_where(
        target.codes < 0,
        "target",
        lambda i: f"unknown model '{target.value(i)}'; known: {', '.join(sorted(models))}",
    )
    check.fail_where(
        gpu.codes < 0,
        "gpu",
        lambda i: f"unknown GPU '{gpu.value(i)}'; known: {', '.join(sorted(gpus))}",
    )
    check.fail_where(
        method.codes < 0,
        "method",
        lambda i: f"unknown method '{method.value(i)}'; use one of {', '.join(METHODS)}",
    )
    # A blank weight dtype is the target's released one (an unknown target is refused above).
    weights = text["weight_dtype"]
    blank = np.array([c == "" for c in weights.cleaned])[weights.raw]
    if blank.any():
        released = np.array(
            [WEIGHT_DTYPES.index(m.checkpoint_dtype) for m in models.values()], dtype=np.int16
        )
        fill = blank & (target.codes >= 0)
        weights.codes[fill] = released[target.codes[fill]]
    for col, names in (
        ("weight_dtype", WEIGHT_DTYPES),
        ("kv_dtype", KV_DTYPES),
        ("serving", SERVING_MODES),
        ("engine", ENGINE_CHOICES),
        ("engine_version", known["engine_version"][1:]),
    ):
        t = text[col]
        check.fail_where(
            t.codes < 0,
            col,
            lambda i, t=t, names=names: f"'{t.value(i)}' is not one of " + ", ".join(names),
        )
    _check_engine_versions(text["engine"], text["engine_version"], known, check)
    is_draft = method.codes == METHODS.index("draft_model")
    check.fail_where(
        is_draft & (draft.codes == 0),
        "draft",
        "is empty; method draft_model needs a draft model id",
    )
    check.fail_where(
        is_draft & (draft.codes < 0),
        "draft",
        lambda i: f"unknown model '{draft.value(i)}'; known: {', '.join(sorted(models))}",
    )

    return text, known


def _version_pairs(engine, version, known, keep) -> np.ndarray:
    """Per row, whether `keep(engine, version)` holds for its (engine, version) pair, from
    their codes; False where no version is given. Each distinct pair is looked at once."""
    given = version > 0
    out = np.zeros(len(given), dtype=bool)
    if not given.any():
        return out
    pair = engine.astype(np.int64) * 65536 + version
    for code in np.unique(pair[given]):
        e, v = known["engine"][code // 65536], known["engine_version"][code % 65536]
        out[pair == code] = keep(e, v)
    return out


def _check_engine_versions(engine: _Text, version: _Text, known, check: _Checker) -> None:
    """A version is refused where the row's engine has no tables of it (another engine's
    version, or any version with engine `other`)."""
    foreign = _version_pairs(
        engine.codes, version.codes, known, lambda e, v: v not in engine_versions_of(e)
    )

    def why(i: int) -> str:
        e, v = known["engine"][engine.codes[i]], version.value(i)
        if not engine_versions_of(e):
            return f"'{v}' is given with engine {e}, which has no kernel tables; leave it blank"
        return f"'{v}' is not a version of {e}; its versions: {', '.join(engine_versions_of(e))}"

    check.fail_where(foreign, "engine_version", why)


def untabled_versions(sc_codes: dict, known: dict) -> np.ndarray:
    """Per row, whether it names an engine version that has no tables for its GPU (the
    engine has the version on other GPUs): such a row is priced on the roofline."""
    version = sc_codes["engine_version"]
    out = np.zeros(len(version), dtype=bool)
    given = version > 0
    if not given.any():
        return out
    key = (sc_codes["gpu"].astype(np.int64) * 256 + sc_codes["engine"]) * 65536 + version
    for code in np.unique(key[given]):
        gpu = known["gpu"][code // (256 * 65536)]
        e = known["engine"][(code // 65536) % 256]
        out[key == code] = not prices_version(gpu, e, known["engine_version"][code % 65536])
    return out


def host_only_versions(sc_codes: dict, known: dict) -> np.ndarray:
    """Per row, whether it names a version with host costs of its own and no kernel tables
    (`tables.host_only`): its kernels come from the nearest version that has them."""
    return _version_pairs(sc_codes["engine"], sc_codes["engine_version"], known, host_only)


def _check_numbers(cols, n: int, method, spec, check: _Checker):
    """The numeric columns with their defaults, every out-of-range value refused:
    (values, given, k), `given` a mask of the cells the table filled (None: no column), `k`
    with its defaults (`values["k"]` stays as given until the acceptance is checked)."""
    values, given = {}, {}
    for col in (*_INT_COLUMNS, *_FLOAT_COLUMNS):
        values[col], given[col] = _numeric(cols.get(col), n, col, check)
    k = values["k"]
    k = np.where(np.isnan(k), np.where(spec, DEFAULT_K_SPECULATIVE, 0), k)
    k = np.where(spec, k, 0)
    check.fail_where(
        spec & ((k < 1) | (k > K_LIMIT)),
        "k",
        lambda i: f"{k[i]:g} is out of range: use 1..{K_LIMIT} with method {method.value(i)}",
    )
    rate = values["request_rate"]
    check.fail_where(~np.isnan(rate) & (rate <= 0), "request_rate", "must be above 0")
    if given["batch_size"] is not None:
        check.fail_where(
            ~np.isnan(rate) & given["batch_size"],
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
        v = values[col]
        values[col] = (
            np.full(n, float(default))
            if given[col] is None
            else np.where(np.isnan(v), float(default), v)
        )
    for col in _INT_COLUMNS:
        if given[col] is None:
            continue
        v = values[col]
        check.fail_where(v < 0, col, lambda i, v=v: f"{v[i]:g} is negative")
        check.fail_where(
            ~np.isnan(v) & (v != np.round(v)),
            col,
            lambda i, v=v: f"{v[i]:g} must be a whole number",
        )
    for col in (
        "num_gpus",
        "tp_size",
        "attention_dp_size",
        "moe_ep_size",
        "moe_tp_size",
        "batch_size",
        "output_len",
        "draft_context_len",
        "medusa_heads",
        "max_num_seqs",
    ):
        if given[col] is not None:
            check.fail_where(values[col] < 1, col, "must be at least 1")
    if given["mtp_depth"] is not None:
        check.fail_where(values["mtp_depth"] < 1, "mtp_depth", "must be at least 1")
    for col, (most, why) in LIMITS.items():
        if given[col] is not None:
            v = values[col]
            check.fail_where(
                v > most,
                col,
                lambda i, v=v, most=most, why=why: (
                    f"{v[i]:g} is above {most:,g}, the most this column accepts ({why})"
                ),
            )
    _check_layout(values, given, check)
    util = values["gpu_memory_utilization"]
    check.fail_where(
        (util <= 0) | (util > 1),
        "gpu_memory_utilization",
        lambda i: f"{util[i]:g} must be in (0, 1]",
    )
    temperature = values["temperature"]
    check.fail_where(temperature < 0, "temperature", lambda i: f"{temperature[i]:g} is negative")
    price = values["gpu_hourly_usd"]
    check.fail_where(price < 0, "gpu_hourly_usd", lambda i: f"{price[i]:g} is negative")

    return values, given, k


def _check_layout(values, given, check: _Checker) -> None:
    """The replica's parallel layout filled and checked in place: GPUs = tp_size x
    attention_dp_size = moe_tp_size x moe_ep_size (aiconfigurator's and its silicon data's
    names). A row that gives only num_gpus keeps its meaning: TP = num_gpus."""
    gpus, dp, ep = values["num_gpus"], values["attention_dp_size"], values["moe_ep_size"]
    dp = np.where(np.isnan(dp), 1.0, dp)
    ep = np.where(np.isnan(ep), 1.0, ep)
    tp = values["tp_size"]
    gpus_given = given["num_gpus"] if given["num_gpus"] is not None else np.zeros(len(gpus), bool)
    if given["tp_size"] is not None:
        both = gpus_given & ~np.isnan(tp)
        check.fail_where(
            both & (gpus != tp * dp),
            "num_gpus",
            lambda i: f"{gpus[i]:g} is not tp_size x attention_dp_size = {tp[i] * dp[i]:g}",
        )
        gpus = np.where(np.isnan(tp), gpus, tp * dp)
    check.fail_where(
        np.isnan(tp) & (gpus % dp != 0),
        "attention_dp_size",
        lambda i: f"{dp[i]:g} does not divide num_gpus {gpus[i]:g}",
    )
    tp = np.where(np.isnan(tp), gpus // dp, tp)
    check.fail_where(
        gpus % ep != 0,
        "moe_ep_size",
        lambda i: f"{ep[i]:g} does not divide the replica's {gpus[i]:g} GPUs",
    )
    moe_tp = values["moe_tp_size"]
    moe_tp = np.where(np.isnan(moe_tp), gpus // ep, moe_tp)
    check.fail_where(
        moe_tp * ep != gpus,
        "moe_tp_size",
        lambda i: f"{moe_tp[i]:g} x moe_ep_size {ep[i]:g} is not the replica's {gpus[i]:g} GPUs",
    )
    values.update(
        num_gpus=gpus, tp_size=tp, attention_dp_size=dp, moe_ep_size=ep, moe_tp_size=moe_tp
    )


def _check_acceptance(cols, n: int, method, draft, values, given, spec, k, check: _Checker):
    """Exactly one way of stating acceptance per speculative row, each in range:
    (per-position rates or None, the ignored-column bits, the positions column)."""
    pos_col = cols.get("acceptance_per_position")
    pos_given = np.zeros(n, bool) if pos_col is None else ~_blank(pos_col)
    ignored = _ignored(method.codes, draft.codes, values, given, pos_given)
    zeros = np.zeros(n, bool)
    count = (
        (zeros if given["acceptance_rate"] is None else given["acceptance_rate"]).astype(np.int8)
        + (zeros if given["mean_accepted_tokens"] is None else given["mean_accepted_tokens"])
        + pos_given
    )
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
            + ", ".join(
                c
                for c, g in zip(
                    ACCEPTANCE_COLUMNS,
                    (
                        ~np.isnan(values["acceptance_rate"][i]),
                        ~np.isnan(values["mean_accepted_tokens"][i]),
                        pos_given[i],
                    ),
                    strict=True,
                )
                if g
            )
        ),
    )
    alpha = values["acceptance_rate"]
    # Checked on every row that gives one, speculative or not: a value no row could use
    # is refused, not carried into the output.
    check.fail_where(
        (alpha < 0) | (alpha > 1),
        "acceptance_rate",
        lambda i: f"{alpha[i]:g} is outside [0, 1]",
    )
    tau = values["mean_accepted_tokens"]
    check.fail_where(
        (tau < 1) | (spec & (tau > k + 1)),
        "mean_accepted_tokens",
        lambda i: f"{tau[i]:g} is outside [1, k+1] = [1, {k[i] + 1:g}]",
    )
    positions = None
    if pos_col is not None and pos_given.any():
        positions = parse_positions(pos_col, check, rows=pos_given)
        if not spec.all():
            positions = np.where(spec[:, None], positions, np.nan)

    return positions, ignored, pos_col


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
    arrays = validate_scenarios(df, gpus, models, source=source, row_offset=row_offset)
    positions = arrays.positions
    if positions is None:
        positions = np.full((arrays.n, 1), np.nan)
    return arrays.frame(), positions
