"""Forward-step latency from a roofline: bytes over bandwidth or FLOPs over compute.

t(B, q, L) = max(bytes / (eta_bw * BW), flops / (eta_f * F)) + all-reduce + overhead, per
GPU of a tensor-parallel group. Times are in milliseconds, bandwidths in GB/s (1e9),
compute in TFLOP/s, sizes in bytes. Every argument broadcasts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from simulator.inputs.specs import DTYPE_BYTES, ModelSpec
from simulator.model.defaults import DEFAULTS, ModelDefaults


@dataclass(frozen=True)
class ModelArrays:
    """Columns of model specs, one entry per scenario, for vectorised maths."""

    total_params: np.ndarray
    active_params: np.ndarray
    num_layers: np.ndarray
    hidden_size: np.ndarray
    num_attention_heads: np.ndarray
    num_kv_heads: np.ndarray
    head_dim: np.ndarray
    intermediate_size: np.ndarray
    vocab_size: np.ndarray
    tied: np.ndarray
    num_experts: np.ndarray
    experts_per_token: np.ndarray
    params_per_expert: np.ndarray
    num_moe_layers: np.ndarray
    always_active_params: np.ndarray
    kv_values_per_token_per_layer: np.ndarray
    is_mla: np.ndarray
    derived: dict | None = None
    """`embedding_params`, `lm_head_params`, `matmul_params_per_token` computed once per
    catalog entry (`from_specs`) and carried by `take`, so a scenario gathers them."""

    @classmethod
    def from_specs(cls, specs: list[ModelSpec | None]) -> ModelArrays:
        """One entry per spec; None (no draft model) becomes zeros."""

        def col(attr: str, dtype=float):
            return np.array([getattr(s, attr) if s is not None else 0 for s in specs], dtype=dtype)

        arrays = cls(
            total_params=col("total_params"),
            active_params=col("active_params"),
            num_layers=col("num_layers"),
            hidden_size=col("hidden_size"),
            num_attention_heads=col("num_attention_heads"),
            num_kv_heads=col("num_kv_heads"),
            head_dim=col("head_dim"),
            intermediate_size=col("intermediate_size"),
            vocab_size=col("vocab_size"),
            tied=col("tie_word_embeddings", bool),
            num_experts=col("num_experts"),
            experts_per_token=col("experts_per_token"),
            params_per_expert=col("params_per_expert"),
            num_moe_layers=col("num_moe_layers"),
            always_active_params=col("always_active_params"),
            kv_values_per_token_per_layer=col("kv_values_per_token_per_layer"),
            is_mla=col("is_mla", bool),
        )
        derived = {
            "embedding_params": arrays.embedding_params,
            "lm_head_params": arrays.lm_head_params,
            "matmul_params_per_token": arrays.matmul_params_per_token,
        }
        return replace(arrays, derived=derived)

    def take(self, index) -> ModelArrays:
        """Rows of these arrays by integer index (catalog entries to scenarios)."""
        fields = {f: getattr(self, f)[index] for f in self.__dataclass_fields__ if f != "derived"}
        if self.derived is not None:
            fields["derived"] = {name: v[index] for name, v in self.derived.items()}
        return ModelArrays(**fields)

    @property
    def embedding_params(self) -> np.ndarray:
        """Input embedding plus an untied LM head."""
        if self.derived is not None:
            return self.derived["embedding_params"]
        return self.vocab_size * self.hidden_size * np.where(self.tied, 1.0, 2.0)

    @property
    def lm_head_params(self) -> np.ndarray:
        if self.derived is not None:
            return self.derived["lm_head_params"]
        return self.vocab_size * self.hidden_size

    @property
    def matmul_params_per_token(self) -> np.ndarray:
        """Parameters a token multiplies through: active minus the input-embedding lookup."""
        if self.derived is not None:
            return self.derived["matmul_params_per_token"]
        return self.active_params - np.where(self.tied, 0.0, self.lm_head_params)


def bytes_per(dtype) -> np.ndarray:
    """Bytes per element of each dtype name in an array of names."""
    return np.vectorize(DTYPE_BYTES.__getitem__, otypes=[float])(np.asarray(dtype))


def get_experts_touched(num_experts, experts_per_token, tokens):
    """Expected distinct experts (of E, k per token) that `tokens` tokens route to.

    E * (1 - ((E - k) / E) ** tokens): tokens pick experts independently and uniformly,
    so a verification pass of B*(K+1) tokens reads more experts than a decode of B.
    """
    e = np.asarray(num_experts, dtype=float)
    k = np.asarray(experts_per_token, dtype=float)
    tokens = np.asarray(tokens)
    moe = e > 0
    if not moe.any():  # dense models: no power function over their rows
        return np.zeros(np.broadcast_shapes(e.shape, k.shape, tokens.shape))
    if moe.all():
        return e * (1.0 - ((e - k) / e) ** tokens)
    safe_e = np.where(moe, e, 1.0)
    return np.where(moe, e * (1.0 - ((safe_e - k) / safe_e) ** tokens), 0.0)


def get_weight_bytes_touched(m: ModelArrays, weight_bytes, tokens):
    """Bytes of weights one forward of `tokens` tokens reads (MoE: only routed experts hit)."""
    if np.ndim(m.num_experts) == 0 and not m.num_experts > 0:
        return m.total_params * weight_bytes  # one dense model: no experts to count
    experts = get_experts_touched(m.num_experts, m.experts_per_token, tokens)
    params = m.always_active_params + experts * m.params_per_expert * m.num_moe_layers
    return np.where(m.num_experts > 0, params, m.total_params) * weight_bytes


def get_kv_share_per_gpu(m: ModelArrays, num_gpus):
    """Fraction of a token's KV cache each GPU of a tensor-parallel group holds.

    KV heads split across GPUs but never below one head per GPU (fewer heads than GPUs
    are replicated); MLA's latent is replicated on every GPU.
    """
    tp = np.asarray(num_gpus, dtype=float)
    heads = np.where(m.num_kv_heads > 0, m.num_kv_heads, 1.0)
    share = np.maximum(1.0, heads / tp) / heads
    return np.where(m.is_mla, 1.0, share)


def get_allreduce_ms(
    num_gpus, num_allreduces, tokens, hidden_size, link_gbps, d: ModelDefaults = DEFAULTS
):
    """Time of the tensor-parallel all-reduces of one forward in milliseconds.

    Ring all-reduce moves 2 (tp-1)/tp of the message over each GPU's link, one direction
    at a time; the catalog's interconnect figure is bidirectional, hence the halving.
    """
    tp = np.asarray(num_gpus, dtype=float)
    msg_bytes = np.asarray(tokens) * np.asarray(hidden_size) * d.activation_dtype_bytes
    link_bps = np.asarray(link_gbps) * 1e9 / 2.0 * d.interconnect_efficiency
    per_op_s = d.allreduce_latency_us * 1e-6 + 2.0 * (tp - 1.0) / tp * msg_bytes / link_bps
    return np.where(tp > 1, np.asarray(num_allreduces) * per_op_s * 1e3, 0.0)


def get_roofline_ms(
    bytes_per_gpu, flops_per_gpu, bw_gbps, tflops, d: ModelDefaults = DEFAULTS, sharpness=np.inf
):
    """Memory time and compute time of one GPU combined, in milliseconds.

    `(mem^n + cmp^n)^(1/n)` with n = `sharpness`: infinity is the textbook max(), 1 is
    their sum. Real kernels near the ridge point neither fully overlap their loads with
    their math nor run either at peak, so a finite n prices the transition from
    memory- to compute-bound (where a verify of B*(K+1) tokens lands) above the max().
    """
    mem = np.asarray(bytes_per_gpu) / (d.bandwidth_efficiency * np.asarray(bw_gbps) * 1e9)
    cmp = np.asarray(flops_per_gpu) / (d.compute_efficiency * np.asarray(tflops) * 1e12)
    n = np.asarray(sharpness, dtype=float)
    if n.ndim == 0 and n == 1.0:  # the default: the two times add
        return (mem + cmp) * 1e3
    hi, lo = np.maximum(mem, cmp), np.minimum(mem, cmp)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(hi > 0, lo / np.where(hi > 0, hi, 1.0), 0.0)
        blend = np.where(
            np.isinf(n), 1.0, (1.0 + ratio ** np.where(np.isinf(n), 1.0, n)) ** (1.0 / n)
        )
    return hi * blend * 1e3


@dataclass(frozen=True)
class Hardware:
    """Per-scenario hardware columns."""

    bw_gbps: np.ndarray
    tflops: np.ndarray
    link_gbps: np.ndarray
    num_gpus: np.ndarray
    sharpness: np.ndarray | float = np.inf
    """How sharply kernels turn from memory- to compute-bound (`get_roofline_ms`)."""
    prefill_efficiency: np.ndarray | float = np.nan
    """Fraction of `tflops` a prefill chunk reaches; NaN: the defaults' figure."""


def get_model_traffic(
    m: ModelArrays, batch, query_len, context_len, weight_bytes, kv_bytes, num_gpus
):
    """(bytes, flops) one GPU of a tensor-parallel group moves and computes in one forward.

    bytes = weights touched + KV read (B*L tokens) + KV written (B*q tokens);
    flops = 2 * matmul params * B*q + attention 4 * layers * B*q*L * heads * head_dim.
    """
    tokens = np.asarray(batch, dtype=float) * np.asarray(query_len, dtype=float)
    tp = np.asarray(num_gpus, dtype=float)
    kv_token = m.num_layers * m.kv_values_per_token_per_layer * np.asarray(kv_bytes)
    kv_bytes_gpu = (np.asarray(batch) * np.asarray(context_len) + tokens) * kv_token
    kv_bytes_gpu = kv_bytes_gpu * get_kv_share_per_gpu(m, tp)
    weights_gpu = get_weight_bytes_touched(m, weight_bytes, tokens) / tp
    attn_dim = m.num_attention_heads * m.head_dim
    flops = (
        2.0 * m.matmul_params_per_token * tokens
        + 4.0 * m.num_layers * tokens * np.asarray(context_len) * attn_dim
    ) / tp
    return weights_gpu + kv_bytes_gpu, flops


def get_model_step_ms(
    m: ModelArrays,
    hw: Hardware,
    batch,
    query_len,
    context_len,
    weight_bytes,
    kv_bytes,
    overhead_ms,
    d: ModelDefaults = DEFAULTS,
):
    """Latency in ms of one forward of a whole model: B sequences, q new tokens each, at
    context L, on a tensor-parallel group of `hw.num_gpus` GPUs: roofline of
    `get_model_traffic`, plus two all-reduces per layer, plus a fixed overhead.
    """
    tokens = np.asarray(batch, dtype=float) * np.asarray(query_len, dtype=float)
    nbytes, flops = get_model_traffic(
        m, batch, query_len, context_len, weight_bytes, kv_bytes, hw.num_gpus
    )
    compute = get_roofline_ms(nbytes, flops, hw.bw_gbps, hw.tflops, d, hw.sharpness)
    comm = get_allreduce_ms(hw.num_gpus, 2.0 * m.num_layers, tokens, m.hidden_size, hw.link_gbps, d)
    return compute + comm + np.asarray(overhead_ms)
