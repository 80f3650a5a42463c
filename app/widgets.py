"""Shared widgets: the scenario inputs every planning page shows in the sidebar (bound to
query parameters, the key being the parameter name, so a link reproduces the scenario),
the pre-flight checklist panel and the inline error message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import streamlit as st

from app import sim
from app.presets import MEASURED, WORKLOADS, pick_prior
from simulator.errors import InputError
from simulator.preflight import checklist
from simulator.specs import KV_DTYPES, METHODS, WEIGHT_DTYPES

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
DEFAULT_PROMPT_LEN = 1024
DEFAULT_OUTPUT_LEN = 256
FALLBACK_ALPHA = 0.7
"""Only used when the priors file has no row for the default workload and method."""

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


def default_alpha() -> float:
    """The acceptance input's default: the prior of the default workload, method, target."""
    prior = pick_prior(
        sim.priors(), DEFAULT_WORKLOAD, DEFAULT_METHOD, sim.models().get(DEFAULT_TARGET)
    )
    return prior.alpha if prior is not None else FALLBACK_ALPHA


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
        }
        if self.speculative:
            out.update(self.acceptance)
        if self.gpu_hourly_usd is not None:
            out["gpu_hourly_usd"] = self.gpu_hourly_usd
        return out

    def row(self, k: int, batch_size: int, **extra) -> dict:
        return {**self.base(), "k": k if self.speculative else 0, "batch_size": batch_size, **extra}


def _refill_acceptance() -> None:
    """Workload, method or target changed: put the matching published figure (or the
    measured one) into the acceptance input. With no figure the user's value stays."""
    ss = st.session_state
    workload = ss.get("workload", DEFAULT_WORKLOAD)
    if workload == MEASURED:
        measured = ss.get(sim.MEASURED_KEY)
        if measured:
            ss["acceptance_rate"] = round(float(measured["alpha"]), 3)
        return
    prior = pick_prior(
        sim.priors(),
        workload,
        ss.get("method", DEFAULT_METHOD),
        sim.models().get(ss.get("target", DEFAULT_TARGET)),
    )
    if prior is not None:
        ss["acceptance_rate"] = prior.alpha


def _index(options: list, value) -> int:
    return options.index(value) if value in options else 0


def scenario_inputs() -> Scenario:
    """The scenario sidebar; the same widgets (same keys) on every planning page."""
    models = sim.models()
    gpus = sim.gpus()
    model_ids = list(models)
    gpu_ids = list(gpus)
    sb = st.sidebar
    sb.subheader("Scenario")
    target = sb.selectbox(
        "Target model",
        model_ids,
        index=_index(model_ids, DEFAULT_TARGET),
        key="target",
        on_change=_refill_acceptance,
        **BIND,
    )
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
        disabled=method != "draft_model",
        help="Used by the draft-model method only; it must share the target's tokenizer.",
        **BIND,
    )
    names = f"{models[target].name} ({models[target].tokenizer} tokenizer)"
    if method == "draft_model":
        names += f"; draft {models[draft].name} ({models[draft].tokenizer})"
    sb.caption(names)
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
    sb.caption(f"{g.name}: {g.memory_gb:g} GB, {g.hbm_bandwidth_gbps:,.0f} GB/s per GPU")
    c1, c2 = sb.columns(2)
    weight_dtype = c1.selectbox("Weights", list(WEIGHT_DTYPES), key="weight_dtype", **BIND)
    kv_dtype = c2.selectbox("KV cache", list(KV_DTYPES), key="kv_dtype", **BIND)

    workload, alpha, acceptance = _acceptance_inputs(sb, method, target)

    sb.subheader("Traffic and price")
    c1, c2 = sb.columns(2)
    prompt_len = c1.number_input(
        "Prompt tokens", 1, 1_000_000, DEFAULT_PROMPT_LEN, 128, key="prompt_len", **BIND
    )
    output_len = c2.number_input(
        "Output tokens", 1, 1_000_000, DEFAULT_OUTPUT_LEN, 64, key="output_len", **BIND
    )
    c1, c2 = sb.columns(2)
    requests_per_day = c1.number_input(
        "Requests per day",
        0,
        10_000_000_000,
        DEFAULT_REQUESTS_PER_DAY,
        100_000,
        key="requests_per_day",
        **BIND,
    )
    catalog_price = gpus[gpu].price_usd_per_hr
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
    if price is None and catalog_price is None:
        sb.warning(f"{gpus[gpu].name} has no catalog price: enter one for the costs.")
    return Scenario(
        target=target,
        method=method,
        draft=draft,
        gpu=gpu,
        num_gpus=int(num_gpus),
        weight_dtype=weight_dtype,
        kv_dtype=kv_dtype,
        workload=workload,
        alpha=float(alpha),
        acceptance=acceptance,
        prompt_len=int(prompt_len),
        output_len=int(output_len),
        requests_per_day=float(requests_per_day),
        gpu_hourly_usd=None if price is None else float(price),
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
    positions = measured.get("acceptance_per_position", "") if measured else ""
    alpha = sb.number_input(
        "Acceptance rate α (per token)",
        min_value=0.0,
        max_value=1.0,
        value=default_alpha(),
        step=0.01,
        format="%.3f",
        key="acceptance_rate",
        disabled=method == "none" or bool(positions),
        help="i.i.d. probability that a drafted token is accepted (Leviathan et al.); "
        "not vLLM's 'draft acceptance rate' (accepted / drafted).",
        **BIND,
    )
    if method == "none":
        sb.caption("Speculation off: acceptance is not used.")
        return workload, alpha, {}
    if workload == MEASURED:
        if not measured:
            sb.info(
                "No /metrics figures in this session yet: paste a scrape on the "
                "Acceptance page. Using the rate above."
            )
            return workload, alpha, {"acceptance_rate": alpha}
        sb.caption(
            f"From /metrics: τ {measured['tau']:.2f} at K={measured['k']}, "
            f"α {measured['alpha']:.3f}"
            + (f"; per-position rates {positions}" if positions else "")
        )
        if positions:
            return workload, float(measured["alpha"]), {"acceptance_per_position": positions}
        return workload, alpha, {"acceptance_rate": alpha}
    prior = pick_prior(sim.priors(), workload, method, sim.models().get(target))
    if prior is None:
        sb.info(
            f"No published figure for {WORKLOAD_LABELS[workload]} with "
            f"{METHOD_LABELS[method]}; enter your own acceptance rate."
        )
    else:
        edited = abs(prior.alpha - alpha) > 5e-4
        sb.caption(
            f"Prior α {prior.alpha:.3f}: {prior.describe()}"
            + (" (edited: i.i.d. α as typed)" if edited else "")
            + (f" [source]({prior.source})" if prior.source.startswith("http") else "")
        )
        if not edited and prior.positions:
            return workload, alpha, {"acceptance_per_position": prior.positions_text}
    return workload, alpha, {"acceptance_rate": alpha}


def checklist_panel(
    row: Mapping, *, title: str | None = "Pre-flight checklist", horizontal: bool = False
) -> None:
    """Five checks for one prediction row, each coloured green, amber or red with one line
    of why; stacked (beside a result) or side by side (under a wide table)."""
    if title:
        st.markdown(f"**{title}**")
    try:
        items = checklist(row, sim.models())
    except (KeyError, ValueError, TypeError) as exc:
        st.warning(f"Checklist unavailable for this row ({exc}).")
        return
    slots = st.columns(len(items)) if horizontal else [st.container() for _ in items]
    for item, slot in zip(items, slots, strict=True):
        color, icon = STATUS_BADGE.get(item.status, ("gray", ":material/help:"))
        # Coloured text rather than st.badge: a badge cuts long names off in a narrow column.
        slot.markdown(f":{color}[{icon} **{item.name}**]")
        slot.caption(item.why)


def show_error(exc: InputError, what: str = "Input") -> None:
    """An inline error that names the field; the rest of the page keeps working."""
    st.error(f"{what}: {exc}", icon=":material/error:")


def calibration_note() -> None:
    """Under the navigation: which profile calibrates the latency model, and whether it
    applies to the scenario's GPU (the sidebar's choice, from the session or the link)."""
    state = sim.current_calibration()
    if state.error:
        st.sidebar.error(f"Calibration profile rejected: {state.error}")
    if state.calibration is None:
        st.sidebar.caption(
            ":material/straighten: Latency: analytic roofline from catalog specs "
            "(choose a profile on the Profiles page to calibrate)."
        )
        return
    devices = sorted(state.calibration.fits)
    shown = ", ".join(devices) or "no device"
    gpu = st.session_state.get("gpu") or st.query_params.get("gpu")
    if gpu is None:
        st.sidebar.caption(
            f":material/speed: Calibrated by **{state.label}** (device: {shown}). Scenarios "
            "on that device use its measured step times."
        )
    elif gpu in devices:
        st.sidebar.caption(
            f":material/speed: Calibrated by **{state.label}** (device: {shown}): this "
            f"scenario's {gpu} uses its measured step times."
        )
    else:
        st.sidebar.caption(
            f":material/warning: Latency: analytic roofline from catalog specs. Profile "
            f"**{state.label}** (device: {shown}) does not apply to this scenario's GPU, "
            f"{gpu}; only scenarios on {shown} are calibrated by it."
        )
