"""Steady-state continuous batching: what one engine step carries besides the decode.

A serving engine never runs an isolated decode step. Requests arrive, prefill, decode
and leave; in steady state every finished request is replaced by a new one, and the
replacement's prompt is prefilled in the same forward as the running decodes (chunked
prefill, vLLM V1's one token budget per step). Per step:

- decode work: B sequences x q tokens (q = 1, or K+1 under speculation);
- prefill work: the prompts of the requests that finish this step,
  `B * tau * prompt_len / output_len` tokens (tau = 1 without speculation). Speculation
  finishes requests tau times sooner, so it pays tau times the prefill per step: the
  prefill cost per generated token is the same in both arms, a fixed term that the
  speedup cannot shrink (Amdahl), and one reason the speedup falls with load;
- host work of the engine: a cost per target forward (scheduling, input preparation,
  sampling), per running sequence, per draft forward and per speculative round, plus the
  rejection sampler's pass over the vocabulary when sampling (temperature > 0).

Prefill arrives in chunks of hundreds of tokens, which are compute-bound, so its time is
priced at the compute roofline and added to the decode forward, not hidden under the
decode's weight reads: `t_prefill = flops / (eta_prefill * F) + all-reduces`, with
`flops = 2 * matmul params * n + 4 * layers * n * (prompt_len / 2) * heads * head_dim`
for n prompt tokens (causal attention over half the prompt on average).

KV capacity caps the batch that actually runs: a request holds on average
`prompt_len + output_len / 2` tokens of KV (it grows from the prompt to the full length)
plus the K lookahead slots vLLM reserves for draft-model and EAGLE/MTP proposals, so the
engine sustains `capacity / (prompt_len + output_len / 2 + lookahead)` requests, and never
more than `max_num_seqs`. The rest queue. Throughput and speedup are computed at the
batch that runs (`effective_batch_baseline`, `effective_batch_spec`).

Units: milliseconds, tokens, bytes. Every function broadcasts over scenario arrays.
"""

from __future__ import annotations

import numpy as np

from simulator.model.defaults import DEFAULTS, ModelDefaults
from simulator.model.latency import ModelArrays, get_allreduce_ms, get_roofline_ms

SERVING_MODES = ("steady", "decode_only")
"""`steady`: continuous batching with prefill in every step (the default);
`decode_only`: the isolated decode step, no prefill."""


def get_prefill_tokens_per_step(batch, tokens_per_step, prompt_len, output_len):
    """Prompt tokens prefilled per engine step in steady state: B * tau * P / O."""
    return (
        np.asarray(batch, dtype=float)
        * np.asarray(tokens_per_step, dtype=float)
        * np.asarray(prompt_len, dtype=float)
        / np.asarray(output_len, dtype=float)
    )


def get_prefill_ms(
    m: ModelArrays,
    tokens,
    prompt_len,
    tflops,
    link_gbps,
    num_gpus,
    d: ModelDefaults = DEFAULTS,
    params=None,
    num_layers=None,
    efficiency=None,
):
    """Time in ms to prefill `tokens` prompt tokens, priced at the compute roofline.

    Prefill chunks are large GEMMs: they run at `prefill_compute_efficiency` of the peak,
    not at the lower `compute_efficiency` of decode and verification; `efficiency`
    (per row, NaN for the default) overrides it, as a profile's fit does. `params` and
    `num_layers` override the model's matmul parameters and attention layers (a one-layer
    EAGLE/MTP head prefills through its own layer only).
    """
    n = np.asarray(tokens, dtype=float)
    tp = np.asarray(num_gpus, dtype=float)
    params = m.matmul_params_per_token if params is None else np.asarray(params)
    layers = m.num_layers if num_layers is None else np.asarray(num_layers)
    attn_dim = m.num_attention_heads * m.head_dim
    flops = (
        2.0 * params * n + 4.0 * layers * n * np.asarray(prompt_len, dtype=float) / 2.0 * attn_dim
    ) / tp
    eff = d.prefill_compute_efficiency if efficiency is None else np.asarray(efficiency, float)
    eff = np.where(np.isnan(eff), d.prefill_compute_efficiency, eff)
    compute = flops / (eff * np.asarray(tflops) * 1e12) * 1e3
    comm = get_allreduce_ms(tp, 2.0 * layers, n, m.hidden_size, link_gbps, d)
    return np.where(n > 0, compute + comm, 0.0)


def get_engine_step_ms(batch, d: ModelDefaults = DEFAULTS):
    """Host cost of one engine step in ms: a fixed part plus a part per running sequence."""
    return d.engine_step_ms + d.engine_per_seq_ms * np.asarray(batch, dtype=float)


def get_engine_round_ms(
    spec_on,
    sampled,
    draft_forwards,
    batch,
    k,
    vocab_size,
    bw_gbps,
    num_gpus,
    d: ModelDefaults = DEFAULTS,
):
    """Host and sampler cost a speculative round adds over a plain step, in ms.

    A host cost per forward of a separate draft model (each of its K proposals is its own
    scheduling, input preparation and synchronisation; an EAGLE/MTP/Medusa head runs
    inside the target's model runner and its fixed cost is `head_forward_overhead_ms`),
    a cost per round (rejection sampler
    launch, KV bookkeeping, draft-token handling), and when sampling, the rejection
    sampler's passes over the vocabulary for B*(K+1) positions at fp32:
    `passes * B * (K+1) * V * 4 bytes / (eta_bw * BW)` split across the GPUs.
    """
    b = np.asarray(batch, dtype=float)
    rows = b * (np.asarray(k, dtype=float) + 1.0)
    sampler_bytes = (
        d.sampler_vocab_passes * rows * np.asarray(vocab_size) * d.logits_dtype_bytes
    ) / np.asarray(num_gpus, dtype=float)
    sampler = get_roofline_ms(sampler_bytes, 0.0, bw_gbps, 1.0, d)
    sampled_extra = np.where(sampled, d.engine_sampled_round_ms + sampler, 0.0)
    per_round = (
        d.engine_round_ms
        + d.engine_draft_forward_ms * np.asarray(draft_forwards, dtype=float)
        + sampled_extra
    )
    return np.where(spec_on, per_round, 0.0)


def get_sustained_batch(token_capacity, prompt_len, output_len, lookahead):
    """Requests the KV cache sustains in steady state: capacity / (P + O/2 + lookahead)."""
    per_request = (
        np.asarray(prompt_len, dtype=float)
        + np.asarray(output_len, dtype=float) / 2.0
        + np.asarray(lookahead, dtype=float)
    )
    return np.floor(np.maximum(np.asarray(token_capacity, dtype=float), 0.0) / per_request)


def get_effective_batch(batch, sustained, max_num_seqs):
    """The batch that runs: what was asked for, capped by KV capacity and max_num_seqs."""
    return np.minimum(np.asarray(batch, dtype=float), np.minimum(sustained, max_num_seqs))


def solve_littles_law(latency_s, rate, cap_base, cap_spec, rows, iterations: int = 40):
    """Mean requests in the engine under a request rate, for both arms.

    `latency_s(b_base, b_spec)` returns each arm's mean request latency in seconds at
    those batches; the answer solves b = rate * latency(b) by bisection on [0, cap] in
    each arm (latency grows with the batch, so the root is unique). Where even the
    capped batch cannot keep up (rate * latency(cap) > cap) the arm is overloaded: its
    queue grows without bound. Returns (b_base, b_spec, overloaded_base, overloaded_spec);
    rows outside `rows` keep their caps.
    """
    rate = np.where(rows, rate, 0.0)
    lo_b, lo_s = np.zeros_like(cap_base), np.zeros_like(cap_spec)
    hi_b, hi_s = cap_base.astype(float), cap_spec.astype(float)
    lat_b, lat_s = latency_s(hi_b, hi_s)
    over_b = rows & (rate * lat_b > hi_b)
    over_s = rows & (rate * lat_s > hi_s)
    for _ in range(iterations):
        mid_b, mid_s = (lo_b + hi_b) / 2.0, (lo_s + hi_s) / 2.0
        lat_b, lat_s = latency_s(np.maximum(mid_b, 1e-3), np.maximum(mid_s, 1e-3))
        above_b = rate * lat_b > mid_b
        above_s = rate * lat_s > mid_s
        lo_b, hi_b = np.where(above_b, mid_b, lo_b), np.where(above_b, hi_b, mid_b)
        lo_s, hi_s = np.where(above_s, mid_s, lo_s), np.where(above_s, hi_s, mid_s)
    b_base = np.where(rows, np.where(over_b, cap_base, (lo_b + hi_b) / 2.0), cap_base)
    b_spec = np.where(rows, np.where(over_s, cap_spec, (lo_s + hi_s) / 2.0), cap_spec)
    return np.maximum(b_base, 1e-3), np.maximum(b_spec, 1e-3), over_b, over_s
