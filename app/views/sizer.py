"""Concurrency sizer: memory per replica, KV capacity and concurrency with and without
speculation, the best K per batch under a latency SLO, replicas for the demand, and the
launch command (vLLM, SGLang, TensorRT-LLM schedule) that deploys exactly that."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import streamlit as st

from app import acceptance_band, engine_notes, figures, library_saves, sim, widgets
from app.formatting import delta, money, signed_money
from app.operating_point import (  # the Sizer's defaults, shared with Reports' prefill
    DEFAULT_K_MAX,
    DEFAULT_MAX_MODEL_LEN,
    DEFAULT_SLO_TOK_S,
    DEFAULT_SLO_TPOT_MS,
    DEFAULT_UTIL,
    SLO_KINDS,
    kv_tokens_cap,
)
from simulator.errors import InputError
from simulator.model import admission
from simulator.model.defaults import DEFAULTS
from simulator.model.economics import get_demand_tok_s
from simulator.model.memory import get_max_concurrency
from simulator.model.predict import WINDOW_REASONS, status_reasons
from simulator.planning import k_schedule, launch
from simulator.planning.layouts import Layout, get_nodes
from simulator.planning.reports import ENGINE_LABELS, launch_config_text
from simulator.planning.sizer import choose_layout, layouts_to_try, schedule_ranges
from simulator.planning.uncertainty import get_money_range, get_paying_batches
from simulator.serving import defaults as serve_defaults
from simulator.serving import tails

FALLBACK_K = 3  # vLLM's documented example K, for the memory bars when nothing is chosen


@st.cache_data(show_spinner=False, max_entries=64)
def _p99_rate(
    scenario: tuple, speculative: bool, lengths: tuple, ttft: float, tpot: float, cal: str
):
    """Highest request rate per replica within the steady-state P99 SLOs, with its bracket
    and the P99s' range (`tails.max_rate_at_slo`)."""
    calibration = sim.current_calibration().calibration if cal else None
    return tails.max_rate_at_slo(
        dict(scenario),
        serve_defaults.default_lengths(lengths[0]),
        serve_defaults.default_lengths(lengths[1]),
        speculative=speculative,
        slo_ttft_ms=ttft,
        slo_tpot_ms=tpot,
        acceptance_spread=serve_defaults.acceptance_spread(dict(scenario)["method"])
        if speculative
        else 0.0,
        calibration=calibration,
    )


def _p99_section(scenario, choice, slo) -> tuple[dict, float, int]:
    """The P99 sizing inputs and, per arm, the rate a replica serves within the P99 SLOs
    with its bracket and the P99s' seed-to-seed range: ({speculative: RateAtSlo or why the
    arm cannot run}, TTFT SLO, K)."""
    p_cols = st.columns(3)
    slo_ttft = float(
        p_cols[0].number_input(
            "TTFT SLO, P99 (ms)",
            1.0,
            600_000.0,
            2000.0,
            100.0,
            format="%.0f",  # whole ms, as on Load & SLO
            key="size_ttft",
            **widgets.BIND,
        )
    )
    k_p99 = int(choice["k"]) if choice and choice["k"] > 0 else FALLBACK_K
    demand_rps = scenario.requests_per_day / 86400.0
    arms = (False, True) if scenario.speculative else (False,)
    found = {}
    with st.spinner("Simulating requests until the P99s are steady..."):
        for spec in arms:
            try:
                found[spec] = _p99_rate(
                    tuple(sorted((c, str(v)) for c, v in scenario.row(k_p99, 1).items())),
                    spec,
                    (scenario.prompt_len, scenario.output_len),
                    slo_ttft,
                    float(slo["slo_tpot_ms"]),
                    sim.current_calibration().key,
                )
            except InputError as exc:  # this arm cannot run: say why in its place
                found[spec] = exc.bare_message
    for i, spec in enumerate(arms):
        label = f"with speculation (K={k_p99})" if spec else "without speculation"
        got = found[spec]
        if isinstance(got, str):
            p_cols[1 + i].metric(f"Replicas {label}", "cannot run")
            p_cols[1 + i].caption(widgets.plain(got))
            continue
        p_cols[1 + i].metric(
            f"Replicas {label}",
            _replicas_text(demand_rps, got),
            help=f"{got.rate:.2f} requests/s per replica at P99 TTFT ≤ {slo_ttft:g} ms and "
            f"P99 TPOT ≤ {slo['slo_tpot_ms']:g} ms; demand {demand_rps:.2f} requests/s.",
        )
        p_cols[1 + i].caption(_p99_confidence(got))
    st.session_state["sizer_p99_rates"] = {
        spec: got.rate for spec, got in found.items() if not isinstance(got, str)
    }
    return found, slo_ttft, k_p99


def _replicas_text(demand_rps: float, got) -> str:
    """Replicas for the demand at the sized rate, with the count at the bracket's other
    end where it differs ("3" or "3-4")."""
    if got.rate <= 0:
        return "SLO unreachable"
    n = int(np.ceil(demand_rps / got.rate))
    worst = int(np.ceil(demand_rps / got.low)) if got.low > 0 else n
    best = int(np.ceil(demand_rps / got.high)) if got.high > 0 else n
    return f"{n}" if best == worst == n else f"{min(best, n)}-{max(worst, n)}"


def _p99_confidence(got) -> str:
    """How sure the sized rate is: its bracket and the P99s two seeds gave there."""
    if got.tails is None:
        return "Even a trickle of requests misses the SLO."
    t = got.tails
    note = (
        "two seeds agree within 5%"
        if t.converged
        else "the SLO decision is clear, though the seeds differ by more than 5%"
    )
    return (
        f"{got.rate:.1f} requests/s per replica (between {got.low:.1f} and {got.high:.1f}). "
        f"There, P99 TPOT {t.tpot_range_ms[0]:.1f}-{t.tpot_range_ms[1]:.1f} ms and P99 "
        f"TTFT {t.ttft_range_ms[0]:,.0f}-{t.ttft_range_ms[1]:,.0f} ms over two seeds of "
        f"{t.requests:,} requests each, warm-up cut ({note})."
    )


def _on_p99_basis(choice: dict, base_choice: dict | None, p99: dict, scenario) -> tuple:
    """The operating points with replicas, GPUs and cost from the P99-sized rates (each arm
    whose simulation ran and reached the SLO); the rest as the mean sized them."""
    demand_rps = scenario.requests_per_day / 86400.0

    def resize(point: dict | None, got) -> dict | None:
        if point is None or isinstance(got, str) or got is None or got.rate <= 0:
            return point
        replicas = max(1, int(np.ceil(demand_rps / got.rate)))
        per_replica = point["monthly_cost_usd"] / max(point["replicas"], 1)
        tok_s = got.rate * scenario.output_len
        return {
            **point,
            "replicas": replicas,
            "gpus": replicas * scenario.num_gpus,
            "monthly_cost_usd": per_replica * replicas,
            # One replica at the rate the P99 allows: its tokens/s, its P99 TPOT there, and
            # $/1M at that rate (the mean basis's at its own rate, scaled).
            "tok_s_per_replica": tok_s,
            "tpot_ms": got.tails.tpot_p99_ms if got.tails is not None else np.nan,
            "cost_per_mtok": point["cost_per_mtok"] * point["tok_s_per_replica"] / tok_s,
            "basis": "P99",
        }

    spec_got = p99.get(True) if scenario.speculative and choice["k"] > 0 else p99.get(False)
    return resize(choice, spec_got), resize(base_choice, p99.get(False))


def _p99_capacity(choice: dict, p99: dict, scenario) -> tuple | None:
    """(demand, speculative, baseline) requests/s per replica as the P99 sized them, for
    `_with_error`; None when the operating point's arm has no sized rate."""

    def rate(got) -> float:
        return got.rate if got is not None and not isinstance(got, str) else np.nan

    spec = rate(p99.get(True) if choice["k"] > 0 else p99.get(False))
    if not spec > 0:
        return None
    return scenario.requests_per_day / 86400.0, spec, rate(p99.get(False))


# The engines the Sizer writes a launch command for (engine 'other' gets vLLM's).
ENGINE_ORDER = ("vllm", "sglang", "trtllm")


def _k_flags(engine: str, choice, k_launch: int) -> str:
    """How the plan's K reaches `engine`'s flags, for the heading above its command."""
    if engine == "vllm":
        return "`--speculative-config` JSON, K falling with batch size"
    if engine == "sglang":
        return f"one K: {choice['k']}, the operating point's; SGLang has no per-batch schedule"
    return (
        f"`max_draft_len` {choice['k']}, the operating point's; its `draft_len_schedule` below"
        if k_launch
        else f"`max_draft_len` {choice['k']}"
    )


def _k0_note(scenario, ranges, max_num_seqs: int, k: int, mem) -> None:
    """At a K = 0 operating point the launch runs no speculation: say which batches the
    schedule would speculate at and what the draft would hold of the memory there."""
    low = [(lo, hi, kk) for lo, hi, kk in ranges if kk > 0 and lo <= max_num_seqs]
    if not scenario.speculative or k > 0 or not low:
        return
    upto = max(hi for _, hi, _ in low)
    draft_gb = float(mem["draft_weights_gb"])
    kv_gb = float(mem["kv_cache_gb_baseline"] - mem["kv_cache_gb_spec"])
    st.caption(
        f"K = 0 at the operating point (batch {max_num_seqs}): the commands run no "
        f"speculation. The schedule speculates only at batch {min(upto, max_num_seqs)} and "
        f"below, when the load falls under the sizing. Speculating there would load the "
        f"draft ({draft_gb:.1f} GiB of weights), leaving {kv_gb:.1f} GiB less for the KV "
        "cache at every batch."
    )


def _with_error(choice: dict, grid, scenario, capacity: tuple) -> str:
    """The operating point's replicas and $ per month at the model's validated error at
    its batch (`simulator.planning.uncertainty`), and the batches where speculation pays even at
    the error's low end. `capacity`: (demand, the speculative arm's per replica, the
    baseline's per replica or NaN) in one unit: tok/s on the mean basis, requests/s as
    the P99 sized them."""
    err = sim.speedup_error([choice["batch_size"]])
    if err is None or not choice["gpus"] or not scenario.speculative:
        return ""
    demand, spec_per_replica, base_per_replica = capacity
    hourly = choice["monthly_cost_usd"] / (choice["gpus"] * DEFAULTS.hours_per_month)
    band, scaled = _acceptance_scale(choice, scenario)
    r = get_money_range(
        demand_tok_s=demand,
        baseline_tok_s=base_per_replica,
        spec_tok_s=spec_per_replica,
        hourly_usd_per_gpu=hourly,
        num_gpus=scenario.num_gpus,
        error=err[0],
        acceptance_ends=None if scaled is None else tuple(spec_per_replica * f for f in scaled),
    )
    reps = sorted({int(x) for x in r.replicas_spec})
    costs = sorted(float(x) for x in r.monthly_cost_spec_usd)
    cost = money(costs[0]) if reps[0] == reps[-1] else f"{money(costs[0])}-{money(costs[1])}"
    spec = grid[(grid["k"] > 0) & np.isfinite(grid["speedup"].to_numpy(dtype=float))]
    best = spec.groupby("batch_size")["speedup"].max()
    paying = get_paying_batches(
        best.index.to_numpy(), best.to_numpy(), sim.speedup_error(best.index.to_numpy())
    )
    sampled = best.index.to_numpy()
    if not len(paying):
        where = "at the model's low end speculation pays at no batch"
    else:
        inside = sampled[(sampled >= paying.min()) & (sampled <= paying.max())]
        batches = (
            f"{int(paying.min())}-{int(paying.max())}"
            if len(paying) > 1 and len(inside) == len(paying)
            else ", ".join(str(int(b)) for b in paying)
        )
        where = f"speculation pays at batch {batches} even at the model's low end"
    if choice["k"] <= 0:
        return f"With the model's typical error (Validation page): {where}."
    acceptance = "" if band is None else f" and acceptance α {band.low:.3f}-{band.high:.3f}"
    if band is not None:
        acceptance += f" ({widgets.plain(band.why)})"
    return (
        f"With the model's typical error at batch {choice['batch_size']} (±{err[0]:.0%}, "
        f"Validation page){acceptance}: {'-'.join(map(str, reps))} replicas, {cost} a "
        f"month; {where}."
    )


def _acceptance_scale(choice: dict, scenario) -> tuple:
    """(band, (low, high) factors on the operating point's speculative throughput at the
    acceptance band's ends), or (band or None, None) where the band is a point."""
    extra = {"gpu_memory_utilization": util, **_layout_columns(choice)}
    return acceptance_band.ratios(scenario, int(choice["k"]), int(choice["batch_size"]), **extra)


def _layout_columns(choice: dict) -> dict:
    """The chosen layout's scenario columns (none for plain tensor parallelism)."""
    layout = _chosen_layout(result.layouts)
    return {} if layout is None else layout.columns()


st.title("Concurrency sizer")
st.caption(
    "How many sequences fit, which K to run at each batch size under a latency SLO, how "
    "many replicas the demand needs, and the command that deploys it."
)
scenario = widgets.scenario_inputs()
with st.sidebar:
    library_saves.scenario_bar("sizer")
models, gpus = sim.models(), sim.gpus()
c = st.columns([1.2, 1, 1.1, 1, 0.8])
util = c[0].slider(
    "GPU memory utilization",  # the flag's name broke mid-word at 1024 px
    0.5,
    0.98,
    DEFAULT_UTIL,
    0.01,
    key="gpu_memory_utilization",
    help="Fraction of each GPU's memory the engine may use (vLLM's "
    "`--gpu-memory-utilization`, SGLang's `--mem-fraction-static`, TensorRT-LLM's "
    "`--kv_cache_free_gpu_memory_fraction`).",
    **widgets.BIND,
)
max_model_len = int(
    c[1].number_input(
        "Max model length (tokens)",
        256,
        10_000_000,
        DEFAULT_MAX_MODEL_LEN,
        1024,
        key="max_model_len",
        **widgets.BIND,
    )
)
window = models[scenario.target].max_position_embeddings
if window and max_model_len > window:
    st.warning(
        f"Max model length {max_model_len:,} is above {widgets.plain(scenario.target)}'s "
        f"{window:,}-token context window: the sizing and the launch commands use {window:,} "
        "(vLLM refuses a longer --max-model-len)."
    )
    max_model_len = window
slo_kind = c[2].radio("Latency SLO", SLO_KINDS, key="slo_kind", horizontal=True, **widgets.BIND)
if slo_kind == SLO_KINDS[0]:
    slo_value = c[3].number_input(
        "TPOT at most (ms)",
        1.0,
        10_000.0,
        DEFAULT_SLO_TPOT_MS,
        5.0,
        key="slo_tpot_ms",
        **widgets.BIND,
    )
    slo = {"slo_tpot_ms": float(slo_value)}
    slo_tpot = float(slo_value)
else:
    slo_value = c[3].number_input(
        "Tokens/s per user at least",
        0.1,
        10_000.0,
        DEFAULT_SLO_TOK_S,
        5.0,
        key="slo_tok_s",
        **widgets.BIND,
    )
    slo = {"slo_tok_s_per_user": float(slo_value)}
    slo_tpot = 1e3 / float(slo_value)
k_max = int(
    c[4].number_input(
        "K up to",
        1,
        16,
        DEFAULT_K_MAX,
        key="k_max",
        disabled=not scenario.speculative,
        **widgets.BIND,
    )
)
head_repo = ""
if scenario.method in ("eagle", "medusa"):
    head_repo = st.text_input(
        f"{widgets.METHOD_LABELS[scenario.method]} head repository (for the launch command)",
        "",
        key="head_repo",
        placeholder=f"e.g. the Hugging Face repo of a {scenario.method} head for "
        f"{models[scenario.target].name}",
        **widgets.BIND,
    )

demand = float(get_demand_tok_s(scenario.requests_per_day, scenario.output_len))
base = {**scenario.base(), "gpu_memory_utilization": util}
try:
    size_kw = dict(k_max=k_max if scenario.speculative else 0, demand_tok_s=demand, **slo)
    tried = layouts_to_try(base, models)
    if len(tried) > 1:
        # An MoE or MLA target: sized in each layout of its GPUs (each run cached), the one
        # serving the most tokens/s per replica kept (`sizer.choose_layout`).
        runs = [sim.run_size({**base, **lay.columns()}, **size_kw) for lay in tried]
        result = choose_layout(tried, runs)
    else:
        result = sim.run_size(base, **size_kw)
    choice = result.choice
    k_mem = choice["k"] if choice and choice["k"] > 0 else FALLBACK_K
    mem = sim.run_predict(pd.DataFrame([scenario.row(k_mem, 1, gpu_memory_utilization=util)])).iloc[
        0
    ]
except InputError as exc:
    widgets.show_error(exc, "Scenario")
    st.stop()

grid = result.grid
# A request longer than the target's (or the draft's) context window cannot run at any
# batch: say so once, here, rather than let the sections below count sequences for it.
too_long = [r in status_reasons(str(mem["status"])) for r in WINDOW_REASONS]
need = scenario.prompt_len + scenario.output_len
if too_long[0]:
    st.error(
        f"Requests of {scenario.prompt_len:,} + {scenario.output_len:,} = {need:,} tokens "
        f"exceed {widgets.plain(scenario.target)}'s {window:,}-token context window: no "
        "configuration serves them. Shorten the prompt or the output, or choose a model "
        "with a longer window."
    )
elif too_long[1]:
    d_window = models[scenario.draft].max_position_embeddings
    st.error(
        f"Requests of {need:,} tokens exceed the draft {widgets.plain(scenario.draft)}'s "
        f"{d_window:,}-token context window: speculation cannot run, so every batch runs "
        "K = 0. Shorten the requests or choose a draft with a longer window."
    )


def _break_even_text(result) -> str:
    """Where speculation pays, for the caption under the best-K figures: nothing where no
    row runs (the memory section says why), and never "pays" where no K > 0 can run."""
    grid = result.grid
    spec = grid["k"].to_numpy() > 0
    runs = np.isfinite(grid["spec_tok_s"].to_numpy(dtype=float))
    if not runs.any():
        return ""
    if not (runs & spec).any():
        status = str(grid.loc[spec, "status"].iloc[0])
        return f"{widgets.plain(status[:1].upper() + status[1:])}, so K = 0 at every batch. "
    at = result.break_even_batch
    if at is None:
        return "Speculation pays at every batch. "
    if not (grid["speedup"].to_numpy(dtype=float)[spec & runs] > 1.0).any():
        return "Speculation pays at no batch: every K is slower than the baseline. "
    return f"Speculation stops paying at batch {at}. "


def _layout_caption(tried: pd.DataFrame) -> str:
    """Which layout the sizer chose for an MoE or MLA target, against the others it tried."""
    chosen = tried[tried["chosen"]].iloc[0]
    others = []
    for _, r in tried[~tried["chosen"]].iterrows():
        why = r["passed_over"] or f"{r['tok_s_per_replica']:,.0f} tok/s"
        others.append(f"{r['layout']} ({why})")
    return (
        f"Layout {chosen['layout']}: {chosen['tok_s_per_replica']:,.0f} tok/s per replica, the "
        f"most of the layouts tried; {', '.join(others)}."
    )


def _chosen_layout(tried: pd.DataFrame | None) -> Layout | None:
    """The layout the sizer chose (None: the scenario's own, plain TP for a dense target)."""
    if tried is None:
        return None
    r = tried[tried["chosen"]].iloc[0]
    return Layout(
        int(r["tp_size"]), int(r["attention_dp_size"]), int(r["moe_tp_size"]), int(r["moe_ep_size"])
    )


st.session_state["sizer_result"] = {
    "choice": choice,
    "baseline_choice": result.baseline_choice,
    "break_even_batch": result.break_even_batch,
    "best": result.best,
}

# ---------------------------------------------------------------------------- memory
st.subheader("Memory and concurrency")
total_gb = float(gpus[scenario.gpu].memory_gb) * scenario.num_gpus
held_back = total_gb * (1.0 - util)
spec_label = "speculative" if scenario.speculative else "speculation off"
breakdown = pd.DataFrame(
    {
        "target weights": [mem["weights_gb"], mem["weights_gb"]],
        "draft weights": [0.0, mem["draft_weights_gb"]],
        "reserves (activations, CUDA graphs, runtime)": [mem["reserved_gb"], mem["reserved_gb"]],
        "KV cache": [mem["kv_cache_gb_baseline"], mem["kv_cache_gb_spec"]],
        "held back (1 - utilisation)": [held_back, held_back],
    },
    index=["baseline", spec_label],
)
left, right = st.columns([3, 2], gap="large")
left.plotly_chart(figures.memory_breakdown(breakdown, total_gb=total_gb), key="sizer_memory")
with right:
    k_lookahead = k_mem if scenario.speculative else 0
    at_len_base = float(
        get_max_concurrency(mem["kv_capacity_tokens_baseline"], max_model_len, 0, 0)
    )
    at_len_spec = float(
        get_max_concurrency(mem["kv_capacity_tokens_spec"], max_model_len, 0, k_lookahead)
    )
    r = st.columns(2)
    r[0].metric("KV tokens, baseline", f"{mem['kv_capacity_tokens_baseline']:,.0f}")
    r[1].metric(
        f"KV tokens, {spec_label}",
        f"{mem['kv_capacity_tokens_spec']:,.0f}",
        f"{mem['kv_capacity_tokens_spec'] - mem['kv_capacity_tokens_baseline']:+,.0f}",
    )
    r = st.columns(2)
    seqs_base = "cannot run" if too_long[0] else f"{mem['max_concurrency_baseline']:,.0f}"
    seqs_spec = "cannot run" if any(too_long) else f"{mem['max_concurrency_spec']:,.0f}"
    r[0].metric(
        "Max sequences, baseline",
        seqs_base,
        help=f"Requests of {scenario.prompt_len}+{scenario.output_len} tokens.",
    )
    r[1].metric(
        f"Max sequences, {spec_label}",
        seqs_spec,
        None
        if any(too_long)
        else delta(mem["max_concurrency_spec"] - mem["max_concurrency_baseline"], "+,.0f"),
        help=f"With K={k_lookahead} lookahead slots per request.",
    )
    st.caption(
        f"At the full {max_model_len:,} tokens per request: {at_len_base:,.0f} sequences "
        f"without speculation, {at_len_spec:,.0f} with K={k_lookahead} (vLLM prints the "
        "first as 'Maximum concurrency for N tokens per request' at start-up). Memory "
        f"shown for K={k_lookahead}, {scenario.num_gpus} x {widgets.plain(gpus[scenario.gpu].name)}."
    )
    if mem["kv_cache_gb_spec"] <= 0:
        mem_row = scenario.row(k_mem, 1, gpu_memory_utilization=util)
        fix = sim.memory_fix(mem_row, widgets.GPU_COUNTS)
        if mem["kv_cache_gb_baseline"] <= 0:
            why = "Weights and reserves exceed the memory: add GPUs or quantise."
        else:
            why = (
                "With speculation, the target's and the draft's weights and reserves exceed "
                "the memory: add GPUs, quantise or choose a smaller draft."
            )
        st.error(f"{why} {fix}".strip())

# ---------------------------------------------------------------------------- SLO
slo_text = f"TPOT ≤ {slo_tpot:g} ms" if "slo_tpot_ms" in slo else f"≥ {slo_value:g} tok/s per user"
st.subheader(f"Best K per batch under the SLO ({slo_text})")
f1, f2 = st.columns(2)
f1.plotly_chart(figures.tpot_by_batch(grid, slo_tpot_ms=slo_tpot), key="sizer_tpot")
f2.plotly_chart(figures.best_k_by_batch(result.best), key="sizer_best_k")
if not scenario.speculative:
    st.info("Method 'none' is the baseline: choose a method in the sidebar to see the gain.")
elif k_max > 0 and (result.best["best_k"] == k_max).any():
    at = result.best.loc[result.best["best_k"] == k_max, "batch_size"].astype(int).tolist()
    st.warning(
        f"Best K sits on the search ceiling (K = {k_max}) at batch "
        f"{', '.join(map(str, at))}: the speedup still rises there. Raise K up to "
        f"{min(2 * k_max, 16)} (the maximum K above) to find the optimum."
    )
caps = {spec: admission.cap_for_row(scenario.base(), spec, gpus) for spec in (False, True)}
rule = admission.rule_for(
    scenario.engine, scenario.speculative, scenario.gpu, gpus[scenario.gpu].memory_gb
)
st.caption(
    (_break_even_text(result) if scenario.speculative else "")
    + "Largest batch meeting the SLO and fitting in memory, by K: "
    + ", ".join(
        f"K={k}: {min(b, caps[k > 0]) if b is not None else 'none'}"
        for k, b in result.max_batch_under_slo.items()
    )
    + f". {scenario.engine} runs at most {caps[scenario.speculative]} requests at once on "
    f"this replica{' with speculation' if scenario.speculative else ''} (its default "
    f"{rule.flag or 'cap'}; {caps[False]} without speculation): past that the extra "
    "requests queue, and a batch above it is the cap, not the memory, at work."
)
with st.expander("Best K per batch as a table"):
    st.dataframe(
        result.best.rename(
            columns={
                "batch_size": "batch",
                "best_k": "best K",
                "spec_tpot_ms": "TPOT [ms]",
                "spec_tok_s": "tok/s per replica",
                "meets_slo": "meets SLO",
            }
        ),
        hide_index=True,
        key="sizer_best_table",
    )
engine_notes.engine_assumptions(
    scenario.engine,
    scenario.method,
    str(result.grid["latency_source"].iloc[0]) if "latency_source" in result.grid else "",
    key="sizer_engine_costs",
)

# ------------------------------------------------------------------ sizing basis
SIZE_ON = ("mean TPOT (analytic model)", "P99 at the SLO (request-level simulation)")
size_on = st.radio(
    "Size replicas on",
    SIZE_ON,
    key="size_on",
    horizontal=True,
    help="The analytic model sizes on the mean step; users feel the P99. The simulation "
    "finds the highest request rate a replica serves with steady-state P99 TTFT and TPOT "
    "within the SLO. The deployment's replicas and cost below follow this choice.",
    **widgets.BIND,
)
p99 = None  # {speculative: RateAtSlo or the reason the arm cannot run}, on the P99 basis
if size_on == SIZE_ON[1]:
    if "slo_tpot_ms" not in slo:
        st.info("P99 sizing takes a TPOT SLO: choose 'TPOT (ms)' above.")
    else:
        p99, slo_ttft, k_p99 = _p99_section(scenario, choice, slo)

# ---------------------------------------------------------------------------- deployment
st.subheader(f"Deployment for {demand:,.0f} tok/s of demand")
# The checklist under the metrics, as on the ROI page: beside them it cut the monthly
# cost's delta at 1024 px (issue 27, Layout).
left, right = st.container(), st.container()
if choice is None:
    left.error(
        "No configuration serves these requests: they exceed the context window."
        if too_long[0]
        else "No (K, batch) meets the SLO and fits in memory: relax the SLO, add GPUs per "
        "replica or shorten the requests."
    )
    row = grid.iloc[0].to_dict()
else:
    row = (
        grid[(grid["k"] == choice["k"]) & (grid["batch_size"] == choice["batch_size"])]
        .iloc[0]
        .to_dict()
    )
    base_choice = result.baseline_choice
    basis = "mean TPOT"
    capacity = (
        demand,
        choice["tok_s_per_replica"],
        base_choice["tok_s_per_replica"] if base_choice else np.nan,
    )
    if p99:
        choice, base_choice = _on_p99_basis(choice, base_choice, p99, scenario)
        basis = "P99 at the SLO"
        capacity = _p99_capacity(choice, p99, scenario)
    m = left.columns(5)
    m[0].metric("K", f"{choice['k']}", help="Speculative tokens at the operating point.")
    m[1].metric("Batch", f"{choice['batch_size']}", help="Sequences per replica (--max-num-seqs).")
    m[2].metric(
        f"Replicas (GPUs), {basis}",
        f"{choice['replicas']} ({choice['gpus']})",
        delta(choice["replicas"] - base_choice["replicas"], "+d") if base_choice else None,
        delta_color="inverse",
    )
    m[3].metric(
        "Monthly cost",
        money(choice["monthly_cost_usd"]),
        signed_money(choice["monthly_cost_usd"] - base_choice["monthly_cost_usd"])
        if base_choice
        else None,
        delta_color="inverse",
    )
    m[4].metric("$/1M tokens", money(choice["cost_per_mtok"], 3))
    tpot_label = "P99 TPOT" if choice.get("basis") == "P99" else "mean TPOT"
    left.caption(
        f"Per replica {choice['tok_s_per_replica']:,.0f} tok/s at {tpot_label} "
        f"{choice['tpot_ms']:.1f} ms. Without speculation: "
        + (
            f"{base_choice['replicas']} replica(s) at batch {base_choice['batch_size']}, "
            f"{money(base_choice['monthly_cost_usd'])} a month."
            if base_choice
            else "no batch meets the SLO."
        )
        + f" {widgets.acceptance_basis(scenario)}"
    )
    if result.layouts is not None:
        left.caption(_layout_caption(result.layouts))
    uncertain = _with_error(choice, grid, scenario, capacity) if capacity else ""
    if uncertain:
        left.caption(uncertain)
with right:
    widgets.checklist_panel(row, horizontal=True, per_row=3)

# ---------------------------------------------------------------------------- launch
if choice is not None:
    st.subheader("Launch command")
    max_num_seqs = int(choice["batch_size"])
    full_ranges = schedule_ranges(result.best)
    ranges = launch.launch_schedule(full_ranges, max_num_seqs, int(choice["k"]))
    k_launch = max((k for _, _, k in ranges), default=0) if scenario.speculative else 0
    _k0_note(scenario, full_ranges, max_num_seqs, int(choice["k"]), mem)
    common = {
        "target": models[scenario.target],
        "method": scenario.method,
        "num_gpus": scenario.num_gpus,
        "gpu_memory_utilization": util,
        "max_model_len": max_model_len,
        "max_num_seqs": max_num_seqs,
        "draft": models.get(scenario.draft) if scenario.method == "draft_model" else None,
        "head_repo": head_repo,
        "kv_dtype": scenario.kv_dtype,
        "layout": _chosen_layout(result.layouts),
        "nodes": get_nodes(scenario.gpu, scenario.num_gpus),
    }
    kv_cap = kv_tokens_cap(choice, scenario.speculative)
    commands = {
        engine: launch.engine_command(
            engine,
            **common,
            k=k_launch if engine == "vllm" else int(choice["k"]),
            weight_dtype=scenario.weight_dtype,
            ranges=ranges,
            kv_cache_tokens=kv_cap,
        )
        for engine in ENGINE_ORDER
    }
    chosen = scenario.engine if scenario.engine in commands else "vllm"
    vllm_sched = launch.vllm_schedule(ranges) if k_launch else []
    trt_sched = launch.trtllm_draft_len_schedule(ranges) if k_launch else {}
    st.markdown(f"**{ENGINE_LABELS[scenario.engine]}** ({_k_flags(chosen, choice, k_launch)})")
    st.code(commands[chosen], language="bash", wrap_lines=True)
    if k_launch:
        s1, s2 = st.columns(2)
        s1.markdown("vLLM `num_speculative_tokens_per_batch_size`")
        s1.code(json.dumps(vllm_sched), language="json", wrap_lines=True)
        s2.markdown("TensorRT-LLM `draft_len_schedule`")
        s2.code(
            json.dumps({str(k): v for k, v in trt_sched.items()}), language="json", wrap_lines=True
        )
    with st.expander("The same plan on the other engines"):
        for engine in ENGINE_ORDER:
            if engine != chosen:
                st.markdown(f"**{ENGINE_LABELS[engine]}** ({_k_flags(engine, choice, k_launch)})")
                st.code(commands[engine], language="bash", wrap_lines=True)
    if scenario.speculative:
        with st.expander("Compare with your engine's own tuning (vLLM `tune_speculative_k`)"):
            st.caption(
                "SpecPlan's predicted output tokens/s at every batch and K, written through "
                "the rules and into the JSON of `vllm bench sweep tune_speculative_k` (K "
                "within 1% of the best ties to the smaller; each batch's K holds until the "
                "next): diff it against the file your own sweep gives."
            )
            tuned = k_schedule.tune_document(result.grid, global_k=max(k_launch, 1))
            st.code(json.dumps(tuned, indent=2), language="json", wrap_lines=True)
    text = launch_config_text(
        title=f"{scenario.target} on {scenario.num_gpus} x {scenario.gpu}, "
        f"{scenario.method}, max_num_seqs {max_num_seqs}, {choice['replicas']} replicas, "
        f"engine {scenario.engine}",
        engine=scenario.engine,
        command=commands[chosen],
        vllm_schedule=vllm_sched if chosen == "vllm" else None,
        trtllm_schedule=trt_sched if chosen == "trtllm" else None,
    )
    st.session_state["sizer_launch_config"] = text
    st.download_button(
        "Download launch config",
        text,
        file_name="specplan-launch.txt",
        mime="text/plain",
        on_click="ignore",
        icon=":material/download:",
        key="sizer_download_launch",
    )
