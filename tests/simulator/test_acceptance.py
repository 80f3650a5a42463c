"""Acceptance conversions: hand-computed values and the laws between the three forms."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator import acceptance


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


def test_extend_positions_continues_geometrically():
    ext = acceptance.extend_positions([0.8, 0.4], 4)[0]
    np.testing.assert_allclose(ext, [0.8, 0.4, 0.2, 0.1])


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
