"""The fastest a forward of the chosen model can run on the chosen GPU: a measured step
below it was not a step of that model there (another model, more GPUs, narrower weights).

A forward reads at least the weights every token passes through and the KV cache it
attends over, and does at least 2 FLOPs per weight per token; no chip does either faster
than its datasheet peak. Each term is a lower bound, so that no real run falls below it:

- weights: every parameter but the input embedding table (a lookup reads B rows of it);
  of an MoE model's routed experts only `experts_per_token` per MoE layer (every token may
  route to the same experts), at the weight dtype the profile records;
- KV cache: B x (context + query) tokens, of the layers whose cache grows with the context
  (`ModelSpec.cache_layers`: sliding-window and linear-attention layers left out), at
  1 byte a value (fp8, the narrowest cache an engine keeps);
- compute: 2 x (active parameters but the embeddings) FLOPs per token, attention left out,
  at the chip's fastest dense tensor rate (its fp8 or int8 figure, twice that for fp4).

A tensor-parallel replica of N GPUs shares both: time = bytes / (N x bandwidth), and
likewise FLOPs; memory and compute may overlap fully, so the bound is the larger of the two.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.inputs.specs import DTYPE_BYTES, GPUSpec, ModelSpec

TOLERANCE = 0.9
"""A measured median is refused below 0.9 x the bound. The bound is already at peak
bandwidth and FLOP rate, which real kernels never reach; the 10% covers the catalog's
parameter counts (vocabulary padding, norms) and bytes served from L2 cache (tens of MB
against GB of weights), not a faster run."""
KV_FLOOR_BYTES = 1.0
"""Bytes per cached value in the bound: fp8, the narrowest KV cache engines keep."""


@dataclass(frozen=True)
class Floor:
    """The lower bound of one forward (ms) and how it was computed."""

    ms: float
    how: str


def weight_floor_bytes(spec: ModelSpec, dtype: str) -> float:
    """Bytes of weights any forward reads: all but the input embedding; of the routed
    experts only `experts_per_token` per MoE layer."""
    head = spec.vocab_size * spec.hidden_size
    params = spec.always_active_params - (spec.embedding_params - head)
    if spec.is_moe:
        params += spec.experts_per_token * spec.params_per_expert * spec.num_moe_layers
    return params * DTYPE_BYTES.get(dtype, 2.0)


def peak_tflops(gpu: GPUSpec, dtype: str) -> float:
    """The chip's fastest dense tensor rate (TFLOP/s) a `dtype` model could run at."""
    rate = max(gpu.bf16_tflops, gpu.fp8_tflops or 0.0, gpu.int8_tops or 0.0)
    return rate * (2.0 if dtype == "fp4" else 1.0)


def step_floor(
    spec: ModelSpec, gpu: GPUSpec, dtype: str, num_gpus: int, batch: int, query: int, context: int
) -> Floor:
    """The least time (ms) one forward of `batch` x `query` tokens over `context` cached
    tokens each can take on `num_gpus` GPUs of `gpu` (see the module docstring)."""
    tokens = batch * query
    weights = weight_floor_bytes(spec, dtype)
    kv_token = spec.cache_layers * spec.kv_values_per_token_per_layer * KV_FLOOR_BYTES
    kv = batch * (context + query) * kv_token
    bw = num_gpus * gpu.hbm_bandwidth_gbps * 1e9
    mem_ms = (weights + kv) / bw * 1e3
    matmul = spec.active_params - spec.embedding_params
    flops = 2.0 * max(matmul, 0) * tokens
    rate = num_gpus * peak_tflops(gpu, dtype) * 1e12
    cmp_ms = flops / rate * 1e3
    gpus = f"{num_gpus} x {gpu.id}"
    if cmp_ms > mem_ms:
        how = (
            f"{flops / 1e12:,.1f} TFLOP (2 x {matmul / 1e9:.2f}B parameters x {tokens:,} "
            f"tokens) / ({gpus} x {peak_tflops(gpu, dtype):g} TFLOP/s peak)"
        )
        return Floor(cmp_ms, how)
    how = (
        f"{weights / 1e9:,.2f} GB of {dtype} weights + {kv / 1e9:,.2f} GB of KV cache at fp8 "
        f"/ ({gpus} x {gpu.hbm_bandwidth_gbps:g} GB/s peak)"
    )
    return Floor(mem_ms, how)
