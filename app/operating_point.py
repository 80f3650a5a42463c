"""The Sizer's inputs and its operating point for a scenario: found from the scenario and
the Sizer's inputs (their session value, else the link's, else the defaults here), so that
Reports prefills the same row whether or not the Sizer page ran in this session."""

from __future__ import annotations

import streamlit as st

from app import sim
from simulator.model.economics import get_demand_tok_s

SLO_KINDS = ("TPOT (ms)", "tokens/s per user")
DEFAULT_UTIL = 0.9  # vLLM's --gpu-memory-utilization default
DEFAULT_MAX_MODEL_LEN = 8192
DEFAULT_SLO_TPOT_MS = 20.0  # 50 tokens/s per user: a chat that streams faster than it is read
DEFAULT_SLO_TOK_S = 50.0
DEFAULT_K_MAX = 8


def carried(key: str, default):
    """A planning page's input read on another page: its session value, else the link's
    query parameter, else `default`. A session value other than the default is written
    into this page's link too, so that the address opened afresh reads the same."""
    if key in st.session_state:
        value = st.session_state[key]
        if str(value) != str(default) and st.query_params.get(key) != str(value):
            st.query_params[key] = str(value)
        return value
    return st.query_params.get(key, default)


def sizer_slo() -> dict[str, float]:
    """The Sizer's latency SLO as `simulator.planning.sizer.size` takes it."""
    if str(carried("slo_kind", SLO_KINDS[0])) == SLO_KINDS[1]:
        return {"slo_tok_s_per_user": float(carried("slo_tok_s", DEFAULT_SLO_TOK_S))}
    return {"slo_tpot_ms": float(carried("slo_tpot_ms", DEFAULT_SLO_TPOT_MS))}


def operating_point(scenario) -> dict | None:
    """The Sizer's choice (K, batch, replicas, cost) for `scenario`
    (`widgets.Scenario`), or None where no configuration serves it. Raises InputError."""
    util = float(carried("gpu_memory_utilization", DEFAULT_UTIL))
    k_max = int(float(carried("k_max", DEFAULT_K_MAX))) if scenario.speculative else 0
    demand = float(get_demand_tok_s(scenario.requests_per_day, scenario.output_len))
    base = {**scenario.base(), "gpu_memory_utilization": util}
    return sim.run_size(base, k_max=k_max, demand_tok_s=demand, **sizer_slo()).choice
