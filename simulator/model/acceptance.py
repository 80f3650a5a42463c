"""Acceptance: the three ways to state it and the conversions between them.

- alpha: per-token acceptance probability, i.i.d. over positions (Leviathan et al. 2023).
- tau: mean tokens emitted per target step, bonus token included, in [1, K+1]
  (vLLM's "mean acceptance length").
- per-position rates p_i: probability that draft position i (1-based) is accepted,
  non-increasing in i (vLLM's accepted_per_pos[i] / num_drafts).

All functions take numpy arrays (or scalars) and broadcast.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_ALPHA_ONE = 1.0 - 1e-12
STEP_TOL = 1e-14
"""Newton steps in `alpha_from_tau` end once none moves alpha by more than this."""
WHOLE_POWER_MAX = 16
"""Above this K, `WholePower` calls `pow`: the products would cost more."""


class WholePower:
    """`x ** k` for one array of exponents `k`: where every K is a whole number up to
    `WHOLE_POWER_MAX`, the powers x, x^2, ... by successive products and each row's
    picked out (a product costs a twentieth of a `pow` call); plain `x ** k` otherwise.
    A row's result depends only on its own x and K, never on the other rows."""

    def __init__(self, k) -> None:
        self.k = np.asarray(k, dtype=float)
        self.pick: np.ndarray | None = None
        k = self.k
        if k.ndim == 1 and k.size >= 64 and np.isfinite(k).all():
            whole = k.astype(np.int64)
            if (whole == k).all() and whole.min() >= 0 and whole.max() <= WHOLE_POWER_MAX:
                self.top = int(whole.max())
                self.pick = whole * k.size + np.arange(k.size)

    def __call__(self, x) -> np.ndarray:
        if self.pick is None:
            return np.asarray(x, dtype=float) ** self.k
        x = np.asarray(x, dtype=float)
        powers = np.empty((self.top + 1, self.k.size))
        powers[0] = 1.0
        for j in range(1, self.top + 1):
            np.multiply(powers[j - 1], x, out=powers[j])
        return powers.ravel().take(self.pick)


def tau_iid(alpha, k):
    """Mean tokens per target step for i.i.d. acceptance alpha and K drafts.

    tau = (1 - alpha^(K+1)) / (1 - alpha), with the limit K+1 at alpha = 1.
    """
    alpha = np.asarray(alpha, dtype=float)
    k = np.asarray(k, dtype=float)
    a = np.minimum(alpha, _ALPHA_ONE)
    power = WholePower(k + 1.0)(a) if a.shape == k.shape else a ** (k + 1.0)
    return np.where(alpha >= _ALPHA_ONE, k + 1.0, (1.0 - power) / (1.0 - a))


def alpha_from_tau(tau, k, *, iterations: int = 14):
    """Invert `tau_iid`: the i.i.d. alpha that yields mean tokens tau with K drafts.

    tau must lie in [1, K+1]. tau_iid is convex and increasing in alpha, so Newton's
    method started at 1 - 1/tau (the K = infinity answer, never above the root) steps
    past the root once and then falls to it monotonically; 14 steps reach float
    precision for K up to 16. It stops earlier once no row moves by more than
    `STEP_TOL` (about 5 steps for alpha in 0.3-0.95 and K up to 8).
    """
    tau = np.asarray(tau, dtype=float)
    k = np.asarray(k, dtype=float)
    tau, k = np.broadcast_arrays(tau, k)
    a = np.clip(1.0 - 1.0 / np.maximum(tau, 1.0), 0.0, 1.0)
    k1 = k + 1.0
    pow_k = WholePower(k)
    for _ in range(iterations):
        power = pow_k(a)
        if not (a > 1.0 - 1e-4).any():
            # Far from alpha = 1 (nearly always): the closed forms below, without the
            # guards, in fewer passes over the rows.
            one_minus = 1.0 - a
            f = (1.0 - power * a) / one_minus - tau
            df = (1.0 - k1 * power + k * power * a) / (one_minus * one_minus)
        else:
            # The value's closed form holds to within 1e-12 of alpha = 1; the slope's
            # cancels badly much earlier, and only the step size depends on it, not the
            # fixed point.
            at_one = a > 1.0 - 1e-12
            flat = a > 1.0 - 1e-4
            one_minus = np.where(at_one, 1.0, 1.0 - a)
            f = np.where(at_one, k1, (1.0 - power * a) / one_minus) - tau
            taylor = k * k1 / 2.0 - k1 * k * (k - 1.0) / 3.0 * (1.0 - a)
            exact = (1.0 - k1 * power + k * power * a) / np.where(flat, 1.0, one_minus) ** 2
            df = np.where(flat, taylor, exact)
        moved, a = a, np.clip(a - f / df, 0.0, 1.0)
        if a.size and np.abs(a - moved).max() <= STEP_TOL:
            break
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
    return tokens_per_step_quantiles_iid(alpha, k, (q,))[0]


def tokens_per_step_quantiles_iid(alpha, k, qs) -> list[np.ndarray]:
    """`tokens_per_step_quantile_iid` for each q in `qs`, sharing the logarithm."""
    alpha = np.asarray(alpha, dtype=float)
    k = np.asarray(k, dtype=float)
    top = k + 1.0
    fast = alpha.ndim and alpha.shape == np.broadcast_shapes(alpha.shape, k.shape)
    if fast and alpha.size and alpha.min() > 0.0 and alpha.max() < 1.0:
        # Every alpha strictly inside (0, 1), the common case: the guards below change
        # nothing, so the same figures in a third of the passes.
        log_alpha = np.log(alpha)
        out = []
        for q in qs:
            j = np.ceil(np.log1p(-q) / log_alpha - 1e-9)
            np.minimum(j, top, out=j)
            out.append(np.maximum(j, 1.0, out=j))
        return out
    with np.errstate(divide="ignore", invalid="ignore"):
        log_alpha = np.log(np.clip(alpha, 1e-300, 1.0))
        out = []
        for q in qs:
            j = np.ceil(np.log1p(-q) / log_alpha - 1e-9)
            j = np.where(alpha >= 1.0, top, np.where(alpha <= 0.0, 1.0, j))
            # NaN (from NaN alpha) counts as 1 token, +inf as K+1, as nan_to_num would.
            j = np.where(np.isnan(j), 1.0, np.minimum(j, top))
            out.append(np.clip(j, 1.0, top))
    return out


@dataclass(frozen=True)
class Decay:
    """How a method's acceptance falls with draft position.

    The conditional acceptance of position i >= 2 (accepted given i-1 accepted) is
    `min(1, rho * p1 * delta^(i-2))`, so `p_i = p1 * prod_{j=2..i} c_j`. rho = delta = 1
    is the i.i.d. model (p_i = p1^i); rho < 1 means deeper positions are harder than the
    first, delta < 1 that they get harder still with depth. Positions past `depth` (an MTP
    module's trained depth) reuse the last module: their conditional is
    `min(1, reuse_rho * p1)`.
    """

    rho: float = 1.0
    delta: float = 1.0
    depth: float = np.inf
    reuse_rho: float = 1.0


IID = Decay()


def positions_from_p1(p1, k_max: int, decay: Decay = IID):
    """Per-position rates p_1..p_k_max (shape (..., k_max)) for first-position rate p1.

    The decay's fields may be arrays that broadcast with p1 (a grid of decays at once).
    """
    p1 = np.clip(np.asarray(p1, dtype=float), 0.0, 1.0)
    rho, delta, depth, reuse = (
        np.broadcast_to(np.asarray(v, dtype=float), p1.shape)[..., None]
        for v in (decay.rho, decay.delta, decay.depth, decay.reuse_rho)
    )
    i = np.arange(2, k_max + 1)
    first = p1[..., None]
    cond = np.where(i <= depth, rho * first * delta ** (i - 2.0), reuse * first)
    tail = first * np.cumprod(np.clip(cond, 0.0, 1.0), axis=-1)
    return np.concatenate([first, tail], axis=-1)


def p1_for_tau(tau, k, decay: Decay = IID, *, iterations: int = 40):
    """The first-position rate whose decay curve gives mean tokens tau at K drafts.

    tau(K) grows with p1, so bisection on [0, 1]; a tau above what p1 = 1 reaches gets 1.
    The decay's fields may be arrays that broadcast with tau.
    """
    tau = np.asarray(tau, dtype=float)
    shape = np.broadcast_shapes(
        tau.shape, *(np.shape(v) for v in (decay.rho, decay.delta, decay.depth, decay.reuse_rho))
    )
    tau = np.broadcast_to(tau, shape)
    k = np.broadcast_to(np.asarray(k, dtype=float), shape)
    k_max = int(np.nanmax(k)) if k.size else 1
    lo, hi = np.zeros(shape), np.ones(shape)
    for _ in range(iterations):
        mid = (lo + hi) / 2.0
        above = tau_from_positions(positions_from_p1(mid, k_max, decay), k) > tau
        lo, hi = np.where(above, lo, mid), np.where(above, mid, hi)
    return (lo + hi) / 2.0


def positions_from_tau(tau, k, k_max: int, decay: Decay = IID):
    """Extend tau measured at K drafts to k_max positions along the method's decay."""
    return positions_from_p1(p1_for_tau(tau, k, decay), k_max, decay)


def extend_measured(positions, k_max: int, decay: Decay = IID):
    """Extend measured per-position rates to k_max positions.

    Past the measured positions the conditional acceptance stays at the geometric mean
    of the measured conditionals p_i / p_{i-1}, i >= 2 (their tail: a single ratio is
    noisy, and a trend fitted to a few positions overshoots); with only p_1 measured, the
    method's `decay` continues it. NaN entries are positions never measured.
    """
    p = np.atleast_2d(np.asarray(positions, dtype=float))
    if p.shape[-1] >= k_max:
        # Columns past k_max never count; a row measured over fewer than k_max positions
        # (NaN padded because another row measured more) is still extended.
        p = p[..., :k_max]
        if not np.isnan(p).any():
            return p
    n = p.shape[-1]
    known = np.sum(~np.isnan(p), axis=-1)
    p = np.nan_to_num(p, nan=0.0)
    rows = np.arange(p.shape[0])
    last = p[rows, np.maximum(known - 1, 0)]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(p[..., :-1] > 0, p[..., 1:] / p[..., :-1], 0.0)
    idx = np.arange(1, n)
    use = (idx[None, :] < known[:, None]) & (ratios > 0)
    logs = np.where(use, np.log(np.where(ratios > 0, ratios, 1.0)), 0.0)
    count = use.sum(axis=-1)
    tail = np.where(count > 0, np.exp(logs.sum(axis=-1) / np.maximum(count, 1)), 0.0)
    single = positions_from_p1(p[:, 0], k_max, decay)
    out = np.zeros((p.shape[0], k_max))
    for j in range(k_max):
        steps = j - (known - 1)
        extended = last * np.clip(tail, 0.0, 1.0) ** np.maximum(steps, 0)
        from_one = single[:, j]
        measured = p[:, j] if j < n else np.zeros(p.shape[0])
        out[:, j] = np.where(
            j < known, measured, np.where(count > 0, extended, np.where(known == 1, from_one, 0))
        )
    return out


def curve_taus(kind: str, values: str) -> dict[int, float]:
    """tau at each K of a public curve: `per_position` "p1;p2;..." or `tau_by_k`
    "k1:tau1;k2:tau2;..." (the format of data/acceptance_curves.csv)."""
    parts = [v.strip() for v in values.split(";") if v.strip()]
    if kind == "per_position":
        p = np.array([float(v) for v in parts])
        return {k: float(1.0 + p[:k].sum()) for k in range(1, len(p) + 1)}
    if kind == "tau_by_k":
        out = {}
        for part in parts:
            k, tau = part.split(":")
            out[int(k)] = float(tau)
        return out
    raise ValueError(f"unknown curve kind {kind!r}")


def fit_decay(
    curves: list[dict[int, float]], anchor_k: int = 3, max_rho: float = 1.4
) -> tuple[Decay, float]:
    """The (rho, delta) that best extends each curve from its tau at the K nearest
    `anchor_k` to its other Ks: a grid over rho in [0.5, max_rho] and delta in [0.6, 1]
    (steps of 0.02), minimising the mean squared relative error of tau. Returns the decay
    and the median relative error of tau over the extended points."""
    rho, delta = np.meshgrid(np.arange(0.5, max_rho + 1e-4, 0.02), np.arange(0.6, 1.0001, 0.02))
    grid = Decay(rho=rho.ravel(), delta=delta.ravel())
    errs = []
    for taus in curves:
        ks = np.array(sorted(taus))
        if len(ks) < 2:
            continue
        anchor = int(ks[np.argmin(np.abs(ks - anchor_k))])
        p1 = p1_for_tau(np.full(rho.size, taus[anchor]), anchor, grid)
        pos = positions_from_p1(p1, int(ks.max()), grid)
        for k in ks[ks != anchor]:
            errs.append(tau_from_positions(pos, np.full(rho.size, k)) / taus[int(k)] - 1.0)
    if not errs:
        return IID, float("nan")
    errs = np.stack(errs)
    best = int(np.argmin(np.mean(np.square(errs), axis=0)))
    decay = Decay(rho=round(float(grid.rho[best]), 2), delta=round(float(grid.delta[best]), 2))
    return decay, float(np.median(np.abs(errs[:, best])))
