"""The request-level simulation's traffic defaults, one place for `simulator serve`, the
Load & SLO page and the Sizer's P99 sizing: how many requests a run simulates, how prompt
and output lengths spread around their means, and how acceptance spreads between
requests (that default is by method, `simulator.serving.spread`).
"""

from __future__ import annotations

# The CLI's parser reads these constants: nothing here imports numpy or pandas until a
# function runs, so `--help` stays fast.

REQUESTS = 2000
"""Requests per arm and load. 300 requests from an empty engine read the P99 low near
saturation (29.6 requests/s per replica where 3,000 gave 22.2, issue 27); the Sizer's P99
sizing runs until two seeds agree instead (`simulator.serving.tails`)."""

LENGTH_KIND = "lognormal"
"""Chat traffic: lengths skewed to the right, a few requests far longer than the mean."""

LENGTH_SPREAD = {"fixed": 0.0, "uniform": 0.5, "lognormal": 0.5}
"""Spread when none is given. uniform: +- this share of the mean; lognormal: the standard
deviation of the log (0.5: the middle 68% of requests within 0.61-1.65x the median). An
assumption, not a measured figure: no length trace is bundled; give a measured spread."""


def default_lengths(mean: float, kind: str = LENGTH_KIND, spread: float | None = None):
    """Lengths of `kind` around `mean` tokens: `spread` as the CLI's `--length-spread`
    reads it (a share of the mean for uniform, the log's s.d. for lognormal), the default
    for the kind when None. Returns a `serving.Lengths`."""
    from simulator.serving.engine import Lengths

    share = LENGTH_SPREAD[kind] if spread is None else float(spread)
    return Lengths(float(mean), kind, share * float(mean) if kind == "uniform" else share)


def acceptance_spread(method: str, given: float | None = None) -> float:
    """The per-request acceptance spread: `given`, else the method's default."""
    from simulator.serving.spread import default_acceptance_spread

    return default_acceptance_spread(method) if given is None else float(given)
