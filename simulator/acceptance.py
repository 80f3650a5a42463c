"""Acceptance: the three ways to state it and the conversions between them.

- alpha: per-token acceptance probability, i.i.d. over positions (Leviathan et al. 2023).
- tau: mean tokens emitted per target step, bonus token included, in [1, K+1]
  (vLLM's "mean acceptance length").
- per-position rates p_i: probability that draft position i (1-based) is accepted,
  non-increasing in i (vLLM's accepted_per_pos[i] / num_drafts).

All functions take numpy arrays (or scalars) and broadcast.
"""

from __future__ import annotations

import numpy as np

_ALPHA_ONE = 1.0 - 1e-12


def tau_iid(alpha, k):
    """Mean tokens per target step for i.i.d. acceptance alpha and K drafts.

    tau = (1 - alpha^(K+1)) / (1 - alpha), with the limit K+1 at alpha = 1.
    """
    alpha = np.asarray(alpha, dtype=float)
    k = np.asarray(k, dtype=float)
    a = np.minimum(alpha, _ALPHA_ONE)
    return np.where(alpha >= _ALPHA_ONE, k + 1.0, (1.0 - a ** (k + 1.0)) / (1.0 - a))


def alpha_from_tau(tau, k, *, iterations: int = 14):
    """Invert `tau_iid`: the i.i.d. alpha that yields mean tokens tau with K drafts.

    tau must lie in [1, K+1]. tau_iid is convex and increasing in alpha, so Newton's
    method started at 1 - 1/tau (the K = infinity answer, never above the root) steps
    past the root once and then falls to it monotonically; 14 steps reach float
    precision for K up to 16.
    """
    tau = np.asarray(tau, dtype=float)
    k = np.asarray(k, dtype=float)
    tau, k = np.broadcast_arrays(tau, k)
    a = np.clip(1.0 - 1.0 / np.maximum(tau, 1.0), 0.0, 1.0)
    for _ in range(iterations):
        # The value's closed form holds to within 1e-12 of alpha = 1; the slope's cancels
        # badly much earlier, and only the step size depends on it, not the fixed point.
        at_one = a > 1.0 - 1e-12
        flat = a > 1.0 - 1e-4
        power = a**k
        one_minus = np.where(at_one, 1.0, 1.0 - a)
        f = np.where(at_one, k + 1.0, (1.0 - power * a) / one_minus) - tau
        taylor = k * (k + 1.0) / 2.0 - (k + 1.0) * k * (k - 1.0) / 3.0 * (1.0 - a)
        exact = (1.0 - (k + 1.0) * power + k * power * a) / np.where(flat, 1.0, one_minus) ** 2
        df = np.where(flat, taylor, exact)
        a = np.clip(a - f / df, 0.0, 1.0)
    return np.where(k > 0, a, np.nan)


def positions_iid(alpha, k_max: int):
    """Per-position acceptance p_i = alpha^i for i = 1..k_max, shape (..., k_max)."""
    alpha = np.asarray(alpha, dtype=float)[..., None]
    return alpha ** np.arange(1, k_max + 1)


def tau_from_positions(positions, k=None):
    """tau(K) = 1 + sum_{i<=K} p_i from per-position rates of shape (..., n).

    With k (broadcastable to the leading shape) only the first K positions count;
    without it, all n do. NaN entries (positions never measured) count as zero.
    """
    p = np.nan_to_num(np.asarray(positions, dtype=float), nan=0.0)
    if k is None:
        return 1.0 + p.sum(axis=-1)
    k = np.asarray(k)
    idx = np.arange(1, p.shape[-1] + 1)
    mask = idx <= k[..., None]
    return 1.0 + (p * mask).sum(axis=-1)


def tau_curve_from_positions(positions):
    """tau for every K from 0 to n: shape (..., n+1). tau(0) = 1 (no speculation)."""
    p = np.nan_to_num(np.asarray(positions, dtype=float), nan=0.0)
    zeros = np.zeros((*p.shape[:-1], 1))
    return 1.0 + np.concatenate([zeros, np.cumsum(p, axis=-1)], axis=-1)


def draft_acceptance_rate(tau, k):
    """vLLM's "draft acceptance rate", accepted / drafted = (tau - 1) / K. It is not alpha."""
    tau = np.asarray(tau, dtype=float)
    k = np.asarray(k, dtype=float)
    return np.where(k > 0, (tau - 1.0) / np.where(k > 0, k, 1.0), np.nan)


def tau_from_draft_acceptance_rate(rate, k):
    """Inverse of `draft_acceptance_rate`: tau = 1 + rate * K."""
    return 1.0 + np.asarray(rate, dtype=float) * np.asarray(k, dtype=float)


def extend_positions(positions, k_max: int):
    """Extend measured per-position rates to k_max positions.

    Positions past the measured ones continue geometrically with the ratio of the last
    two measured rates (or the last rate itself when only one is known), capped at 1,
    so that a K sweep beyond what an engine reported stays non-increasing.
    """
    p = np.atleast_2d(np.asarray(positions, dtype=float))
    n = p.shape[-1]
    if n >= k_max:
        return p[..., :k_max]
    last = p[..., -1]
    if n >= 2:
        prev = p[..., -2]
        ratio = np.where(prev > 0, last / np.where(prev > 0, prev, 1.0), 0.0)
    else:
        ratio = last
    ratio = np.clip(ratio, 0.0, 1.0)
    extra = last[..., None] * ratio[..., None] ** np.arange(1, k_max - n + 1)
    return np.concatenate([p, extra], axis=-1)


def accepted_tokens_pmf(positions, k):
    """Distribution of tokens emitted per step (1..K+1) from per-position rates.

    P(at least i drafts accepted) = p_i, so P(exactly j accepted) = p_j - p_{j+1} with
    p_0 = 1 and p_{K+1} = 0. Returns shape (..., n+1) over j = 0..n accepted drafts;
    entries with j > K are zero.
    """
    p = np.nan_to_num(np.atleast_2d(np.asarray(positions, dtype=float)), nan=0.0)
    n = p.shape[-1]
    k = np.broadcast_to(np.asarray(k), p.shape[:-1])
    idx = np.arange(1, n + 1)
    p = np.where(idx <= k[..., None], p, 0.0)
    at_least = np.concatenate(
        [np.ones((*p.shape[:-1], 1)), p, np.zeros((*p.shape[:-1], 1))], axis=-1
    )
    return at_least[..., :-1] - at_least[..., 1:]


def tokens_per_step_quantile(positions, k, q: float):
    """Smallest tokens-per-step count (1..K+1) whose cumulative probability reaches q."""
    pmf = accepted_tokens_pmf(positions, k)
    cdf = np.cumsum(pmf, axis=-1)
    return (np.argmax(cdf >= q - 1e-12, axis=-1) + 1).astype(float)


def tokens_per_step_quantile_iid(alpha, k, q: float):
    """`tokens_per_step_quantile` for i.i.d. acceptance, in closed form.

    P(tokens <= j) = 1 - alpha^j for j <= K, so the q-quantile is the smallest integer
    j >= log(1 - q) / log(alpha), capped at K+1.
    """
    alpha = np.asarray(alpha, dtype=float)
    k = np.asarray(k, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        j = np.ceil(np.log1p(-q) / np.log(np.clip(alpha, 1e-300, 1.0)) - 1e-9)
    j = np.where(alpha >= 1.0, k + 1.0, np.where(alpha <= 0.0, 1.0, j))
    return np.clip(np.nan_to_num(j, nan=1.0, posinf=k + 1.0), 1.0, k + 1.0)
