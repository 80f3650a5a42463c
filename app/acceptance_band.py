"""The acceptance's own band for the scenario the sidebar holds, and the speedup and
tokens/s at its two ends (`simulator.planning.acceptance_range`): what ROI's and the
Sizer's headline ranges add to the step-time error."""

from __future__ import annotations

import numpy as np
import pandas as pd

from app import sim, widgets
from simulator.errors import InputError
from simulator.inputs.scenarios import ACCEPTANCE_COLUMNS
from simulator.planning.acceptance_range import AlphaBand, alpha_band, at_alpha


def band_of(scenario: widgets.Scenario) -> AlphaBand | None:
    """The scenario's acceptance band by where its α came from; None without speculation."""
    if not scenario.speculative:
        return None
    basis, prior = widgets.acceptance_source(scenario)
    chain = sim.chain_prior(scenario.workload, scenario.method, scenario.target)
    return alpha_band(
        scenario.alpha,
        basis,
        method=scenario.method,
        drafter=prior.hint if prior else "",
        tau=prior.tau if prior else None,
        k=prior.k if prior else None,
        chain=(chain.alpha, chain.hint) if chain else None,
    )


def ends(scenario: widgets.Scenario, k: int, batch: int, **extra):
    """(band, ((speedup, spec tok/s) at its low end, at its high end) or None), or None
    without speculation; the ends are None where the band is a point or cannot be priced."""
    band = band_of(scenario)
    if band is None or not band.wide:
        return None if band is None else (band, None)
    base = scenario.row(k, batch, **extra)
    acc = {c: base.pop(c) for c in ACCEPTANCE_COLUMNS if c in base}
    rows = [{**base, **at_alpha(acc, scenario.alpha, a)} for a in (band.low, band.high)]
    try:
        priced = sim.run_predict(pd.DataFrame(rows))
    except InputError:
        return band, None
    pairs = zip(priced["speedup"], priced["spec_tok_s"], strict=True)
    return band, tuple((float(a), float(b)) for a, b in pairs)


def ratios(scenario: widgets.Scenario, k: int, batch: int, **extra):
    """(band, (low, high) speculative tokens/s at the band's ends over the α's own), or
    (band or None, None) where the band is a point or cannot be priced: the factors a page
    applies to its own throughput figure (the Sizer's, in its unit)."""
    band = band_of(scenario)
    if band is None or not band.wide:
        return band, None
    return band, tok_s_ratios(scenario.row(k, batch, **extra), band, scenario.alpha)


def tok_s_ratios(row: dict, band: AlphaBand, centre: float) -> tuple[float, float] | None:
    """(low, high): a scenario row's speculative tokens/s at `band`'s ends over its own at
    α `centre`, in one `predict` call; None where it cannot be priced or runs nowhere."""
    base = dict(row)
    acc = {c: base.pop(c) for c in ACCEPTANCE_COLUMNS if c in base}
    rows = [{**base, **at_alpha(acc, centre, a)} for a in (centre, band.low, band.high)]
    try:
        tok = sim.run_predict(pd.DataFrame(rows))["spec_tok_s"].to_numpy(dtype=float)
    except InputError:
        return None
    if not (tok > 0).all():
        return None
    return float(tok[1] / tok[0]), float(tok[2] / tok[0])


def row_band(row: dict) -> tuple[AlphaBand, float] | None:
    """A scenario row's acceptance band and the α at its centre, from the row alone (a
    saved report reopens with the same ranges whatever the sidebar holds): the band of
    the published prior its acceptance is (`widgets.prior_of_row`), else the row's α taken
    as given; None without speculation."""
    if str(row.get("method")) == "none":
        return None
    found = widgets.prior_of_row(row)
    if found is None:
        return AlphaBand(np.nan, np.nan, "the row's α, typed: taken as given"), np.nan
    workload, prior = found
    method, target = str(row["method"]), str(row["target"])
    chain = sim.chain_prior(workload, method, target)
    band = alpha_band(
        prior.alpha,
        widgets.prior_basis(prior, target),
        method=method,
        drafter=prior.hint,
        tau=prior.tau,
        k=prior.k,
        chain=(chain.alpha, chain.hint) if chain else None,
    )
    return band, prior.alpha


_PRICED = ("speedup", "spec_tok_s")
_ENDS = ("low", "high")


def report_ends(rows: pd.DataFrame) -> pd.DataFrame:
    """Per report row (the editor's, before pricing): `alpha_low`, `alpha_high` (the
    acceptance band, NaN where it is a point or without speculation), `acceptance_band`
    (where it comes from) and `speedup` / `spec_tok_s` at its two ends (`_at_alpha_low`,
    `_at_alpha_high`, one `predict` call for every row)."""
    out = pd.DataFrame(index=rows.index)
    for col in ("alpha_low", "alpha_high", *(f"{c}_at_alpha_{e}" for c in _PRICED for e in _ENDS)):
        out[col] = np.nan
    out["acceptance_band"] = ""
    moved, at = [], []
    for i, row in rows.iterrows():
        record = {k: v for k, v in row.to_dict().items() if not _blank(v)}
        found = row_band(record)
        if found is None:
            continue
        band, centre = found
        out.loc[i, "acceptance_band"] = band.why
        if not band.wide:
            continue
        out.loc[i, ["alpha_low", "alpha_high"]] = band.low, band.high
        acc = {c: record.pop(c) for c in ACCEPTANCE_COLUMNS if c in record}
        moved += [{**record, **at_alpha(acc, centre, a)} for a in (band.low, band.high)]
        at.append(i)
    if not at:
        return out
    try:
        priced = sim.run_predict(pd.DataFrame(moved))
    except InputError:
        return out
    for column in _PRICED:
        values = priced[column].to_numpy(dtype=float)
        out.loc[at, f"{column}_at_alpha_low"] = values[0::2]
        out.loc[at, f"{column}_at_alpha_high"] = values[1::2]
    return out


def _blank(value) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value)) or value == ""
