"""Load & SLO: P50 and P99 TPOT and TTFT against the request rate (or concurrency), with
and without speculation, the SLO lines, goodput, and the load beyond which speculation
hurts the tail. Every point is a request-level simulation (`simulator.serving.engine`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from app import figures_load, sim, widgets
from simulator.errors import InputError
from simulator.serving import defaults as serve_defaults
from simulator.serving.engine import (
    LENGTH_KINDS,
    Lengths,
    Load,
    arm_key,
    arm_scenario,
    arms,
    latency_summary,
    max_acceptance_spread,
    run_arms,
    step_model,
    summarise_arms,
)
from simulator.serving.spread import default_acceptance_spread

LOAD_KINDS = ("request rate (open loop)", "concurrency (closed loop)")
MAX_POINTS = 12


# The cached functions below take the scenario twice: as text, the key Streamlit hashes
# (0.008 ms, where the tuple of its 16 pairs took 0.29 ms, some 40 times a rerun), and as
# a dict, `_`-named so that Streamlit does not hash it.


@st.cache_data(show_spinner=False, max_entries=64)
def _arm_model(arm_key: str, _arm: dict, speculative: bool, p_mean: float, o_mean: float, cal: str):
    """One arm's step model, the same for every load point; `_arm` is the scenario as that
    arm reads it (`arm_scenario`), `arm_key` its text, and `cal` the calibration's key
    and, for an own model, its content's (`sim.models_for`)."""
    calibration = sim.current_calibration().calibration if cal.split("|")[0] else None
    sized = {**_arm, "prompt_len": p_mean, "output_len": o_mean}
    _, models = sim.models_for([_arm.get("target", ""), _arm.get("draft", "")])
    return step_model(sized, speculative=speculative, calibration=calibration, models=models)


@st.cache_resource(show_spinner=False, max_entries=512)
def _arm_run(
    name: str,
    speculative: bool,
    arm_key: str,
    _arm: dict,
    load: tuple,
    lengths: tuple,
    spread: float,
    cal: str,
) -> tuple:
    """One arm's run at one load point and its `latency_summary` (the percentiles, which
    no SLO changes): ((arm, K, run), latencies). Cached on what that arm's simulation
    reads: the baseline's on the scenario without what only speculation reads (and no
    acceptance spread), so a new K, acceptance or spread simulates the speculative arm
    alone. A resource cache: runs are shared, never copied (nothing changes them), so a
    new SLO re-summarises them without unpickling each run's tables."""
    rate, concurrency, requests, seed = load
    (p_kind, p_mean, p_spread), (o_kind, o_mean, o_spread) = lengths
    arm = run_arms(
        _arm,
        Load(requests=requests, rate=rate, concurrency=concurrency, seed=seed),
        Lengths(p_mean, p_kind, p_spread),
        Lengths(o_mean, o_kind, o_spread),
        acceptance_spread=spread,
        arm_models=[(name, _arm_model(arm_key, _arm, speculative, p_mean, o_mean, cal))],
    )[0]
    return arm, latency_summary(arm[2])


@st.cache_data(show_spinner=False, max_entries=512)
def _point(
    scenario_key: str,
    _scenario: dict,
    load: tuple,
    lengths: tuple,
    spread: float,
    slos: tuple,
    cal: str,
):
    """One load point, both arms, summarised against the SLOs; cached, so a change to an
    input no simulation reads (requests per day) costs no summary either, and a new SLO
    only counts the requests that meet it."""
    runs, latencies = [], []
    for name, speculative in arms(_scenario):
        arm = arm_scenario(_scenario, speculative)
        spread_read = spread if speculative else 0.0
        run, latency = _arm_run(
            name, speculative, arm_key(arm), arm, load, lengths, spread_read, cal
        )
        runs.append(run)
        latencies.append(latency)
    rate, concurrency, requests, seed = load
    return summarise_arms(
        runs,
        Load(requests=requests, rate=rate, concurrency=concurrency, seed=seed),
        slo_ttft_ms=slos[0],
        slo_tpot_ms=slos[1],
        latencies=latencies,
    )


st.title("Load & SLO")
st.caption(
    "Tails, not means: each point runs 2,000 requests (by default) through a continuous-batching "
    "engine (vLLM's scheduling, chunked prefill, preemption), priced step by step by the "
    "model, with each request's acceptance drawn around the scenario's. P99 is what an SLO "
    "is written on."
)


def _first_position_rate(scenario) -> float:
    """The scenario's first-position acceptance: its first per-position rate where it
    plans by position, else its α (the mean the per-request spread is drawn around)."""
    positions = str(scenario.acceptance.get("acceptance_per_position", "") or "")
    try:
        return float(positions.split(";")[0]) if positions.strip() else float(scenario.alpha)
    except ValueError:
        return float(scenario.alpha)


def _spread_cap_text(scenario, spread: float) -> str:
    """The spread in force: the one entered, or the cap at this acceptance where the
    entered one is wider (`max_acceptance_spread`)."""
    p1 = _first_position_rate(scenario)
    cap = max_acceptance_spread(p1)
    if spread > cap:
        return (
            f"In force: s.d. {cap:.3f}, the cap at first-position acceptance {p1:.3f} "
            f"(the {spread:.2f} entered would pile requests at 0 or 1)."
        )
    return (
        f"In force: s.d. {spread:.3f} (the cap at first-position acceptance {p1:.3f} is {cap:.3f})."
    )


scenario = widgets.scenario_inputs()
c = st.columns(4)
kind = c[0].radio("Load", LOAD_KINDS, key="load_kind", **widgets.BIND)
if kind == LOAD_KINDS[0]:
    lo, hi = c[1].slider(
        "Request rate (requests/s)",
        0.1,
        64.0,
        (0.5, 8.0),
        key="rate_range",
        **widgets.BIND,
    )
else:
    lo, hi = c[1].slider("Concurrency", 1, 512, (1, 64), key="concurrency_range", **widgets.BIND)
points = int(c[2].number_input("Load points", 2, MAX_POINTS, 6, key="load_points", **widgets.BIND))
requests = int(
    c[3].number_input(
        "Requests per point",
        50,
        20_000,
        serve_defaults.REQUESTS,
        50,
        key="load_requests",
        **widgets.BIND,
    )
)
c = st.columns(4)
slo_ttft = float(
    c[0].number_input(
        "TTFT SLO, P99 (ms)",
        1.0,
        600_000.0,
        2000.0,
        100.0,
        format="%.0f",  # whole ms: '2000.00' did not fit beside the steppers at 1024 px
        key="slo_ttft",
        **widgets.BIND,
    )
)
slo_tpot = float(
    c[1].number_input("TPOT SLO, P99 (ms)", 0.1, 10_000.0, 50.0, key="slo_tpot", **widgets.BIND)
)
length_kind = c[2].selectbox(
    "Lengths",
    LENGTH_KINDS,
    index=LENGTH_KINDS.index(serve_defaults.LENGTH_KIND),
    key="length_kind",
    **widgets.BIND,
)
spread = float(
    c[3].number_input(
        "Per-request acceptance spread (s.d.)",
        0.0,
        0.5,
        default_acceptance_spread(scenario.method),
        0.01,
        key="acceptance_spread",
        **widgets.BIND,
        help="Standard deviation of each request's first-position acceptance: code and chat "
        "requests accept differently. 0 makes every request alike. The default is the "
        "method's published spread between workloads (data/acceptance_spread.csv), a floor: "
        "no public per-request acceptance trace was found. Capped where a wider spread "
        "would pile requests at 0 or 1 (the mean's distance to them).",
    )
)
if scenario.speculative:
    c[3].caption(_spread_cap_text(scenario, spread))

if kind == LOAD_KINDS[0]:
    loads = [(float(x), None) for x in np.round(np.linspace(lo, hi, points), 3)]
else:
    loads = [(None, int(x)) for x in sorted(set(np.linspace(lo, hi, points).round().astype(int)))]
lengths = tuple(
    (length_kind, got.mean, got.spread)
    for got in (
        serve_defaults.default_lengths(mean, length_kind)
        for mean in (scenario.prompt_len, scenario.output_len)
    )
)
k = int(
    st.number_input(
        "K (speculative tokens per step)",
        1,
        16,
        3,
        key="load_k",
        **widgets.BIND,
        disabled=not scenario.speculative,
        help="One K for every load; the ROI page and the Sizer find the best K per batch.",
    )
)
base = scenario.row(k, 1)
base.pop("batch_size", None)
key = tuple(sorted((k, str(v)) for k, v in base.items()))
cal = sim.current_calibration().key
models_key, _ = sim.models_for([scenario.target, scenario.draft])
if models_key:
    # An own model: the cached runs are keyed on its content as well as its id.
    cal = f"{cal}|{models_key}"


def _simulate(key: tuple) -> pd.DataFrame:
    """Every load point of the scenario `key` (its sorted items), with a progress bar."""
    frames = []
    progress = st.progress(0.0, text="Simulating...")
    try:
        for i, (rate, concurrency) in enumerate(loads):
            frames.append(
                _point(
                    repr(key),
                    dict(key),
                    (rate, concurrency, requests, 0),
                    lengths,
                    spread,
                    (slo_ttft, slo_tpot),
                    cal,
                )
            )
            progress.progress((i + 1) / len(loads), text=f"Simulated {i + 1} of {len(loads)} loads")
    finally:
        progress.empty()
    return pd.concat(frames, ignore_index=True)


spec_refused = None  # why the speculative arm cannot run, when only it cannot
try:
    table = _simulate(key)
except InputError as exc:
    if not scenario.speculative:
        widgets.show_error(exc, "Scenario")
        st.stop()
    try:
        table = _simulate(tuple(sorted(arm_scenario(dict(key), False).items())))
    except InputError:
        widgets.show_error(exc, "Scenario")
        st.stop()
    spec_refused = exc.bare_message
    st.warning(f"Only the baseline is simulated ({widgets.plain(spec_refused)}).")
refused = table.groupby("arm", sort=False)["refused"].max()
if refused.any():
    arms_text = ", ".join(f"{count} in the {arm} arm" for arm, count in refused.items() if count)
    st.warning(
        f"Some requests are longer (prompt and output) than the context window or the KV "
        f"cache holds: up to {arms_text}, of {requests} per point. They are refused, as "
        "vLLM refuses a request longer than max_model_len, and count against goodput. "
        "Shorter lengths, a model with a longer window or more GPUs avoid it."
    )

unit = "requests/s" if kind == LOAD_KINDS[0] else "requests in flight"
verdict = figures_load.tail_verdict(table, unit)
if not scenario.speculative:
    st.info("Method 'none' is the baseline: choose a method in the sidebar to compare.")
elif spec_refused is not None or verdict is None:
    pass  # said above: there is no speculative arm to compare
elif verdict.kind == "none":
    st.success(verdict.text)
else:
    st.warning(verdict.text)


def _seed_check() -> str:
    """How much a rerun with another seed moves each arm's P99 TPOT at the highest load:
    the confidence of the page's P99s (the heaviest load moves most)."""
    rate, concurrency = loads[-1]
    again = _point(
        repr(key), dict(key), (rate, concurrency, requests, 1), lengths, spread, slos, cal
    )
    first = table[table["arm"].isin(again["arm"])].groupby("arm")["tpot_p99_ms"].last()
    moved = (again.set_index("arm")["tpot_p99_ms"] / first - 1).abs().dropna()
    if moved.empty:
        return ""
    worst = float(moved.max())
    verdict = "steady" if worst < 0.05 else "not steady yet: raise the requests per point"
    return (
        f"A rerun with another seed moves the P99 TPOT at the highest load by "
        f"{worst:.1%} ({verdict}); {requests:,} requests per point, each P99 over all of them."
    )


POINT_COLUMNS = ("arm", "rate", "concurrency", "tpot_p99_ms", "ttft_p99_ms", "goodput_rps")
POINT_NAMES = {
    "rate": "req/s",
    "concurrency": "in flight",
    "tpot_p99_ms": "P99 TPOT ms",
    "ttft_p99_ms": "P99 TTFT ms",
    "goodput_rps": "goodput req/s",
}
slos = (slo_ttft, slo_tpot)
if spec_refused is None:
    st.caption(_seed_check())
f1, f2 = st.columns(2)
f1.plotly_chart(
    figures_load.latency_vs_load(table, "tpot", "TPOT against load", slo_ms=slo_tpot),
    key="load_tpot",
)
f2.plotly_chart(
    figures_load.latency_vs_load(table, "ttft", "TTFT against load", slo_ms=slo_ttft),
    key="load_ttft",
)
f1.plotly_chart(figures_load.goodput_vs_load(table), key="load_goodput")
# The load column this kind of load does not set (rate or concurrency) is all empty:
# shown without it; the download keeps the `serve` command's columns.
every = table.dropna(axis=1, how="all").round(3)
with f2:
    st.markdown("**Every point** (P99s and goodput; all columns below and in the CSV)")
    # A static table wraps its headers to fit half a page at 1024 px; a grid of even these
    # five columns scrolled there, and of every column it was cut off (issue 27, Layout).
    brief = every[[c for c in POINT_COLUMNS if c in every.columns]].rename(columns=POINT_NAMES)
    st.table(brief.style.format(precision=1).hide(axis="index"))
    st.download_button(
        "Download load & SLO table (CSV)",
        table.to_csv(index=False).encode(),
        file_name="specplan-load-slo.csv",
        mime="text/csv",
        key="load_download",
    )
with st.expander("Every point, all columns"):
    st.dataframe(every, hide_index=True, key="load_table")
