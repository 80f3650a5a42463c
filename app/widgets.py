"""Shared widgets: the scenario inputs every planning page shows in the sidebar, the
pre-flight checklist panel and the inline error message.

A link reproduces the scenario. Every scenario input is bound to the query parameter named
after its key (`?target=llama-3.1-8b&method=ngram&k=4&batch_size=32`); Streamlit leaves a
parameter out while its widget shows its default, and those defaults are constants of this
module and the pages. What the page takes from data files, or from the session alone, is
written out, so the link shows the same numbers in a fresh browser and after the priors
file changes:

- `acceptance_rate=0.797`: the acceptance input. It has no default, so once it is set (by
  the user, or by a change of workload, method or target) the link carries it. A link
  without it gets the figure its workload fills in: the published one for its workload,
  method and target (data/acceptance_priors.csv), or the `pos` below.
- `pos=0.9241_0.6149_0.401_...`: the per-position acceptance rates the page planned with,
  from position 1, to 4 decimals with trailing zeros dropped (`,` `;` or spaces also read).
  Present: the page planned by position (a published figure left unedited, or a /metrics
  scrape on the 'measured' workload). Absent: it planned with the i.i.d. α above. A fresh
  session plans with the link's rates until the user changes the workload, method, target
  or α, or brings a scrape of their own; where the published figure still rounds to them,
  it plans with that at full precision.
- `profile=cpu/tiny.json` (`cpu%2Ftiny.json` once encoded): the bundled calibration profile
  (Profiles page), by its path under data/profiles/; `profile=library:NAME`, a profile
  kept in the team's library (app/library_ui.py). An upload kept only in the session
  cannot travel in a link; the sidebar says so.
- `report=NAME`: on Reports, a table kept in the library (app/library_saves.py), reopened
  with its rows.
"""

from __future__ import annotations

import difflib
import math
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

import streamlit as st

from app import own_models, sim
from app.presets import MEASURED, WORKLOADS, Prior, slug
from app.text import plain
from simulator.errors import InputError
from simulator.inputs.scenarios import K_LIMIT
from simulator.inputs.specs import KV_DTYPES, METHODS, WEIGHT_DTYPES
from simulator.kernels.tables import ENGINE_CHOICES
from simulator.planning.preflight import checklist

BIND = {"bind": "query-params", "persist_state": "session"}


"""Every scenario widget: its value in the URL, and kept when the user switches pages.
Bound selectboxes show catalog ids, not names: the URL holds what the widget displays,
and ids make short, stable links (`?target=llama-3.3-70b&gpu=h100-sxm`)."""

DEFAULT_TARGET = "llama-3.3-70b"
DEFAULT_METHOD = "eagle"
DEFAULT_DRAFT = "llama-3.2-1b"
DEFAULT_GPU = "h100-sxm"
DEFAULT_WORKLOAD = "chat"
GPU_COUNTS = (1, 2, 4, 8, 16)
DEFAULT_NUM_GPUS = 4
"""A 70B model in bf16 needs at least two 80 GB GPUs; four is the common deployment."""
DEFAULT_REQUESTS_PER_DAY = 2_000_000
MAX_REQUESTS_PER_S = 100_000.0
DAY_PARAM = "requests_per_day"
"""Demand per day in links of before it was entered per second (read as `requests_per_s`)."""
DEFAULT_PROMPT_LEN = 1024
DEFAULT_OUTPUT_LEN = 256
FALLBACK_ALPHA = 0.7
"""Only used when neither the link nor a published figure or scrape gives an α."""
ALPHA_KEY = "acceptance_rate"
POS_PARAM = "pos"
PROFILE_PARAM = "profile"
REPORT_PARAM = "report"
"""Reports: the name of a table kept in the library (app/library_saves.py)."""
POS_DECIMALS = 4
"""Enough for a /metrics scrape's rates (simulator.inputs.metrics writes 4 decimals)."""
LINK_POSITIONS_KEY = "link_positions"
"""Per-position rates a link carried ('p1;p2;...'), kept until the user changes acceptance."""
LINK_READ_KEY = "link_read"
LINK_PROFILE_MISSING_KEY = "link_profile_missing"

METHOD_LABELS = {
    "none": "none (no speculation)",
    "draft_model": "draft model",
    "eagle": "EAGLE (1/2)",
    "eagle3": "EAGLE-3",
    "medusa": "Medusa",
    "mtp": "MTP",
    "ngram": "n-gram (prompt lookup)",
}
WORKLOAD_LABELS = {
    "chat": "chat",
    "code": "code",
    "summarisation": "summarisation",
    "creative": "creative writing",
    MEASURED: "measured (vLLM /metrics)",
}
STATUS_BADGE = {
    "green": ("green", ":material/check_circle:"),
    "amber": ("orange", ":material/warning:"),
    "red": ("red", ":material/cancel:"),
}


def _prior(workload: str, method: str, target: str) -> Prior | None:
    """The published figure for the workload, method and target, and for a draft model the
    session's draft (the link's before the sidebar exists)."""
    draft = st.session_state.get("draft") or st.query_params.get("draft") or DEFAULT_DRAFT
    return sim.prior(workload, method, target, draft)


def _filled_alpha(workload: str, method: str, target: str) -> float | None:
    """The α a workload fills in: the session's scrape for 'measured', else the published
    figure for the workload, method and target; None where there is none."""
    if workload == MEASURED:
        measured = st.session_state.get(sim.MEASURED_KEY)
        return round(float(measured["alpha"]), 3) if measured else None
    prior = _prior(workload, method, target)
    return prior.alpha if prior is not None else None


@dataclass(frozen=True)
class Scenario:
    """The sidebar's choices, as scenario-table columns (everything but K and batch)."""

    target: str
    method: str
    draft: str
    gpu: str
    num_gpus: int
    weight_dtype: str
    kv_dtype: str
    workload: str
    alpha: float
    acceptance: dict = field(default_factory=dict)
    """Exactly one acceptance column for `predict` (empty with method none)."""
    prompt_len: int = DEFAULT_PROMPT_LEN
    output_len: int = DEFAULT_OUTPUT_LEN
    requests_per_day: float = DEFAULT_REQUESTS_PER_DAY
    gpu_hourly_usd: float | None = None
    temperature: float = 0.0
    """Sampling temperature; above 0 the step pays the rejection sampler."""
    engine: str = "vllm"

    @property
    def speculative(self) -> bool:
        return self.method != "none"

    def base(self) -> dict:
        """Scenario columns without k and batch_size."""
        out = {
            "target": self.target,
            "method": self.method,
            "draft": self.draft if self.method == "draft_model" else "",
            "gpu": self.gpu,
            "num_gpus": self.num_gpus,
            "weight_dtype": self.weight_dtype,
            "kv_dtype": self.kv_dtype,
            "prompt_len": self.prompt_len,
            "output_len": self.output_len,
            "engine": self.engine,
        }
        if self.speculative:
            out.update(self.acceptance)
        if self.gpu_hourly_usd is not None:
            out["gpu_hourly_usd"] = self.gpu_hourly_usd
        if self.temperature > 0:
            out["temperature"] = self.temperature
        return out

    def row(self, k: int, batch_size: int, **extra) -> dict:
        return {**self.base(), "k": k if self.speculative else 0, "batch_size": batch_size, **extra}


def _session_alpha() -> float | None:
    """`_filled_alpha` for the workload, method and target the session has chosen."""
    ss = st.session_state
    return _filled_alpha(
        ss.get("workload", DEFAULT_WORKLOAD),
        ss.get("method", DEFAULT_METHOD),
        ss.get("target", DEFAULT_TARGET),
    )


def _refill_acceptance() -> None:
    """Workload, method or target changed: put the matching published figure (or the
    measured one) into the acceptance input. With no figure the user's value stays."""
    st.session_state.pop(LINK_POSITIONS_KEY, None)
    alpha = _session_alpha()
    if alpha is not None:
        st.session_state[ALPHA_KEY] = alpha


def _alpha_edited() -> None:
    """The user typed an α: the link's rates no longer apply. An emptied input refills."""
    st.session_state.pop(LINK_POSITIONS_KEY, None)
    if st.session_state.get(ALPHA_KEY) is None:
        alpha = _session_alpha()
        st.session_state[ALPHA_KEY] = FALLBACK_ALPHA if alpha is None else alpha


def alpha_from_param(value: str | None) -> float | None:
    """A link's `acceptance_rate` as a number in [0, 1], or None."""
    try:
        alpha = float(value) if isinstance(value, str) and value.isascii() else None
    except ValueError:
        return None
    return alpha if alpha is not None and 0 <= alpha <= 1 else None


def _link_alpha() -> float | None:
    return alpha_from_param(st.query_params.get(ALPHA_KEY))


LINK_NUMBERS = {
    "prompt_len": (1, 1_000_000, True),
    "output_len": (1, 1_000_000, True),
    DAY_PARAM: (0, 8_640_000_000, True),
    "requests_per_s": (0.0, 100_000.0, False),
    "gpu_hourly_usd": (0.0, 1000.0, False),
    ALPHA_KEY: (0.0, 1.0, False),
    "batch_size": (1, 4096, True),
    "migration_usd": (0, 100_000_000, True),
    "max_model_len": (256, 10_000_000, True),
    "slo_tpot_ms": (1.0, 10_000.0, False),
    "slo_tok_s": (0.1, 10_000.0, False),
    "k_max": (1, 16, True),
    "gpu_memory_utilization": (0.5, 0.98, False),
    "temperature": (0.0, 100.0, False),
    "size_ttft": (1.0, 600_000.0, False),
    "rate_range": (0.1, 64.0, False),
    "concurrency_range": (1, 512, True),
    "load_points": (2, 12, True),
    "load_requests": (50, 20_000, True),
    "slo_ttft": (1.0, 600_000.0, False),
    "slo_tpot": (0.1, 10_000.0, False),
    "acceptance_spread": (0.0, 0.5, False),
    "load_k": (1, 16, True),
}
"""Numeric query parameters the pages bind or read, as (lowest, highest, whole number):
the ranges of their inputs. Streamlit's own reading of a link stops the page at a
whole-number input given `inf` or `nan`, and the Reports page reads some of them as text."""
LINK_K_VALUES = ("best", *(str(k) for k in range(1, 11)))
"""The ROI page's K choices (`k`), which the Reports page reads from a link."""
_PLAIN_NUMBER = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")
_PLAIN_INTEGER = re.compile(r"\+?[0-9]{1,15}")


LINK_PARAMS = frozenset(
    {
        # Inputs bound to the URL (`BIND`), on every page together: a link carries the
        # scenario from page to page, so one page's parameter is no stranger on another.
        "batch_size",
        "draft",
        "engine",
        "gpu",
        "gpu_hourly_usd",
        "gpu_memory_utilization",
        "head_repo",
        "k",
        "k_max",
        "kv_dtype",
        "load_kind",
        # The Load & SLO page's and the Sizer's P99 inputs.
        "rate_range",
        "concurrency_range",
        "load_points",
        "load_requests",
        "slo_ttft",
        "slo_tpot",
        "length_kind",
        "acceptance_spread",
        "load_k",
        "size_ttft",
        "max_model_len",
        "method",
        "migration_usd",
        "num_gpus",
        "output_len",
        "prompt_len",
        "requests_per_s",
        "size_on",
        "slo_kind",
        "slo_tok_s",
        "slo_tpot_ms",
        "target",
        "temperature",
        "weight_dtype",
        "workload",
        # Read from the link by the pages themselves.
        ALPHA_KEY,
        DAY_PARAM,
        POS_PARAM,
        PROFILE_PARAM,
        REPORT_PARAM,
        # Streamlit's own.
        "embed",
        "embed_options",
    }
)
"""Every query parameter the dashboard reads; tests/app/test_links.py checks it against
the inputs bound to the URL in app/."""


def link_problems(
    params: Mapping[str, str], choices: Mapping[str, Sequence[str]] | None = None
) -> dict[str, str]:
    """Query parameters a page cannot take as they are, each with why: a name the
    dashboard does not read (a typo, say), numbers out of their input's range or not
    plain ASCII decimals (`inf`, `nan`, `1e400`, `²`), whole numbers given with a
    fraction, a `k` that is not one of the ROI page's choices, and a dropdown's value
    that is not one of its options (`choices`: parameter -> options; Streamlit would drop
    such a value without a word)."""
    problems = {}
    for key in params:
        if key not in LINK_PARAMS:
            near = difflib.get_close_matches(str(key), sorted(LINK_PARAMS), n=1)
            problems[key] = "is not a parameter of this dashboard" + (
                f" (did you mean `{near[0]}`)" if near else ""
            )
    for key, options in (choices or {}).items():
        value = params.get(key)
        if value is not None and str(value) not in options:
            listed = ", ".join(options[:12]) + (", ..." if len(options) > 12 else "")
            problems[key] = f"is not one of the choices ({listed})"
    for key, (low, high, whole) in LINK_NUMBERS.items():
        value = params.get(key)
        if value is None:
            continue
        text = str(value).strip()
        pattern = _PLAIN_INTEGER if whole else _PLAIN_NUMBER
        number = float(text) if pattern.fullmatch(text) else math.nan
        if not (math.isfinite(number) and low <= number <= high):
            kind = "a whole number" if whole else "a number"
            problems[key] = f"must be {kind} from {low:,} to {high:,}"
    k = params.get("k")
    if k is not None and str(k) not in LINK_K_VALUES:
        problems["k"] = f"must be one of {', '.join(LINK_K_VALUES)}"
    return problems


def _forget_link_values(keys) -> None:
    """Drop `keys` from the address Streamlit seeds URL-bound inputs from: the link as the
    run first read it, which deleting them from `st.query_params` leaves as it was. There a
    dropped `batch_size=1e400` still reached its input, whose `int(float('inf'))` stopped
    the page (Streamlit 1.67). The store is private to Streamlit: a version without it
    makes this do nothing, and tests/app/test_link_overflow.py fail."""
    from streamlit.runtime.state.session_state_proxy import get_session_state

    with get_session_state().query_params() as qp:
        initial = getattr(qp, "_initial_query_params", None)
        if isinstance(initial, dict):
            for key in keys:
                initial.pop(key, None)


def _drop_link_problems(sb, choices: Mapping[str, Sequence[str]]) -> None:
    """Remove the link's unusable parameters before any input reads them, and say so."""
    problems = link_problems(st.query_params, choices)
    for key in [k for k in problems if k in choices]:
        # The session set this input (the "Your model" control, a kept model gone): the
        # input, bound to the parameter, writes its own value there when drawn.
        if str(st.session_state.get(key)) in choices[key]:
            del problems[key]
    _forget_link_values(problems)
    for key, why in problems.items():
        shown = str(st.query_params.get(key, ""))[:40]
        del st.query_params[key]
        # The name is the link's text too (an unknown one is anything at all): plain.
        sb.warning(f"Ignored the link's {plain(str(key)[:40])} ({plain(shown)}): it {why}.")


def _seed_alpha() -> None:
    """A session's first α, where the link gives none: the figure its workload fills in.
    Set before the input exists, so the input itself passes no default."""
    if ALPHA_KEY in st.session_state or _link_alpha() is not None:
        return
    alpha = _session_alpha()
    st.session_state[ALPHA_KEY] = FALLBACK_ALPHA if alpha is None else alpha


RELEASED = "released"
"""The Weights choice that serves each target in the dtype its weights are released in (a
choice whose text never changes with the target, as a link's value must not)."""
WEIGHT_CHOICES = [RELEASED, *WEIGHT_DTYPES]


def _index(options: list, value) -> int:
    return options.index(value) if value in options else 0


_RUN = threading.local()
"""This script run's sidebar scenario, drawn by the entry point before the page runs."""


def draw_scenario_sidebar(planning: bool) -> None:
    """Draw the scenario sidebar from the entry point, before a planning page runs.

    Streamlit binds a widget to the URL for the script that creates it, and on a page
    switch drops the query parameters bound to any other page's script. Drawn by each page,
    the sidebar's inputs lost a link's scenario on the next page (shown at their defaults
    there, right again on a second visit). Drawn by the entry point, they belong to every
    page and keep their values, and their parameters, across pages."""
    _RUN.scenario = _scenario_sidebar() if planning else None


def _dtype_inputs(sb, released: str, target: str) -> tuple[str, str]:
    """The sidebar's weight and KV-cache dtypes: (weight dtype, KV dtype), the released
    dtype `released` where the reader keeps the target's own."""
    c1, c2 = sb.columns(2)
    weights = c1.selectbox(
        "Weights",
        WEIGHT_CHOICES,
        key="weight_dtype",
        help=f"The dtype the target's weights are served in; '{RELEASED}' is the one they "
        f"are released in ({released} for {plain(target)}; fp8 for DeepSeek-V3).",
        **BIND,
    )
    weight_dtype = released if weights == RELEASED else weights
    kv_dtype = c2.selectbox("KV cache", list(KV_DTYPES), key="kv_dtype", **BIND)
    return weight_dtype, kv_dtype


def _default_requests_per_s() -> float:
    """The Requests/s input's default: a link of before demand was entered per second
    carries `requests_per_day` (its range checked with the others), read as the same
    demand; a `requests_per_s` in the link wins over it, as over any default."""
    day = st.query_params.get(DAY_PARAM)
    try:
        value = float(day) if day is not None else math.nan
    except ValueError:
        value = math.nan
    if 0 <= value <= MAX_REQUESTS_PER_S * 86400:
        return value / 86400
    return DEFAULT_REQUESTS_PER_DAY / 86400


def _traffic_inputs(sb, g) -> tuple:
    """The sidebar's traffic and price: (prompt tokens, output tokens, requests per day,
    $ per GPU-hour or None for GPU `g`'s catalog price)."""
    sb.subheader("Traffic and price")
    c1, c2 = sb.columns(2)
    prompt_len = c1.number_input(
        "Prompt tokens", 1, 1_000_000, DEFAULT_PROMPT_LEN, 128, key="prompt_len", **BIND
    )
    output_len = c2.number_input(
        "Output tokens", 1, 1_000_000, DEFAULT_OUTPUT_LEN, 64, key="output_len", **BIND
    )
    c1, c2 = sb.columns(2)
    requests_per_s = c1.number_input(
        "Requests/s",
        0.0,
        MAX_REQUESTS_PER_S,
        _default_requests_per_s(),
        1.0,
        format="%.2f",
        key="requests_per_s",
        help="The service's demand in requests per second, averaged over the day (enter "
        "the peak to size for it); requests a day below.",
        **BIND,
    )
    requests_per_day = float(requests_per_s) * 86400
    catalog_price = g.price_usd_per_hr
    price = c2.number_input(
        "$ per GPU-hour",
        min_value=0.0,
        max_value=1000.0,
        value=None,
        step=0.1,
        format="%.2f",
        placeholder=f"catalog {catalog_price:.2f}" if catalog_price else "enter a price",
        key="gpu_hourly_usd",
        help="Empty: the catalog's on-demand price for this GPU.",
        **BIND,
    )
    sb.caption(
        f"{requests_per_s:,.2f} requests/s is {requests_per_day:,.0f} requests a day. To size "
        "for a peak, enter the peak requests/s."
    )
    if price is None and catalog_price is None:
        sb.warning(f"{plain(g.name)} has no catalog price: enter one for the costs.")
    return prompt_len, output_len, requests_per_day, price


def scenario_inputs() -> Scenario:
    """The scenario sidebar's choices; the same widgets (same keys) on every planning page,
    drawn once a run (by the entry point, see `draw_scenario_sidebar`)."""
    drawn = getattr(_RUN, "scenario", None)
    if drawn is not None:
        _RUN.scenario = None
        return drawn
    return _scenario_sidebar()


def _model_inputs(sb, models: dict, model_ids: list) -> tuple[str, str, str]:
    """The sidebar's models: (target id, method, draft id), and a caption naming them."""
    sb.subheader("Scenario")
    target = sb.selectbox(
        "Target model",
        model_ids,
        # The "Your model" control sets the target through the session state: no default
        # then, or Streamlit warns that the widget has both.
        index=0 if "target" in st.session_state else _index(model_ids, DEFAULT_TARGET),
        key="target",
        on_change=_refill_acceptance,
        **BIND,
    )
    own_models.control(target, _refill_acceptance)
    method = sb.selectbox(
        "Method",
        list(METHODS),
        index=_index(list(METHODS), DEFAULT_METHOD),
        key="method",
        on_change=_refill_acceptance,
        **BIND,
    )
    draft = sb.selectbox(
        "Draft model",
        model_ids,
        index=_index(model_ids, DEFAULT_DRAFT),
        key="draft",
        on_change=_refill_acceptance,
        disabled=method != "draft_model",
        help="Used by the draft-model method only; it must share the target's tokenizer.",
        **BIND,
    )
    names = f"{models[target].name} ({models[target].tokenizer} tokenizer)"
    if method == "draft_model":
        names += f"; draft {models[draft].name} ({models[draft].tokenizer})"
    sb.caption(names)
    return target, method, draft


def _scenario_sidebar() -> Scenario:
    """The scenario sidebar; the same widgets (same keys) on every planning page."""
    models = sim.models()
    gpus = sim.gpus()
    model_ids = list(models)
    gpu_ids = list(gpus)
    sb = st.sidebar
    own_models.forget_missing(model_ids, {"target": DEFAULT_TARGET, "draft": DEFAULT_DRAFT})
    _drop_link_problems(
        sb,
        {
            "target": model_ids,
            "method": list(METHODS),
            "draft": model_ids,
            "gpu": gpu_ids,
            "num_gpus": [str(g) for g in GPU_COUNTS],
            "weight_dtype": WEIGHT_CHOICES,
            "kv_dtype": list(KV_DTYPES),
            "workload": [*WORKLOADS, MEASURED],
        },
    )
    _read_link_positions(sb)
    target, method, draft = _model_inputs(sb, models, model_ids)
    c1, c2 = sb.columns(2)
    gpu = c1.selectbox(
        "GPU",
        gpu_ids,
        index=_index(gpu_ids, DEFAULT_GPU),
        key="gpu",
        **BIND,
    )
    num_gpus = c2.selectbox(
        "GPUs per replica",
        list(GPU_COUNTS),
        index=GPU_COUNTS.index(DEFAULT_NUM_GPUS),
        key="num_gpus",
        help="Tensor-parallel degree of one replica.",
        **BIND,
    )
    g = gpus[gpu]
    # A calibrating profile adds its device under the name the profile gives: user text.
    sb.caption(f"{plain(g.name)}: {g.memory_gb:g} GB, {g.hbm_bandwidth_gbps:,.0f} GB/s per GPU")
    weight_dtype, kv_dtype = _dtype_inputs(sb, models[target].checkpoint_dtype, target)
    engine = sb.selectbox(
        "Engine",
        list(ENGINE_CHOICES),
        key="engine",
        help="The serving engine: its measured kernel tables (aiconfigurator-core) price the "
        "steps on the GPUs they cover, with its host costs, and the launch flags follow it; "
        "'other' prices on the roofline.",
        **BIND,
    )

    workload, alpha, acceptance = _acceptance_inputs(sb, method, target)
    temperature = sb.number_input(
        "Sampling temperature",
        0.0,
        100.0,
        0.0,
        0.1,
        key="temperature",
        help="0 is greedy. Above 0 every step pays the rejection sampler over the "
        "vocabulary, and acceptance falls: the published priors are at temperature 0 "
        "(EAGLE-3, Llama-3.3-70B chat: τ 5.63 at 0, 5.45 at 1; data/acceptance_priors.csv).",
        **BIND,
    )

    prompt_len, output_len, requests_per_day, price = _traffic_inputs(sb, g)
    _write_positions(acceptance)
    return Scenario(
        target=target,
        method=method,
        draft=draft,
        gpu=gpu,
        num_gpus=int(num_gpus),
        weight_dtype=weight_dtype,
        kv_dtype=kv_dtype,
        engine=str(engine),
        workload=workload,
        alpha=alpha,
        acceptance=acceptance,
        prompt_len=int(prompt_len),
        output_len=int(output_len),
        requests_per_day=float(requests_per_day),
        gpu_hourly_usd=None if price is None else float(price),
        temperature=float(temperature),
    )


def _acceptance_inputs(sb, method: str, target: str) -> tuple[str, float, dict]:
    sb.subheader("Acceptance")
    options = [*WORKLOADS, MEASURED]
    workload = sb.selectbox(
        "Workload preset",
        options,
        index=_index(options, DEFAULT_WORKLOAD),
        key="workload",
        on_change=_refill_acceptance,
        help="Fills the acceptance rate with a published figure for this workload and "
        "method (data/acceptance_priors.csv); the value stays editable.",
        **BIND,
    )
    measured = st.session_state.get(sim.MEASURED_KEY) if workload == MEASURED else None
    linked = "" if method == "none" else st.session_state.get(LINK_POSITIONS_KEY, "")
    by_rates = bool(measured.get("acceptance_per_position")) if measured else bool(linked)
    _seed_alpha()
    alpha = sb.number_input(
        "Acceptance rate α (per token)",
        min_value=0.0,
        max_value=1.0,
        value=None,
        step=0.01,
        format="%.3f",
        key=ALPHA_KEY,
        on_change=_alpha_edited,
        disabled=method == "none" or (workload == MEASURED and by_rates),
        help="i.i.d. probability that a drafted token is accepted (Leviathan et al.); "
        "not vLLM's 'draft acceptance rate' (accepted / drafted). Empty it to get the "
        "workload's figure back.",
        **BIND,
    )
    alpha = FALLBACK_ALPHA if alpha is None else float(alpha)
    if method == "none":
        sb.caption("Speculation off: acceptance is not used.")
        return workload, alpha, {}
    if workload == MEASURED:
        return workload, *_measured_acceptance(sb, alpha, measured, linked, target, method)
    prior = _prior(workload, method, target)
    if prior is None and not linked:
        sb.info(
            f"No published figure for {WORKLOAD_LABELS[workload]} with "
            f"{METHOD_LABELS[method]}; enter your own acceptance rate."
        )
        return workload, alpha, {"acceptance_rate": alpha}
    return workload, *_prior_acceptance(sb, alpha, prior, linked)


def _same_model(name: str, repo: str) -> bool:
    """Whether a scrape's `model_name` (a repo id, or a local path ending in the repo's
    name) is the catalog model of Hugging Face repo `repo`."""
    name, repo = name.strip().lower().rstrip("/"), repo.strip().lower()
    return bool(repo) and (name == repo or name.rsplit("/", 1)[-1] == repo.rsplit("/", 1)[-1])


def measured_mismatch(measured: Mapping, target: str, method: str) -> str:
    """Why a kept /metrics scrape is not this scenario's acceptance, '' when nothing says
    so: its counters name another served model than `target`'s repo, or it was loaded
    while another target or method was planned (what the user said it measures)."""
    problems = []
    spec = sim.models().get(target)
    names = list(measured.get("model_names") or [])
    if (
        spec is not None
        and spec.hf_repo
        and names
        and not any(_same_model(n, spec.hf_repo) for n in names)
    ):
        problems.append(
            f"its counters are of {', '.join(names)}, not this scenario's target ({spec.hf_repo})"
        )
    elif not names and measured.get("target") and measured["target"] != target:
        problems.append(f"it was loaded while planning {measured['target']}, not {target}")
    if measured.get("method") not in (None, "", "none", method) and method != "none":
        problems.append(
            f"it was loaded while planning method {measured['method']}; this scenario "
            f"plans {method}, whose acceptance differs"
        )
    if not problems:
        return ""
    return plain("The /metrics scrape may not measure this scenario: " + "; ".join(problems)) + "."


def _measured_acceptance(
    sb, alpha: float, measured: dict | None, linked: str, target: str = "", method: str = ""
):
    """(α, acceptance column) on the 'measured' workload: the session's scrape, else the
    link's rates, else the α typed."""
    if measured:
        positions = measured.get("acceptance_per_position", "")
        sb.caption(
            f"From /metrics: τ {measured['tau']:.2f} at K={measured['k']}, "
            f"α {measured['alpha']:.3f}"
            + (f"; per-position rates {positions}" if positions else "")
        )
        other = measured_mismatch(measured, target, method)
        if other:
            sb.warning(other, icon=":material/warning:")
        if positions:
            return float(measured["alpha"]), {"acceptance_per_position": positions}
        return alpha, {"acceptance_rate": alpha}
    if linked:
        sb.caption(
            f"Per-position rates from the link: {_rates_shown(linked)}. Paste a scrape on "
            "the Acceptance page to use your own."
        )
        return alpha, {"acceptance_per_position": linked}
    sb.info(
        "No /metrics figures in this session yet: paste a scrape on the "
        "Acceptance page. Using the rate above."
    )
    return alpha, {"acceptance_rate": alpha}


def _prior_acceptance(sb, alpha: float, prior: Prior | None, linked: str):
    """(α, acceptance column) on a workload preset: the link's rates while they apply, the
    published figure by position while α is left as published, else the α typed."""
    if linked and (prior is None or not _same_rates(linked, prior.positions_text)):
        now = f" (the published figure is now α {prior.alpha:.3f})" if prior else ""
        sb.caption(f"Per-position rates from the link: {_rates_shown(linked)}{now}.")
        return alpha, {"acceptance_per_position": linked}
    edited = not linked and abs(prior.alpha - alpha) > 5e-4
    published_at = ""
    if prior.k:
        planned = "" if edited or not prior.positions else "; planned by position"
        published_at = f" (published at K={prior.k}{planned})"
    sb.caption(
        f"Prior α {prior.alpha:.3f}{published_at}: {prior.describe()}"
        + (" (edited: i.i.d. α as typed)" if edited else "")
        + (f" [source]({prior.source})" if prior.source.startswith("http") else "")
    )
    if not edited and prior.positions:
        return alpha, {"acceptance_per_position": prior.positions_text}
    return alpha, {"acceptance_rate": alpha}


_SEPARATORS = re.compile(r"[\s,;_]+")


def _short(rate: float) -> str:
    return f"{rate:.{POS_DECIMALS}f}".rstrip("0").rstrip(".")


def positions_param(text: str) -> str:
    """Per-position rates 'p1;p2;...' as the link's `pos` value (see the module docstring)."""
    rates = [float(p) for p in _SEPARATORS.split(text.strip()) if p]
    return "_".join(_short(r) for r in rates[:K_LIMIT])


def positions_from_param(value: str) -> str | None:
    """A link's `pos` as 'p1;p2;...', or None unless it holds non-increasing rates in
    [0, 1] written as plain decimals (past K_LIMIT they are dropped)."""
    if not isinstance(value, str):
        return None
    parts = [p for p in _SEPARATORS.split(value.strip()[: 64 * K_LIMIT]) if p][:K_LIMIT]
    if not all(_PLAIN_NUMBER.fullmatch(p) for p in parts):
        return None
    rates = [float(p) for p in parts]
    in_range = all(0 <= r <= 1 for r in rates)
    falling = all(b <= a for a, b in pairwise(rates))
    return ";".join(_short(r) for r in rates) if rates and in_range and falling else None


def _same_rates(a: str, b: str) -> bool:
    return bool(b) and positions_param(a) == positions_param(b)


def _rates_shown(text: str, head: int = 4) -> str:
    rates = text.split(";")
    return ", ".join(rates[:head]) + (", …" if len(rates) > head else "")


def _set_param(key: str, value: str | None) -> None:
    """Write an app-owned query parameter (remove it for None), only when it changes."""
    params = st.query_params
    if value is None:
        if key in params:
            del params[key]
    elif params.get(key) != value:
        params[key] = value


def _read_link_positions(sb) -> None:
    """The session's first planning page takes the link's per-position rates."""
    ss = st.session_state
    if ss.get(LINK_READ_KEY):
        return
    ss[LINK_READ_KEY] = True
    raw = st.query_params.get(POS_PARAM)
    if raw is None:
        return
    positions = positions_from_param(raw)
    if positions is None:
        sb.warning(
            f"Ignored the link's per-position rates (`{POS_PARAM}`): they must be numbers "
            "in [0, 1] that do not rise with position."
        )
    else:
        ss[LINK_POSITIONS_KEY] = positions


def _write_positions(acceptance: dict) -> None:
    positions = acceptance.get("acceptance_per_position")
    _set_param(POS_PARAM, positions_param(positions) if positions else None)


LAYOUT_CSS = """<style>
[data-testid="stMetricValue"] { font-size: clamp(1.05rem, 1.7vw, 2.25rem); }
[data-testid="stMetricValue"] > div { text-overflow: clip; }
[data-testid="stMetricLabel"] p, [data-testid="stMetricLabel"] div {
  white-space: normal; overflow: visible; text-overflow: clip;
}
</style>"""
"""Metric values scale with the window and labels wrap, so that at 1,024 px with the
sidebar open no figure is cut to "$2.…" (tests/app/test_layout_browser.py)."""


def layout_style() -> None:
    """The dashboard's few layout rules; drawn once a run by the entry point."""
    st.html(LAYOUT_CSS)


def known_positions(scenario: Scenario) -> int | None:
    """How many draft positions the scenario's acceptance figure measured or published
    (past them the rates are extrapolated); None where that is not known."""
    if not scenario.speculative:
        return None
    measured = st.session_state.get(sim.MEASURED_KEY)
    if scenario.workload == MEASURED and measured:
        return int(measured["k"]) if measured.get("k") else None
    prior = _prior(scenario.workload, scenario.method, scenario.target)
    return prior.k if prior is not None else None


def acceptance_source(scenario: Scenario) -> tuple[str, Prior | None]:
    """Where the scenario's α comes from, as `acceptance_range.BASES` names it, and the
    published prior behind it (None when measured or typed)."""
    if scenario.workload == MEASURED and st.session_state.get(sim.MEASURED_KEY):
        return "measured", None
    prior = _prior(scenario.workload, scenario.method, scenario.target)
    if prior is None or abs(prior.alpha - scenario.alpha) > 5e-4:
        return "typed", None
    return prior_basis(prior, scenario.target), prior


def prior_basis(prior: Prior, target: str) -> str:
    """'prior' where the published figure is the target's own, else 'borrowed'."""
    model = sim.models().get(target)
    names = {slug(target), slug(model.name) if model else ""} - {""}
    own = any(n in slug(prior.hint) for n in names) and not prior.pair
    return "prior" if own else "borrowed"


def prior_of_row(row: Mapping) -> tuple[str, Prior] | None:
    """(workload, published prior) whose figure a scenario row's acceptance is: its
    `acceptance_rate` within 5e-4 of the prior's α, or its `acceptance_per_position` the
    prior's rates; None where the row's acceptance is no workload's prior (typed)."""
    method, target = str(row.get("method", "")), str(row.get("target", ""))
    draft = str(row.get("draft") or "") or None
    rate, positions = row.get("acceptance_rate"), str(row.get("acceptance_per_position") or "")
    for workload in WORKLOADS:
        try:
            prior = sim.prior(workload, method, target, draft)
        except (InputError, KeyError, ValueError):
            return None
        if prior is None:
            continue
        if positions.strip() and _same_rates(positions, prior.positions_text):
            return workload, prior
        if not positions.strip() and _number(rate) and abs(float(rate) - prior.alpha) <= 5e-4:
            return workload, prior
    return None


def _number(value) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def acceptance_basis(scenario: Scenario) -> str:
    """Where the page's verdict gets its acceptance, said under the verdict: measured
    (/metrics), a published prior (until measured acceptance is pasted), or the α typed."""
    if not scenario.speculative:
        return ""
    measured = st.session_state.get(sim.MEASURED_KEY)
    if scenario.workload == MEASURED and measured:
        other = measured_mismatch(measured, scenario.target, scenario.method)
        return "Acceptance measured (your vLLM /metrics scrape)." + (f" {other}" if other else "")
    prior = _prior(scenario.workload, scenario.method, scenario.target)
    if prior is not None and abs(prior.alpha - scenario.alpha) <= 5e-4:
        return (
            f"From a published prior (α {prior.alpha:.3f}: {plain(prior.hint)}): paste your "
            "/metrics on the Acceptance page to plan with measured acceptance."
        )
    return f"From the acceptance you entered (α {scenario.alpha:.3f}), not a measurement."


def checklist_panel(
    row: Mapping,
    *,
    title: str | None = "Pre-flight checklist",
    horizontal: bool = False,
    per_row: int | None = None,
) -> None:
    """The pre-flight checks for one prediction row, each coloured green, amber or red with
    one line of why; stacked (beside a result) or side by side (under a wide table), at
    most `per_row` to a row."""
    if title:
        st.markdown(f"**{title}**")
    try:
        gpu = sim.gpus().get(str(row.get("gpu")))
        items = checklist(
            row,
            sim.models(),
            fits_on=sim.fewest_gpus(row, GPU_COUNTS),
            gpu_name=gpu.name if gpu is not None else None,
        )
    except (KeyError, ValueError, TypeError) as exc:
        st.warning(f"Checklist unavailable for this row ({plain(exc)}).")
        return
    if horizontal:
        per = per_row or len(items)
        slots = [c for _ in range(0, len(items), per) for c in st.columns(per)]
    else:
        slots = [st.container() for _ in items]
    for item, slot in zip(items, slots, strict=False):
        color, icon = STATUS_BADGE.get(item.status, ("gray", ":material/help:"))
        # Coloured text rather than st.badge: a badge cuts long names off in a narrow column.
        slot.markdown(f":{color}[{icon} **{item.name}**]")
        slot.caption(plain(item.why))


def kept_upload(container, label: str, *, key: str, **kwargs) -> tuple[str, bytes] | None:
    """A file uploader in `container` whose file outlives a visit to another page: (name,
    bytes) of the file, or None.

    Streamlit empties an uploader whose page is left. The uploader's on_change (the user
    choosing or removing a file, never a page switch) keeps a copy of the file in the
    session, so a return finds the same file, said in a caption with a button to forget it;
    removing the file in the uploader forgets it too.
    """
    kept_key = f"{key}:kept"

    def keep() -> None:
        upload = st.session_state.get(key)
        if upload is None:
            st.session_state.pop(kept_key, None)
        else:
            st.session_state[kept_key] = (upload.name, upload.getvalue())

    upload = container.file_uploader(label, key=key, on_change=keep, **kwargs)
    if upload is not None:
        return upload.name, upload.getvalue()
    kept = st.session_state.get(kept_key)
    if kept is not None:
        container.caption(
            f":material/attach_file: {plain(kept[0])}, uploaded earlier in this session."
        )
        container.button(
            "Forget this file", key=f"{key}:forget", on_click=forget_upload, args=(key,)
        )
    return kept


def forget_upload(key: str) -> None:
    """Drop the copy `kept_upload(..., key=key)` keeps (a file still in the uploader stays)."""
    st.session_state.pop(f"{key}:kept", None)


def show_error(exc: InputError, what: str = "Input") -> None:
    """An inline error that names the field; the rest of the page keeps working."""
    st.error(f"{what}: {plain(exc)}", icon=":material/error:")


def _profile_from_link() -> None:
    """A session that has not chosen a profile takes the link's bundled one."""
    ss = st.session_state
    name = st.query_params.get(PROFILE_PARAM)
    if sim.CALIBRATE_KEY in ss or name is None:
        return
    kept = sim.label_from_link(name)
    if name in sim.bundled_profile_paths():
        ss[sim.CALIBRATE_KEY] = sim.BUNDLED + name
    elif kept is not None:
        ss[sim.CALIBRATE_KEY] = kept
    else:
        ss[sim.CALIBRATE_KEY] = sim.NO_PROFILE
        ss[LINK_PROFILE_MISSING_KEY] = name


def _profile_to_link(label: str) -> None:
    bundled = label.removeprefix(sim.BUNDLED) if label.startswith(sim.BUNDLED) else None
    _set_param(PROFILE_PARAM, bundled or sim.link_profile(label))


def _shown(name: str) -> str:
    """A name from the URL, quoted as code when it looks like a path (never as markdown)."""
    return f"`{name}`" if re.fullmatch(r"[\w./-]{1,120}", name) else "it names"


def _link_notes(label: str) -> None:
    if label.startswith(sim.UPLOADED):
        st.sidebar.caption(
            ":material/link_off: An uploaded profile cannot travel in a link: whoever opens "
            "this page's address gets the catalog roofline unless they upload the same file."
        )
    missing = st.session_state.get(LINK_PROFILE_MISSING_KEY)
    if missing and label == sim.NO_PROFILE:
        st.sidebar.warning(
            f"The link asks for the calibration profile {_shown(missing)}, which is not "
            "bundled with this copy of SpecPlan: latency from the catalog roofline."
        )


def calibration_note() -> None:
    """Under the navigation: which profile calibrates the latency model, and whether it
    applies to the scenario's GPU (the sidebar's choice, from the session or the link).
    The choice travels in the link (`profile`), when a link can carry it."""
    _profile_from_link()
    state = sim.current_calibration()
    _profile_to_link(state.label)
    _link_notes(state.label)
    if state.error:
        st.sidebar.error(f"Calibration profile rejected: {plain(state.error)}")
    if state.calibration is None:
        st.sidebar.caption(
            ":material/straighten: Latency: the engine's measured kernel tables where they "
            "cover the GPU, else the analytic roofline from catalog specs (choose a profile "
            "on the Profiles page to calibrate)."
        )
        return
    devices = sorted(state.calibration.fits)
    shown = plain(", ".join(devices) or "no device")
    label = plain(state.label)
    gpu = st.session_state.get("gpu") or st.query_params.get("gpu")
    if gpu is None:
        st.sidebar.caption(
            f":material/speed: Calibrated by **{label}** (device: {shown}). Scenarios "
            "on that device use its measured step times."
        )
    elif gpu in devices:
        st.sidebar.caption(
            f":material/speed: Calibrated by **{label}** (device: {shown}): this "
            f"scenario's {plain(gpu)} uses its measured step times for the models it "
            "timed (the latency source says which parts)."
        )
    else:
        st.sidebar.caption(
            f":material/warning: Latency: kernel tables or the catalog roofline. Profile "
            f"**{label}** (device: {shown}) does not apply to this scenario's GPU, "
            f"{plain(gpu)}; only scenarios on {shown} are calibrated by it."
        )
