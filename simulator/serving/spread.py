"""The default per-request acceptance spread (standard deviation of each request's
first-position acceptance), by method.

No public trace of per-request acceptance was found among the sources this project cites
(papers and engines publish means per benchmark). What is published is each drafter's mean
per workload (data/acceptance_priors.csv); its spread between workloads, written out in
data/acceptance_spread.csv, is a floor for the spread between requests (requests of one
workload differ too). The default is that floor for the method: the largest
between-workload s.d. of its drafters, rounded up to 0.01; a method with no such rows takes
the largest over all drafters.
"""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path

import pandas as pd

SPREAD_CSV = Path(__file__).resolve().parent.parent.parent / "data" / "acceptance_spread.csv"


@cache
def _table() -> pd.DataFrame:
    return pd.read_csv(SPREAD_CSV)


def default_acceptance_spread(method: str) -> float:
    """The default spread for `method` (see the module docstring); 0 for 'none'."""
    if method == "none":
        return 0.0
    table = _table()
    rows = table[table["method"] == method]
    sd = float((rows if len(rows) else table)["between_workload_sd"].max())
    return math.ceil(sd * 100) / 100
