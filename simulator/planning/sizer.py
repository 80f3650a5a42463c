"""The sizer: best K per batch, the break-even batch, the largest batch under an SLO, and
the cheapest configuration for a demand. One `predict` call over a (K, batch) grid; for an
MoE or MLA target whose row gives no layout, one per layout of its GPU count
(`simulator.planning.layouts.span`, DP 1 or all the GPUs, EP 1 or all), and the layout
whose cheapest configuration serves the most tokens/s per replica is the one sized.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from simulator.errors import InputError
from simulator.inputs.catalog import default_models, method_decay
from simulator.inputs.scenarios import ACCEPTANCE_COLUMNS
from simulator.inputs.sweep import build_grid
from simulator.model import economics
from simulator.model.acceptance import positions_from_tau
from simulator.model.predict import predict
from simulator.planning import layouts

DEFAULT_BATCHES = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)
"""Batch sizes an engine's CUDA-graph capture list covers, 1 to vLLM's max_num_seqs x2."""


@dataclass(frozen=True)
class SizingResult:
    """Everything the sizer decided, with the grid it decided from."""

    grid: pd.DataFrame
    """One row per (K, batch): the full prediction table; K=0 is speculation off."""
    best: pd.DataFrame
    """One row per batch: best_k, best speedup, TPOT, throughput, fits, meets_slo."""
    break_even_batch: int | None
    """Smallest batch at which no K > 0 beats the baseline; a K that cannot run there does
    not beat it. None: speculation pays at every batch, or no K > 0 was priced."""
    max_batch_under_slo: dict[int, int | None]
    """Per K, the largest batch that meets the SLO and fits in memory."""
    choice: dict | None
    """Cheapest (K, batch) meeting SLO and memory, with replicas and monthly cost."""
    baseline_choice: dict | None
    """The same search restricted to K=0, for the saving."""
    layout: str = ""
    """The replica's layout sized ('TP8 EP8'; '' for a dense target's plain TP)."""
    layouts: pd.DataFrame | None = None
    """Where the sizer chose the layout: one row per layout tried (layout, its columns,
    tok_s_per_replica and replicas of its cheapest configuration, why it was passed over)."""


def _acceptance_cols(base: dict) -> dict:
    return {c: base[c] for c in ACCEPTANCE_COLUMNS if base.get(c) not in (None, "")}


def price_grid(
    base: dict, *, k_max: int = 8, batches=DEFAULT_BATCHES, **predict_kwargs
) -> pd.DataFrame:
    """The predictions `size` decides from: one row per (K, batch), K 0..k_max (0 is
    speculation off) over `batches`. It depends on neither the SLO nor the demand, so a
    caller that varies those prices it once.

    A mean_accepted_tokens figure only holds for the K it was measured at, so it is
    turned into per-position rates along the method's decay (fitted on public curves,
    `catalog.method_decay`) before sweeping K; an acceptance_rate is i.i.d. by
    definition and stays so.
    """
    if k_max < 0 or k_max > 16:
        raise InputError(f"{k_max} must be in 0..16", field="k_max")
    batches = sorted({int(b) for b in batches})
    if not batches or batches[0] < 1:
        raise InputError("batch sizes must be positive integers", field="batches")
    base = dict(base)
    acc = _acceptance_cols(base)
    if "mean_accepted_tokens" in acc:
        k_given = int(base.get("k") or 3)
        decay = method_decay(str(base.get("method", "")), float(base.get("mtp_depth") or 1))
        pos = positions_from_tau(float(acc["mean_accepted_tokens"]), k_given, max(k_max, 1), decay)
        acc = {"acceptance_per_position": ";".join(f"{p:.6f}" for p in np.ravel(pos))}
    for c in (*ACCEPTANCE_COLUMNS, "k"):
        base.pop(c, None)
    method = base.get("method", "none")
    off = build_grid({**base, "method": "none", "draft": ""}, k=[0], batch_size=batches)
    frames = [off]
    if method != "none" and k_max >= 1:
        frames.append(build_grid({**base, **acc}, k=list(range(1, k_max + 1)), batch_size=batches))
    return predict(pd.concat(frames, ignore_index=True), **predict_kwargs)


def size(
    base: dict,
    *,
    k_max: int = 8,
    batches=DEFAULT_BATCHES,
    slo_tpot_ms: float | None = None,
    slo_tok_s_per_user: float | None = None,
    demand_tok_s: float = 0.0,
    grid: pd.DataFrame | None = None,
    **predict_kwargs,
) -> SizingResult:
    """Size a deployment for one (target, method, draft, GPU) choice.

    `base` holds scenario columns (acceptance included); K runs 0..k_max and batch over
    `batches` (`price_grid`). `grid`, what `price_grid` gave for the same base, K and
    batches, saves pricing it again; it is not modified. An MoE or MLA target whose `base`
    gives no layout column is sized in each layout of its GPUs (`size_layouts`).
    """
    sizing = dict(
        k_max=k_max,
        batches=batches,
        slo_tpot_ms=slo_tpot_ms,
        slo_tok_s_per_user=slo_tok_s_per_user,
        demand_tok_s=demand_tok_s,
    )
    if grid is None:
        tried = _layouts_to_try(base, predict_kwargs.get("models"))
        if len(tried) > 1:
            return size_layouts(base, tried, **sizing, **predict_kwargs)
        grid = price_grid(base, k_max=k_max, batches=batches, **predict_kwargs)
    slo = {k: sizing[k] for k in ("slo_tpot_ms", "slo_tok_s_per_user", "demand_tok_s")}
    return _size_grid(grid, **slo, layout=_label(base))


def _label(base: dict) -> str:
    lay = layouts.from_row(base)
    return "" if lay is None else lay.describe()


def _layouts_to_try(base: dict, models=None) -> tuple:
    """The layouts `size` sizes `base` in: its own (one) where it gives one or its target
    has no layouts beyond TP, else `layouts.span`'s corners of its GPU count."""
    target = (models or default_models()).get(str(base.get("target")))
    if target is None or layouts.from_row(base) is not None or not layouts.has_layouts(target):
        return ()
    engine = str(base.get("engine") or "vllm")
    n = int(base.get("num_gpus") or 1)
    return layouts.span(n, target, engine, corners=True)


def size_layouts(base: dict, tried, **kwargs) -> SizingResult:
    """`size` of `base` in each layout of `tried`, chosen between by `choose_layout`."""
    sizing = {k: kwargs.pop(k) for k in ("k_max", "batches", "slo_tpot_ms", "slo_tok_s_per_user")}
    demand = kwargs.pop("demand_tok_s", 0.0)
    results = []
    for lay in tried:
        grid = price_grid(
            {**base, **lay.columns()}, k_max=sizing["k_max"], batches=sizing["batches"], **kwargs
        )
        results.append(
            _size_grid(
                grid,
                slo_tpot_ms=sizing["slo_tpot_ms"],
                slo_tok_s_per_user=sizing["slo_tok_s_per_user"],
                demand_tok_s=demand,
                layout=lay.describe(),
            )
        )
    return choose_layout(tried, results)


def layouts_to_try(base: dict, models=None) -> tuple:
    """The layouts `size` sizes `base` in: none (its own) where it gives a layout column or
    its target has no layouts beyond TP, else `layouts.span`'s corners of its GPU count."""
    return _layouts_to_try(base, models)


def choose_layout(tried, results: list[SizingResult]) -> SizingResult:
    """Of one base sized in each layout of `tried` (`results` in the same order), the result
    whose cheapest configuration serves the most tokens/s per replica, with every layout's
    figures in its `layouts`. A layout other than plain TP counts only where the kernel
    tables price it (the roofline prices every layout as TP, `layouts.priced_by_layout`);
    plain TP, first in `tried`, is kept where nothing else is."""
    rows, usable = [], []
    for i, (lay, res) in enumerate(zip(tried, results, strict=True)):
        grid = res.grid
        source = str(grid["latency_source"].iloc[0]) if "latency_source" in grid else ""
        why = ""
        if not lay.plain_tp and not layouts.priced_by_layout(source):
            why = f"priced on the {source or 'roofline'}, which does not model the layout"
        elif res.choice is None:
            why = "no batch meets the SLO and fits"
        else:
            usable.append(i)
        rows.append(
            {
                "layout": lay.describe(),
                **lay.columns(),
                "tok_s_per_replica": res.choice["tok_s_per_replica"] if res.choice else np.nan,
                "replicas": res.choice["replicas"] if res.choice else np.nan,
                "passed_over": why,
            }
        )
    pick = max(usable, key=lambda i: results[i].choice["tok_s_per_replica"], default=0)
    table = pd.DataFrame(rows)
    table["chosen"] = np.arange(len(table)) == pick
    res = results[pick]
    choice = None if res.choice is None else {**res.choice, "layout": tried[pick].describe()}
    return replace(res, layouts=table, layout=tried[pick].describe(), choice=choice)


def _size_grid(
    grid: pd.DataFrame,
    *,
    slo_tpot_ms: float | None,
    slo_tok_s_per_user: float | None,
    demand_tok_s: float,
    layout: str = "",
) -> SizingResult:
    """`size` on a priced grid; `layout` the label of the layout it was priced in."""
    tpot = grid["spec_tpot_ms"].to_numpy()
    per_user = 1e3 / tpot
    meets = np.ones(len(grid), dtype=bool)
    if slo_tpot_ms is not None:
        meets &= tpot <= slo_tpot_ms
    if slo_tok_s_per_user is not None:
        meets &= per_user >= slo_tok_s_per_user
    runs = np.isfinite(grid["spec_tok_s"].to_numpy(dtype=float))  # not a "cannot run" row
    usable = meets & grid["fits"].to_numpy(dtype=bool) & runs
    grid = grid.assign(meets_slo=meets, usable=usable)

    idx = grid["spec_tok_s"].fillna(-np.inf).groupby(grid["batch_size"]).idxmax()
    best = grid.loc[
        idx, ["batch_size", "k", "speedup", "spec_tpot_ms", "spec_tok_s", "fits", "meets_slo"]
    ].rename(columns={"k": "best_k"})
    best = best.sort_values("batch_size").reset_index(drop=True)
    # Filters on the few columns they need: a boolean filter of the whole grid copies its
    # sixty-odd columns, and the dashboard runs this on every rerun.
    k_col = grid["k"].to_numpy()
    batch_col = grid["batch_size"].to_numpy()
    tok_s = grid["spec_tok_s"].to_numpy(dtype=float)
    spec_rows = grid.loc[k_col > 0, ["batch_size", "speedup"]]
    break_even = None
    if len(spec_rows):
        top = spec_rows.groupby("batch_size")["speedup"].max().sort_index()
        losing = top[~(top > 1.0)]  # NaN: no K runs at that batch
        break_even = int(losing.index[0]) if len(losing) else None

    max_batch: dict[int, int | None] = {}
    for k in np.unique(k_col):
        ok = usable & (k_col == k)
        max_batch[int(k)] = int(batch_col[ok].max()) if ok.any() else None

    def cheapest(rows: np.ndarray) -> dict | None:
        ok = np.flatnonzero(rows & usable)
        if not len(ok):
            return None
        row = grid.iloc[ok[np.argmax(tok_s[ok])]]
        replicas = float(economics.get_replicas_needed(demand_tok_s, row["spec_tok_s"]))
        gpus = int(row["num_gpus"])
        monthly = float(economics.get_monthly_cost(row["gpu_hourly_usd"], gpus, replicas))
        return {
            "k": int(row["k"]),
            "batch_size": int(row["batch_size"]),
            "tok_s_per_replica": float(row["spec_tok_s"]),
            "tpot_ms": float(row["spec_tpot_ms"]),
            "replicas": int(replicas),
            "gpus": int(replicas) * gpus,
            "monthly_cost_usd": monthly,
            "cost_per_mtok": float(row["cost_per_mtok_spec"]),
            "layout": layout,
        }

    return SizingResult(
        grid=grid,
        best=best,
        break_even_batch=break_even,
        max_batch_under_slo=max_batch,
        choice=cheapest(np.ones(len(grid), dtype=bool)),
        baseline_choice=cheapest(k_col == 0),
        layout=layout,
    )


def schedule_ranges(best: pd.DataFrame) -> list[tuple[int, int, int]]:
    """Best K per batch as contiguous [lo, hi, k] ranges covering 1..largest batch.

    A grid point's K holds from just above the previous grid point up to that point.
    """
    ranges: list[list[int]] = []
    lo = 1
    for b, k in zip(best["batch_size"].astype(int), best["best_k"].astype(int), strict=True):
        if ranges and ranges[-1][2] == k:
            ranges[-1][1] = b
        else:
            ranges.append([lo, b, k])
        lo = b + 1
    return [tuple(r) for r in ranges]
