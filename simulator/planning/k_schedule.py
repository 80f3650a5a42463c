"""The Sizer's K per batch in the engines' own schema, to set beside what they measure.

vLLM's `vllm bench sweep tune_speculative_k` (vllm/benchmarks/sweep/tune_speculative_k.py,
`select_k_by_batch_size` and `build_schedule`) turns measured sweeps into
`num_speculative_tokens_per_batch_size`: at each batch-size anchor the K whose output
throughput is within `relative_tolerance` (1%) of the best, the smallest such K; each
anchor's K holds from that anchor to the next anchor minus one, the last to
`max_batch_size`; neighbours with the same K merge. `tune_document` writes SpecPlan's
predicted throughputs through the same rules and into the same JSON keys, so a user can
diff SpecPlan's schedule against the one their engine's sweep gives.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

RELATIVE_TOLERANCE = 0.01
"""vLLM's `--relative-tolerance` default: K within 1% of the best ties to the smaller."""


def select_k(grid: pd.DataFrame, relative_tolerance: float = RELATIVE_TOLERANCE) -> dict[int, int]:
    """Per batch size of `grid` (Sizer rows: batch_size, k, spec_tok_s), the smallest K
    whose predicted output tokens/s is within `relative_tolerance` of that batch's best;
    batches where no K runs are left out."""
    if not 0.0 <= relative_tolerance < 1.0:
        raise ValueError("relative_tolerance must be in [0, 1)")
    out = {}
    rows = grid[np.isfinite(grid["spec_tok_s"].to_numpy(dtype=float))]
    for batch, group in rows.groupby("batch_size", sort=True):
        best = float(group["spec_tok_s"].max())
        if best <= 0:
            continue
        near = group[group["spec_tok_s"] >= (1.0 - relative_tolerance) * best]
        out[int(batch)] = int(near["k"].min())
    return out


def build_schedule(selected: dict[int, int], max_batch_size: int) -> list[list[int]]:
    """`[[start, end, K], ...]` as vLLM's `build_schedule` writes it: each anchor's K
    from it to the next anchor - 1, the last to `max_batch_size`, equal neighbours merged."""
    anchors = sorted(selected)
    if not anchors or anchors[0] != 1:
        raise ValueError("the batch sizes must start at 1")
    if max_batch_size < anchors[-1]:
        raise ValueError("max_batch_size must cover the largest batch size")
    schedule: list[list[int]] = []
    for i, start in enumerate(anchors):
        end = anchors[i + 1] - 1 if i + 1 < len(anchors) else max_batch_size
        k = selected[start]
        if schedule and schedule[-1][2] == k:
            schedule[-1][1] = end
        else:
            schedule.append([start, end, k])
    return schedule


def tune_document(
    grid: pd.DataFrame,
    global_k: int,
    relative_tolerance: float = RELATIVE_TOLERANCE,
) -> dict:
    """The JSON `tune_speculative_k` writes (`num_speculative_tokens_per_batch_size`,
    `configured_global_num_speculative_tokens`, `max_num_speculative_tokens_observed`,
    `selection`, `batch_decisions`), from SpecPlan's predictions instead of measured runs;
    `max_batch_size` is the largest batch priced, as the tuner requires."""
    selected = select_k(grid, relative_tolerance)
    largest = max(selected)
    decisions = []
    for batch, k in selected.items():
        group = grid[grid["batch_size"] == batch].set_index("k")["spec_tok_s"].astype(float)
        best, chosen = float(group.max()), float(group.loc[k])
        k0 = float(group.loc[0]) if 0 in group.index and group.loc[0] > 0 else None
        decisions.append(
            {
                "batch_size": batch,
                "selected_k": k,
                "selected_median_objective": chosen,
                "selected_vs_best_percent": 100.0 * (chosen / best - 1.0),
                "selected_vs_k0_percent": None if k0 is None else 100.0 * (chosen / k0 - 1.0),
                "candidates": [
                    {"k": int(kk), "median_objective": float(v)}
                    for kk, v in group.sort_index().items()
                    if np.isfinite(v)
                ],
            }
        )
    return {
        "num_speculative_tokens_per_batch_size": build_schedule(selected, largest),
        "configured_global_num_speculative_tokens": int(global_k),
        "max_num_speculative_tokens_observed": int(grid["k"].max()),
        "selection": {
            "batch_size_metric": "batch_size",
            "k_metric": "k",
            "objective_metric": "spec_tok_s (SpecPlan's predicted output tokens/s)",
            "objective_direction": "maximize",
            "relative_tolerance": relative_tolerance,
            "max_batch_size": largest,
        },
        "batch_decisions": decisions,
    }
