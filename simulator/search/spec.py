"""The search specification: YAML in, a checked, frozen `SearchSpec` out.

Every refusal is an `InputError` naming the field by its dotted path (`candidates.gpus`,
`slo.p99_tpot_ms`) and what would be valid: an unknown field (with the nearest known
name), an empty list or range, an id the catalogs lack, a number outside its limits.
The YAML is read with PyYAML's safe loader (data only, no object construction), less
aliases, anchors, deep nesting and keys given twice (`spec_yaml`).
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from pathlib import Path

from simulator.errors import InputError
from simulator.inputs import scenarios
from simulator.inputs.catalog import default_gpus, default_models
from simulator.inputs.scenarios import ACCEPTANCE_COLUMNS, K_LIMIT
from simulator.inputs.specs import KV_DTYPES, METHODS, WEIGHT_DTYPES
from simulator.planning.layouts import LAYOUT_COLUMNS, Layout
from simulator.search.spec_yaml import Oversized, read_yaml
from simulator.serving import engine as serving

PER_BATCH = "per batch"
"""The K option that drafts K by batch size (vLLM `num_speculative_tokens_per_batch_size`)."""
ENGINES = ("vllm", "sglang", "trtllm")
"""Engines a spec may name; any but vllm needs the scenario column `engine`."""
MAX_SEQS_LIMIT = 4096
"""Largest `max_num_seqs` searched: the step table is priced at every batch up to it."""
MAX_SEQS_VALUES = 64
"""Most `max_num_seqs` values one spec may list: it is a scalar of the model's defaults
(the sampler's logits reserve and the batch cap), so stage one prices each value in a
`predict` call of its own."""
MIN_REQUESTS = 50
"""Fewest requests per simulated probe: a P99 of fewer is the maximum of a handful."""
MAX_CANDIDATES = 100_000
"""Most candidates one spec may expand to; stage one prices a few rows for each."""


@dataclass(frozen=True)
class Method:
    """One speculation option: a method, its draft (draft_model) and its acceptance."""

    method: str
    draft: str = ""
    acceptance: tuple[tuple[str, object], ...] = ()
    """(column, value) pairs: exactly one of the scenario's acceptance columns."""
    medusa_heads: int | None = None
    mtp_depth: int | None = None

    def columns(self) -> dict:
        out: dict = {"method": self.method, "draft": self.draft, **dict(self.acceptance)}
        if self.medusa_heads is not None:
            out["medusa_heads"] = self.medusa_heads
        if self.mtp_depth is not None:
            out["mtp_depth"] = self.mtp_depth
        return out

    def label(self) -> str:
        if self.method == "draft_model":
            return f"draft_model({self.draft})"
        return self.method


@dataclass(frozen=True)
class Slo:
    """P99 TTFT and/or P99 TPOT limits, or a goodput share: `fraction` of requests within
    both `ttft_ms` and `tpot_ms`. Times in ms; None: no limit on that metric."""

    ttft_ms: float | None
    tpot_ms: float | None
    goodput_fraction: float | None = None

    def meets(self, summary: dict, requests: int) -> bool:
        """Whether one probe's summary (`serving.summarise`) is within the SLO. More than
        1% of requests refused (longer than the context or the KV cache) never is."""
        if summary["refused"] > 0.01 * requests:
            return False
        if self.goodput_fraction is not None:
            return summary["slo_attainment"] >= self.goodput_fraction
        ok = True
        if self.ttft_ms is not None:
            ok &= summary["ttft_p99_ms"] <= self.ttft_ms
        if self.tpot_ms is not None:
            ok &= summary["tpot_p99_ms"] <= self.tpot_ms
        return bool(ok)

    def describe(self, summary: dict | None = None) -> str:
        """The SLO in words; given a probe's summary, only the limits it misses."""
        if self.goodput_fraction is not None:
            return (
                f"{self.goodput_fraction:.0%} of requests within a TTFT of {self.ttft_ms:g} ms "
                f"and a TPOT of {self.tpot_ms:g} ms"
            )
        parts = []
        for name, limit in (("TPOT", self.tpot_ms), ("TTFT", self.ttft_ms)):
            seen = (summary or {}).get(f"{name.lower()}_p99_ms", float("inf"))
            if limit is not None and (summary is None or not seen <= limit):
                parts.append(f"a P99 {name} of {limit:g} ms")
        return " and ".join(parts) or self.describe()


@dataclass(frozen=True)
class Traffic:
    """Demand in requests/s for the whole service (`rate_min` = `rate_max` for one rate),
    and the prompt and output length distributions of a request (tokens)."""

    rate_min: float
    rate_max: float
    prompt: serving.Lengths
    output: serving.Lengths


@dataclass(frozen=True)
class Candidates:
    gpus: tuple[str, ...]
    tp: tuple[int, ...]
    engines: tuple[str, ...]
    methods: tuple[Method, ...]
    k: tuple[int | str, ...]
    max_num_seqs: tuple[int, ...]
    weight_dtypes: tuple[str | None, ...]
    kv_dtypes: tuple[str, ...]
    max_gpus: int | None
    layouts: tuple[Layout, ...] = ()
    """Pinned layouts (each with its GPU count) in place of `tp`'s GPU counts, whose
    layouts the search spans (`simulator.planning.layouts.span`)."""


@dataclass(frozen=True)
class Simulation:
    """How each probe is simulated: requests per probe, seed, the spread of per-request
    acceptance, bisection steps, `window`, the candidates in flight whose results a
    pruning decision may not use (fixed, so the result does not depend on the workers), and
    `keep`: `fronts` confirms every candidate that may be on a Pareto front, `optimum` only
    those that may be the cheapest (a candidate whose cost bound is above a confirmed cost
    is dropped: far fewer simulations, fronts drawn from what was confirmed)."""

    requests: int = 400
    seed: int = 0
    acceptance_spread: float | None = None
    """None: each arm's method's default (`simulator.serving.spread`), as `serve` and the dashboard."""
    iterations: int = 10
    window: int = 16
    keep: str = "fronts"


@dataclass(frozen=True)
class SearchSpec:
    models: tuple[str, ...]
    traffic: Traffic
    slo: Slo
    candidates: Candidates
    prices: tuple[tuple[str, float], ...]
    """(gpu, USD per GPU-hour); GPUs not named use the catalog's price."""
    simulation: Simulation
    source: str = ""

    def price(self, gpu: str) -> float:
        given = dict(self.prices)
        return float(given[gpu]) if gpu in given else float(default_gpus()[gpu].price_usd_per_hr)


_TOP = ("models", "traffic", "slo", "candidates", "prices", "simulation")
_TRAFFIC = ("rate", "prompt", "output")
_LENGTHS = ("mean", "kind", "spread")
_SLO = ("p99_ttft_ms", "p99_tpot_ms", "goodput")
_GOODPUT = ("ttft_ms", "tpot_ms", "fraction")
_CANDIDATES = (
    "gpus",
    "tp",
    "engines",
    "methods",
    "k",
    "max_num_seqs",
    "weight_dtypes",
    "kv_dtypes",
    "max_gpus",
    "layouts",
)
LAYOUT_LIMIT = 64
"""Largest degree of a pinned layout (as `tp`'s): a replica of more GPUs than any engine's
published deployment of one model."""
_METHOD = ("method", "draft", *ACCEPTANCE_COLUMNS, "medusa_heads", "mtp_depth")
_SIMULATION = ("requests", "seed", "acceptance_spread", "iterations", "window", "keep")
KEEP = ("fronts", "optimum")


class _Reader:
    """Checks of one spec's fields, each naming `source` and the field's dotted path."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, path: str, message: str):
        raise InputError(message, file=self.source, field=path)

    def mapping(self, value, path: str, known: tuple[str, ...], required=()) -> dict:
        if not isinstance(value, dict):
            self.fail(path or "(top level)", f"must be a mapping of {', '.join(known)}")
        for key in value:
            if key not in known:
                close = difflib.get_close_matches(_shown(key), known, n=1)
                hint = f"did you mean '{close[0]}'?" if close else f"known: {', '.join(known)}"
                self.fail(_join(path, _shown(key)), f"unknown field; {hint}")
        for key in required:
            if value.get(key) is None:
                self.fail(_join(path, key), "is required")
        return value

    def items(self, value, path: str) -> list:
        items = value if isinstance(value, list) else [value]
        if not items or value is None:
            self.fail(path, "is empty; give at least one value")
        return items

    def number(self, value, path: str, lo: float, hi: float, whole=False) -> float:
        if isinstance(value, Oversized):
            self.fail(path, f"{value} is outside {lo:g}..{hi:g}")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(path, f"'{_shown(value)}' is not a number")
        if isinstance(value, int) and abs(value) > 1e300:
            digits = int(value.bit_length() * math.log10(2)) + 1
            self.fail(path, f"an integer of about {digits:,} digits is outside {lo:g}..{hi:g}")
        if not (math.isfinite(value) and lo <= value <= hi):
            self.fail(path, f"{value} is outside {lo:g}..{hi:g}")
        if whole and value != int(value):
            self.fail(path, f"{value} must be a whole number")
        return int(value) if whole else float(value)

    def choice(self, value, path: str, allowed) -> str:
        text = _shown(value, 200).strip()
        if text not in allowed:
            close = difflib.get_close_matches(text, list(allowed), n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"one of {', '.join(allowed)}"
            self.fail(path, f"'{text[:40]}' is not known; {hint}")
        return text


def _join(path: str, key) -> str:
    return f"{path}.{key}" if path else str(key)


def _shown(value, limit: int = 40) -> str:
    """`value` as text, cut to `limit` characters."""
    if isinstance(value, int) and abs(value) > 1e300:
        return "(an integer too long to show)"
    return str(value)[:limit]


def load_spec(path: str | Path) -> SearchSpec:
    """Read and check a YAML search specification."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read: {exc}", file=source) from None
    return parse_spec(read_yaml(text, source), source=source)


def parse_spec(data, *, source: str = "spec") -> SearchSpec:
    """Check a specification already parsed into dicts and lists (see `load_spec`)."""
    r = _Reader(source)
    top = r.mapping(data, "", _TOP, required=("models", "traffic", "slo", "candidates"))
    models = default_models()
    targets = tuple(r.choice(m, "models", models) for m in r.items(top["models"], "models"))
    spec = SearchSpec(
        models=targets,
        traffic=_traffic(r, top["traffic"]),
        slo=_slo(r, top["slo"]),
        candidates=_candidates(r, top["candidates"]),
        prices=_prices(r, _section(top, "prices")),
        simulation=_simulation(r, _section(top, "simulation")),
        source=source,
    )
    priced = dict(spec.prices)
    catalog = default_gpus()
    for gpu in spec.candidates.gpus:
        if gpu not in priced and catalog[gpu].price_usd_per_hr is None:
            r.fail(f"prices.{gpu}", "the GPU catalog has no price for this GPU; give one")
    return spec


def _section(top: dict, key: str):
    """An optional section: {} where absent or null (`prices:` with nothing under it),
    else as given, for its reader to check (a 0 or false is no mapping)."""
    value = top.get(key)
    return {} if value is None else value


def _lengths(r: _Reader, value, path: str) -> serving.Lengths:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = {"mean": value}
    m = r.mapping(value, path, _LENGTHS, required=("mean",))
    mean = r.number(m["mean"], _join(path, "mean"), 1, scenarios.LIMITS["prompt_len"][0])
    kind = r.choice(m.get("kind", "fixed"), _join(path, "kind"), serving.LENGTH_KINDS)
    hi = serving.MAX_LOG_SPREAD if kind == "lognormal" else mean - 1
    spread = r.number(m.get("spread", 0.0), _join(path, "spread"), 0, max(hi, 0))
    try:
        return serving.Lengths(mean=mean, kind=kind, spread=spread)
    except InputError as exc:
        r.fail(_join(path, exc.field or "mean"), exc.bare_message)


def _traffic(r: _Reader, value) -> Traffic:
    m = r.mapping(value, "traffic", _TRAFFIC, required=("rate", "prompt", "output"))
    rate = m["rate"]
    if isinstance(rate, dict):
        rm = r.mapping(rate, "traffic.rate", ("min", "max"), required=("min", "max"))
        lo = r.number(rm["min"], "traffic.rate.min", 1e-6, 1e9)
        hi = r.number(rm["max"], "traffic.rate.max", 1e-6, 1e9)
        if lo > hi:
            r.fail("traffic.rate", f"is an empty range: min {lo:g} is above max {hi:g}")
    else:
        lo = hi = r.number(rate, "traffic.rate", 1e-6, 1e9)
    prompt = _lengths(r, m["prompt"], "traffic.prompt")
    output = _lengths(r, m["output"], "traffic.output")
    return Traffic(rate_min=lo, rate_max=hi, prompt=prompt, output=output)


def _slo(r: _Reader, value) -> Slo:
    m = r.mapping(value, "slo", _SLO)
    if m.get("goodput") is not None:
        if m.get("p99_ttft_ms") is not None or m.get("p99_tpot_ms") is not None:
            r.fail("slo.goodput", "give either goodput or the P99 limits, not both")
        g = r.mapping(m["goodput"], "slo.goodput", _GOODPUT, required=_GOODPUT)
        return Slo(
            ttft_ms=r.number(g["ttft_ms"], "slo.goodput.ttft_ms", 1e-3, 1e9),
            tpot_ms=r.number(g["tpot_ms"], "slo.goodput.tpot_ms", 1e-3, 1e9),
            goodput_fraction=r.number(g["fraction"], "slo.goodput.fraction", 1e-3, 1.0),
        )
    ttft = m.get("p99_ttft_ms")
    tpot = m.get("p99_tpot_ms")
    if ttft is None and tpot is None:
        r.fail("slo", "is empty; give p99_ttft_ms, p99_tpot_ms or goodput")
    return Slo(
        ttft_ms=None if ttft is None else r.number(ttft, "slo.p99_ttft_ms", 1e-3, 1e9),
        tpot_ms=None if tpot is None else r.number(tpot, "slo.p99_tpot_ms", 1e-3, 1e9),
    )


def _method(r: _Reader, value, path: str) -> Method:
    if isinstance(value, str):
        value = {"method": value}
    m = r.mapping(value, path, _METHOD, required=("method",))
    method = r.choice(m["method"], _join(path, "method"), METHODS)
    given = [c for c in ACCEPTANCE_COLUMNS if m.get(c) is not None]
    if method == "none":
        extra = [c for c in _METHOD[1:] if m.get(c) not in (None, "")]
        if extra:
            r.fail(_join(path, extra[0]), "is not read by method none; delete it")
        return Method("none")
    if len(given) != 1:
        r.fail(
            path,
            f"method {method} needs exactly one of {', '.join(ACCEPTANCE_COLUMNS)} "
            f"(it has {len(given)})",
        )
    column = given[0]
    raw = m[column]
    if column == "acceptance_rate":
        val: object = r.number(raw, _join(path, column), 0.0, 1.0)
    elif column == "mean_accepted_tokens":
        val = r.number(raw, _join(path, column), 1.0, K_LIMIT + 1)
    else:
        rates = raw if isinstance(raw, list) else str(raw).replace(",", ";").split(";")
        nums = [r.number(_float(x), _join(path, column), 0.0, 1.0) for x in rates if x != ""]
        if not nums:
            r.fail(_join(path, column), "is empty")
        val = ";".join(f"{x:g}" for x in nums)
    draft = ""
    if method == "draft_model":
        if m.get("draft") in (None, ""):
            r.fail(_join(path, "draft"), "is required for method draft_model")
        draft = r.choice(m["draft"], _join(path, "draft"), default_models())
    elif m.get("draft") not in (None, ""):
        r.fail(_join(path, "draft"), f"is only read by method draft_model, not {method}")
    heads = m.get("medusa_heads")
    depth = m.get("mtp_depth")
    return Method(
        method=method,
        draft=draft,
        acceptance=((column, val),),
        medusa_heads=None
        if heads is None
        else r.number(heads, _join(path, "medusa_heads"), 1, 64, True),
        mtp_depth=None if depth is None else r.number(depth, _join(path, "mtp_depth"), 1, 64, True),
    )


def _float(x):
    try:
        return float(x)
    except (TypeError, ValueError, OverflowError):
        return x


def _candidates(r: _Reader, value) -> Candidates:
    m = r.mapping(value, "candidates", _CANDIDATES, required=("gpus", "methods"))
    if m.get("layouts") is not None and m.get("tp") is not None:
        r.fail(
            "candidates.layouts",
            "give tp (GPU counts: the search spans their layouts) or layouts (pinned), not both",
        )
    if m.get("layouts") is None and m.get("tp") is None:
        r.fail("candidates.tp", "is required (GPUs per replica), or give candidates.layouts")
    gpus = default_gpus()
    engines_known = "engine" in scenarios.INPUT_COLUMNS
    engines = []
    for e in r.items(m.get("engines", ["vllm"]), "candidates.engines"):
        name = r.choice(e, "candidates.engines", ENGINES)
        if name != "vllm" and not engines_known:
            r.fail(
                "candidates.engines",
                f"'{name}' needs the scenario column 'engine', which this build lacks; use vllm",
            )
        engines.append(name)
    ks: list[int | str] = []
    for k in r.items(m.get("k", [3]), "candidates.k"):
        if isinstance(k, str) and k.strip().replace("_", " ") == PER_BATCH:
            ks.append(PER_BATCH)
        else:
            ks.append(r.number(k, "candidates.k", 1, K_LIMIT, whole=True))
    max_gpus = m.get("max_gpus")
    weights = [
        None if str(w) == "default" else r.choice(w, "candidates.weight_dtypes", WEIGHT_DTYPES)
        for w in r.items(m.get("weight_dtypes", ["default"]), "candidates.weight_dtypes")
    ]
    return Candidates(
        gpus=_unique(
            r.choice(g, "candidates.gpus", gpus) for g in r.items(m["gpus"], "candidates.gpus")
        ),
        tp=()
        if m.get("tp") is None
        else _unique(
            r.number(t, "candidates.tp", 1, 64, whole=True)
            for t in r.items(m["tp"], "candidates.tp")
        ),
        layouts=()
        if m.get("layouts") is None
        else _unique(
            _layout(r, x, f"candidates.layouts[{i}]")
            for i, x in enumerate(r.items(m["layouts"], "candidates.layouts"))
        ),
        engines=_unique(engines),
        methods=_unique(
            _method(r, x, f"candidates.methods[{i}]")
            for i, x in enumerate(r.items(m["methods"], "candidates.methods"))
        ),
        k=_unique(ks),
        max_num_seqs=_max_num_seqs(r, m.get("max_num_seqs", [256])),
        weight_dtypes=_unique(weights),
        kv_dtypes=_unique(
            r.choice(d, "candidates.kv_dtypes", KV_DTYPES)
            for d in r.items(m.get("kv_dtypes", ["bf16"]), "candidates.kv_dtypes")
        ),
        max_gpus=None
        if max_gpus is None
        else r.number(max_gpus, "candidates.max_gpus", 1, 1e6, True),
    )


def _max_num_seqs(r: _Reader, value) -> tuple[int, ...]:
    """The distinct `max_num_seqs` values, at most `MAX_SEQS_VALUES` of them."""
    path = "candidates.max_num_seqs"
    seqs = _unique(r.number(s, path, 1, MAX_SEQS_LIMIT, whole=True) for s in r.items(value, path))
    if len(seqs) > MAX_SEQS_VALUES:
        r.fail(
            path,
            f"lists {len(seqs):,} values; give at most {MAX_SEQS_VALUES} (stage one prices "
            "each in a predict call of its own): a spread such as [16, 64, 256, 1024]",
        )
    return seqs


def _layout(r: _Reader, value, path: str) -> Layout:
    """One pinned layout: tp_size (required), attention_dp_size and moe_ep_size (default 1),
    moe_tp_size (default the GPUs / moe_ep_size); GPUs = tp_size x attention_dp_size =
    moe_tp_size x moe_ep_size."""
    for key in value if isinstance(value, dict) else ():
        if key not in LAYOUT_COLUMNS:
            # difflib would offer tp_size for ep_size: name all four instead.
            r.fail(_join(path, key), f"unknown field; a layout has {', '.join(LAYOUT_COLUMNS)}")
    m = r.mapping(value, path, LAYOUT_COLUMNS, required=("tp_size",))
    tp, dp, ep = (
        r.number(m.get(c, 1), _join(path, c), 1, LAYOUT_LIMIT, whole=True)
        for c in ("tp_size", "attention_dp_size", "moe_ep_size")
    )
    gpus = tp * dp
    if gpus % ep:
        r.fail(_join(path, "moe_ep_size"), f"{ep} does not divide the layout's {gpus} GPUs")
    moe_tp = m.get("moe_tp_size")
    if moe_tp is not None:
        moe_tp = r.number(moe_tp, _join(path, "moe_tp_size"), 1, LAYOUT_LIMIT, whole=True)
        if moe_tp * ep != gpus:
            r.fail(
                _join(path, "moe_tp_size"),
                f"{moe_tp} x moe_ep_size {ep} is not the layout's {gpus} GPUs "
                f"(tp_size x attention_dp_size); {gpus // ep} would be",
            )
    return Layout(tp, dp, moe_tp, ep)


def _unique(values) -> tuple:
    return tuple(dict.fromkeys(values))


def _prices(r: _Reader, value) -> tuple[tuple[str, float], ...]:
    gpus = default_gpus()
    m = r.mapping(value, "prices", tuple(gpus))
    return tuple(
        (g, r.number(p, f"prices.{g}", 1e-6, scenarios.LIMITS["gpu_hourly_usd"][0]))
        for g, p in m.items()
    )


def _simulation(r: _Reader, value) -> Simulation:
    m = r.mapping(value, "simulation", _SIMULATION)
    d = Simulation()
    return Simulation(
        requests=r.number(
            m.get("requests", d.requests),
            "simulation.requests",
            MIN_REQUESTS,
            serving.MAX_REQUESTS,
            True,
        ),
        seed=r.number(m.get("seed", d.seed), "simulation.seed", 0, 2**32 - 1, True),
        acceptance_spread=None
        if m.get("acceptance_spread") is None
        else r.number(
            m["acceptance_spread"],
            "simulation.acceptance_spread",
            0.0,
            serving.MAX_ACCEPTANCE_SPREAD,
        ),
        iterations=r.number(
            m.get("iterations", d.iterations), "simulation.iterations", 1, 30, True
        ),
        window=r.number(m.get("window", d.window), "simulation.window", 1, 10_000, True),
        keep=r.choice(m.get("keep", d.keep), "simulation.keep", KEEP),
    )
