"""GPU memory: weights, KV cache per token, reserves, token capacity and max concurrency.

Sizes in bytes unless a name says `_gb` (binary gigabytes, 2**30 bytes). Capacity is per
replica (a tensor-parallel group of `num_gpus` GPUs).
"""

from __future__ import annotations

import numpy as np

from simulator.inputs.specs import DTYPE_BYTES, ModelSpec
from simulator.model.defaults import DEFAULTS, ModelDefaults
from simulator.model.latency import ModelArrays, get_kv_share_per_gpu


def get_kv_bytes_per_token(model: ModelSpec, kv_dtype: str = "bf16") -> int:
    """Bytes of key/value cache one token of context occupies across all layers.

    2 * layers * kv_heads * head_dim * bytes; MLA models cache their latent
    (kv_lora_rank + rope dim) per layer instead.
    """
    return int(model.num_layers * model.kv_values_per_token_per_layer * DTYPE_BYTES[kv_dtype])


def get_kv_bytes_per_token_arrays(m: ModelArrays, kv_bytes) -> np.ndarray:
    """Vectorised `get_kv_bytes_per_token`."""
    return m.num_layers * m.kv_values_per_token_per_layer * np.asarray(kv_bytes)


def get_activation_reserve_bytes(t: ModelArrays, num_gpus, d: ModelDefaults = DEFAULTS):
    """Peak activation memory per GPU of the profiling forward pass an engine runs at start.

    The chunked-prefill budget of tokens passes through the widest layer: the MLP's gate
    and up projections (2 * intermediate, split by TP) plus about six hidden-size buffers
    (residual, norm output, fused QKV of up to ~2 H, attention output); the sampler holds
    fp32 logits for every running sequence. Checked against a vLLM start-up log in
    tests/simulator/test_memory.py.
    """
    tokens = d.max_num_batched_tokens
    width = 2.0 * t.intermediate_size / np.asarray(num_gpus) + 6.0 * t.hidden_size
    return (
        tokens * width * d.activation_dtype_bytes
        + (d.max_num_seqs or d.logits_rows) * t.vocab_size * d.logits_dtype_bytes
    )


def get_usable_kv_bytes(
    memory_gb,
    num_gpus,
    weights_bytes,
    activation_bytes_per_gpu,
    utilisation,
    d: ModelDefaults = DEFAULTS,
):
    """Bytes left for KV cache across the replica: util * VRAM minus weights and reserves.

    Negative means the deployment does not fit.
    """
    tp = np.asarray(num_gpus, dtype=float)
    per_gpu = (
        np.asarray(utilisation) * np.asarray(memory_gb) * d.hbm_bytes_per_gb
        - (d.non_torch_reserve_gb + d.cuda_graph_reserve_gb) * d.hbm_bytes_per_gb
        - activation_bytes_per_gpu
    )
    return per_gpu * tp - np.asarray(weights_bytes)


def get_replica_kv_bytes_per_token(m: ModelArrays, kv_bytes_per_token, num_gpus):
    """KV bytes per token summed over the GPUs of a replica, counting replicas of heads.

    With fewer KV heads than GPUs (or an MLA latent) each GPU keeps its own copy, so the
    replica spends more than one model's worth per token.
    """
    tp = np.asarray(num_gpus, dtype=float)
    return np.asarray(kv_bytes_per_token) * get_kv_share_per_gpu(m, tp) * tp


def get_token_capacity(usable_bytes, replica_kv_bytes_per_token):
    """Tokens of context the shared KV pool holds (0 when nothing fits)."""
    per_token = np.asarray(replica_kv_bytes_per_token, dtype=float)
    cap = np.where(
        per_token > 0, np.asarray(usable_bytes) / np.where(per_token > 0, per_token, 1.0), 0.0
    )
    return np.floor(np.maximum(cap, 0.0))


def get_max_concurrency(token_capacity, prompt_len, output_len, k):
    """Requests that fit at once: capacity / (prompt + output + K lookahead slots)."""
    per_request = np.asarray(prompt_len) + np.asarray(output_len) + np.asarray(k)
    return np.floor(np.asarray(token_capacity) / per_request)
