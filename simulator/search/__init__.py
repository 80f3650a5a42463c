"""Deployment search: the cheapest deployments that meet P99 latency SLOs.

Given a model, its traffic and its SLOs, which GPUs, how many and in which parallel
layout (TP x attention DP x EP for MoE and MLA targets, `simulator.planning.layouts`),
which engine, which speculation method and draft, which K (or K per batch size), which
`max_num_seqs` and dtypes, and what does it cost per million output tokens? The search answers in two stages:

1. `screen`: the vectorised model (`simulator.model.predict`) prices every candidate at once and
   drops those that cannot run, those that cannot meet the TPOT SLO at any rate, and those
   provably off both Pareto fronts (`prune`); it also bounds each survivor's rate.
2. `confirm`: the request-level simulation (`simulator.serving.engine`) bisects, per survivor and
   per arm (with and without speculation), the highest request rate one replica serves
   within the SLOs, as Vidur-Search does; the runs fan out as Ray tasks (`runners`).

`spec` reads and checks the YAML specification, `candidates` expands it, `table` builds
the result (cost per 1M tokens, max rate, P50/P99 TTFT and TPOT, replicas, launch
command) and `fronts` marks the Pareto fronts. Rates are requests per second per replica,
times in ms, prices in USD per GPU-hour, costs in USD per million output tokens.

May import `simulator.errors` and the folders inputs/, model/, serving/ and planning/ (the
sizer's schedules, launch commands); never cli/ (its own `cli` module registers `python -m
simulator search` there).
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "SearchResult": "simulator.search.driver",
    "run_search": "simulator.search.driver",
    "SearchSpec": "simulator.search.spec",
    "load_spec": "simulator.search.spec",
    "parse_spec": "simulator.search.spec",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    # Imported on first use, so `python -m simulator --help` (which registers the search
    # command through `simulator.search.cli`) does not import numpy and pandas.
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'simulator.search' has no attribute {name!r}")
