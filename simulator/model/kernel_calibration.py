"""A measured profile on rows the kernel tables price: what it measured scales the tables'
times, what it did not keeps them.

On such a row the base is the engine's kernel tables (`simulator.kernels.source`). A
profile of the row's GPU, model and weight dtype (one GPU, no tensor parallelism: what a
profile times) changes three factors, each a ratio profile / tables at the same point:

- the target's decode step (query 1), at the row's (batch, context): the ratio at the
  profile's decode points, spread between them by inverse-distance weighting in
  (log2 batch, log2 context) (Shepard, power 2: exact at a measured point, never outside
  the measured ratios), with the row's point first clamped into the profile's range, so
  the ratio at the grid's edge holds beyond it;
- the verify forward (query K+1): where the profile timed forwards of more than one token
  around the row (every corner of its batch x query x context cell, the decode column
  included), the ratio there, trilinear; elsewhere the decode ratio at the row's batch and
  context, which keeps the tables' verify/decode ratio (the speedup hangs on it, and a
  profile of decode steps says nothing about it);
- a separate draft model's forwards: the draft model's decode ratio, when the profile
  timed that model (the in-loop table is not used on these rows).

An EAGLE/EAGLE-3/MTP/Medusa head, prefill riding in a step, the sampler and the engine's
host costs keep the tables' prices. `latency_source` then reads, part by part,
`target:<how> [verify:<how>] [draft:<how> | head:kernels] host:kernels base:<tables>`,
where <how> is `profile` (the profile's ratio at this point), `scaled` (the tables' time
times the profile's decode ratio: the tables' shape) or `kernels` (the tables' time), and
<tables> is the row's kernel label (`kernels:vllm-0.24.0/h200`). A row the profile does not
cover at all keeps that label alone. Units: ms; tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from simulator.kernels import source as kernel_source
from simulator.model.calibration import _Grid, _trilinear

HEAD_METHODS = ("eagle", "eagle3", "mtp", "medusa")
"""Methods whose proposals come from a head inside the target's model runner."""


@dataclass(frozen=True)
class KernelScale:
    """Factors on the tables' times per row (1 where the profile has nothing), and the
    row's `latency_source` where a factor came from the profile ("" elsewhere)."""

    target: np.ndarray
    verify: np.ndarray
    draft: np.ndarray
    labels: np.ndarray


def _shepard(points: np.ndarray, values: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Inverse-distance-weighted values (power 2) at `at` (n, 2) from `points` (m, 2),
    exact at a point; `at` is clamped into the points' bounding box first."""
    at = np.clip(at, points.min(axis=0), points.max(axis=0))
    d2 = ((at[:, None, :] - points[None, :, :]) ** 2).sum(axis=-1)
    hit = d2 < 1e-12
    w = 1.0 / np.where(hit, 1.0, d2)
    out = (w * values).sum(axis=1) / w.sum(axis=1)
    return np.where(hit.any(axis=1), values[np.argmax(hit, axis=1)], out)


def _log_points(b, c) -> np.ndarray:
    return np.stack([np.log2(np.maximum(b, 1.0)), np.log2(np.maximum(c, 1.0))], axis=-1)


def _ratio_grid(grid: _Grid, plan, group: int, model: str) -> np.ndarray:
    """The profile's times over the tables' at each measured point of `grid`, for the
    plan's surfaces `group` (NaN where not measured)."""
    ib, iq, ic = np.nonzero(~np.isnan(grid.ms))
    m = ib.size
    one = replace(plan, n=m, group=np.full(m, group), covered=np.ones(m, dtype=bool))
    tables = kernel_source.forward_ms(one, model, grid.batch[ib], grid.query[iq], grid.context[ic])
    ratio = np.full(grid.ms.shape, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio[ib, iq, ic] = np.where(tables > 0, grid.ms[ib, iq, ic] / tables, np.nan)
    return ratio


def _decode_ratio(grid: _Grid, ratio: np.ndarray, b, c) -> np.ndarray:
    """The decode (query 1) ratio at (b, c), NaN where the profile timed no decode step."""
    q1 = np.flatnonzero(grid.query == 1)
    if not q1.size:
        return np.full(np.shape(b), np.nan)
    ib, ic = np.nonzero(~np.isnan(ratio[:, q1[0], :]))
    if not ib.size:
        return np.full(np.shape(b), np.nan)
    points = _log_points(grid.batch[ib], grid.context[ic])
    return _shepard(points, ratio[ib, q1[0], ic], _log_points(b, c))


@dataclass(frozen=True)
class _Rows:
    """The piece's points, one entry per row of the plan."""

    b_base: np.ndarray
    b_spec: np.ndarray
    query: np.ndarray
    context: np.ndarray
    d_context: np.ndarray


def _scale_target(grid, plan, g, r, at: _Rows, spec, out) -> None:
    ratio = _ratio_grid(grid, plan, g, "target")
    decode = _decode_ratio(grid, ratio, at.b_base[r], at.context[r])
    ok = ~np.isnan(decode)
    out["target"][r] = np.where(ok, decode, 1.0)
    out["how_t"][r] = np.where(ok, "profile", "kernels")
    v_decode = _decode_ratio(grid, ratio, at.b_spec[r], at.context[r])
    v_grid = _Grid(grid.batch, grid.query, grid.context, ratio)
    measured, _ = _trilinear(v_grid, at.b_spec[r], at.query[r], at.context[r])
    measured = np.where(at.query[r] > 1, measured, np.nan)
    verify = np.where(np.isnan(measured), v_decode, measured)
    out["verify"][r] = np.where(np.isnan(verify), 1.0, verify)
    how = np.where(
        ~np.isnan(measured), "profile", np.where(np.isnan(v_decode), "kernels", "scaled")
    )
    out["how_v"][r] = np.where(spec[r], how, "")


def _scale_draft(grid, plan, g, r, at: _Rows, out) -> None:
    ratio = _ratio_grid(grid, plan, g, "draft")
    decode = _decode_ratio(grid, ratio, at.b_spec[r], at.d_context[r])
    ok = ~np.isnan(decode)
    out["draft"][r] = np.where(ok, decode, 1.0)
    out["how_d"][r] = np.where(ok, "profile", "kernels")


def get_kernel_scale(cal, plan, ids: dict, num_gpus, method: str, spec_on, at: _Rows):
    """The `KernelScale` of a plan's rows under the calibration `cal`, or None where the
    profile covers none of them. `ids`: per row the text ids of "gpu", "target", "draft"
    and "weight_dtype"; `spec_on` per row or a bool."""
    n = plan.n
    out = {f: np.ones(n) for f in ("target", "verify", "draft")}
    out |= {f: np.full(n, "", dtype=object) for f in ("how_t", "how_v", "how_d")}
    spec = np.broadcast_to(np.asarray(spec_on, dtype=bool), (n,))
    single = np.broadcast_to(np.asarray(num_gpus), (n,)) == 1
    base = plan.covered & single
    draft_model = method == "draft_model" and plan.draft is not None
    for (gid, mid, dtype), grid in cal.grids.items():
        here = base & (ids["gpu"] == gid) & (ids["weight_dtype"] == dtype)
        for model in ("target", "draft") if draft_model else ("target",):
            rows = here & (ids[model] == mid)
            for g in np.unique(plan.group[rows]):
                r = np.flatnonzero(rows & (plan.group == g))
                if model == "target":
                    _scale_target(grid, plan, int(g), r, at, spec, out)
                else:
                    _scale_draft(grid, plan, int(g), r, at, out)
    touched = np.zeros(n, dtype=bool)
    for how in ("how_t", "how_v", "how_d"):
        touched |= np.isin(out[how], ("profile", "scaled"))
    if not touched.any():
        return None
    labels = _labels(plan, out, spec, method, touched)
    return KernelScale(out["target"], out["verify"], out["draft"], labels)


def _labels(plan, out, spec, method: str, touched) -> np.ndarray:
    codes, names = plan.labels
    base = np.asarray(names, dtype=object)[codes]
    labels = np.full(plan.n, "", dtype=object)
    for i in np.flatnonzero(touched):
        parts = [f"target:{out['how_t'][i] or 'kernels'}"]
        if spec[i]:
            parts.append(f"verify:{out['how_v'][i] or 'kernels'}")
            if method == "draft_model":
                parts.append(f"draft:{out['how_d'][i] or 'kernels'}")
            elif method in HEAD_METHODS:
                parts.append("head:kernels")
        parts += ["host:kernels", f"base:{base[i]}"]
        labels[i] = " ".join(parts)
    return labels


def scale_for(times, plan, p, b_base, b_spec) -> KernelScale | None:
    """The `KernelScale` of a piece priced by the kernel tables, when its step-time source
    carries a profile (`step_times.ProfiledStepTimes`); None otherwise."""
    cal = getattr(times, "cal", None)
    if cal is None or not cal.grids:
        return None
    n = plan.n

    def full(v):
        return np.broadcast_to(np.asarray(v, dtype=float), (n,))

    ids = {"gpu": times.gpu, "target": times.ids["target"], "draft": times.ids["draft"]}
    ids["weight_dtype"] = times.dtype
    at = _Rows(full(b_base), full(b_spec), full(p.verify), full(p.context), full(p.draft_context))
    return get_kernel_scale(cal, plan, ids, times.hardware.num_gpus, p.method_name, p.spec_on, at)
