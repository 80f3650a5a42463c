"""The acceptance rate's own uncertainty, by where it came from: the larger unknown of a
plan, carried beside the step-time error into every headline range.

- measured (a /metrics scrape of the deployment): no band; the step-time error alone;
- a published prior for the target: its spread across datasets (the between-workload
  s.d. of data/acceptance_spread.csv for that drafter, the method's widest where the
  drafter has none), and, for a dynamic tree's figure planned as a chain, down to the
  chain's alpha: a tree's tau runs 0.62-0.75 above a chain's of the same depth (EAGLE
  paper, Table 5, depth 5 on MT-bench), so the chain's tau is taken as tau - 0.75 at
  the same K and inverted i.i.d., and further down to a published chain figure of the
  same method and workload where one exists (another target's, as the engines run it);
- a prior borrowed from another target or family: twice the spread (no published pair
  measures the drift between targets; an assumption, stated on the page);
- an alpha typed by the user: taken as given, and the page says so.

Alphas are fractions; the band is clipped to [0, 1].
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simulator.model.acceptance import alpha_from_tau

SPREAD_CSV = Path(__file__).resolve().parents[2] / "data" / "acceptance_spread.csv"
TREE_TAU_EXCESS = 0.75
"""The most a dynamic tree's tau exceeds a chain's of the same depth (EAGLE paper, Table
5: +0.62 to +0.75 at depth 5 on MT-bench)."""
BORROWED_FACTOR = 2.0
"""A prior of another target or family: this many times its spread (an assumption)."""
BASES = ("measured", "prior", "borrowed", "typed")


@dataclass(frozen=True)
class AlphaBand:
    """Low and high acceptance rate and the words that say where the band comes from."""

    low: float
    high: float
    why: str

    @property
    def wide(self) -> bool:
        return self.high - self.low > 1e-6


@functools.cache
def spreads(path: Path = SPREAD_CSV) -> dict[tuple[str, str], float]:
    """(method, drafter) -> between-workload s.d. of the acceptance rate."""
    with open(path, newline="", encoding="utf-8") as fh:
        return {
            (r["method"], r["drafter"].strip()): float(r["between_workload_sd"])
            for r in csv.DictReader(fh)
        }


def spread_of(method: str, drafter: str) -> float | None:
    """The drafter's spread across datasets, else the method's widest; None for none."""
    table = spreads()
    if (method, drafter) in table:
        return table[(method, drafter)]
    same = [sd for (m, _), sd in table.items() if m == method]
    return max(same) if same else None


def alpha_band(
    alpha: float,
    basis: str,
    *,
    method: str = "",
    drafter: str = "",
    tau: float | None = None,
    k: int | None = None,
    chain: tuple[float, str] | None = None,
) -> AlphaBand:
    """The acceptance band of `alpha` from `basis` (one of `BASES`); `chain`, (alpha,
    drafter) of a published chain figure of the same method and workload, extends the low
    end of a tree's figure to it."""
    if basis not in BASES:
        raise ValueError(f"unknown acceptance basis {basis!r}")
    if basis == "measured":
        return AlphaBand(alpha, alpha, "acceptance measured: the step-time error alone")
    if basis == "typed":
        return AlphaBand(alpha, alpha, "the α you entered, taken as given")
    sd = spread_of(method, drafter)
    if sd is None:
        return AlphaBand(alpha, alpha, "no published spread for this method")
    words = f"the published prior's spread across datasets (±{sd:.3f})"
    if basis == "borrowed":
        sd *= BORROWED_FACTOR
        words = f"a prior of another target or family: twice its spread (±{sd:.3f}, assumed)"
    low, high = alpha - sd, alpha + sd
    if "tree" in drafter.lower() and tau is not None and k:
        as_chain = float(alpha_from_tau(max(1.0, tau - TREE_TAU_EXCESS), k))
        if as_chain < low:
            low = as_chain
            words += f"; a dynamic tree's figure planned as a chain: down to α {as_chain:.3f}"
    if "tree" in drafter.lower() and chain is not None and chain[0] < low:
        low = chain[0]
        words += f"; the published chain figure ({chain[1]}): α {chain[0]:.3f}"
    return AlphaBand(float(np.clip(low, 0, 1)), float(np.clip(high, 0, 1)), words)


def at_alpha(acceptance: dict, alpha: float, new_alpha: float) -> dict:
    """Scenario acceptance columns moved from `alpha` to `new_alpha`: an acceptance rate
    replaced, per-position rates scaled by new / old (clipped to [0, 1])."""
    out = dict(acceptance)
    if out.get("acceptance_per_position"):
        rates = [float(x) for x in str(out["acceptance_per_position"]).split(";") if x.strip()]
        scale = new_alpha / alpha if alpha > 0 else 0.0
        out["acceptance_per_position"] = ";".join(
            f"{min(1.0, max(0.0, r * scale)):.6f}" for r in rates
        )
        return out
    out.pop("mean_accepted_tokens", None)
    out["acceptance_rate"] = new_alpha
    return out
