"""Acceptance conversions: hand-computed values and the laws between the three forms."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.model import acceptance


def test_tau_iid_hand_computed():
    # (1 - 0.8^5) / (1 - 0.8) = (1 - 0.32768) / 0.2 = 3.3616
    assert acceptance.tau_iid(0.8, 4) == pytest.approx(3.3616, abs=1e-12)


def test_tau_iid_limits():
    assert acceptance.tau_iid(1.0, 5) == pytest.approx(6.0)
    assert acceptance.tau_iid(0.0, 5) == pytest.approx(1.0)
    assert acceptance.tau_iid(0.7, 0) == pytest.approx(1.0)


def test_alpha_from_tau_inverts():
    alphas = np.linspace(0.05, 0.99, 40)
    for k in (1, 3, 8):
        back = acceptance.alpha_from_tau(acceptance.tau_iid(alphas, k), k)
        np.testing.assert_allclose(back, alphas, atol=1e-9)


def test_per_position_tau_and_iid_agree():
    p = acceptance.positions_iid(0.8, 4)
    assert acceptance.tau_from_positions(p)[()] == pytest.approx(3.3616)
    np.testing.assert_allclose(
        acceptance.tau_curve_from_positions([0.9, 0.7, 0.5]), [1.0, 1.9, 2.6, 3.1]
    )


def test_vllm_draft_acceptance_rate_is_not_alpha():
    tau = acceptance.tau_iid(0.8, 4)
    rate = acceptance.draft_acceptance_rate(tau, 4)
    # accepted / drafted = (3.3616 - 1) / 4 = 0.5904, well below alpha = 0.8
    assert rate == pytest.approx(0.5904)
    assert acceptance.tau_from_draft_acceptance_rate(rate, 4) == pytest.approx(tau)


def test_decaying_positions_give_less_than_iid_at_large_k():
    # Real rates decay faster than alpha^i: the i.i.d. fit from K=1 overstates tau(8).
    measured = np.array([0.8, 0.6, 0.45, 0.33, 0.24, 0.17, 0.12, 0.08])
    iid = acceptance.tau_iid(measured[0], 8)
    assert acceptance.tau_from_positions(measured) < iid


def test_pmf_sums_to_one_and_mean_is_tau():
    p = np.array([[0.9, 0.7, 0.4, 0.2]])
    for k in range(0, 5):
        pmf = acceptance.accepted_tokens_pmf(p, k)[0]
        assert pmf.sum() == pytest.approx(1.0)
        mean = (pmf * np.arange(1, pmf.size + 1)).sum()
        assert mean == pytest.approx(acceptance.tau_from_positions(p, k)[0])


def test_measured_positions_continue_at_their_mean_conditional():
    ext = acceptance.extend_measured([0.8, 0.4], 4)[0]
    np.testing.assert_allclose(ext, [0.8, 0.4, 0.2, 0.1])
    # The geometric mean of the measured conditionals (0.5 and 0.8), not the last one.
    ext = acceptance.extend_measured([0.8, 0.4, 0.32], 5)[0]
    tail = np.sqrt(0.5 * 0.8)
    np.testing.assert_allclose(ext, [0.8, 0.4, 0.32, 0.32 * tail, 0.32 * tail**2])
    # Rows of different lengths: NaN is a position never measured, not a zero.
    both = acceptance.extend_measured([[0.8, 0.4, np.nan], [0.9, 0.6, 0.3]], 4)
    np.testing.assert_allclose(both[0], [0.8, 0.4, 0.2, 0.1])


@given(st.floats(0.0, 0.999), st.floats(0.0, 0.999), st.integers(1, 16))
def test_tau_monotone_in_alpha(a, b, k):
    lo, hi = sorted((a, b))
    assert acceptance.tau_iid(lo, k) <= acceptance.tau_iid(hi, k) + 1e-12


@given(st.floats(0.0, 1.0), st.integers(1, 16))
def test_tau_bounds(alpha, k):
    tau = acceptance.tau_iid(alpha, k)
    assert 1.0 - 1e-12 <= tau <= k + 1 + 1e-9


@given(st.floats(0.0, 1.0), st.integers(0, 12), st.sampled_from([0.1, 0.5, 0.9, 0.99]))
def test_iid_quantile_closed_form_matches_pmf(alpha, k, q):
    pos = acceptance.positions_iid(alpha, max(k, 1))
    via_pmf = acceptance.tokens_per_step_quantile(pos, k, q)[0]
    assert acceptance.tokens_per_step_quantile_iid(alpha, k, q) == via_pmf


def test_cpu_pair_tau_at_every_k_from_a_fit_on_k4_only():
    """The measured per-position rates at K=4, extended along their conditionals,
    reproduce the measured tau at K=1..8 within 5%, greedy and sampled; the i.i.d. figure
    from the first position's rate is off by more than 20% (greedy, K=8)."""
    import pandas as pd

    positions = pd.read_csv("data/validation/cpu_acceptance.csv")
    points = pd.read_csv("data/validation/cpu_validation.csv")
    for mode in ("greedy", "sample_t1"):
        at4 = positions[(positions["mode"] == mode) & (positions["k"] == 4)]
        p = at4.groupby("position")["acceptance"].mean().to_numpy()
        extended = acceptance.extend_measured(p, 8)[0]
        measured = points[points["mode"] == mode].groupby("k")["tau_measured"].mean()
        for k in range(1, 9):
            predicted = float(acceptance.tau_from_positions(extended, k))
            assert predicted == pytest.approx(measured[k], rel=0.05), (mode, k)
    greedy = points[points["mode"] == "greedy"].groupby("k")["tau_measured"].mean()
    p1 = positions[(positions["mode"] == "greedy") & (positions["k"] == 4)]
    p1 = p1[p1["position"] == 1]["acceptance"].mean()
    assert float(acceptance.tau_iid(p1, 8)) < 0.8 * greedy[8]


def test_decay_extends_tau_from_one_k_and_fits_public_curves():
    from simulator.inputs.catalog import method_decays

    decays = method_decays()
    # EAGLE-1 heads lose acceptance with depth faster than EAGLE-3 heads.
    assert decays["eagle"].rho < decays["eagle3"].rho <= 1.0
    # The vLLM #20780 EAGLE-3 chain (Llama-3.1-8B, MT-bench): from tau 2.79 at K=3 the
    # decay predicts the published tau at K=7 (3.54) within 5%; i.i.d. over-sells it.
    pos = acceptance.positions_from_tau(2.79, 3, 7, decays["eagle3"])
    assert float(acceptance.tau_from_positions(pos, 7)) == pytest.approx(3.54, rel=0.05)
    assert float(acceptance.tau_iid(acceptance.alpha_from_tau(2.79, 3), 7)) > 3.54 * 1.05
    # The curve keeps tau at the K it was given.
    assert float(acceptance.tau_from_positions(pos, 3)) == pytest.approx(2.79, abs=1e-6)
    # MTP reused past its trained depth: DeepSeek-V3's module, 0.85 at position 1, gives
    # tau 3.20 at K=7 (the published figure the reuse decay is solved from).
    mtp = acceptance.positions_from_p1(0.85, 7, decays["mtp"])
    assert float(acceptance.tau_from_positions(mtp, 7)) == pytest.approx(3.20, abs=0.02)
