"""The model as a pipeline of named stages, each a function of a few typed inputs that
returns a small frozen dataclass of arrays.

    Piece (one piece of scenario rows that share a method)
      -> get_acceptance     Acceptance   alpha, tau, tokens per step p10/p50/p90
      -> get_memory         Memory       weights, KV bytes per token, capacity, concurrency
      -> get_batch          Batch        the batch that runs in each arm (KV, admission cap)
      -> get_steps          Steps        target, verify, draft, prefill, engine, step ms
             (forward times from a `step_times.StepTimes` provider: the one seam)
      -> get_open_loop      OpenLoop     Little's law batches under a request rate
      -> get_serving        Serving      throughput, TPOT, speedup
      -> get_status         Status       why an arm cannot run (bits), which arm
      -> get_economics      Economics    $ per 1M tokens
      -> get_warnings, get_break_even    warnings (bits), break-even acceptance

`simulator.model.predict` cuts a table into pieces and composes these per piece. A value is an
array of one entry per row, or a scalar where every row of the piece shares it; a mask
is a boolean array or a Python bool. Units: ms, tokens, bytes, tokens/s, $.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from simulator.inputs.catalog import method_decays
from simulator.model import acceptance, drafts, economics, memory, steady
from simulator.model.defaults import ModelDefaults
from simulator.model.latency import Hardware, ModelArrays, get_kv_share_per_gpu
from simulator.model.step_times import DRAFT, TARGET, StepTimes

QUANTILES = (0.1, 0.5, 0.9)
"""Quantiles of tokens emitted per target step the outputs report."""


def where(cond, a, b):
    """np.where(cond, a, b), without a pass over the rows when `cond` is a Python bool."""
    if cond is True:
        return a
    if cond is False:
        return b
    return np.where(cond, a, b)


def mask(values: np.ndarray):
    """A boolean array, or a Python bool when every entry agrees (the common case)."""
    if values.all():
        return True
    if not values.any():
        return False
    return values


@dataclass(frozen=True)
class Piece:
    """The inputs of one piece of rows that share a method: the scenario's values per
    row, the model figures (`target`, `draft`) and datasheet hardware per row."""

    n: int
    method_name: str
    method: dict
    """`drafts.method_masks(method_name)`."""
    target: ModelArrays
    draft: ModelArrays
    target_code: np.ndarray | int
    draft_code: np.ndarray | int
    """Index of the draft in the model catalog plus one (0: no draft model)."""
    hardware: Hardware
    memory_gb: np.ndarray
    weight_bytes: np.ndarray | float
    kv_bytes: np.ndarray | float
    k: np.ndarray
    batch: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    verify: np.ndarray
    medusa_heads: np.ndarray
    mtp_depth: np.ndarray
    draft_window: np.ndarray
    acceptance_rate: np.ndarray
    mean_accepted_tokens: np.ndarray
    positions: np.ndarray | None
    """Measured per-position acceptance (n, P), NaN past the measured ones; or None."""
    gpu_memory_utilization: np.ndarray
    request_rate: np.ndarray
    in_steady: np.ndarray | bool
    sampled: np.ndarray | bool
    gpu_hourly_usd: np.ndarray
    attention_dp: np.ndarray | float = 1.0
    """Attention data-parallel ranks of the replica (its GPUs / attention TP)."""
    max_num_seqs: np.ndarray | float = np.nan
    """Requests the replica runs at once as launched (NaN: the engine's default)."""

    @property
    def spec_on(self) -> bool:
        return self.method_name != "none"

    @property
    def is_draft(self) -> bool:
        return self.method["draft_model"]

    @cached_property
    def context(self):
        """Mean context a decode step attends over: prompt + output / 2 tokens."""
        return self.prompt + self.output / 2.0

    @cached_property
    def draft_context(self):
        """The draft's context: the window of a draft that keeps only `draft_context_len`."""
        windowed = mask(~np.isnan(self.draft_window))
        return where(windowed, np.minimum(self.context, self.draft_window), self.context)

    @cached_property
    def lookahead(self):
        """KV slots vLLM reserves per running request for the drafts (0 for n-grams)."""
        return self.k if self.method_name in ("draft_model", "eagle", "eagle3", "mtp") else 0.0

    @cached_property
    def open_loop(self):
        return mask(~np.isnan(self.request_rate))


@dataclass(frozen=True)
class Acceptance:
    alpha: np.ndarray
    """i.i.d.-equivalent per-token acceptance (NaN without speculation)."""
    tau: np.ndarray
    """Mean tokens emitted per target step, bonus included."""
    quantiles: dict
    """Tokens per step at each of `QUANTILES`."""


def get_acceptance(p: Piece) -> Acceptance:
    """Acceptance: i.i.d. rows in closed form (from alpha, or alpha solved from a given
    tau); rows with measured per-position rates from their own (n, K) matrix."""
    n, k = p.n, p.k
    positions = p.positions
    has_pos = (
        np.zeros(n, bool) if positions is None or not p.spec_on else ~np.isnan(positions[:, 0])
    )
    if p.spec_on:
        alpha = p.acceptance_rate.copy()
        tau_in = p.mean_accepted_tokens
        from_tau = ~np.isnan(tau_in)
        if from_tau.any():
            alpha[from_tau] = acceptance.alpha_from_tau(tau_in[from_tau], k[from_tau])
        a0 = np.nan_to_num(alpha) if np.isnan(alpha).any() else alpha
        tau = acceptance.tau_iid(a0, k)
        tau[from_tau] = tau_in[from_tau]
        qs = acceptance.tokens_per_step_quantiles_iid(a0, k, QUANTILES)
        quantiles = dict(zip(QUANTILES, qs, strict=True))
    else:
        alpha = np.full(n, np.nan)
        tau = np.ones(n)
        quantiles = {q: np.ones(n) for q in QUANTILES}
    if has_pos.any():
        rows = np.flatnonzero(has_pos)
        pos = extend_measured(
            positions[rows], k[rows], np.full(rows.size, p.method_name), p.mtp_depth[rows]
        )
        tau[rows] = acceptance.tau_from_positions(pos, k[rows])
        alpha[rows] = acceptance.alpha_from_tau(tau[rows], k[rows])
        for q in quantiles:
            quantiles[q][rows] = acceptance.tokens_per_step_quantile(pos, k[rows], q)
    return Acceptance(alpha=alpha, tau=tau, quantiles=quantiles)


def extend_measured(positions, k, methods, mtp_depth) -> np.ndarray:
    """Measured per-position rates (NaN past the measured ones) extended to the largest K:
    along the measured conditionals, or, from a single measured position, along the
    method's decay fitted on public curves (`catalog.method_decays`)."""
    k_max = int(k.max())
    single = (np.sum(~np.isnan(positions), axis=-1) == 1) & (k > 1)
    out = np.zeros((len(positions), k_max))
    for name, depth in sorted(set(zip(methods, mtp_depth, strict=True))):
        sel = (methods == name) & (mtp_depth == depth)
        decay = acceptance.IID
        if single[sel].any():
            decay = method_decays().get(name, acceptance.IID)
            if name == "mtp":
                decay = replace(decay, depth=float(depth))
        out[sel] = acceptance.extend_measured(positions[sel], k_max, decay)
    return out


@dataclass(frozen=True)
class Memory:
    """Bytes of weights and reserves, KV cache per token and in all, per replica."""

    weights: np.ndarray
    draft_weights: np.ndarray
    reserved: np.ndarray
    kv_per_token: np.ndarray
    draft_kv_per_token: np.ndarray
    usable_base: np.ndarray
    """Bytes left for the KV cache without speculation (<= 0: the target does not fit)."""
    usable_spec: np.ndarray
    capacity_base: np.ndarray
    """KV tokens the replica holds, replica-wide."""
    capacity_spec: np.ndarray
    concurrency_base: np.ndarray
    """vLLM's start-up figure: capacity / (P + O + lookahead)."""
    concurrency_spec: np.ndarray
    fits: np.ndarray
    """Whether the asked batch fits the speculative arm's concurrency."""


def get_memory(p: Piece, defaults: ModelDefaults) -> Memory:
    """Weights, reserves and the KV cache that is left, in each arm."""
    t, d, method, tp = p.target, p.draft, p.method, p.hardware.num_gpus
    # Attention DP keeps a copy of everything but the routed experts on each rank, and
    # each rank caches only its own sequences' KV over its attention TP group.
    dp = np.asarray(p.attention_dp, dtype=float)
    weights = (t.total_params + (dp - 1.0) * t.always_active_params) * p.weight_bytes
    tp_attn = tp / dp
    # A draft model that is the target itself (self-speculation with a compressed cache,
    # as MagicDec runs it) shares the target's weights.
    self_draft = p.is_draft and np.equal(p.draft_code - 1, p.target_code)
    draft_params = drafts.get_draft_params(method, t, d, p.k, p.medusa_heads, p.mtp_depth)
    draft_weights = np.where(self_draft, 0.0, draft_params * p.weight_bytes)
    kv_t = memory.get_kv_bytes_per_token_arrays(t, p.kv_bytes)
    kv_d = drafts.get_draft_kv_bytes_per_token(method, t, d, p.kv_bytes)
    act = memory.get_activation_reserve_bytes(t, tp, defaults)
    reserved = tp * (
        act
        + (defaults.non_torch_reserve_gb + defaults.cuda_graph_reserve_gb)
        * defaults.hbm_bytes_per_gb
    )
    util = p.gpu_memory_utilization
    usable_base = memory.get_usable_kv_bytes(p.memory_gb, tp, weights, act, util, defaults)
    usable_spec = usable_base
    share_t = get_kv_share_per_gpu(t, tp_attn)
    kv_rep_t = kv_t * share_t * tp_attn
    if p.spec_on:
        usable_spec = memory.get_usable_kv_bytes(
            p.memory_gb, tp, weights + draft_weights, act, util, defaults
        )
        share_d = get_kv_share_per_gpu(d, tp_attn) if p.is_draft else share_t
        kv_rep_d = kv_d * share_d * tp_attn * (p.draft_context / p.context)
        cap_spec = memory.get_token_capacity(usable_spec, kv_rep_t + kv_rep_d)
    cap_base = memory.get_token_capacity(usable_base, kv_rep_t)
    conc_base = memory.get_max_concurrency(cap_base, p.prompt, p.output, 0)
    if p.spec_on:
        conc_spec = memory.get_max_concurrency(cap_spec, p.prompt, p.output, p.lookahead)
    else:
        cap_spec, conc_spec = cap_base, conc_base
    return Memory(
        weights=weights,
        draft_weights=draft_weights,
        reserved=reserved,
        kv_per_token=kv_t,
        draft_kv_per_token=kv_d,
        usable_base=usable_base,
        usable_spec=usable_spec,
        capacity_base=cap_base,
        capacity_spec=cap_spec,
        concurrency_base=conc_base,
        concurrency_spec=conc_spec,
        fits=p.batch <= conc_spec,
    )


@dataclass(frozen=True)
class Batch:
    """Requests in the engine per arm: closed loop, the asked batch capped by the KV
    cache and max_num_seqs; open loop, the cap (Little's law sets the batch later)."""

    asked: np.ndarray
    """The batch asked for (inf under a request rate)."""
    base: np.ndarray
    spec: np.ndarray
    capped_by_engine: np.ndarray | bool = False
    """Where the engine's admission cap, not the KV cache, bounds the speculative arm's
    batch (the plain arm's, without speculation)."""


def get_batch(p: Piece, mem: Memory, defaults: ModelDefaults, caps: tuple) -> Batch:
    """The batch that runs in each arm in steady state: the KV capacity and the engine's
    admission cap (`caps`: per row, plain and speculative arm; `defaults.max_num_seqs`
    instead where set) bound it, the rest queue."""
    cap_base, cap_spec = caps
    if defaults.max_num_seqs is not None:
        cap_base = cap_spec = float(defaults.max_num_seqs)
    asked = where(p.open_loop, np.inf, p.batch)
    sustained = steady.get_sustained_batch(mem.capacity_base, p.prompt, p.output, 0.0)
    base = steady.get_effective_batch(asked, sustained, cap_base)
    spec, admitted = base, where(p.open_loop, False, (cap_base < asked) & (cap_base < sustained))
    if p.spec_on:
        sustained = steady.get_sustained_batch(mem.capacity_spec, p.prompt, p.output, p.lookahead)
        spec = steady.get_effective_batch(asked, sustained, cap_spec)
        admitted = where(p.open_loop, False, (cap_spec < asked) & (cap_spec < sustained))
    return Batch(asked=asked, base=base, spec=spec, capped_by_engine=admitted)


@dataclass(frozen=True)
class Steps:
    """Per-step times in ms at the batches priced, one entry per row (a scalar where
    every row of a piece shares it), and prefill tokens per step."""

    target: np.ndarray
    """One decode forward of the target (baseline)."""
    verify: np.ndarray
    draft: np.ndarray
    """The draft's K proposals per speculative step."""
    prefill_tokens_base: np.ndarray
    prefill_tokens_spec: np.ndarray
    prefill_base: np.ndarray
    prefill_spec: np.ndarray
    engine_base: np.ndarray
    engine_spec: np.ndarray
    base: np.ndarray
    """A whole baseline step: target + prefill + engine."""
    spec: np.ndarray
    """A whole speculative step: draft + verify + verify overhead + prefill + engine."""
    source: np.ndarray | None
    """`latency_source` per row (None: the roofline for every row)."""


def get_spec_prefill_ms(p: Piece, times: StepTimes, tokens, defaults: ModelDefaults):
    """Prefill ms of `tokens` prompt tokens in a speculative step: target's and draft's."""
    target = get_base_prefill_ms(p, times, tokens, defaults)
    draft_hw = times.draft_hardware if p.is_draft else times.raw_hardware
    return target + drafts.get_draft_prefill_ms(
        p.method, p.target, p.draft, draft_hw, tokens, p.prompt, defaults
    )


def get_base_prefill_ms(p: Piece, times: StepTimes, tokens, defaults: ModelDefaults):
    """Prefill ms of `tokens` prompt tokens through the target alone."""
    hw = times.hardware
    return steady.get_prefill_ms(
        p.target,
        tokens,
        p.prompt,
        hw.tflops,
        hw.link_gbps,
        hw.num_gpus,
        defaults,
        efficiency=hw.prefill_efficiency,
    )


def get_forward_steps(p: Piece, times: StepTimes, b_base, b_spec):
    """(target, verify, draft ms, latency source) at the batches that run: the forwards
    from the `times` provider, the draft's K proposals by method."""
    t_step, src_t = times.forward_ms(TARGET, b_base, 1.0, p.context)
    v_step = d_model_step = d_step = 0.0
    src_v = src_d = d_round = None
    if p.spec_on:
        v_step, src_v = times.forward_ms(TARGET, b_spec, p.verify, p.context)
    if p.is_draft:
        d_model_step, src_d = times.forward_ms(DRAFT, b_spec, 1.0, p.draft_context)
        d_round, src_d = times.draft_round_ms(b_spec, p.k, p.draft_context, src_d)
    source = times.latency_source(src_t, src_v, src_d, p.spec_on and not p.is_draft)
    if p.spec_on:
        d_step = drafts.get_draft_step_ms(
            p.method,
            p.target,
            p.draft,
            times.raw_hardware,
            b_spec,
            p.draft_context,
            p.weight_bytes,
            p.kv_bytes,
            p.k,
            times.defaults,
            draft_model_step_ms=d_model_step,
            head_overhead_ms=times.head_overhead_ms,
            draft_model_round_ms=d_round,
            medusa_heads=p.medusa_heads,
        )
    return t_step, v_step, d_step, source


def get_steps(p: Piece, tau, times: StepTimes, b_base, b_spec) -> Steps:
    """Every per-step time at the batches `b_base`, `b_spec` (>= 1). Steady state: the
    prompts of the requests that replace finished ones ride in each step, tau times as
    many under speculation; the engine's host costs on top."""
    defaults = times.defaults
    t_step, v_step, d_step, source = get_forward_steps(p, times, b_base, b_spec)
    pf_base = where(
        p.in_steady, steady.get_prefill_tokens_per_step(b_base, 1.0, p.prompt, p.output), 0.0
    )
    pf_base_ms = get_base_prefill_ms(p, times, pf_base, defaults)
    host_base = steady.get_engine_step_ms(b_base, defaults) + times.host_shift_ms
    base_step = t_step + pf_base_ms + host_base
    pf_spec, pf_spec_ms, host_spec, spec_step = pf_base, pf_base_ms, host_base, base_step
    if p.spec_on:
        pf_spec = where(
            p.in_steady, steady.get_prefill_tokens_per_step(b_spec, tau, p.prompt, p.output), 0.0
        )
        pf_spec_ms = get_spec_prefill_ms(p, times, pf_spec, defaults)
        draft_forwards = p.k if p.is_draft else 0.0
        hw = times.raw_hardware
        host_spec = times.host_shift_ms + steady.get_engine_step_ms(b_spec, defaults)
        host_spec = host_spec + steady.get_engine_round_ms(
            True, p.sampled, draft_forwards, b_spec, p.k, p.target.vocab_size, hw.bw_gbps,
            hw.num_gpus, defaults,
        )  # fmt: skip
        spec_step = d_step + v_step + defaults.verify_overhead_ms + pf_spec_ms + host_spec
    steps = Steps(
        target=t_step,
        verify=v_step,
        draft=d_step,
        prefill_tokens_base=pf_base,
        prefill_tokens_spec=pf_spec,
        prefill_base=pf_base_ms,
        prefill_spec=pf_spec_ms,
        engine_base=host_base,
        engine_spec=host_spec,
        base=base_step,
        spec=spec_step,
        source=source,
    )
    return times.price_steps(p, steps, b_base, b_spec)


@dataclass(frozen=True)
class OpenLoop:
    """Requests in the engine per arm (before the floor of 1), and which arm a request
    rate overloads (a Python False for closed-loop pieces)."""

    base: np.ndarray
    spec: np.ndarray
    overloaded_base: np.ndarray | bool
    overloaded_spec: np.ndarray | bool


def get_open_loop(p: Piece, tau, times: StepTimes, batch: Batch) -> OpenLoop:
    """Under a request rate the mean number of requests in the engine solves Little's law,
    B = rate * (TTFT + output_len * TPOT(B)), in each arm on its own, up to the cap."""
    b_base = np.maximum(batch.base, 1.0)
    b_spec = np.maximum(batch.spec, 1.0) if p.spec_on else b_base
    open_loop = p.open_loop
    if open_loop is False:
        return OpenLoop(base=b_base, spec=b_spec, overloaded_base=False, overloaded_spec=False)
    n, defaults = p.n, times.defaults
    ttft_base = get_base_prefill_ms(p, times, p.prompt, defaults)
    ttft_spec = ttft_base + drafts.get_draft_prefill_ms(
        p.method, p.target, p.draft, times.draft_hardware, p.prompt, p.prompt, defaults
    )

    def latency_s(b_b, b_s):
        s = get_steps(p, tau, times, np.maximum(b_b, 1.0), np.maximum(b_s, 1.0))
        return (
            (ttft_base + p.output * s.base) / 1e3,
            (ttft_spec + p.output * s.spec / tau) / 1e3,
        )

    b_base, b_spec, over_base, over_spec = steady.solve_littles_law(
        latency_s,
        p.request_rate,
        np.maximum(batch.base, 1.0),
        np.maximum(np.broadcast_to(batch.spec, (n,)), 1.0),
        np.broadcast_to(open_loop, (n,)),
    )
    return OpenLoop(
        base=b_base,
        spec=b_spec if p.spec_on else b_base,
        overloaded_base=over_base,
        overloaded_spec=over_spec & p.spec_on,
    )


@dataclass(frozen=True)
class Serving:
    """Throughput (tokens/s per replica), time per output token (ms) and speedup, before
    the rows that cannot run are blanked."""

    baseline_tok_s: np.ndarray
    spec_tok_s: np.ndarray
    baseline_tpot: np.ndarray
    spec_tpot: np.ndarray
    speedup: np.ndarray


def get_serving(p: Piece, tau, steps: Steps, b_base, b_spec) -> Serving:
    """Closed loop: throughput at the batches that run. Open loop: both arms serve the
    offered rate, so the gain is in each request's time per token."""
    open_loop = p.open_loop
    offered = p.request_rate * p.output
    baseline_tok_s = where(open_loop, offered, b_base * 1e3 / steps.base)
    spec_tok_s = baseline_tok_s
    if p.spec_on:
        spec_tok_s = where(open_loop, offered, b_spec * tau * 1e3 / steps.spec)
    speedup = where(open_loop, steps.base * tau / steps.spec, spec_tok_s / baseline_tok_s)
    return Serving(
        baseline_tok_s=baseline_tok_s,
        spec_tok_s=spec_tok_s,
        baseline_tpot=steps.base,
        spec_tpot=steps.spec / tau,
        speedup=speedup,
    )


def blank_cannot_run(s: Serving, cannot_base, cannot_spec) -> Serving:
    """The serving figures with NaN for every arm that cannot run."""
    nan = np.nan
    return Serving(
        baseline_tok_s=np.where(cannot_base, nan, s.baseline_tok_s),
        spec_tok_s=np.where(cannot_spec, nan, s.spec_tok_s),
        baseline_tpot=np.where(cannot_base, nan, s.baseline_tpot),
        spec_tpot=np.where(cannot_spec, nan, s.spec_tpot),
        speedup=np.where(cannot_base | cannot_spec, nan, s.speedup),
    )


@dataclass(frozen=True)
class Economics:
    cost_base: np.ndarray
    """$ per 1M generated tokens without speculation (NaN where it cannot run)."""
    cost_spec: np.ndarray


def get_economics(p: Piece, s: Serving, cannot_base, cannot_spec) -> Economics:
    """What a million generated tokens cost at each arm's throughput."""
    hourly, tp = p.gpu_hourly_usd, p.hardware.num_gpus
    cost_base = economics.get_cost_per_mtok(hourly, tp, s.baseline_tok_s)
    cost_spec = economics.get_cost_per_mtok(hourly, tp, s.spec_tok_s)
    return Economics(
        cost_base=np.where(cannot_base, np.nan, cost_base),
        cost_spec=np.where(cannot_spec, np.nan, cost_spec),
    )


def get_break_even(p: Piece, times: StepTimes, steps: Steps, tau, b_base, b_spec):
    """The i.i.d. acceptance at which each row's speculation exactly breaks even
    (`break_even_alpha`); NaN without speculation."""
    if not p.spec_on:
        return np.nan
    one = where(
        p.in_steady, steady.get_prefill_tokens_per_step(b_spec, 1.0, p.prompt, p.output), 0.0
    )
    # The prefill a speculative step carries is affine in tau: A + per_tau * tau. Both
    # points in one call, as two rows of a (2, n) array.
    one = np.broadcast_to(one, (p.n,))
    at_two, at_one = get_spec_prefill_ms(p, times, np.stack((2.0 * one, one)), times.defaults)
    per_tau = at_two - at_one
    per_tau = times.prefill_per_tau(p, one, per_tau)
    return break_even_alpha(
        True, steps.spec, tau, per_tau, steps.base, b_base, b_spec, p.k, p.open_loop
    )


def break_even_alpha(spec_on, spec_step, tau, per_tau, base_step, b_base, b_spec, k, open_loop):
    """The i.i.d. acceptance at which this row's speculation exactly breaks even.

    Closed loop, throughput parity: b_spec * tau / spec_step(tau) = b_base / base_step,
    where the steady-state prefill makes the speculative step affine in tau,
    spec_step = S0 + c * tau (c = `per_tau`, the prefill ms per unit of tau). So
    tau* = b_base * S0 / (b_spec * base_step - b_base * c). Open loop, time per token
    parity: the same with b_spec = b_base. Beyond K+1 (or with a non-positive
    denominator) no acceptance suffices (reported as inf).
    """
    b_spec = where(open_loop, b_base, b_spec)
    s0 = spec_step - per_tau * tau
    denom = b_spec * base_step - b_base * per_tau
    with np.errstate(divide="ignore", invalid="ignore"):
        need = np.where(spec_on & (denom > 0), b_base * s0 / denom, np.inf)
    need = np.where(spec_on, need, np.nan)
    out = np.full(need.shape, np.nan)
    ok = spec_on & (need <= k + 1)
    # Four Newton steps: break-even needs 1e-6, not float precision. Measured over K 1-16
    # and alpha 0-1 (with the ends 0-0.01 and 0.999-1 drawn apart), four land within 1e-9
    # of the root and three within 6e-6; later steps only move rows near alpha = 1 by
    # rounding.
    out[ok] = acceptance.alpha_from_tau(np.maximum(need[ok], 1.0), k[ok], iterations=4)
    out[spec_on & ~ok] = np.inf
    return out
