"""The result table: one row per confirmed candidate, its Pareto fronts and launch command.

`tp` is the replica's GPUs, `layout` how they are split ('TP8', 'TP1 DP8 EP8':
`simulator.planning.layouts`), `nodes` the hosts one replica spans. Units in the names:
rates in requests/s per replica, times in ms, costs in USD per million
output tokens at the spec's peak demand (`rate_max`: the whole replicas it needs, each
busy only as the demand makes it; `cost_per_mtok_at_max_rate_usd` is one replica's at its
max rate at SLO, a bound the demand reaches only when it fills whole replicas), hourly
cost in USD for the replicas the peak demand needs. `tok_s_per_user` is 1000 / P50
TPOT; `concurrency_at_max_rate` the requests in flight by Little's law, rate x (P50 TTFT +
(mean output - 1) x P50 TPOT) / 1000; `speedup` the max rate with speculation over the
same deployment's without.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from simulator.inputs.catalog import default_models
from simulator.inputs.scenarios import ACCEPTANCE_COLUMNS
from simulator.model.defaults import DEFAULTS
from simulator.model.predict import predict
from simulator.planning import launch, layouts
from simulator.search.confirm import ArmResult
from simulator.search.screen import Screened
from simulator.search.spec import SearchSpec
from simulator.serving.engine import arm_scenario

COLUMNS = (
    "id",
    "target",
    "gpu",
    "tp",
    "layout",
    "nodes",
    "engine",
    "method",
    "draft",
    "acceptance",
    "k",
    "k_schedule",
    "max_num_seqs",
    "weight_dtype",
    "kv_dtype",
    "max_rate_rps",
    "cost_per_mtok_usd",
    "cost_per_mtok_at_max_rate_usd",
    "ttft_p50_ms",
    "ttft_p99_ms",
    "tpot_p50_ms",
    "tpot_p99_ms",
    "tok_s_per_gpu",
    "tok_s_per_user",
    "concurrency_at_max_rate",
    "replicas",
    "gpus",
    "hourly_usd",
    "baseline_max_rate_rps",
    "baseline_cost_per_mtok_usd",
    "speedup",
    "on_cost_front",
    "on_throughput_front",
    "optimum",
    "status",
    "launch_command",
)


def row(spec: SearchSpec, s: Screened, arm: ArmResult, base: ArmResult) -> dict:
    """The table row of one confirmed candidate (fronts and optimum filled by `finish`)."""
    c = s.candidate
    r = c.row
    tp = int(r["num_gpus"])
    out_mean = spec.traffic.output.mean
    rate = arm.max_rate_rps
    hourly_replica = float(r["gpu_hourly_usd"]) * tp
    sm = arm.summary
    feasible = rate > 0 and arm.status == "ok"
    replicas = math.ceil(spec.traffic.rate_max / rate) if feasible else np.nan
    ranges = s.spec.ranges
    return {
        "id": c.id,
        "target": r["target"],
        "gpu": r["gpu"],
        "tp": tp,
        "layout": c.layout.describe(),
        "nodes": layouts.get_nodes(r["gpu"], tp),
        "engine": c.engine,
        "method": r["method"],
        "draft": r.get("draft", "") or "",
        "acceptance": _acceptance(r),
        "k": "per batch" if c.per_batch and c.speculative else str(int(r.get("k") or 0)),
        "k_schedule": ";".join(f"{lo}-{hi}:{k}" for lo, hi, k in ranges) if ranges else "",
        "max_num_seqs": c.max_num_seqs,
        "weight_dtype": r.get("weight_dtype") or "default",
        "kv_dtype": r["kv_dtype"],
        "max_rate_rps": rate,
        "cost_per_mtok_usd": _cost_at_demand(hourly_replica, rate, spec.traffic.rate_max, out_mean),
        "cost_per_mtok_at_max_rate_usd": _cost(hourly_replica, rate, out_mean),
        "ttft_p50_ms": sm.get("ttft_p50_ms", np.nan) if feasible else np.nan,
        "ttft_p99_ms": sm.get("ttft_p99_ms", np.nan) if feasible else np.nan,
        "tpot_p50_ms": sm.get("tpot_p50_ms", np.nan) if feasible else np.nan,
        "tpot_p99_ms": sm.get("tpot_p99_ms", np.nan) if feasible else np.nan,
        "tok_s_per_gpu": rate * out_mean / tp if feasible else np.nan,
        "tok_s_per_user": 1e3 / sm["tpot_p50_ms"] if feasible and sm.get("tpot_p50_ms") else np.nan,
        "concurrency_at_max_rate": (
            rate * (sm["ttft_p50_ms"] + (out_mean - 1) * sm["tpot_p50_ms"]) / 1e3
            if feasible
            else np.nan
        ),
        "replicas": replicas,
        "gpus": replicas * tp if feasible else np.nan,
        "hourly_usd": replicas * hourly_replica if feasible else np.nan,
        "baseline_max_rate_rps": base.max_rate_rps,
        "baseline_cost_per_mtok_usd": _cost_at_demand(
            hourly_replica, base.max_rate_rps, spec.traffic.rate_max, out_mean
        ),
        "speedup": rate / base.max_rate_rps if base.max_rate_rps > 0 else np.nan,
        "on_cost_front": False,
        "on_throughput_front": False,
        "optimum": False,
        "status": arm.status if arm.status != "ok" else ("ok" if feasible else "misses the SLO"),
        "launch_command": launch_command(c, ranges, spec),
    }


def _acceptance(r: dict) -> str:
    """The candidate's acceptance as `column=value` ('' without speculation)."""
    for column in ACCEPTANCE_COLUMNS:
        if r.get(column) not in (None, ""):
            return f"{column}={r[column]}"
    return ""


def _cost(hourly: float, rate: float, out_mean: float) -> float:
    """USD per 1M output tokens of one replica at `hourly` USD serving `rate` requests/s."""
    return hourly * 1e6 / (rate * out_mean * 3600) if rate > 0 else np.inf


def _cost_at_demand(hourly: float, rate: float, demand: float, out_mean: float) -> float:
    """USD per 1M output tokens serving `demand` requests/s on the whole replicas of `rate`
    requests/s each that it needs (never below `_cost`: a part-filled replica is paid in
    full)."""
    if not rate > 0:
        return np.inf
    return math.ceil(demand / rate) * hourly * 1e6 / (demand * out_mean * 3600)


def launch_command(c, ranges, spec: SearchSpec) -> str:
    """The engine's launch command for this candidate (`simulator.planning.launch`)."""
    r = c.row
    models = default_models()
    target = models[r["target"]]
    draft = models.get(r.get("draft") or "")
    ranges = tuple(ranges or ())
    k = max((x[2] for x in ranges), default=0) if ranges else int(r.get("k") or 0)
    # The Sizer's --max-model-len for fixed lengths; a length distribution has requests up
    # to the window, which the simulation served, so the command admits them too.
    window = int(target.max_position_embeddings or 10**9)
    request = int(spec.traffic.prompt.mean + spec.traffic.output.mean)
    max_len = max(request, min(launch.DEFAULT_MAX_MODEL_LEN, window))
    if spec.traffic.prompt.kind != "fixed" or spec.traffic.output.kind != "fixed":
        max_len = max(request, window if window < 10**9 else max_len)
    kw = dict(
        target=target,
        method=r["method"],
        k=k,
        num_gpus=int(r["num_gpus"]),
        gpu_memory_utilization=0.9,
        max_model_len=max_len,
        max_num_seqs=c.max_num_seqs,
        draft=draft,
        kv_dtype=r["kv_dtype"],
    )
    full = dict(
        kw,
        weight_dtype=r.get("weight_dtype") or "bf16",
        ranges=list(ranges) or None,
        layout=c.layout,
        nodes=layouts.get_nodes(r["gpu"], int(r["num_gpus"])),
    )
    if c.engine == "trtllm":
        full["kv_cache_tokens"] = kv_cache_tokens(c, k)
    return launch.engine_command(c.engine, **full)


def kv_cache_tokens(c, k: int) -> int | None:
    """The KV capacity in tokens of the candidate's replica at K = `k` (0: its baseline),
    as its arms were simulated with (`simulator.serving.engine.step_model`); None where
    nothing fits."""
    speculative = k > 0 and c.speculative
    scenario = arm_scenario(c.row, speculative)
    if speculative:
        scenario["k"] = k
    defaults = dataclasses.replace(DEFAULTS, max_num_seqs=c.max_num_seqs)
    pred = predict(pd.DataFrame([scenario]), defaults=defaults)
    tokens = float(
        pred["kv_capacity_tokens_spec" if speculative else "kv_capacity_tokens_baseline"].iloc[0]
    )
    return int(tokens) if np.isfinite(tokens) and tokens > 0 else None


def pareto(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Mask of the points no other point dominates, both axes minimised (NaN never on it)."""
    ok = np.isfinite(x) & np.isfinite(y)
    out = np.zeros(len(x), dtype=bool)
    idx = np.flatnonzero(ok)
    for i in idx:
        better = (x[idx] <= x[i]) & (y[idx] <= y[i]) & ((x[idx] < x[i]) | (y[idx] < y[i]))
        out[i] = not better.any()
    return out


def finish(rows: list[dict]) -> pd.DataFrame:
    """The table in cost order (ties by P99 TPOT), with both fronts and the optimum marked."""
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    if not len(df):
        return df
    # At demand, configurations buying the same replicas cost the same: the faster wins.
    df = df.sort_values(["cost_per_mtok_usd", "tpot_p99_ms", "id"], kind="stable")
    df = df.reset_index(drop=True)
    feasible = (df["max_rate_rps"] > 0).to_numpy() & (df["status"] == "ok").to_numpy()
    cost = np.where(feasible, df["cost_per_mtok_usd"], np.nan)
    df["on_cost_front"] = pareto(cost, df["tpot_p99_ms"].to_numpy(dtype=float))
    df["on_throughput_front"] = pareto(
        -df["tok_s_per_gpu"].to_numpy(dtype=float), -df["tok_s_per_user"].to_numpy(dtype=float)
    )
    df["optimum"] = False
    if feasible.any():
        df.loc[int(np.flatnonzero(feasible)[0]), "optimum"] = True
    return df
