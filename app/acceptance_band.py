"""The acceptance's own band for the scenario the sidebar holds, and the speedup and
tokens/s at its two ends (`simulator.planning.acceptance_range`): what ROI's and the
Sizer's headline ranges add to the step-time error."""

from __future__ import annotations

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
    base = scenario.row(k, batch, **extra)
    acc = {c: base.pop(c) for c in ACCEPTANCE_COLUMNS if c in base}
    alphas = (scenario.alpha, band.low, band.high)
    rows = [{**base, **at_alpha(acc, scenario.alpha, a)} for a in alphas]
    try:
        tok = sim.run_predict(pd.DataFrame(rows))["spec_tok_s"].to_numpy(dtype=float)
    except InputError:
        return band, None
    if not (tok > 0).all():
        return band, None
    return band, (float(tok[1] / tok[0]), float(tok[2] / tok[0]))
