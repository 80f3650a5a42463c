"""The profile file (`specplan.profile/v1`): its schema, loader and writers. Pure Python + pandas.

A profile records, for one device, the forward-step latency of one or more models over a grid
of batch size B, query length q (1 = decode step, K+1 = verification) and context length L.
The profiler writes it through `profile_to_json` / `profile_to_csv`; the simulator and the app
read it through `load_profile`, which raises `InputError` naming the field that is wrong,
e.g. `measurements[3].median_ms`.

JSON form::

    {"schema": "specplan.profile/v1", "created": ISO-8601, "command": str,
     "device": {...DeviceInfo}, "settings": {...ProfileSettings},
     "models": [{...ProfiledModel}, ...],
     "measurements": [{"model", "batch", "query_len", "context_len", "median_ms", "p10_ms",
                       "p90_ms", "repeats", "peak_bytes", "status", "extrapolated"}, ...],
     "draft_in_loop": [{"draft", "target", "batch", "context_len", "position", "query_len",
                        "median_ms", "p10_ms", "p90_ms", "repeats"}, ...]}

`engine` and `serving_points` are optional (written by `profiler import`, which reads an
engine's own benchmark files): `engine` says which engine and version measured, from which
files, and holds the fit of the engine's per-step host cost; `serving_points` holds one row
of SERVING_COLUMNS per measured serving load (concurrency or request rate, TPOT, TTFT, ITL
in ms, output tokens/s, acceptance length when speculating).

`draft_in_loop` is optional (written by `profiler run --draft`): the draft's forward time at
each position of a speculative round, timed right after a verify forward of the target, as
speculation runs it. Position 1 feeds `query_len` 2 tokens (the draft re-reads the last
accepted one), later positions 1. The simulator sums positions 1..K for a draft model's cost
per round where this table covers the point (`simulator.model.calibration`).

Latencies are milliseconds, memory is bytes. Rows with status `oom` have null latencies
(NaN in the DataFrame) and 0 repeats.

CSV form: the measurement rows as a plain CSV table, preceded by header lines of the form
`# key: <JSON value>` for `schema`, `created`, `command`, `device`, `settings`, `models` and,
when present, `draft_in_loop` (each value is one line of JSON). `pandas.read_csv(path, comment="#")` reads the table alone
when the command has no `#` in it; `load_profile` reads both parts.
"""

from __future__ import annotations

import csv
import io
import json
import math
import numbers
import re
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from simulator.errors import InputError

SCHEMA = "specplan.profile/v1"
# Larger than any real profile (a full grid is a few thousand rows of ~250 bytes) and small
# enough that a stray upload cannot make the app parse hundreds of megabytes.
MAX_PROFILE_BYTES = 20 * 1024 * 1024
MAX_MEASUREMENTS = 20_000
"""Rows a profile may hold: ten times a full grid (a few thousand rows); the size cap alone
would let 80,000 rows through."""
MAX_GRID_CELLS = 1 << 22
"""Distinct batch x query_len x context_len points one model's rows may span (the same for
a draft_in_loop table's batch x context_len x position): calibration keeps a dense grid of
them, 32 MB at this size, and a real grid has a few hundred."""
MAX_BATCH = 1 << 20
"""Sequences in one forward: no server batches a million."""
MAX_TOKENS = 1 << 24
"""Tokens of a query or a context (16.7M): beyond any model's window."""
MAX_LOOP_POSITION = 64
"""Draft positions a draft_in_loop table may time: speculation drafts at most a few tens."""
MAX_BYTES = 1 << 53
"""Byte counts (8 PiB): beyond any device, and exact in a float64."""
MAX_COUNT = 10**9
"""Repeats, warm-up steps and threads."""
MIN_STEP_MS = 1e-6
"""A measured forward below a nanosecond is not a measurement (and 1/t would overflow)."""
MAX_STEP_MS = 1e7
"""A forward of almost three hours is not one either."""
MAX_NESTING = 8
"""Objects and lists inside `device.nvml` and `models[i].architecture` nest at most this
deep: NVML's fields are flat, and deeper nesting only costs recursion when written back."""
ARCH_LIMITS = {
    "num_layers": (1, 10_000),
    "hidden_size": (1, 1 << 20),
    "num_heads": (1, 1 << 16),
    "num_kv_heads": (1, 1 << 16),
    "head_dim": (1, 1 << 16),
    "intermediate_size": (0, 1 << 22),
    "vocab_size": (1, 1 << 24),
    "num_experts": (0, 1 << 16),
    "experts_per_token": (0, 1 << 16),
    "moe_intermediate_size": (0, 1 << 22),
    "num_shared_experts": (0, 1 << 16),
    "num_dense_layers": (0, 10_000),
}
"""Architecture fields the simulator reads, as whole numbers in [low, high]; other fields
(rope_theta, norm_eps, ...) are kept as written. Calibration needs the first seven of a
model that is not in the model catalog."""
ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:+@-]{0,127}")
"""A model id: letters, digits and . _ / : + @ - (a Hugging Face repo fits), no spaces, at
most 128 characters. Ids are joined into labels and links, so they carry no separators."""
DTYPES = ("fp32", "bf16", "fp16")
DEVICE_KINDS = ("cuda", "cpu")
STATUSES = ("ok", "oom")
MEASUREMENT_COLUMNS = (
    "model",
    "batch",
    "query_len",
    "context_len",
    "median_ms",
    "p10_ms",
    "p90_ms",
    "repeats",
    "peak_bytes",
    "status",
    "extrapolated",
)
_LATENCIES = ("median_ms", "p10_ms", "p90_ms")
OPTIONAL_MEASUREMENT_COLUMNS = ("bytes_moved", "copy_fraction")
"""Written by profilers that measured the device's copy rate (`device.copy_gbps`): the bytes
a step moves (weights read + KV cache read and written) and the fraction of the copy rate
that step reached, (bytes_moved / median_ms) / copy rate. Null where unknown."""
MAX_COPY_FRACTION = 100.0
"""A step cannot move its bytes 100x faster than a plain copy: a larger figure is a unit
mistake (a byte count in the wrong unit, a rate in bytes where GB/s goes)."""
LOOP_COLUMNS = (
    "draft",
    "target",
    "batch",
    "context_len",
    "position",
    "query_len",
    "median_ms",
    "p10_ms",
    "p90_ms",
    "repeats",
)
SERVING_COLUMNS = (
    "source",
    "concurrency",
    "request_rate",
    "prompt_tokens",
    "output_tokens",
    "speculative",
    "method",
    "k",
    "acceptance_length",
    "acceptance_per_position",
    "tpot_ms",
    "ttft_ms",
    "itl_ms",
    "output_tok_s",
)
"""A serving point: `source` (file it came from), load (`concurrency` requests in flight or
`request_rate` per second; null when not recorded), mean prompt and output tokens per
request, whether the server speculated (`method`, `k` and acceptance when known; the
per-position rates as 'p1;p2;...'), mean TPOT, TTFT and ITL in ms, output tokens/s."""
_SERVING_NUMBERS = (
    "concurrency",
    "request_rate",
    "prompt_tokens",
    "output_tokens",
    "acceptance_length",
    "tpot_ms",
    "ttft_ms",
    "itl_ms",
    "output_tok_s",
)
ENGINE_FIELDS = {"name", "version", "format", "files"}
ENGINE_OPTIONAL = {"notes", "fit"}
# Quantiles of the same samples are ordered exactly; this only absorbs rounding in the file.
_ORDER_TOL = 1e-9


@dataclass(frozen=True)
class DeviceInfo:
    """The machine a profile was measured on. `memory_bytes` is device (or host) memory."""

    name: str
    kind: str
    memory_bytes: int
    driver: str | None
    torch_version: str
    cpu_threads: int | None
    nvml: dict[str, Any] | None = None
    reason_no_gpu: str | None = None
    copy_gbps: float | None = None
    """Device-to-device copy rate measured at the start of the run, GB/s counting the bytes
    read and written (as a bandwidth test does); a host memory copy on a CPU."""
    matmul_tflops: float | None = None
    """A large bf16 matmul's rate measured at the start of the run (GPU only), TFLOP/s."""


@dataclass(frozen=True)
class ProfileSettings:
    """How every point was measured: warm-up steps, at least `repeats` timed steps and at
    least `min_time_s` seconds of them, CUDA graphs on or off."""

    dtype: str
    warmup: int
    repeats: int
    min_time_s: float
    cuda_graphs: bool


@dataclass(frozen=True)
class ProfiledModel:
    """One model of the profile. `weight_bytes` and `kv_bytes_per_token` are for the full depth
    `num_layers`, even when only the depths in `layers_run` were run (`extrapolated`)."""

    id: str
    architecture: dict[str, Any]
    layers_run: list[int]
    num_layers: int
    extrapolated: bool
    weight_bytes: int
    kv_bytes_per_token: int
    kv_bytes_per_token_formula: int
    notes: str = ""


@dataclass(frozen=True, eq=False)
class Profile:
    schema: str
    created: str
    command: str
    device: DeviceInfo
    settings: ProfileSettings
    models: tuple[ProfiledModel, ...]
    measurements: pd.DataFrame = field(repr=False)
    draft_in_loop: pd.DataFrame = field(default_factory=lambda: _loop_frame([]), repr=False)
    """Rows of LOOP_COLUMNS; empty when the profile did not time a draft inside the loop."""
    engine: dict[str, Any] | None = None
    """Which engine measured (name, version, format, files, notes, fit); None for a
    profile this profiler measured."""
    serving_points: pd.DataFrame = field(default_factory=lambda: _serving_frame([]), repr=False)
    """Rows of SERVING_COLUMNS; empty unless imported from an engine's serving benchmark."""

    def model(self, model_id: str) -> ProfiledModel:
        for m in self.models:
            if m.id == model_id:
                return m
        raise KeyError(model_id)

    def measurements_for(self, model_id: str, *, ok_only: bool = True) -> pd.DataFrame:
        """The rows of one model, sorted by (batch, query_len, context_len)."""
        df = self.measurements[self.measurements["model"] == model_id]
        if ok_only:
            df = df[df["status"] == "ok"]
        return df.sort_values(["batch", "query_len", "context_len"]).reset_index(drop=True)


# ----------------------------------------------------------------------------------- checks


class _Checker:
    """Field-by-field validation; every error names the dotted path of the field."""

    def __init__(self, name: str) -> None:
        self.name = name

    def fail(self, path: str, message: str, row: int | None = None) -> InputError:
        return InputError(message, file=self.name, row=row, field=path)

    def obj(self, value: Any, path: str, required: set[str], optional: set[str]) -> dict:
        if not isinstance(value, dict):
            raise self.fail(path, f"expected an object, got {_kind(value)}")
        missing = sorted(required - value.keys())
        if missing:
            where = f"{path}.{missing[0]}" if path else missing[0]
            raise self.fail(where, "is missing")
        unknown = sorted(value.keys() - required - optional)
        if unknown:
            where = f"{path}.{unknown[0]}" if path else unknown[0]
            raise self.fail(where, "is not a field of " + (path or "the profile"))
        return value

    def string(self, value: Any, path: str, *, allow_none: bool = False, nonempty=False):
        if value is None and allow_none:
            return None
        if not isinstance(value, str):
            raise self.fail(path, f"expected a string, got {_kind(value)}")
        if nonempty and not value.strip():
            raise self.fail(path, "must not be empty")
        return value

    def choice(self, value: Any, path: str, options: tuple[str, ...]) -> str:
        if value not in options:
            raise self.fail(path, f"{value!r} is not one of {', '.join(options)}")
        return value

    def boolean(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(path, f"expected true or false, got {value!r}")
        return value

    def integer(
        self,
        value: Any,
        path: str,
        *,
        minimum: int = 0,
        maximum: int = MAX_BYTES,
        allow_none=False,
        row=None,
    ):
        if value is None and allow_none:
            return None
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise self.fail(path, f"expected a whole number, got {_kind(value)}", row)
        if isinstance(value, float) and (not math.isfinite(value) or value != int(value)):
            raise self.fail(path, f"{value} must be a whole number", row)
        if not minimum <= value <= maximum:
            shown = value if isinstance(value, int) else f"{value:g}"
            raise self.fail(path, f"{shown} must be in {minimum}..{maximum}", row)
        return int(value)

    def number(
        self, value: Any, path: str, *, minimum: float = 0.0, maximum: float = math.inf, row=None
    ) -> float:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise self.fail(path, f"expected a number, got {_kind(value)}", row)
        if isinstance(value, int) and abs(value) > maximum:
            raise self.fail(path, f"{str(value)[:12]}... must be <= {maximum:g}", row)
        if not math.isfinite(value):
            raise self.fail(path, f"{value} must be a finite number >= {minimum:g}", row)
        if value < minimum:
            raise self.fail(path, f"{value} must be >= {minimum:g}", row)
        if value > maximum:
            raise self.fail(path, f"{value:g} must be <= {maximum:g}", row)
        return float(value)

    def ident(self, value: Any, path: str, known: set[str] | None = None, row=None) -> str:
        """A model id: a string matching ID_PATTERN and, given `known`, one of those."""
        if not isinstance(value, str):
            raise self.fail(path, f"expected a model id (a string), got {_kind(value)}", row)
        if known is not None:
            if value not in known:
                raise self.fail(path, f"{value[:80]!r} is not one of the profile's models", row)
        elif not ID_PATTERN.fullmatch(value):
            raise self.fail(
                path,
                f"{value[:80]!r} is not a model id: letters, digits and . _ / : + @ -, "
                "no spaces, at most 128 characters",
                row,
            )
        return value

    def shallow(self, value: Any, path: str) -> None:
        """Refuse objects and lists nested deeper than MAX_NESTING, and NaN or infinite
        numbers inside them (JSON has none; the profile could not be written back)."""
        stack = [(value, 0)]
        while stack:
            item, depth = stack.pop()
            if isinstance(item, float) and not math.isfinite(item):
                raise self.fail(path, f"holds {item}, not a finite number")
            if isinstance(item, dict | list):
                if depth >= MAX_NESTING:
                    raise self.fail(path, f"nests deeper than {MAX_NESTING} levels")
                children = item.values() if isinstance(item, dict) else item
                stack.extend((child, depth + 1) for child in children)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), repr(value)
    )


def _device(c: _Checker, d: Any) -> DeviceInfo:
    names = {f.name for f in fields(DeviceInfo)}
    optional = {"nvml", "reason_no_gpu", "copy_gbps", "matmul_tflops"}
    d = c.obj(d, "device", names - optional, optional)
    nvml = d.get("nvml")
    if nvml is not None and not isinstance(nvml, dict):
        raise c.fail("device.nvml", f"expected an object or null, got {_kind(nvml)}")
    c.shallow(nvml, "device.nvml")
    return DeviceInfo(
        name=c.string(d["name"], "device.name", nonempty=True),
        kind=c.choice(d["kind"], "device.kind", DEVICE_KINDS),
        memory_bytes=c.integer(d["memory_bytes"], "device.memory_bytes"),
        driver=c.string(d["driver"], "device.driver", allow_none=True),
        torch_version=c.string(d["torch_version"], "device.torch_version"),
        cpu_threads=c.integer(
            d["cpu_threads"], "device.cpu_threads", minimum=1, maximum=MAX_COUNT, allow_none=True
        ),
        nvml=nvml,
        reason_no_gpu=c.string(d.get("reason_no_gpu"), "device.reason_no_gpu", allow_none=True),
        copy_gbps=_rate(c, d.get("copy_gbps"), "device.copy_gbps"),
        matmul_tflops=_rate(c, d.get("matmul_tflops"), "device.matmul_tflops"),
    )


def _rate(c: _Checker, value: Any, path: str) -> float | None:
    """A measured rate: null, or a positive number below 1e7 (GB/s or TFLOP/s)."""
    if value is None:
        return None
    rate = c.number(value, path, minimum=MIN_STEP_MS, maximum=1e7)
    return float(rate)


def _settings(c: _Checker, s: Any) -> ProfileSettings:
    s = c.obj(s, "settings", {f.name for f in fields(ProfileSettings)}, set())
    return ProfileSettings(
        dtype=c.choice(s["dtype"], "settings.dtype", DTYPES),
        warmup=c.integer(s["warmup"], "settings.warmup", maximum=MAX_COUNT),
        repeats=c.integer(s["repeats"], "settings.repeats", minimum=1, maximum=MAX_COUNT),
        min_time_s=c.number(s["min_time_s"], "settings.min_time_s", maximum=MAX_STEP_MS / 1e3),
        cuda_graphs=c.boolean(s["cuda_graphs"], "settings.cuda_graphs"),
    )


def _model(c: _Checker, m: Any, i: int) -> ProfiledModel:
    p = f"models[{i}]"
    names = {f.name for f in fields(ProfiledModel)}
    m = c.obj(m, p, names - {"notes"}, {"notes"})
    arch = m["architecture"]
    if not isinstance(arch, dict):
        raise c.fail(f"{p}.architecture", f"expected an object, got {_kind(arch)}")
    c.shallow(arch, f"{p}.architecture")
    for key, (low, high) in ARCH_LIMITS.items():
        if key in arch:
            c.integer(arch[key], f"{p}.architecture.{key}", minimum=low, maximum=high)
    if "tie_word_embeddings" in arch:
        c.boolean(arch["tie_word_embeddings"], f"{p}.architecture.tie_word_embeddings")
    layers = m["layers_run"]
    if not isinstance(layers, list) or not layers:
        raise c.fail(f"{p}.layers_run", "expected a non-empty list of layer counts")
    most = ARCH_LIMITS["num_layers"][1]
    layers_run = [
        c.integer(n, f"{p}.layers_run[{j}]", minimum=1, maximum=most) for j, n in enumerate(layers)
    ]
    num_layers = c.integer(m["num_layers"], f"{p}.num_layers", minimum=1, maximum=most)
    if max(layers_run) > num_layers:
        raise c.fail(f"{p}.layers_run", f"{max(layers_run)} exceeds num_layers {num_layers}")
    return ProfiledModel(
        id=c.ident(m["id"], f"{p}.id"),
        architecture=dict(arch),
        layers_run=layers_run,
        num_layers=num_layers,
        extrapolated=c.boolean(m["extrapolated"], f"{p}.extrapolated"),
        weight_bytes=c.integer(m["weight_bytes"], f"{p}.weight_bytes"),
        kv_bytes_per_token=c.integer(m["kv_bytes_per_token"], f"{p}.kv_bytes_per_token"),
        kv_bytes_per_token_formula=c.integer(
            m["kv_bytes_per_token_formula"], f"{p}.kv_bytes_per_token_formula"
        ),
        notes=c.string(m.get("notes", ""), f"{p}.notes"),
    )


def _measurement(c: _Checker, r: Any, i: int, models: set[str], row: int | None) -> dict:
    p = f"measurements[{i}]"
    if not isinstance(r, dict):
        raise c.fail(p, f"expected an object, got {_kind(r)}", row)
    missing = [k for k in MEASUREMENT_COLUMNS if k not in r]
    if missing:
        raise c.fail(f"{p}.{missing[0]}", "is missing", row)
    unknown = sorted(set(r) - set(MEASUREMENT_COLUMNS) - set(OPTIONAL_MEASUREMENT_COLUMNS))
    if unknown:
        raise c.fail(f"{p}.{unknown[0]}", "is not a measurement column", row)
    model = c.ident(r["model"], f"{p}.model", models, row)
    status = r["status"]
    if not isinstance(status, str) or status not in STATUSES:
        shown = repr(status)[:80]
        raise c.fail(f"{p}.status", f"{shown} is not one of {', '.join(STATUSES)}", row)
    if not isinstance(r["extrapolated"], bool):
        shown = repr(r["extrapolated"])[:80]
        raise c.fail(f"{p}.extrapolated", f"expected true or false, got {shown}", row)
    out = {
        "model": model,
        "batch": c.integer(r["batch"], f"{p}.batch", minimum=1, maximum=MAX_BATCH, row=row),
        "query_len": c.integer(
            r["query_len"], f"{p}.query_len", minimum=1, maximum=MAX_TOKENS, row=row
        ),
        "context_len": c.integer(r["context_len"], f"{p}.context_len", maximum=MAX_TOKENS, row=row),
        "repeats": c.integer(
            r["repeats"],
            f"{p}.repeats",
            minimum=1 if status == "ok" else 0,
            maximum=MAX_COUNT,
            row=row,
        ),
        "peak_bytes": c.integer(r["peak_bytes"], f"{p}.peak_bytes", row=row),
        "status": status,
        "extrapolated": r["extrapolated"],
    }
    for name in _LATENCIES:
        value = r[name]
        if status == "oom" and (value is None or (isinstance(value, float) and math.isnan(value))):
            out[name] = math.nan
        elif value is None:
            raise c.fail(f"{p}.{name}", "is null but the status is 'ok'", row)
        else:
            low = MIN_STEP_MS if name == "median_ms" else 0.0
            out[name] = c.number(value, f"{p}.{name}", minimum=low, maximum=MAX_STEP_MS, row=row)
    if r.get("bytes_moved") is not None:
        out["bytes_moved"] = c.integer(
            r["bytes_moved"], f"{p}.bytes_moved", maximum=MAX_BYTES, row=row
        )
    if r.get("copy_fraction") is not None and not (
        isinstance(r["copy_fraction"], float) and math.isnan(r["copy_fraction"])
    ):
        out["copy_fraction"] = c.number(
            r["copy_fraction"], f"{p}.copy_fraction", maximum=MAX_COPY_FRACTION, row=row
        )
    if status == "ok":
        lo, mid, hi = out["p10_ms"], out["median_ms"], out["p90_ms"]
        tol = _ORDER_TOL * max(hi, 1.0)
        if not lo - tol <= mid <= hi + tol:
            raise c.fail(
                f"{p}.median_ms", f"{mid} must lie between p10_ms {lo} and p90_ms {hi}", row
            )
    return out


def _loop_row(c: _Checker, r: Any, i: int, models: set[str]) -> dict:
    p = f"draft_in_loop[{i}]"
    r = c.obj(r, p, set(LOOP_COLUMNS), set())
    out: dict[str, Any] = {}
    for key in ("draft", "target"):
        out[key] = c.ident(r[key], f"{p}.{key}", models)
    if out["draft"] == out["target"]:
        raise c.fail(f"{p}.draft", "must differ from the target")
    limits = {
        "batch": MAX_BATCH,
        "position": MAX_LOOP_POSITION,
        "query_len": MAX_TOKENS,
        "repeats": MAX_COUNT,
    }
    for key, most in limits.items():
        out[key] = c.integer(r[key], f"{p}.{key}", minimum=1, maximum=most)
    out["context_len"] = c.integer(r["context_len"], f"{p}.context_len", maximum=MAX_TOKENS)
    for key in _LATENCIES:
        low = MIN_STEP_MS if key == "median_ms" else 0.0
        out[key] = c.number(r[key], f"{p}.{key}", minimum=low, maximum=MAX_STEP_MS)
    lo, mid, hi = out["p10_ms"], out["median_ms"], out["p90_ms"]
    if not lo - _ORDER_TOL * max(hi, 1.0) <= mid <= hi + _ORDER_TOL * max(hi, 1.0):
        raise c.fail(f"{p}.median_ms", f"{mid} must lie between p10_ms {lo} and p90_ms {hi}")
    return out


def _loop_rows(c: _Checker, raw: Any, models: set[str]) -> list[dict]:
    if not isinstance(raw, list):
        raise c.fail("draft_in_loop", f"expected a list of rows, got {_kind(raw)}")
    if len(raw) > MAX_MEASUREMENTS:
        raise c.fail(
            "draft_in_loop", f"{len(raw):,} rows; a profile holds at most {MAX_MEASUREMENTS:,}"
        )
    rows, seen = [], {}
    for i, r in enumerate(raw):
        row = _loop_row(c, r, i, models)
        key = tuple(row[k] for k in ("draft", "target", "batch", "context_len", "position"))
        if key in seen:
            raise c.fail(f"draft_in_loop[{i}]", f"repeats the point of draft_in_loop[{seen[key]}]")
        seen[key] = i
        rows.append(row)
    _check_grid(c, rows, ("draft", "target"), ("batch", "context_len", "position"), "draft_in_loop")
    return rows


def _check_grid(c: _Checker, rows: list[dict], group: tuple, axes: tuple, path: str) -> None:
    """Refuse rows whose distinct axis values span more than MAX_GRID_CELLS points."""
    spans: dict[tuple, list[set]] = {}
    for r in rows:
        sets = spans.setdefault(tuple(r[g] for g in group), [set() for _ in axes])
        for values, axis in zip(sets, axes, strict=True):
            values.add(r[axis])
    for key, sets in spans.items():
        # A position axis is allocated up to its largest value, not its distinct ones.
        sizes = [max(s) if a == "position" else len(s) for s, a in zip(sets, axes, strict=True)]
        if math.prod(sizes) > MAX_GRID_CELLS:
            raise c.fail(
                path,
                f"the rows of {' / '.join(map(str, key))} span {' x '.join(map(str, sizes))} "
                f"distinct {' x '.join(axes)} points, more than the {MAX_GRID_CELLS:,} a "
                "profile may hold",
            )


def profile_from_dict(d: dict, name: str = "", *, csv_rows: list[int] | None = None) -> Profile:
    """Validate a parsed profile; `name` (a file name) goes into error messages.

    `csv_rows` maps measurement index to the line number of the CSV it came from.
    """
    c = _Checker(name)
    top = {"schema", "created", "command", "device", "settings", "models", "measurements"}
    if not isinstance(d, dict):
        raise c.fail("", f"a profile is a JSON object, got {_kind(d)}")
    if "schema" not in d:
        raise c.fail("schema", f"is missing (expected '{SCHEMA}')")
    if d["schema"] != SCHEMA:
        raise c.fail("schema", f"{d['schema']!r} is not supported, expected '{SCHEMA}'")
    c.obj(d, "", top, {"draft_in_loop", "engine", "serving_points"})
    created = c.string(d["created"], "created", nonempty=True)
    try:
        datetime.fromisoformat(created)
    except ValueError:
        raise c.fail("created", f"{created!r} is not an ISO-8601 date and time") from None
    device = _device(c, d["device"])
    settings = _settings(c, d["settings"])
    raw_models = d["models"]
    if not isinstance(raw_models, list) or not raw_models:
        raise c.fail("models", "expected a non-empty list of models")
    models = tuple(_model(c, m, i) for i, m in enumerate(raw_models))
    ids = [m.id for m in models]
    for i, ident in enumerate(ids):
        if ident in ids[:i]:
            raise c.fail(f"models[{i}].id", f"duplicate model id {ident!r}")
    raw_rows = d["measurements"]
    if not isinstance(raw_rows, list):
        raise c.fail("measurements", f"expected a list of rows, got {_kind(raw_rows)}")
    if len(raw_rows) > MAX_MEASUREMENTS:
        raise c.fail(
            "measurements", f"{len(raw_rows):,} rows; a profile holds at most {MAX_MEASUREMENTS:,}"
        )
    rows = []
    seen: dict[tuple, int] = {}
    for i, r in enumerate(raw_rows):
        line = csv_rows[i] if csv_rows else None
        row = _measurement(c, r, i, set(ids), line)
        key = (row["model"], row["batch"], row["query_len"], row["context_len"])
        if key in seen:
            raise c.fail(
                f"measurements[{i}]", f"repeats the point of measurements[{seen[key]}]", line
            )
        seen[key] = i
        rows.append(row)
    _check_grid(c, rows, ("model",), ("batch", "query_len", "context_len"), "measurements")
    loop = _loop_rows(c, d.get("draft_in_loop", []), set(ids))
    return Profile(
        schema=SCHEMA,
        created=created,
        command=c.string(d["command"], "command"),
        device=device,
        settings=settings,
        models=models,
        measurements=_frame(rows),
        draft_in_loop=_loop_frame(loop),
        engine=_engine(c, d["engine"]) if "engine" in d else None,
        serving_points=_serving_frame(_serving_rows(c, d.get("serving_points", []))),
    )


def _engine(c: _Checker, e: Any) -> dict[str, Any]:
    e = c.obj(e, "engine", ENGINE_FIELDS, ENGINE_OPTIONAL)
    c.shallow(e, "engine")
    for key in ("name", "version", "format"):
        c.string(e[key], f"engine.{key}", nonempty=True)
    if not isinstance(e["files"], list):
        raise c.fail("engine.files", f"expected a list of file names, got {_kind(e['files'])}")
    for i, name in enumerate(e["files"]):
        c.string(name, f"engine.files[{i}]")
    c.string(e.get("notes", ""), "engine.notes")
    if "fit" in e and not isinstance(e["fit"], dict):
        raise c.fail("engine.fit", f"expected an object, got {_kind(e['fit'])}")
    return dict(e)


def _serving_rows(c: _Checker, raw: Any) -> list[dict]:
    if not isinstance(raw, list):
        raise c.fail("serving_points", f"expected a list of rows, got {_kind(raw)}")
    if len(raw) > MAX_MEASUREMENTS:
        raise c.fail(
            "serving_points", f"{len(raw):,} rows; a profile holds at most {MAX_MEASUREMENTS:,}"
        )
    rows = []
    for i, r in enumerate(raw):
        p = f"serving_points[{i}]"
        r = c.obj(r, p, set(SERVING_COLUMNS), set())
        out: dict[str, Any] = {
            "source": c.string(r["source"], f"{p}.source"),
            "speculative": c.boolean(r["speculative"], f"{p}.speculative"),
            "method": c.string(r["method"], f"{p}.method"),
            "k": c.integer(r["k"], f"{p}.k", maximum=MAX_LOOP_POSITION, allow_none=True),
            "acceptance_per_position": c.string(
                r["acceptance_per_position"], f"{p}.acceptance_per_position"
            ),
        }
        for key in _SERVING_NUMBERS:
            value = r[key]
            out[key] = math.nan if value is None else c.number(value, f"{p}.{key}")
        if out["acceptance_length"] < 1:
            raise c.fail(f"{p}.acceptance_length", "must be >= 1 (tokens per target step)")
        rows.append(out)
    return rows


def _serving_frame(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=list(SERVING_COLUMNS))
    types = {k: "float64" for k in _SERVING_NUMBERS}
    types.update(source=str, method=str, acceptance_per_position=str, speculative=bool)
    df = df.astype(types)
    df["k"] = df["k"].astype("Int64")
    return df


def _frame(rows: list[dict]) -> pd.DataFrame:
    extra = [k for k in OPTIONAL_MEASUREMENT_COLUMNS if any(k in r for r in rows)]
    df = pd.DataFrame(rows, columns=[*MEASUREMENT_COLUMNS, *extra])
    types = {
        "model": str,
        "batch": "int64",
        "query_len": "int64",
        "context_len": "int64",
        "median_ms": "float64",
        "p10_ms": "float64",
        "p90_ms": "float64",
        "repeats": "int64",
        "peak_bytes": "int64",
        "status": str,
        "extrapolated": bool,
        **dict.fromkeys(extra, "float64"),
    }
    return df.astype(types)


def _loop_frame(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=list(LOOP_COLUMNS))
    ints = ("batch", "context_len", "position", "query_len", "repeats")
    return df.astype({**{k: "int64" for k in ints}, **{k: "float64" for k in _LATENCIES}})


# ----------------------------------------------------------------------------------- loading


def _read_source(source: str | Path | bytes, name: str) -> tuple[bytes, str, str]:
    """The raw bytes, a display name and a format hint ('json', 'csv' or '')."""
    if isinstance(source, bytes | bytearray):
        data = bytes(source)
        hint = Path(name).suffix.lower().lstrip(".") if name else ""
    else:
        path = Path(source)
        name = name or str(path)
        try:
            if path.is_dir():
                raise InputError("is a folder; give a profile file (.json or .csv)", file=name)
            size = path.stat().st_size
            if size > MAX_PROFILE_BYTES:
                raise InputError(
                    f"{size} bytes is larger than the {MAX_PROFILE_BYTES} bytes a profile may have",
                    file=name,
                )
            data = path.read_bytes()
        except FileNotFoundError:
            raise InputError("file not found", file=name) from None
        except OSError as exc:
            raise InputError(f"cannot be read ({exc.strerror or exc})", file=name) from None
        hint = path.suffix.lower().lstrip(".")
    if len(data) > MAX_PROFILE_BYTES:
        raise InputError(
            f"{len(data)} bytes is larger than the {MAX_PROFILE_BYTES} bytes a profile may have",
            file=name,
        )
    return data, name, hint if hint in ("json", "csv") else ""


def load_profile(source: str | Path | bytes, *, name: str = "") -> Profile:
    """Read a profile from a path or from the bytes of an upload (JSON or CSV form).

    Raises `InputError` naming the file and the field (`measurements[3].median_ms`).
    """
    data, name, hint = _read_source(source, name)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text; expected a JSON or CSV profile", file=name) from None
    stripped = text.lstrip()
    if not stripped:
        raise InputError("is empty; expected a JSON or CSV profile", file=name)
    if hint == "json" or (not hint and stripped.startswith("{")):
        return profile_from_dict(_json(text, name), name)
    return _from_csv(text, name)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    out = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


class _DuplicateKey(ValueError):
    pass


def _json(text: str, name: str, *, field: str = "", row: int | None = None) -> Any:
    """Parsed JSON; a key given twice in one object is refused, not overwritten."""
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKey as exc:
        raise InputError(
            f"the key {str(exc)[:80]!r} appears twice in one object",
            file=name,
            row=row,
            field=field,
        ) from None
    except RecursionError:
        raise InputError(
            "nests objects or lists too deeply to be a profile", file=name, row=row, field=field
        ) from None
    except (json.JSONDecodeError, ValueError) as exc:
        what = "header value is not valid JSON" if field else "not valid JSON"
        raise InputError(f"{what} ({exc})", file=name, row=row, field=field) from None


def _csv_value(text: str | None, column: str) -> Any:
    if text is None:
        return None
    t = text.strip()
    if t == "" or t.lower() == "nan":
        return None if t == "" else math.nan
    if column in ("model", "status"):
        return t
    if column == "extrapolated":
        low = t.lower()
        return True if low == "true" else False if low == "false" else t
    try:
        number = float(t)
    except ValueError:
        return t
    return int(number) if column not in _LATENCIES and number.is_integer() else number


def _from_csv(text: str, name: str) -> Profile:
    lines = text.splitlines(keepends=True)
    header: dict[str, Any] = {}
    n = 0
    while n < len(lines) and lines[n].startswith("#"):
        line = lines[n][1:].strip()
        n += 1
        if not line:
            continue
        key, sep, value = line.partition(":")
        key = key.strip()
        if not sep:
            raise InputError(f"header line {n} is not '# key: value'", file=name, row=n)
        if key in header or key == "measurements":
            why = "appears twice" if key in header else "is the table below the header lines"
            raise InputError(f"header key {why}", file=name, row=n, field=key[:80])
        header[key] = _json(value, name, field=key[:80], row=n)
    if "schema" not in header:
        raise InputError(
            f"no '# schema: \"{SCHEMA}\"' header line; a CSV profile starts with the '# key:"
            " value' lines profile_to_csv writes",
            file=name,
            field="schema",
        )
    reader = csv.DictReader(io.StringIO("".join(lines[n:])))
    try:
        columns = reader.fieldnames or []
    except csv.Error as exc:
        raise InputError(f"not a readable CSV table ({exc})", file=name) from None
    for i, col in enumerate(columns):
        if col in columns[:i]:
            raise InputError("column appears twice", file=name, row=n + 1, field=col[:80])
        if col not in MEASUREMENT_COLUMNS and col not in OPTIONAL_MEASUREMENT_COLUMNS:
            raise InputError(
                f"is not a measurement column (expected {', '.join(MEASUREMENT_COLUMNS)})",
                file=name,
                row=n + 1,
                field=col[:80],
            )
    missing = [col for col in MEASUREMENT_COLUMNS if col not in columns]
    if missing:
        raise InputError("column is missing", file=name, row=n + 1, field=missing[0])
    rows, line_numbers = [], []
    try:
        for record in reader:
            line = n + reader.line_num
            if None in record:
                raise InputError(
                    f"has more values than the {len(columns)} columns of the header",
                    file=name,
                    row=line,
                )
            if len(rows) >= MAX_MEASUREMENTS:
                raise InputError(
                    f"more than {MAX_MEASUREMENTS:,} rows; a profile holds at most that many",
                    file=name,
                    row=line,
                    field="measurements",
                )
            rows.append({k: _csv_value(v, k) for k, v in record.items()})
            line_numbers.append(line)
    except csv.Error as exc:
        raise InputError(f"not a readable CSV table ({exc})", file=name) from None
    header["measurements"] = rows
    return profile_from_dict(header, name, csv_rows=line_numbers)


# ----------------------------------------------------------------------------------- writing


def _header(p: Profile) -> dict[str, Any]:
    out = {
        "schema": p.schema,
        "created": p.created,
        "command": p.command,
        "device": asdict(p.device),
        "settings": asdict(p.settings),
        "models": [asdict(m) for m in p.models],
    }
    if p.engine is not None:
        out["engine"] = p.engine
    if len(p.serving_points):
        out["serving_points"] = [
            {k: _plain(v) for k, v in rec.items()}
            for rec in p.serving_points[list(SERVING_COLUMNS)].to_dict("records")
        ]
    if len(p.draft_in_loop):
        out["draft_in_loop"] = [
            {
                k: (
                    round(float(v), 6)
                    if k in _LATENCIES
                    else v
                    if k in ("draft", "target")
                    else int(v)
                )
                for k, v in rec.items()
            }
            for rec in p.draft_in_loop[list(LOOP_COLUMNS)].to_dict("records")
        ]
    return out


def _plain(v: Any) -> Any:
    """A serving cell as JSON: NaN and pandas' NA as null, numpy scalars as Python ones."""
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, bool | str):
        return v
    if hasattr(v, "item"):
        v = v.item()
    return round(v, 6) if isinstance(v, float) else v


def _columns(p: Profile) -> list[str]:
    extra = [k for k in OPTIONAL_MEASUREMENT_COLUMNS if k in p.measurements.columns]
    return [*MEASUREMENT_COLUMNS, *extra]


def _rows(p: Profile) -> list[dict[str, Any]]:
    out = []
    columns = _columns(p)
    for rec in p.measurements[columns].to_dict("records"):
        row = {}
        for k in columns:
            v = rec[k]
            if k in OPTIONAL_MEASUREMENT_COLUMNS:
                v = None if v is None or math.isnan(v) else v
                v = v if v is None else int(v) if k == "bytes_moved" else round(float(v), 6)
            elif k in _LATENCIES:
                v = None if v is None or math.isnan(v) else round(float(v), 6)
            elif k == "extrapolated":
                v = bool(v)
            elif k not in ("model", "status"):
                v = int(v)
            else:
                v = str(v)
            row[k] = v
        out.append(row)
    return out


def _json_rows(key: str, rows: list[dict]) -> str:
    body = ",\n".join("    " + json.dumps(r, allow_nan=False) for r in rows)
    return f'  "{key}": [\n' + body + "\n  ]" if rows else f'  "{key}": []'


def profile_to_json(p: Profile) -> str:
    """The JSON form: header fields indented, one measurement (and loop) row per line."""
    header = _header(p)
    tables = []
    if "draft_in_loop" in header:
        tables.append(_json_rows("draft_in_loop", header.pop("draft_in_loop")))
    if "serving_points" in header:
        tables.append(_json_rows("serving_points", header.pop("serving_points")))
    tables.append(_json_rows("measurements", _rows(p)))
    head = json.dumps(header, indent=2, allow_nan=False)
    return head[: head.rstrip().rfind("}")].rstrip() + ",\n" + ",\n".join(tables) + "\n}\n"


def profile_to_csv(p: Profile) -> str:
    """The CSV form: `# key: <JSON>` header lines, then one measurement row per line."""
    buf = io.StringIO()
    for key, value in _header(p).items():
        buf.write(f"# {key}: {json.dumps(value, allow_nan=False)}\n")
    writer = csv.DictWriter(buf, fieldnames=_columns(p), lineterminator="\n")
    writer.writeheader()
    for r in _rows(p):
        writer.writerow(
            {
                k: ("" if v is None else str(v).lower() if isinstance(v, bool) else v)
                for k, v in r.items()
            }
        )
    return buf.getvalue()
