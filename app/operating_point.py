"""The Sizer's inputs and its operating point for a scenario: found from the scenario and
the Sizer's inputs (their session value, else the link's, else the defaults here), so that
Reports prefills the same row whether or not the Sizer page ran in this session."""

from __future__ import annotations

import numpy as np
import streamlit as st

from app import sim
from simulator.model.economics import get_demand_tok_s
from simulator.planning import launch

SLO_KINDS = ("TPOT (ms)", "tokens/s per user")
DEFAULT_UTIL = 0.9  # vLLM's --gpu-memory-utilization default
DEFAULT_MAX_MODEL_LEN = launch.DEFAULT_MAX_MODEL_LEN
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


def row_command(r, models) -> str:
    """The launch command of one predicted row (`predict`'s output, a Reports or ROI row)
    on its engine, with the Sizer's --max-model-len (its input, else its default) within
    the target's window and never below a request's own length: the same command on every
    page. TensorRT-LLM's KV fraction is of the memory left after the weights: the row's KV
    pool caps it (`launch.trtllm_command`); the other engines ignore it."""
    window = models[r["target"]].max_position_embeddings or 10**9
    sizer_len = int(carried("max_model_len", DEFAULT_MAX_MODEL_LEN))
    util = r.get("gpu_memory_utilization")
    return launch.engine_command(
        str(r.get("engine") or "vllm"),
        target=models[r["target"]],
        method=r["method"],
        k=int(r["k"]),
        num_gpus=int(r["num_gpus"]),
        gpu_memory_utilization=float(util)
        if util is not None and np.isfinite(float(util))
        else DEFAULT_UTIL,
        max_model_len=max(int(r["prompt_len"] + r["output_len"]), min(sizer_len, window)),
        max_num_seqs=int(r["batch_size"]),
        draft=models.get(r["draft"]) if r["method"] == "draft_model" else None,
        kv_dtype=str(r["kv_dtype"]),
        weight_dtype=str(r["weight_dtype"]),
        kv_cache_tokens=kv_tokens_cap(r, r["method"] != "none"),
    )


def kv_tokens_cap(r, speculative: bool) -> int | None:
    """The KV pool in tokens a row (a prediction or the Sizer's choice) has with or without
    speculation, for TensorRT-LLM's `max_tokens`; None where it is unknown or empty."""
    tokens = float(
        r.get("kv_capacity_tokens_spec" if speculative else "kv_capacity_tokens_baseline", np.nan)
    )
    return int(tokens) if np.isfinite(tokens) and tokens > 0 else None
