"""Full-depth step cost from a few shallow runs: a least-squares line in the number of layers.

A decoder step is a fixed part (embedding, final norm, LM head, launch overhead) plus one cost
per layer, so `t(d) = fixed + d * per_layer`. The line is fit per grid point over the depths
that were run and evaluated at the full depth.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def fit_line(depths: Sequence[int], values: Sequence[float]) -> tuple[float, float]:
    """(fixed, per_layer) of the least-squares line `value = fixed + per_layer * depth`."""
    x = np.asarray(depths, dtype=np.float64)
    y = np.asarray(values, dtype=np.float64)
    if x.size < 2 or np.unique(x).size < 2:
        raise ValueError("a line in depth needs at least two different depths")
    a = np.stack([np.ones_like(x), x], axis=1)
    (fixed, per_layer), *_ = np.linalg.lstsq(a, y, rcond=None)
    return float(fixed), float(per_layer)


def extrapolate(depths: Sequence[int], values: Sequence[float], full_depth: int) -> float:
    """The fitted line at `full_depth`, never below zero."""
    fixed, per_layer = fit_line(depths, values)
    return max(0.0, fixed + per_layer * full_depth)


def extrapolate_stats(
    depths: Sequence[int], stats: Sequence[tuple[float, float, float]], full_depth: int
) -> tuple[float, float, float]:
    """(median, p10, p90) at `full_depth` from per-depth (median, p10, p90).

    Each quantile gets its own line; the order p10 <= median <= p90 is restored afterwards
    because separately fitted lines can cross beyond the measured depths.
    """
    med = extrapolate(depths, [s[0] for s in stats], full_depth)
    p10 = extrapolate(depths, [s[1] for s in stats], full_depth)
    p90 = extrapolate(depths, [s[2] for s in stats], full_depth)
    return med, min(p10, med), max(p90, med)
