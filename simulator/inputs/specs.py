"""Frozen specifications of hardware and models, as read from the `data/` catalogs.

Units are in the field names: `_gb` is the datasheet's gigabytes, `_gbps` gigabytes per
second (1e9), `_tflops` 1e12 floating-point operations per second (dense, no sparsity).
Parameter counts are plain integers.
"""

from __future__ import annotations

from dataclasses import dataclass

DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
    "fp4": 0.5625,
}
"""Bytes per value. fp4 is NVFP4 as the Blackwell recipes ship it: 4-bit values with one
fp8 scale per 16 (4.5 bits; MXFP4's one scale per 32 is 4.25)."""
WEIGHT_DTYPES = ("bf16", "fp16", "fp8", "int8", "int4", "fp32", "fp4")
KV_DTYPES = ("bf16", "fp16", "fp8", "fp32")
METHODS = ("none", "draft_model", "eagle", "eagle3", "medusa", "mtp", "ngram")
SELF_SPECULATIVE = ("eagle", "eagle3", "medusa", "mtp")
HEADS = ("eagle", "eagle3", "mtp")
"""Methods that draft with a one-layer head autoregressively: K forwards of the head."""


@dataclass(frozen=True)
class GPUSpec:
    """One accelerator model, one row of `data/gpus.csv`."""

    id: str
    name: str
    memory_gb: float
    hbm_bandwidth_gbps: float
    bf16_tflops: float
    interconnect_gbps: float
    vendor: str = ""
    fp8_tflops: float | None = None
    int8_tops: float | None = None
    interconnect: str = ""
    price_usd_per_hr: float | None = None
    source: str = ""

    def tflops_for(self, weight_dtype: str) -> float:
        """Dense tensor TFLOP/s for matmuls with weights in `weight_dtype`.

        fp8 weights run fp8 GEMMs where the chip has them; int8/int4 weights are
        dequantised to bf16 by the common weight-only kernels, so they get bf16 rate.
        """
        if weight_dtype == "fp8" and self.fp8_tflops:
            return self.fp8_tflops
        return self.bf16_tflops


@dataclass(frozen=True)
class ModelSpec:
    """One decoder architecture, one row of `data/models.csv`."""

    id: str
    name: str
    tokenizer: str
    total_params: int
    active_params: int
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool = False
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    num_shared_experts: int = 0
    num_dense_layers: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    max_position_embeddings: int = 0
    checkpoint_dtype: str = "bf16"
    """The dtype the released weights come in (`WEIGHT_DTYPES`): a scenario's default."""
    hf_repo: str = ""
    source: str = ""
    aic_model: str = ""
    """What aiconfigurator-core's engine builds this model from: a Hugging Face id whose
    config.json the package ships, or a local folder holding a config.json (a user's own
    model); "" where the package cannot build it (its MoE and MLA tables then do not
    price it: simulator/kernels/composite.py)."""
    num_nextn_predict_layers: int = 0
    """MTP modules the checkpoint ships (DeepSeek-V3: 1)."""
    kv_layers: int = 0
    """Layers that keep a KV cache where fewer than `num_layers` do (hybrid linear
    attention: Qwen3.5's full-attention layers); 0: every layer."""

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def num_moe_layers(self) -> int:
        return self.num_layers - self.num_dense_layers if self.is_moe else 0

    @property
    def params_per_expert(self) -> int:
        """Parameters of one routed expert in one layer (gate, up and down projections)."""
        return 3 * self.hidden_size * self.moe_intermediate_size if self.is_moe else 0

    @property
    def routed_expert_params(self) -> int:
        """All routed-expert parameters across the MoE layers."""
        return self.params_per_expert * self.num_experts * self.num_moe_layers

    @property
    def always_active_params(self) -> int:
        """Parameters every token reads: everything but the routed experts."""
        return self.total_params - self.routed_expert_params

    @property
    def embedding_params(self) -> int:
        """Input embedding plus the LM head when it is not tied."""
        return self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)

    @property
    def kv_values_per_token_per_layer(self) -> int:
        """Numbers the KV cache holds per token per layer.

        MLA caches the compressed latent plus the decoupled RoPE key, once for all heads;
        standard attention caches K and V for each KV head.
        """
        if self.is_mla:
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * self.num_kv_heads * self.head_dim

    @property
    def cache_layers(self) -> int:
        """Layers whose KV cache grows with the context."""
        return self.kv_layers or self.num_layers
