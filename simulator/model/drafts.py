"""What each speculation method costs: draft parameters, draft KV per token, draft time.

- draft_model: a separate small model of the same tokenizer, K autoregressive steps.
- eagle: a head of about one decoder layer of the target plus a 2H->H fusion layer,
  sharing the target's embedding and LM head; K autoregressive steps.
- eagle3: the same with a 3H->H fusion of low, middle and high target features.
- mtp: DeepSeek's multi-token-prediction modules, one full target layer each (its experts
  included) plus the 2H->H projection, `mtp_depth` of them loaded; K autoregressive steps.
- medusa: a fixed number of heads (a residual H x H block and an H x V LM head each, all
  loaded) that all run once per step from the target's last hidden state.
- ngram: prompt lookup on the CPU; no GPU parameters, cache or time.
Sizes are parameter counts, bytes and milliseconds; arrays broadcast per scenario.
"""

from __future__ import annotations

import numpy as np

from simulator.inputs.specs import METHODS
from simulator.model.defaults import DEFAULTS, ModelDefaults
from simulator.model.latency import (
    Hardware,
    ModelArrays,
    get_allreduce_ms,
    get_experts_touched,
    get_kv_share_per_gpu,
    get_model_step_ms,
    get_roofline_ms,
)
from simulator.model.steady import get_prefill_ms


def method_masks(method) -> dict[str, np.ndarray]:
    """Boolean mask per method name; pass the dict itself to skip recomputing it. One
    method name (a str) gives Python bools, and the functions below then compute only
    that method's branch."""
    if isinstance(method, dict):
        return method
    if isinstance(method, str):
        return {name: method == name for name in METHODS}
    method = np.asarray(method)
    return {name: method == name for name in METHODS}


def _select(branches, default=0.0):
    """np.select over (mask, compute) pairs; with Python-bool masks only the chosen
    branch is computed."""
    if all(isinstance(mask, bool) for mask, _ in branches):
        for mask, compute in branches:
            if mask:
                return compute()
        return default
    return np.select(
        [mask for mask, _ in branches], [compute() for _, compute in branches], default
    )


def _layer_shared_params(t: ModelArrays) -> np.ndarray:
    """Per-layer parameters every token reads (attention, norms, dense or shared MLP)."""
    body = np.where(t.num_experts > 0, t.always_active_params, t.total_params)
    return (body - t.embedding_params) / t.num_layers


def get_head_params(method, t: ModelArrays, k, medusa_heads=None, mtp_depth=1.0) -> np.ndarray:
    """Parameters a self-speculative head adds to the deployment (0 for other methods).

    Medusa loads all its heads (`medusa_heads`, default K), MTP all `mtp_depth` modules.
    """
    m = method_masks(method)
    h = t.hidden_size

    def layer():
        # On an MoE target the EAGLE head still carries a dense MLP of the target's width.
        return _layer_shared_params(t) + np.where(
            t.num_experts > 0, 3.0 * h * t.intermediate_size, 0.0
        )

    def mtp():
        return (_layer_shared_params(t) + t.num_experts * t.params_per_expert + 2.0 * h * h) * (
            np.asarray(mtp_depth, dtype=float)
        )

    def medusa():
        heads = np.asarray(k if medusa_heads is None else medusa_heads, dtype=float)
        return heads * (h * h + h * t.vocab_size)

    return _select(
        [
            (m["eagle"], lambda: layer() + 2.0 * h * h),
            (m["eagle3"], lambda: layer() + 3.0 * h * h),
            (m["mtp"], mtp),
            (m["medusa"], medusa),
        ]
    )


def get_draft_params(
    method, t: ModelArrays, d: ModelArrays, k, medusa_heads=None, mtp_depth=1.0
) -> np.ndarray:
    """Parameters the speculation method adds to GPU memory."""
    m = method_masks(method)
    if isinstance(m["draft_model"], bool):
        if m["draft_model"]:
            return d.total_params
        return get_head_params(m, t, k, medusa_heads, mtp_depth)
    return np.where(
        m["draft_model"], d.total_params, get_head_params(m, t, k, medusa_heads, mtp_depth)
    )


def get_draft_kv_bytes_per_token(method, t: ModelArrays, d: ModelArrays, kv_bytes):
    """Bytes of draft KV cache per token of context (whole model, before TP sharding)."""
    m = method_masks(method)
    return _select(
        [
            (m["draft_model"], lambda: d.num_layers * d.kv_values_per_token_per_layer * kv_bytes),
            (
                m["eagle"] | m["eagle3"] | m["mtp"],
                lambda: t.kv_values_per_token_per_layer * kv_bytes,
            ),
        ]
    )


def get_draft_step_ms(
    method,
    t: ModelArrays,
    d: ModelArrays,
    hw: Hardware,
    batch,
    context_len,
    weight_bytes,
    kv_bytes,
    k,
    d_defaults: ModelDefaults = DEFAULTS,
    draft_model_step_ms=None,
    head_overhead_ms=None,
    draft_model_round_ms=None,
    medusa_heads=None,
):
    """Time in ms the draft spends per speculative step (all K proposals together).

    `draft_model_step_ms`, when given, replaces the roofline of one draft-model decode
    step (a measured profile supplies it); `head_overhead_ms` the fixed cost of one head
    forward (default: `head_forward_overhead_ms`). `draft_model_round_ms`, where not NaN,
    replaces a draft model's K steps by their measured in-loop total
    (`Calibration.draft_round_ms`).
    """
    head_overhead = (
        d_defaults.head_forward_overhead_ms
        if head_overhead_ms is None
        else np.asarray(head_overhead_ms)
    )
    m = method_masks(method)
    k = np.asarray(k, dtype=float)
    b = np.asarray(batch, dtype=float)

    def draft_model_round():
        one_step = draft_model_step_ms
        if one_step is None:
            one_step = get_model_step_ms(
                d,
                hw,
                b,
                1.0,
                context_len,
                weight_bytes,
                kv_bytes,
                d_defaults.draft_forward_overhead_ms,
                d_defaults,
            )
        rounds = k * one_step
        if draft_model_round_ms is not None:
            rounds = np.where(np.isnan(draft_model_round_ms), rounds, draft_model_round_ms)
        return rounds

    def head_steps():
        step = _get_head_step_ms(m, t, hw, b, k, context_len, weight_bytes, kv_bytes, d_defaults)
        return k * (step + head_overhead)

    def medusa_step():
        heads = k if medusa_heads is None else np.asarray(medusa_heads, float)
        return _get_medusa_step_ms(t, hw, b, heads, weight_bytes, d_defaults) + head_overhead

    return _select(
        [
            (m["draft_model"], draft_model_round),
            (m["eagle"] | m["eagle3"] | m["mtp"], head_steps),
            (m["medusa"], medusa_step),
        ]
    )


def _get_head_step_ms(
    m, t: ModelArrays, hw: Hardware, b, k, context_len, weight_bytes, kv_bytes, d
):
    """ms of one EAGLE/MTP head forward (one decoder layer, the fusion and the LM head)
    without its fixed overhead: an MTP module's layer with its experts, an EAGLE head's
    layer otherwise."""
    tp = np.asarray(hw.num_gpus, dtype=float)
    h = t.hidden_size
    lm_head = t.vocab_size * h

    def mtp_layer():
        experts = get_experts_touched(t.num_experts, t.experts_per_token, b)
        return _layer_shared_params(t) + experts * t.params_per_expert

    def eagle_layer():
        return get_head_params("eagle", t, k) - 2.0 * h * h

    if isinstance(m["mtp"], bool):
        head_layer = mtp_layer() if m["mtp"] else eagle_layer()
    else:
        head_layer = np.where(m["mtp"], mtp_layer(), eagle_layer())
    fusion = np.where(m["eagle3"], 3.0, 2.0) * h * h
    head_params = head_layer + fusion + lm_head
    head_kv = (b * np.asarray(context_len) + b) * t.kv_values_per_token_per_layer * kv_bytes
    head_bytes = head_params * weight_bytes / tp + head_kv * get_kv_share_per_gpu(t, tp)
    head_flops = (
        2.0 * head_params * b
        + 4.0 * b * np.asarray(context_len) * t.num_attention_heads * t.head_dim
    ) / tp
    return get_roofline_ms(
        head_bytes, head_flops, hw.bw_gbps, hw.tflops, d, hw.sharpness
    ) + get_allreduce_ms(tp, 2.0, b, h, hw.link_gbps, d)


def _get_medusa_step_ms(t: ModelArrays, hw: Hardware, b, heads, weight_bytes, d):
    """ms of one forward of `heads` Medusa heads (each a residual block and an LM head),
    without its fixed overhead."""
    tp = np.asarray(hw.num_gpus, dtype=float)
    h = t.hidden_size
    medusa_params = heads * (h * h + t.vocab_size * h)
    return get_roofline_ms(
        medusa_params * weight_bytes / tp,
        2.0 * medusa_params * b / tp,
        hw.bw_gbps,
        hw.tflops,
        d,
        hw.sharpness,
    )


def get_draft_prefill_ms(
    method, t: ModelArrays, d: ModelArrays, hw: Hardware, tokens, prompt_len, d_defaults=DEFAULTS
):
    """Time in ms the draft spends prefilling `tokens` prompt tokens per step.

    A draft model prefills every prompt through all its layers; an EAGLE or MTP head
    through its one layer and fusion projection (its KV cache needs every prompt token);
    Medusa heads and n-gram lookup keep no cache of the prompt.
    """
    m = method_masks(method)
    h = t.hidden_size

    def model():
        return get_prefill_ms(
            d,
            tokens,
            prompt_len,
            hw.tflops,
            hw.link_gbps,
            hw.num_gpus,
            d_defaults,
            efficiency=hw.prefill_efficiency,
        )

    def head():
        def mtp_layer():
            return _layer_shared_params(t) + t.experts_per_token * t.params_per_expert

        def eagle_layer():
            return get_head_params("eagle", t, 0.0) - 2.0 * h * h

        if isinstance(m["mtp"], bool):
            head_layer = mtp_layer() if m["mtp"] else eagle_layer()
        else:
            head_layer = np.where(m["mtp"], mtp_layer(), eagle_layer())
        return get_prefill_ms(
            t,
            tokens,
            prompt_len,
            hw.tflops,
            hw.link_gbps,
            hw.num_gpus,
            d_defaults,
            params=head_layer + 2.0 * h * h,
            num_layers=1.0,
            efficiency=hw.prefill_efficiency,
        )

    return _select([(m["draft_model"], model), (m["eagle"] | m["eagle3"] | m["mtp"], head)])
