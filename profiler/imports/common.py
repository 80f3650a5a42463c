"""What every engine-benchmark parser returns, and the checked field readers they share.

A parser turns one file's bytes into a `Parsed`: decode steps measured by the engine
(`StepPoint`, milliseconds), serving points (`ServingPoint`: load, TPOT/TTFT/ITL in ms,
output tokens/s, acceptance), and what the file says about the engine, its version, the
model and the GPU. Nothing in a file is executed: JSON through `json.loads`, CSV through
`csv`, every value checked before use. Errors are `InputError`s naming the file and field.
"""

from __future__ import annotations

import json
import math
import numbers
import re
from dataclasses import dataclass, field
from typing import Any

from simulator.errors import InputError, not_a_number
from simulator.inputs.scenarios import K_LIMIT

MAX_ACCEPTANCE_LENGTH = K_LIMIT + 1.0
"""The longest mean acceptance length priced: K + 1 tokens per verify step, K at most
`K_LIMIT`."""

MAX_FILE_BYTES = 20 * 1024 * 1024
"""A benchmark result is kilobytes (a `--save-detailed` serve result a few megabytes)."""
MAX_ROWS = 10_000
"""Rows a JSONL or CSV file may hold: a sweep has tens."""


@dataclass(frozen=True)
class StepPoint:
    """One decode (q = 1) or prefill forward the engine timed: `batch` sequences, `query_len`
    tokens each, over `context_len` tokens of cache, `median_ms` per forward."""

    batch: int
    query_len: int
    context_len: int
    median_ms: float
    repeats: int
    source: str


@dataclass(frozen=True)
class ServingPoint:
    """One serving load the engine measured, as `simulator.inputs.profile.SERVING_COLUMNS`."""

    source: str
    concurrency: float | None
    request_rate: float | None
    prompt_tokens: float | None
    output_tokens: float | None
    speculative: bool
    method: str
    k: int | None
    acceptance_length: float | None
    acceptance_per_position: str
    tpot_ms: float | None
    ttft_ms: float | None
    itl_ms: float | None
    output_tok_s: float | None

    def row(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class Parsed:
    """One file's content. `model` and `gpu` are what the file records ('' when nothing);
    `notes` say what the file cannot give (shown to the user)."""

    format: str
    engine: str
    version: str
    source: str
    model: str = ""
    gpu: str = ""
    dtype: str = ""
    steps: tuple[StepPoint, ...] = ()
    serving: tuple[ServingPoint, ...] = ()
    latency_runs: tuple[dict, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    num_gpus: int = 1


def decode_text(data: bytes, name: str) -> str:
    """UTF-8 text of an upload, refused when too large, binary or empty."""
    if len(data) > MAX_FILE_BYTES:
        raise InputError(
            f"{len(data):,} bytes is over the {MAX_FILE_BYTES:,} bytes a benchmark file may have",
            file=name,
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(
            "not UTF-8 text; expected a JSON, JSONL or CSV result", file=name
        ) from None
    if not text.strip():
        raise InputError("is empty", file=name)
    return text


def load_json(text: str, name: str, row: int | None = None) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise InputError("nests too deeply to be a benchmark result", file=name, row=row) from None
    except ValueError as exc:
        raise InputError(f"not valid JSON ({exc})", file=name, row=row) from None


def json_lines(text: str, name: str) -> list[tuple[int, Any]]:
    """(line number, parsed object) of each non-blank line."""
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            if len(out) >= MAX_ROWS:
                raise InputError(f"more than {MAX_ROWS:,} lines", file=name, row=n)
            out.append((n, load_json(line, name, n)))
    return out


class Fields:
    """Checked reads from one JSON object (or CSV row) of one file; errors name the field
    by its dotted path in the file and the row (a JSONL line or CSV row) when given."""

    def __init__(self, obj: Any, name: str, path: str = "", row: int | None = None) -> None:
        self.name, self.path, self.row = name, path, row
        if not isinstance(obj, dict):
            raise self.fail("", f"expected a JSON object, got {type(obj).__name__}")
        self.obj = obj

    def where(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path and key else self.path or key

    def fail(self, key: str, message: str) -> InputError:
        return InputError(message, file=self.name, row=self.row, field=self.where(key))

    def has(self, key: str) -> bool:
        value = self.obj.get(key)
        return value is not None and value != ""

    def sub(self, key: str, *, required: bool = True) -> Fields | None:
        if not self.has(key):
            if required:
                raise self.fail(key, "is missing")
            return None
        return Fields(self.obj[key], self.name, self.where(key), self.row)

    def number(
        self,
        key: str,
        unit: str,
        *,
        required: bool = True,
        low: float = 0.0,
        high: float = math.inf,
        above: bool = False,
    ) -> float | None:
        """A finite number in `unit`, >= low (> low with `above`) and <= high; None when
        absent and not required."""
        if not self.has(key):
            if required:
                raise self.fail(key, f"is missing (a number, {unit})")
            return None
        return self.check(key, self.obj[key], unit, low=low, high=high, above=above)

    def check(
        self, key: str, value: Any, unit: str, *, low=0.0, high=math.inf, above=False
    ) -> float:
        if isinstance(value, str):
            try:
                value = float(value.strip())
            except ValueError:
                raise self.fail(key, f"{not_a_number(value)} ({unit} expected)") from None
        elif isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise self.fail(key, f"expected a number ({unit}), got {type(value).__name__}")
        value = float(value)
        if not math.isfinite(value):
            raise self.fail(key, f"{value} is not a finite number ({unit})")
        if value < low or (above and value == low):
            raise self.fail(key, f"{value:g} must be {'>' if above else '>='} {low:g} {unit}")
        if value > high:
            raise self.fail(key, f"{value:g} is above {high:g} {unit}: is it in another unit?")
        return value

    def whole(self, key: str, unit: str, *, required=True, low=1, high=10**9) -> int | None:
        value = self.number(key, unit, required=required, low=low, high=high)
        if value is None:
            return None
        if value != int(value):
            raise self.fail(key, f"{value:g} must be a whole number of {unit}")
        return int(value)

    def text(self, key: str, *, required: bool = False, default: str = "") -> str:
        if not self.has(key):
            if required:
                raise self.fail(key, "is missing")
            return default
        value = self.obj[key]
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise self.fail(key, f"expected text, got {type(value).__name__}")
        return str(value).strip()[:200]

    def rates(self, key: str) -> str:
        """A list of per-position acceptance fractions as 'p1;p2;...' ('' when absent)."""
        if not self.has(key):
            return ""
        values = self.obj[key]
        if not isinstance(values, list):
            raise self.fail(key, f"expected a list of fractions, got {type(values).__name__}")
        out = []
        for i, v in enumerate(values[:64]):
            rate = self.check(f"{key}[{i}]", v, "a fraction of drafts", high=1.0)
            out.append(f"{rate:.6g}")
        return ";".join(out)


def acceptance_length(f: Fields, key: str, *, required: bool = False) -> float | None:
    """A file's mean acceptance length (tokens per verify step, 1 + accepted / drafts),
    refused naming `key` above K + 1 for the largest K priced."""
    length = f.number(key, "tokens per step", required=required, low=1.0)
    if length is not None and length > MAX_ACCEPTANCE_LENGTH:
        raise f.fail(
            key,
            f"{length:g} tokens per verify step needs K >= {math.ceil(length - 1)}; "
            f"SpecPlan prices K up to {K_LIMIT}, so at most {MAX_ACCEPTANCE_LENGTH:g}",
        )
    return length


def consistent(f: Fields, key: str, value: float, expected: float, why: str) -> None:
    """Refuse `key` when it disagrees with what the file's other fields give (1%): the sign
    of a field written in another unit."""
    if expected > 0 and abs(value / expected - 1) > 0.01:
        raise f.fail(
            key,
            f"{value:g} disagrees with {why} ({expected:.6g}); is one of them in another unit?",
        )


_POOL_KEY = re.compile(
    r"^(?:num_)?(?P<role>ctx|context|prefill|gen|generation|decode)_"
    r"(?P<what>servers|workers|instances|nodes|gpus|tp|tp_size|world_size)$"
)
_SPLIT_KEYS = ("disaggregation_mode", "disaggregated", "disaggregation", "pd_disaggregation")
_NOT_SPLIT = ("", "null", "none", "false", "0", "no", "off", "aggregated", "colocated")


def refuse_disaggregated(f: Fields) -> None:
    """Refuse a result of a prefill/decode split, as its `--metadata` (top-level keys of a
    `vllm bench serve` result, which TensorRT-LLM's `benchmark_serving.py` also writes)
    records it: a `disaggregation_mode` (or `disaggregated`) other than none, or a context /
    prefill or generation / decode pool's size (`num_ctx_servers`, `gen_tp_size`,
    `prefill_tp`, ...) above 0. The model simulates one replica doing both phases."""
    for key in _SPLIT_KEYS:
        if f.has(key) and str(f.obj[key]).strip().lower() not in _NOT_SPLIT:
            raise f.fail(key, _split_message(f, str(f.obj[key])[:40]))
    pools = {}
    for key, value in f.obj.items():
        match = _POOL_KEY.match(str(key).lower())
        if match is None or isinstance(value, bool):
            continue
        try:
            size = float(value)
        except (TypeError, ValueError):
            continue
        if math.isfinite(size) and size > 0:
            pools[key] = (match["role"], match["what"], size)
    if pools:
        raise f.fail(next(iter(pools)), _split_message(f, "", _pool_gpus(pools)))


def _pool_gpus(pools: dict) -> int | None:
    """GPUs over both pools where the sizes say it: instances x GPUs each, per role."""
    total = 0.0
    for role in (("ctx", "context", "prefill"), ("gen", "generation", "decode")):
        count = [s for r, w, s in pools.values() if r in role and w in ("servers", "instances")]
        each = [
            s
            for r, w, s in pools.values()
            if r in role and w in ("gpus", "tp", "tp_size", "world_size")
        ]
        if not each:
            return None
        total += (count[0] if count else 1) * each[0]
    return int(total)


def _split_message(f: Fields, mode: str, gpus: int | None = None) -> str:
    over = f" over {gpus} GPUs" if gpus else ""
    said = f" ({mode})" if mode else ""
    return (
        f"a prefill/decode split{said}{over}: not what the model simulates (one replica "
        "doing both phases); import a run of an aggregated server"
    )
