"""The acceptance rate's band by where it came from (issue 34 item 2)."""

from __future__ import annotations

import pytest

from simulator.planning import acceptance_range as ar
from simulator.planning.uncertainty import get_money_range

TREE = "EAGLE-3 head; target Llama-3.3-70B-Instruct; dynamic tree"


def test_measured_and_typed_alphas_carry_no_band():
    for basis in ("measured", "typed"):
        band = ar.alpha_band(0.8, basis, method="eagle3", drafter=TREE)
        assert (band.low, band.high) == (0.8, 0.8) and not band.wide


def test_a_prior_spreads_by_its_drafters_between_workload_sd():
    band = ar.alpha_band(
        0.6, "prior", method="draft_model", drafter="Vicuna-68M drafting Vicuna-13B"
    )
    assert band.low == pytest.approx(0.6 - 0.0265) and band.high == pytest.approx(0.6 + 0.0265)


def test_a_borrowed_prior_spreads_twice_as_far():
    own = ar.alpha_band(0.6, "prior", method="eagle", drafter="x")
    borrowed = ar.alpha_band(0.6, "borrowed", method="eagle", drafter="x")
    assert borrowed.high - borrowed.low == pytest.approx(2 * (own.high - own.low))


def test_a_tree_figure_reaches_down_to_a_chain_and_to_a_published_chain():
    tree = ar.alpha_band(0.877, "prior", method="eagle3", drafter=TREE, tau=5.63, k=8)
    assert tree.low < 0.877 - 0.0298 and "planned as a chain" in tree.why
    chained = ar.alpha_band(
        0.877, "prior", method="eagle3", drafter=TREE, tau=5.63, k=8, chain=(0.70, "vLLM chain")
    )
    assert chained.low == 0.70 and "vLLM chain" in chained.why
    plain = ar.alpha_band(0.6, "prior", method="eagle3", drafter="chain", chain=(0.4, "c"))
    assert plain.low > 0.4  # a chain's own figure is not lowered by another chain


def test_moving_alpha_scales_per_position_rates_and_replaces_a_rate():
    moved = ar.at_alpha({"acceptance_per_position": "0.8;0.6;0.5"}, 0.8, 0.4)
    assert moved["acceptance_per_position"] == "0.400000;0.300000;0.250000"
    assert ar.at_alpha({"mean_accepted_tokens": 2.5}, 0.7, 0.6) == {"acceptance_rate": 0.6}


def test_acceptance_ends_widen_the_money_range():
    kw = dict(demand_tok_s=10_000, baseline_tok_s=1000, spec_tok_s=1500, hourly_usd_per_gpu=2.0)
    kw |= dict(num_gpus=1, error=0.06)
    plain = get_money_range(**kw)
    wide = get_money_range(**kw, acceptance_ends=(1200.0, 1700.0))
    assert wide.spec_tok_s[0] == pytest.approx(1200 * 0.94)
    assert wide.spec_tok_s[1] == pytest.approx(1700 * 1.06)
    assert wide.replicas_spec[0] >= plain.replicas_spec[0]
