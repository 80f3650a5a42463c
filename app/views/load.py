"""Load & SLO: P50 and P99 TPOT and TTFT against the request rate (or concurrency), with
and without speculation, the SLO lines, goodput, and the load beyond which speculation
hurts the tail. Every point is a request-level simulation (`simulator.serving`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from app import figures_load, sim, widgets
from simulator.errors import InputError
from simulator.serving import (
    LENGTH_KINDS,
    Lengths,
    Load,
    latency_summary,
    price_arms,
    run_arms,
    summarise_arms,
)

LOAD_KINDS = ("request rate (open loop)", "concurrency (closed loop)")
DEFAULT_REQUESTS = 300
MAX_POINTS = 12


@st.cache_data(show_spinner=False, max_entries=32)
def _arm_models(scenario: tuple, p_mean: float, o_mean: float, cal: str):
    """Each arm's step model: the same for every load point of a scenario."""
    calibration = sim.current_calibration().calibration if cal else None
    return price_arms(dict(scenario), p_mean, o_mean, calibration=calibration)


@st.cache_resource(show_spinner=False, max_entries=256)
def _runs(scenario: tuple, load: tuple, lengths: tuple, spread: float, cal: str):
    """One load point's runs, both arms; cached on every input the simulation reads (the
    calibration by its key), not on the SLOs, which only the summary reads. A resource
    cache: the runs are shared, never copied (nothing changes them), so a new SLO
    re-summarises them without unpickling each run's tables."""
    rate, concurrency, requests, seed = load
    (p_kind, p_mean, p_spread), (o_kind, o_mean, o_spread) = lengths
    return run_arms(
        dict(scenario),
        Load(requests=requests, rate=rate, concurrency=concurrency, seed=seed),
        Lengths(p_mean, p_kind, p_spread),
        Lengths(o_mean, o_kind, o_spread),
        acceptance_spread=spread,
        arm_models=_arm_models(scenario, p_mean, o_mean, cal),
    )


@st.cache_data(show_spinner=False, max_entries=512)
def _latencies(scenario: tuple, load: tuple, lengths: tuple, spread: float, cal: str):
    """Each arm's `latency_summary` at one load point: the percentiles, which no SLO
    changes."""
    return [latency_summary(run) for _, _, run in _runs(scenario, load, lengths, spread, cal)]


@st.cache_data(show_spinner=False, max_entries=512)
def _point(scenario: tuple, load: tuple, lengths: tuple, spread: float, slos: tuple, cal: str):
    """One load point, both arms, summarised against the SLOs; cached, so a change to an
    input no simulation reads (requests per day) costs no summary either, and a new SLO
    only counts the requests that meet it."""
    rate, concurrency, requests, seed = load
    return summarise_arms(
        _runs(scenario, load, lengths, spread, cal),
        Load(requests=requests, rate=rate, concurrency=concurrency, seed=seed),
        slo_ttft_ms=slos[0],
        slo_tpot_ms=slos[1],
        latencies=_latencies(scenario, load, lengths, spread, cal),
    )


st.title("Load & SLO")
st.caption(
    "Tails, not means: each point runs a few hundred requests through a continuous-batching "
    "engine (vLLM's scheduling, chunked prefill, preemption), priced step by step by the "
    "model, with each request's acceptance drawn around the scenario's. P99 is what an SLO "
    "is written on."
)
scenario = widgets.scenario_inputs()
c = st.columns(4)
kind = c[0].radio("Load", LOAD_KINDS, key="load_kind", **widgets.BIND)
if kind == LOAD_KINDS[0]:
    lo, hi = c[1].slider("Request rate (requests/s)", 0.1, 64.0, (0.5, 8.0), key="rate_range")
else:
    lo, hi = c[1].slider("Concurrency", 1, 512, (1, 64), key="concurrency_range")
points = int(c[2].number_input("Load points", 2, MAX_POINTS, 6, key="load_points"))
requests = int(
    c[3].number_input("Requests per point", 50, 5000, DEFAULT_REQUESTS, 50, key="load_requests")
)
c = st.columns(4)
slo_ttft = float(c[0].number_input("TTFT SLO, P99 (ms)", 1.0, 600_000.0, 2000.0, key="slo_ttft"))
slo_tpot = float(c[1].number_input("TPOT SLO, P99 (ms)", 0.1, 10_000.0, 50.0, key="slo_tpot"))
length_kind = c[2].selectbox("Lengths", LENGTH_KINDS, index=2, key="length_kind")
spread = float(
    c[3].number_input(
        "Per-request acceptance spread (s.d.)",
        0.0,
        0.5,
        0.1,
        0.05,
        key="acceptance_spread",
        help="Standard deviation of each request's first-position acceptance: code and chat "
        "requests accept differently. 0 makes every request alike.",
    )
)

if kind == LOAD_KINDS[0]:
    loads = [(float(x), None) for x in np.round(np.linspace(lo, hi, points), 3)]
else:
    loads = [(None, int(x)) for x in sorted(set(np.linspace(lo, hi, points).round().astype(int)))]
sigma = 0.5 if length_kind == "lognormal" else 0.0
lengths = tuple(
    (length_kind, float(mean), sigma if length_kind != "uniform" else 0.5 * mean)
    for mean in (scenario.prompt_len, scenario.output_len)
)
k = int(
    st.number_input(
        "K (speculative tokens per step)",
        1,
        16,
        3,
        key="load_k",
        disabled=not scenario.speculative,
        help="One K for every load; the ROI page and the Sizer find the best K per batch.",
    )
)
base = scenario.row(k, 1)
base.pop("batch_size", None)
key = tuple(sorted((k, str(v)) for k, v in base.items()))
cal = sim.current_calibration().key

frames = []
progress = st.progress(0.0, text="Simulating...")
try:
    for i, (rate, concurrency) in enumerate(loads):
        frames.append(
            _point(
                key, (rate, concurrency, requests, 0), lengths, spread, (slo_ttft, slo_tpot), cal
            )
        )
        progress.progress((i + 1) / len(loads), text=f"Simulated {i + 1} of {len(loads)} loads")
except InputError as exc:
    progress.empty()
    widgets.show_error(exc, "Scenario")
    st.stop()
progress.empty()
table = pd.concat(frames, ignore_index=True)

cross = figures_load.tail_crossover(table)
if not scenario.speculative:
    st.info("Method 'none' is the baseline: choose a method in the sidebar to compare.")
elif cross is None:
    st.success("Speculation keeps the P99 TPOT below the baseline's over the whole range.")
else:
    unit = "requests/s" if kind == LOAD_KINDS[0] else "requests in flight"
    st.warning(f"Beyond {cross:g} {unit}, speculation makes the P99 TPOT worse than without it.")
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
with f2:
    st.markdown("**Every point**")
    st.dataframe(table.round(3), hide_index=True, key="load_table")
    st.download_button(
        "Download load & SLO table (CSV)",
        table.to_csv(index=False).encode(),
        file_name="specplan-load-slo.csv",
        mime="text/csv",
        key="load_download",
    )
