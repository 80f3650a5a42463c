"""Stage one: price every candidate with the vectorised model and bound what the
request-level simulation can find for it.

Each distinct arm (a deployment with one K, or K = 0 without speculation) is priced by two
`predict` rows, in one call per `max_num_seqs`:

- the isolated decode step at batch 1 (`decode_only`): its status says whether the arm
  runs at all (the check `serving.step_model` makes), and its step time over K + 1 is a
  floor under every request's TPOT, since every step a decoding request takes costs at
  least the batch-1 step (the step grows with the batch) and emits at most K + 1 tokens;
- the steady state at `max_num_seqs` (`steady`): the most output tokens per second the
  replica sustains, whose rate (over the mean output) is the ceiling the bisection
  (`bisect.max_rate`) searches under, so a confirmed rate never exceeds it.

From these, per candidate: a lower bound on cost per 1M tokens (price at the ceiling),
upper bounds on tokens/s per GPU and per user, and a floor under P99 TPOT. They are bounds,
not estimates, which is what lets `prune` drop a candidate only when it provably cannot be
on a Pareto front. A K-per-batch candidate gets its schedule here: the K (0 to
`SCHEDULE_K_MAX`) the steady-state model gives most tokens/s at each batch size, as the
Sizer picks it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from simulator.inputs.catalog import default_models
from simulator.model.defaults import DEFAULTS
from simulator.model.predict import WINDOW_REASONS, predict, status_reasons
from simulator.planning import layouts, sizer
from simulator.search.candidates import Candidate
from simulator.search.spec import SearchSpec
from simulator.serving import engine as serving

SCHEDULE_K_MAX = 8
"""Deepest K a K-per-batch schedule may pick (the Sizer's default)."""


@dataclass(frozen=True)
class Arm:
    """One arm to confirm: a scenario with a fixed K (0: no speculation) or a K schedule.

    `ceiling_rps`: the highest rate the bisection probes (requests/s per replica);
    `tpot_floor_ms`: no request's TPOT can be below it; `status`: 'ok' or why it cannot run."""

    key: str
    scenario: tuple[tuple[str, object], ...]
    max_num_seqs: int
    ranges: tuple[tuple[int, int, int], ...] | None
    ceiling_rps: float
    tpot_floor_ms: float
    status: str

    @property
    def speculative(self) -> bool:
        return self.ranges is not None or dict(self.scenario)["method"] != "none"


@dataclass(frozen=True)
class Screened:
    """A candidate after stage one: its arms, its bounds and, if dropped, why."""

    candidate: Candidate
    spec: Arm
    """The arm the candidate deploys (for method none, the baseline arm itself)."""
    base: Arm
    """The same deployment without speculation."""
    cost_lb: float
    """USD per 1M output tokens can be no lower (price at the ceiling rate)."""
    tok_s_gpu_ub: float
    tok_s_user_ub: float
    dropped: str = ""


def _defaults(seqs: int):
    return dataclasses.replace(DEFAULTS, max_num_seqs=int(seqs))


def _fixed_arm(row: dict, k: int) -> dict:
    if k == 0:
        return serving.arm_scenario(row, False)
    return {**serving.arm_scenario(row, True), "k": int(k)}


def _schedules(cands: list[Candidate]) -> dict[int, tuple | str]:
    """K-per-batch ranges of each per-batch candidate, by candidate id, or why it has none
    (its speculation cannot run, or pays at no batch size)."""
    out = {}
    for c in cands:
        if not (c.per_batch and c.speculative):
            continue
        batches = sorted(
            {b for b in sizer.DEFAULT_BATCHES if b <= c.max_num_seqs} | {c.max_num_seqs}
        )
        base = {**c.row, "k": 3}
        grid = sizer.price_grid(
            base, k_max=SCHEDULE_K_MAX, batches=batches, defaults=_defaults(c.max_num_seqs)
        )
        best = sizer.size(base, k_max=SCHEDULE_K_MAX, batches=batches, grid=grid).best
        best = best.assign(best_k=best["best_k"].fillna(0).astype(int))
        spec_rows = grid[grid["k"] > 0]
        ok = spec_rows["status"] == "ok"
        if not ok.any():
            out[c.id] = str(spec_rows["status"].iloc[0])
        elif not (best["best_k"] > 0).any():
            out[c.id] = "K per batch drafts nothing: speculation pays at no batch size"
        else:
            out[c.id] = tuple(sizer.schedule_ranges(best))
    return out


def _price_arms(arms: dict[str, tuple[dict, int]], output_mean: float) -> dict[str, dict]:
    """Status, TPOT floor and ceiling rate of each fixed-K arm: key -> figures."""
    by_seqs: dict[int, list[str]] = {}
    for key, (_, seqs) in arms.items():
        by_seqs.setdefault(seqs, []).append(key)
    out = {}
    for seqs, keys in by_seqs.items():
        rows = []
        for key in keys:
            scen = arms[key][0]
            rows.append({**scen, "serving": "decode_only", "batch_size": 1})
            rows.append({**scen, "serving": "steady", "batch_size": seqs})
        p = predict(pd.DataFrame(rows), defaults=_defaults(seqs), break_even=False)
        one, steady = p.iloc[0::2], p.iloc[1::2]
        for i, key in enumerate(keys):
            k = int(arms[key][0].get("k") or 0)
            status = str(one["status"].iloc[i])
            window = [r for r in status_reasons(steady["status"].iloc[i]) if r in WINDOW_REASONS]
            if status == "ok" and window:
                status = "cannot run: " + "; ".join(window)
            step1 = float(one["spec_step_ms"].iloc[i])
            tok_s = float(steady["spec_tok_s"].iloc[i])
            if not (np.isfinite(tok_s) and tok_s > 0):
                tok_s = seqs * (k + 1) * 1e3 / step1
            out[key] = {
                "latency_source": str(one["latency_source"].iloc[i]),
                "status": status,
                "tpot_floor_ms": step1 / (k + 1),
                "ceiling_rps": tok_s / output_mean,
            }
    return out


def screen(spec: SearchSpec, cands: list[Candidate]) -> list[Screened]:
    """Stage one over every candidate (see the module docstring); order kept."""
    schedules = _schedules(cands)
    fixed: dict[str, tuple[dict, int]] = {}

    def key_of(row: dict, k: int, seqs: int) -> str:
        arm = _fixed_arm(row, k)
        key = f"{serving.arm_key(arm)}|seqs={seqs}"
        fixed.setdefault(key, (arm, seqs))
        return key

    plan = []
    for c in cands:
        row, seqs = c.row, c.max_num_seqs
        base_key = key_of(row, 0, seqs)
        if isinstance(schedules.get(c.id), str):
            plan.append((c, base_key, [base_key], schedules[c.id]))
        elif c.id in schedules:
            ks = sorted({k for _, _, k in schedules[c.id]})
            plan.append((c, base_key, [key_of(row, k, seqs) for k in ks], schedules[c.id]))
        else:
            plan.append((c, base_key, [key_of(row, int(row["k"]), seqs)], None))
    priced = _price_arms(fixed, spec.traffic.output.mean)
    return [
        _bound(spec, c, base_key, keys, ranges, fixed, priced) for c, base_key, keys, ranges in plan
    ]


def _arm(key: str, fixed, priced, ranges=None, parts=()) -> Arm:
    scen, seqs = fixed[key]
    parts = parts or (key,)
    bad = [priced[p]["status"] for p in parts if priced[p]["status"] != "ok"]
    return Arm(
        key=key if ranges is None else f"{key}|schedule={ranges}",
        scenario=tuple(scen.items()),
        max_num_seqs=seqs,
        ranges=ranges,
        ceiling_rps=max(priced[p]["ceiling_rps"] for p in parts),
        tpot_floor_ms=min(priced[p]["tpot_floor_ms"] for p in parts),
        status=bad[0] if bad else "ok",
    )


def _bound(spec, c: Candidate, base_key, keys, ranges, fixed, priced) -> Screened:
    base = _arm(base_key, fixed, priced)
    why_not = ranges if isinstance(ranges, str) else ""
    if why_not:
        ranges = None
    if ranges is None:
        arm = _arm(keys[0], fixed, priced)
    else:
        scen_key = key_of_schedule(c, fixed)
        arm = _arm(scen_key, fixed, priced, ranges=ranges, parts=tuple(keys))
    if not c.speculative:
        arm = base
    row = c.row
    hourly = float(row["gpu_hourly_usd"]) * int(row["num_gpus"])
    tokens = arm.ceiling_rps * spec.traffic.output.mean
    cost_lb = hourly * 1e6 / (tokens * 3600) if tokens > 0 else math.inf
    dropped = (
        why_not
        or _layout_problem(c, priced[base_key]["latency_source"])
        or _why_dropped(spec, arm, int(row["num_gpus"]))
    )
    return Screened(
        candidate=c,
        spec=arm,
        base=base,
        cost_lb=cost_lb,
        tok_s_gpu_ub=tokens / int(row["num_gpus"]),
        tok_s_user_ub=1e3 / arm.tpot_floor_ms,
        dropped=dropped,
    )


def _layout_problem(c: Candidate, latency_source: str) -> str:
    """Why a candidate's layout is no candidate ('' where it is): the engine or target cannot
    run it, or it is priced on the roofline, which prices every layout as plain TP (so the
    plain-TP candidate beside it already stands for it)."""
    lay = c.layout
    if lay.plain_tp:
        return ""
    why = layouts.problem(lay, default_models()[c.row["target"]], c.engine)
    if why or layouts.priced_by_layout(latency_source):
        return why
    return (
        f"cannot run: layout {lay.describe()} is priced only from the kernel tables "
        f"(aiconfigurator-core's engine), which do not cover this row ({latency_source})"
    )


def _why_dropped(spec: SearchSpec, arm: Arm, tp: int) -> str:
    """Why stage one drops a candidate on its own bounds ('' to keep it)."""
    if arm.status != "ok":
        return arm.status
    if spec.slo.tpot_ms is not None and arm.tpot_floor_ms > spec.slo.tpot_ms:
        return (
            f"misses the TPOT SLO at any rate: no step is faster than "
            f"{arm.tpot_floor_ms:.1f} ms per token"
        )
    if spec.candidates.max_gpus is not None:
        least = math.ceil(spec.traffic.rate_max / arm.ceiling_rps) * tp
        if least > spec.candidates.max_gpus:
            return f"needs at least {least} GPUs for the demand, above max_gpus"
    return ""


def key_of_schedule(c: Candidate, fixed) -> str:
    """The key of a per-batch candidate's scenario (its K left to the schedule)."""
    arm = serving.arm_scenario(c.row, True)
    key = f"{serving.arm_key(arm)}|seqs={c.max_num_seqs}"
    fixed.setdefault(key, (arm, c.max_num_seqs))
    return key
