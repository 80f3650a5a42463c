"""The highest request rate within the SLOs, by bisection on the log of the rate.

As `tails.max_rate_at_slo` does, and as Vidur-Search does with one simulation per probe:
probe a trickle (0.01 requests/s, or 1% of the ceiling), then the ceiling, then halve the
interval in log space `iterations` times. With the ceiling 10^4 times the trickle, ten
steps pin the rate to within 1% (10^(4/1024)); `step_ratio` gives the bound for any
interval. Unlike `max_rate_at_slo`, the probe and the SLO test are given, so the caller
chooses the step model (a K schedule included), and the summary at the rate found comes
back with it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Bisection:
    """`rate`: the highest rate that met the SLO (0 when even the trickle missed);
    `summary`: the probe's summary at that rate (at the trickle when 0);
    `probes`: simulations run; `lo`, `hi`: the final bracket (rate = lo)."""

    rate: float
    summary: dict
    probes: int
    lo: float
    hi: float


def trickle(ceiling: float) -> float:
    """The lowest rate probed: 0.01 requests/s, or 1% of the ceiling when lower."""
    return min(0.01, ceiling / 100.0)


def step_ratio(ceiling: float, iterations: int) -> float:
    """hi / lo once the bisection has run: the factor within which the rate is pinned."""
    return (ceiling / trickle(ceiling)) ** (1.0 / 2**iterations)


def max_rate(
    probe: Callable[[float], dict],
    meets: Callable[[dict], bool],
    ceiling: float,
    iterations: int = 10,
) -> Bisection:
    """Bisect the highest rate in [trickle, ceiling] whose probe `meets` the SLO."""
    if not (math.isfinite(ceiling) and ceiling > 0):
        raise ValueError(f"ceiling {ceiling} must be a positive number of requests/s")
    lo, hi = trickle(ceiling), ceiling
    at_lo = probe(lo)
    probes = 1
    if not meets(at_lo):
        return Bisection(0.0, at_lo, probes, 0.0, lo)
    at_hi = probe(hi)
    probes += 1
    if meets(at_hi):
        return Bisection(hi, at_hi, probes, hi, hi)
    for _ in range(iterations):
        mid = math.sqrt(lo * hi)
        at_mid = probe(mid)
        probes += 1
        if meets(at_mid):
            lo, at_lo = mid, at_mid
        else:
            hi = mid
    return Bisection(lo, at_lo, probes, lo, hi)
