"""Step-time surfaces of MoE, MLA and hybrid-attention models from aiconfigurator-core's
compiled engine, sampled once per (model, GPU, engine, version, dtypes, layout).

aiconfigurator-core (pinned) models each family as its engines run it: DeepSeek's MLA
block and MoE with its shared experts (`mla`, `mla_bmm`, `moe` tables), the expert
all-to-all or all-reduce of the layout (`comm` tables: NCCL, custom all-reduce, DeepEP),
attention data parallelism, Qwen3.5's linear attention (`linear_attention`), gpt-oss's
sliding windows. Its engine answers one step per call (about 35 us): the surface asks it
on the grids `simulator.kernels.surface` holds (GEMM tokens, batch x KV length, prompt
length) and returns a `KernelSurface`, so these rows stack and interpolate in numpy with
the dense ones and the prediction path is the same for every model.

The split into the surface's terms, for a replica of `tp_size x attention_dp_size` GPUs
where a batch of B sequences puts B / dp on each attention rank:

    f(b, L)          = the engine's decode step of b sequences per rank at KV length L,
                       less its LM head ("generation_logits_gemm")
    layers * layer(m)  = f(m / dp, 1)                 (every op whose cost is set by tokens)
    layers * attn(B, L) = f(B / dp, L) - f(B / dp, 1)  (what grows with the KV length)
    lm_head(m)       = the engine's logits GEMM at m / dp tokens

so a decode forward `layers * (layer(B) + attn(B, L)) + lm_head(B)` is the engine's step
exactly. A verify forward of q = K+1 tokens per sequence prices its token-bound ops at B*q
tokens (more tokens reach more experts: the MoE tables' token axis) and its attention as
B*q separate reads of the same KV, as aiconfigurator charges speculative decode
(`attn_q(B, L) = attn(B*q, L)`). Prefill is the engine's context phase of a full chunk:
`layers * (chunk + attn_p(P))` per token with `attn_p(P) = T(8192 / P prompts of P) /
8192 - chunk`, chunk the token-bound cost per token at 8192 tokens.

The fusion and residual GEMMs of EAGLE/EAGLE-3/MTP/Medusa heads come from the engine's
dense GEMM table (`tables.gemm_curve`). A head's decoder layer is priced as the target's
average layer (an MoE layer for MTP, as DeepSeek's MTP module is; EAGLE-3 heads on MoE
targets are dense layers, so this overstates them: docs/model.md).

Units: ms, tokens.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from simulator.kernels import tables
from simulator.kernels.surface import (
    B_GRID,
    M_GRID,
    P_GRID,
    PREFILL_CHUNK,
    Q_MAX,
    S_GRID,
    KernelSurface,
    NoSurface,
)

logging.getLogger("aiconfigurator_core.sdk.perf_database").setLevel(logging.ERROR)
"""The engine warns once per table where a framework's rows fall back to another's (vLLM's
mla_bmm on TensorRT-LLM's, as its collection_meta.yaml says); on every CLI run that is noise
on stderr, and the surfaces are what the engine itself would price."""

QUANT_MODES = {
    "bf16": ("bfloat16", "bfloat16"),
    "fp16": ("bfloat16", "bfloat16"),
    "fp8": ("fp8", "fp8"),
    "fp4": ("nvfp4", "nvfp4"),
    "int4": ("int4_wo", "int4_wo"),
}
"""Weight dtype -> aiconfigurator's (GEMM, MoE) quant modes, where a scenario's weights
differ from the checkpoint's; at the checkpoint's own dtype the package reads the modes
from the config (DeepSeek's and Qwen3's block-scaled fp8, gpt-oss's MXFP4 experts)."""

KV_MODES = {"bf16": "bfloat16", "fp16": "bfloat16", "fp8": "fp8"}

FP8_GEMM_AS = {"vllm": "fp8"}
"""Engines whose fp8 GEMMs (attention projections, dense layers, shared experts) are
priced from their per-tensor fp8 table even where the checkpoint is block-scaled.
vLLM 0.24.0's fp8_block GEMM tables sit on a floor of ~0.17 ms a call on B200 whatever the
shape (32x3072 and 3584x3072 alike); at m <= 16, n and k in 1024..8192 they are a median
27x its own bf16 table on B200, 52x on GB200, 5.8x on H200 and 5.1x on H100, where
SGLang's and TensorRT-LLM's fp8_block tables are 0.8-1.2x their bf16 ones on the same
GPUs. A GEMM that reads half the bytes of bf16 cannot be 27x slower; the floor is the
collection's, and vLLM's MiniMax-M2.5 fp8 runs on B200 (measured 9-55 ms a step) were
priced 2-5x too slow by it. The MoE tables are not affected."""

FP8_BLOCK_RETRY = True
"""fp8 weights on a bf16 checkpoint (a scenario's `weight_dtype` fp8 on GLM-5, Qwen3.5-397B)
are priced as block-scaled fp8 where the package has no per-tensor fp8 table for the point:
the vendors' own fp8 releases of these models (zai-org/GLM-5-FP8, Qwen/Qwen3.5-397B-A17B-FP8,
deepseek-ai/DeepSeek-V3) are block-scaled, and aiconfigurator-core 0.12.0 collects
SGLang's DSA attention of GLM-5 and its 512-expert MoE only in that format. The label says
so ("fp8 as block-scaled fp8")."""

MOE_SHARE_SWAP = True
"""A layout whose MoE split the package has no table for is priced at the other split of
the same GPUs: MoE TP n as EP n, or EP n as TP n. With balanced routing (the tables'
`distribution`), each GPU holds 1/n of every layer's expert weights and does 1/n of its
expert FLOPs either way; TP cuts each expert's intermediate dimension n ways, EP keeps
whole experts on fewer GPUs. TensorRT-LLM 1.3.0rc20 collects gpt-oss's MXFP4 MoE only at
MoE TP 1 (EP 1-128), so every gpt-oss run at `--tp_size 2..8` without `--ep_size` (100
silicon runs on B200 and H200) was on the roofline; SGLang 0.5.14 collects Qwen3.5's
512-expert MoE on H200 at TP, not EP 8. The label says so ("MoE TP2 as EP2")."""

FP4_ATTENTION_AS = "bfloat16"
"""The GEMM quant mode of fp4 weights where the package has no NVFP4 table for the
attention (tried after NVFP4 throughout). NVIDIA's NVFP4 exports quantise the experts and
keep attention at the checkpoint's dtype: nvidia/GLM-5-NVFP4's hf_quant_config.json (the
package bundles it) excludes every layer's q_a/q_b/kv_a/kv_b/o projections and DSA indexer
from NVFP4. SGLang 0.5.14 has no DSA module table at NVFP4 GEMMs, so GLM-5's fp4 runs were
on the roofline; the label says so ("fp4 experts, bf16 attention")."""

MLA_BLOCK_FROM = "trtllm"
"""The engine whose MLA block prices vLLM's on a GPU where vLLM's MLA module tables predate
aiconfigurator's fused-op collector fix (ai-dynamo/aiconfigurator#1423). The package's
B200 vLLM 0.24.0 tables were re-collected with it on 2026-07-27 (their collection_meta.yaml
says so, `norm_dispatch: vllm_c_eager_surrogate`): "the previous rows ran the never-in-
serving native chain (+34%)". Every other GPU's vLLM MLA tables are the previous rows: on
H200 a DeepSeek-V3 MLA module at 16 heads, batch 4, KV 1,024 costs 0.117 ms (FlashMLA,
fp8 KV) where TensorRT-LLM's H200 module costs 0.055 ms and vLLM's re-collected B200 one
0.043 ms. TensorRT-LLM's module on the same GPU is the engine's MLA block at the same
heads, layout and dtypes; the label says so ("MLA block from trtllm")."""

MLA_BLOCK_OP = "generation_mla_block"

PREFILL_KV_AS = "bf16"
"""The KV dtype prefill is priced at where the package's context-attention tables lack
the scenario's (SGLang 0.5.14 on H200 has no fp8-KV context attention for Qwen3's 2 KV
heads a rank at TP2, nor Qwen3.5's head size 256: 40 silicon runs were on the roofline
for want of prefill alone). Context attention computes in bf16 (`fmha_quant_mode`
bfloat16) over the chunk's own keys either way; an fp8 cache changes what it writes. The
decode terms keep the scenario's KV dtype; the label says so ("prefill at bf16 KV")."""

LM_HEAD_OP = "generation_logits_gemm"

CACHE_FORMAT = 4
"""Bumped whenever what a surface holds or how it is sampled changes: surfaces cached on
disk under another format are rebuilt."""


@dataclass(frozen=True)
class Layout:
    """The parallel layout of one replica, as aiconfigurator and its silicon data name it.
    GPUs per replica = tp_size * attention_dp_size = moe_tp_size * moe_ep_size."""

    tp_size: int = 1
    attention_dp_size: int = 1
    moe_tp_size: int = 1
    moe_ep_size: int = 1

    @property
    def num_gpus(self) -> int:
        return self.tp_size * self.attention_dp_size

    @classmethod
    def tensor_parallel(cls, num_gpus: int) -> Layout:
        """A row that gives only `num_gpus`: every GPU in one TP group, experts split by TP."""
        return cls(num_gpus, 1, num_gpus, 1)

    def describe(self) -> str:
        parts = [f"TP{self.tp_size}"]
        if self.attention_dp_size > 1:
            parts.append(f"DP{self.attention_dp_size}")
        if self.moe_ep_size > 1:
            parts.append(f"EP{self.moe_ep_size}")
        return " ".join(parts)


class _Engine:
    """One compiled aiconfigurator engine, asked at integer points and interpolated
    linearly between them where a point is fractional (tokens per attention rank). With a
    `donor`, the MLA block of each step is the donor engine's (`MLA_BLOCK_FROM`)."""

    def __init__(self, handle, dp: int, donor=None) -> None:
        self.handle = handle
        self.dp = dp
        self.donor = donor

    def _decode(self, b: int, kv_len: int) -> float:
        # s = isl + osl // 2 + 1 is the engine's KV length: isl = L - 1, osl = 0.
        args = (max(int(b), 1), max(int(kv_len) - 1, 0), 0)
        if self.donor is None:
            return float(self.handle.decode_step_latency(*args))
        ops = self.handle.decode_step_per_op(*args)
        theirs = self.donor.decode_step_per_op(*args)
        return float(
            sum(x[1] for x in ops if x[0] != MLA_BLOCK_OP)
            + sum(x[1] for x in theirs if x[0] == MLA_BLOCK_OP)
        )

    def _lm_head(self, b: int) -> float:
        ops = self.handle.decode_step_per_op(max(int(b), 1), 0, 0)
        return float(sum(x[1] for x in ops if x[0] == LM_HEAD_OP))

    def per_rank(self, fn, m: float, *args) -> float:
        """fn at m / dp sequences per rank (at least one)."""
        x = max(m / self.dp, 1.0)
        lo = int(np.floor(x))
        w = x - lo
        v = fn(lo, *args)
        return v if w == 0 else (1 - w) * v + w * fn(lo + 1, *args)

    def decode(self, m: float, kv_len: float) -> float:
        return self.per_rank(self._decode, m, kv_len)

    def lm_head(self, m: float) -> float:
        return self.per_rank(self._lm_head, m)

    def prefill(self, prompts: int, prompt_len: int) -> float:
        return float(self.handle.predict_prefill_latency(max(prompts, 1), int(prompt_len)))


def quant_attempts(
    aic_model: str, system: str, engine: str, weight_dtype: str, checkpoint_dtype: str
) -> list[tuple[str | None, str | None, str]]:
    """The (GEMM, MoE) quant modes to price a row with, in order, each with the note its
    surface's label carries ("" for the first). None: the checkpoint config's own modes.

    fp8 weights on a checkpoint released in another dtype are per-tensor fp8 first, then
    block-scaled fp8 (`FP8_BLOCK_RETRY`) where the package has no per-tensor table for the
    point. Raises `NoSurface` for a weight dtype the package has no quant mode for."""
    if weight_dtype not in QUANT_MODES:
        raise NoSurface(f"no kernel tables for weights {weight_dtype}")
    if weight_dtype == checkpoint_dtype:
        gemm, moe = None, None
    else:
        gemm, moe = QUANT_MODES[weight_dtype]
    if weight_dtype == "fp8" and engine in FP8_GEMM_AS:
        gemm = FP8_GEMM_AS[engine]
    if moe is None and engine == "trtllm" and _mxfp4_experts(aic_model) and _blackwell(system):
        moe = "w4a8_mxfp4_mxfp8"
    out = [(gemm, moe, "")]
    if weight_dtype == "fp8" and checkpoint_dtype != "fp8":
        block = FP8_GEMM_AS.get(engine, "fp8_block")
        out.append((block, "fp8_block", "fp8 as block-scaled fp8"))
    if weight_dtype == "fp4" and checkpoint_dtype != "fp4" and FP4_ATTENTION_AS:
        out.append((FP4_ATTENTION_AS, "nvfp4", "fp4 experts, bf16 attention"))
    return out


def moe_layout_attempts(layout: Layout) -> list[tuple[Layout, str]]:
    """The layouts to price `layout` at, in order, each with its label's note ("" for the
    layout itself): then the other MoE splits of the same GPUs (`MOE_SHARE_SWAP`)."""
    n = layout.moe_tp_size * layout.moe_ep_size
    out = [(layout, "")]
    for tp, ep in ((1, n), (n, 1)):
        alt = dataclasses.replace(layout, moe_tp_size=tp, moe_ep_size=ep)
        if alt != layout:
            out.append((alt, f"MoE {_moe_split(layout)} as {_moe_split(alt)}"))
    return out


def _moe_split(layout: Layout) -> str:
    return (
        " ".join(
            f"{name}{size}"
            for name, size in (("TP", layout.moe_tp_size), ("EP", layout.moe_ep_size))
            if size > 1
        )
        or "TP1"
    )


def compile_engine(
    aic_model: str,
    system: str,
    engine: str,
    version,
    weight_dtype: str,
    checkpoint_dtype: str,
    kv_dtype: str,
    layout: Layout,
    modes: tuple[str | None, str | None] | None = None,
):
    """The package's compiled engine of the model at `modes` (GEMM, MoE quant modes;
    default the first of `quant_attempts`), or raises `NoSurface` saying why."""
    from aiconfigurator_core.sdk.engine import EngineHandle

    if kv_dtype not in KV_MODES or weight_dtype not in QUANT_MODES:
        raise NoSurface(f"no kernel tables for weights {weight_dtype} / KV {kv_dtype}")
    if modes is None:
        modes = quant_attempts(aic_model, system, engine, weight_dtype, checkpoint_dtype)[0][:2]
    gemm, moe = modes
    try:
        return EngineHandle.compile(
            aic_model,
            system,
            engine,
            backend_version=version or None,
            tp_size=layout.tp_size,
            attention_dp_size=layout.attention_dp_size,
            moe_tp_size=layout.moe_tp_size,
            moe_ep_size=layout.moe_ep_size,
            gemm_quant_mode=gemm,
            moe_quant_mode=moe,
            kvcache_quant_mode=KV_MODES[kv_dtype],
            fmha_quant_mode="bfloat16",
        )
    except Exception as exc:  # the package raises ValueError, KeyError, its own errors
        raise NoSurface(f"aiconfigurator-core cannot build {aic_model}: {exc}") from None


@functools.lru_cache(maxsize=64)
def _mxfp4_experts(aic_model: str) -> bool:
    """Whether the checkpoint's experts are MXFP4 (gpt-oss: quantization_config.quant_method
    "mxfp4"). TensorRT-LLM serves those with MXFP8 activations on SM >= 100
    (`ModelConfig.get_mxfp4_quant_algo()`: W4A8_MXFP4_MXFP8 for its TRTLLM and CUTLASS MoE
    backends, W4A16_MXFP4 below SM 100 or when OVERRIDE_QUANT_ALGO says so); the package
    prices the checkpoint's label, W4A16, whose B200 table is 3.6x slower at 4 tokens."""
    quant = _config_of(aic_model).get("quantization_config")
    return isinstance(quant, dict) and str(quant.get("quant_method", "")).lower() == "mxfp4"


def mla_donor(aic_model, system, engine, version, weight_dtype, checkpoint_dtype, kv_dtype, layout):
    """`MLA_BLOCK_FROM`'s compiled engine of the model on the same GPU and layout, where
    `engine` is vLLM with MLA tables from before the collector fix; None otherwise (another
    engine, re-collected tables, a model without an MLA block, or no donor tables). The
    block does not depend on the MoE, so the donor may price its experts at bf16."""
    if MLA_BLOCK_FROM is None or engine != "vllm":
        return None
    if not _stale_vllm_mla(system, _literal_version(system, engine, version)):
        return None
    gemm, moe, _ = quant_attempts(
        aic_model, system, MLA_BLOCK_FROM, weight_dtype, checkpoint_dtype
    )[0]
    for experts in (moe, "bfloat16"):
        try:
            handle = compile_engine(
                aic_model,
                system,
                MLA_BLOCK_FROM,
                "",
                weight_dtype,
                checkpoint_dtype,
                kv_dtype,
                layout,
                (gemm, experts),
            )
            ops = handle.decode_step_per_op(1, 1, 0)
        except Exception:  # NoSurface, or a table the donor lacks for these experts
            continue
        return handle if any(x[0] == MLA_BLOCK_OP for x in ops) else None
    return None


@functools.lru_cache(maxsize=64)
def _stale_vllm_mla(system: str, version: str) -> bool:
    """Whether vLLM's MLA module tables on `system` at `version` are the rows from before
    aiconfigurator#1423 (their collection_meta.yaml records no `norm_dispatch`)."""
    path = tables.data_root() / system / "mla" / "vllm" / version / "collection_meta.yaml"
    try:
        meta = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        entry = (meta.get("tables") or {}).get("mla_generation_module_perf") or {}
    except (OSError, yaml.YAMLError, AttributeError):
        return False
    return isinstance(entry, dict) and bool(entry) and "norm_dispatch" not in entry


def _qk_norm_allreduce_ms(aic_model, system, engine, version, layout) -> np.ndarray | float:
    """Per layer at M_GRID tokens: the two all-reduces a "per_layer" QK norm costs under
    attention TP (0 otherwise). MiniMax-M2's config (`use_qk_norm`, `qk_norm_type`
    "per_layer") normalises q and k over all heads at once, so with the heads split over
    TP ranks each layer all-reduces the two variances, an fp32 value per token each (vLLM's
    and SGLang's `MiniMaxText01RMSNormTP`); the package's engine has no such op. Priced
    from the engine's custom all-reduce table (`surface._allreduce_ms`)."""
    if layout.tp_size <= 1 or not _per_layer_qk_norm(aic_model):
        return 0.0
    from simulator.kernels.surface import _allreduce_ms

    tokens = np.maximum(M_GRID / layout.attention_dp_size, 1.0)
    literal = _literal_version(system, engine, version)
    return 2.0 * _allreduce_ms(system, engine, literal, layout.tp_size, 2.0 * tokens)


@functools.lru_cache(maxsize=64)
def _per_layer_qk_norm(aic_model: str) -> bool:
    config = _config_of(aic_model)
    return bool(config.get("use_qk_norm")) and config.get("qk_norm_type") == "per_layer"


def _config_of(aic_model: str) -> dict:
    """The model's config.json (the package's bundled copy, or a local folder's), {} where
    none can be read."""
    import json

    from simulator.inputs.hf_config import bundled_config_path

    path = bundled_config_path(aic_model) or Path(aic_model) / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


def _blackwell(system: str) -> bool:
    from aiconfigurator_core.sdk.perf_database import is_blackwell_system

    try:
        return is_blackwell_system(system)
    except Exception:  # a system the package cannot read: not Blackwell for this rule
        return False


def build_composite(
    aic_model: str,
    num_layers: int,
    hidden: int,
    system: str,
    engine: str,
    version: str,
    weight_dtype: str,
    checkpoint_dtype: str,
    kv_dtype: str,
    layout: Layout,
) -> KernelSurface:
    """The surface of one combination (module docstring). Raises `NoSurface` where the
    package cannot price it (a layout its tables lack, a dtype the GPU has no kernels for)."""
    quants = quant_attempts(aic_model, system, engine, weight_dtype, checkpoint_dtype)
    if not FP8_BLOCK_RETRY:
        quants = quants[:1]
    layouts = moe_layout_attempts(layout) if MOE_SHARE_SWAP else [(layout, "")]
    compile_at = functools.partial(
        compile_engine, aic_model, system, engine, version, weight_dtype, checkpoint_dtype
    )
    first = None
    for (priced, moe_note), (gemm, moe, quant_note) in itertools.product(layouts, quants):
        try:
            donor = mla_donor(
                aic_model, system, engine, version, weight_dtype, checkpoint_dtype, kv_dtype, priced
            )
            dp = layout.attention_dp_size
            eng = _Engine(compile_at(kv_dtype, priced, (gemm, moe)), dp, donor)
            fallback = None
            if PREFILL_KV_AS and kv_dtype != PREFILL_KV_AS:
                fallback = functools.partial(
                    _engine_at, compile_at, PREFILL_KV_AS, priced, (gemm, moe), dp
                )
            *sampled, prefill_note = _sample(eng, float(num_layers), fallback)
            mla_note = f"MLA block from {MLA_BLOCK_FROM}" if donor is not None else ""
            notes = (quant_note, moe_note, mla_note, prefill_note)
            note = "; ".join(n for n in notes if n)
            break
        except NoSurface as exc:
            first = first or exc
    else:
        raise first
    lm_head, token_bound, attn, chunk, prefill = sampled
    layers = float(num_layers)
    layer = np.maximum.accumulate(np.maximum(token_bound, 0.0)) / layers
    layer = layer + _qk_norm_allreduce_ms(aic_model, system, engine, version, layout)
    dense = _dense_gemms(system, engine, version, weight_dtype, hidden, layout.tp_size)
    return KernelSurface(
        label=f"kernels:{engine}-{_literal_version(system, engine, version)}/"
        f"{system.split('_')[0]} {layout.describe()}" + (f" ({note})" if note else ""),
        layers=layers,
        m_grid=M_GRID,
        layer_ms=layer,
        lm_head_ms=np.maximum.accumulate(lm_head),
        b_grid=B_GRID,
        s_grid=S_GRID,
        attn_ms=attn,
        p_grid=P_GRID,
        prefill_attn_per_token_ms=np.maximum(prefill - chunk, 0.0) / layers,
        **dense,
    )


def _engine_at(compile_at, kv_dtype, layout, modes, dp) -> _Engine:
    return _Engine(compile_at(kv_dtype, layout, modes), dp)


def _sample(eng: _Engine, layers: float, prefill_fallback=None) -> tuple:
    """(lm_head, token-bound, attention / layers, chunk ms per token, prefill per token,
    note) on the surface's grids, or raises `NoSurface` where a table the layout needs is
    missing. Where only the context phase's tables lack the KV dtype, `prefill_fallback`
    (a callable returning an engine at `PREFILL_KV_AS`) prices prefill, and the note says
    so."""
    try:
        lm_head = np.array([eng.lm_head(m) for m in M_GRID])
        token_bound = np.array([eng.decode(m, 1.0) for m in M_GRID]) - lm_head
        attn = _attention(eng) / layers
        chunk = float(np.interp(PREFILL_CHUNK * eng.dp, M_GRID, token_bound)) / (
            PREFILL_CHUNK * eng.dp
        )
        prefill = np.array([_prefill_per_token(eng, p) for p in P_GRID])
        note = ""
    except Exception as exc:  # PerfDataNotAvailableError and kin: a table the layout lacks
        missing = NoSurface(f"aiconfigurator-core has no tables for this point: {exc}")
        if prefill_fallback is None or "context attention" not in str(exc):
            raise missing from None
        try:
            other = prefill_fallback()
            prefill = np.array([_prefill_per_token(other, p) for p in P_GRID])
        except Exception:
            raise missing from None
        note = f"prefill at {PREFILL_KV_AS} KV"
    return lm_head, token_bound, attn, chunk, prefill, note


def _attention(eng: _Engine) -> np.ndarray:
    """(Q_MAX, B, S) whole-model attention ms: attn(B*q, L) = f(B*q, L) - f(B*q, 1)."""
    out = np.empty((Q_MAX, len(B_GRID), len(S_GRID)))
    cache: dict[float, np.ndarray] = {}
    for qi in range(Q_MAX):
        for bi, b in enumerate(B_GRID):
            m = float(b * (qi + 1))
            if m not in cache:
                base = eng.decode(m, 1.0)
                cache[m] = np.array([eng.decode(m, s) - base for s in S_GRID])
            out[qi, bi] = cache[m]
    out = np.maximum(out, 0.0)
    return np.maximum.accumulate(np.maximum.accumulate(out, axis=2), axis=0)


def _prefill_per_token(eng: _Engine, prompt: float) -> float:
    """ms per prompt token of the replica for a full chunk of prompts of `prompt` tokens
    on each attention rank (the ranks prefill their own prompts side by side)."""
    n = max(int(PREFILL_CHUNK // prompt), 1)
    return eng.prefill(n, int(prompt)) / (n * prompt * eng.dp)


def _dense_gemms(system, engine, version, weight_dtype, hidden, tp) -> dict:
    """The heads' fusion (2H->H, 3H->H) and residual (H->H) GEMMs from the dense table."""
    resolved = tables.resolve_version(system, engine, version or None) or tables.resolve_version(
        system, engine
    )
    if resolved is None:
        raise NoSurface(f"no GEMM table for {engine} on {system}")
    gemm = tables.load_table(str(tables.table_path(system, engine, resolved, "gemm")), "gemm")
    dtype = tables.GEMM_DTYPES.get(weight_dtype, "bfloat16")

    def g(n, k):
        return tables.gemm_curve(gemm, dtype, float(n), float(k), M_GRID)

    h = float(hidden)
    return {
        "fusion2_ms": g(h / tp, 2 * h),
        "fusion3_ms": g(h / tp, 3 * h),
        "resblock_ms": g(h / tp, h),
    }


def _literal_version(system: str, engine: str, version: str) -> str:
    if version:
        return version
    try:
        from aiconfigurator_core.sdk.engine import _literal_backend_version

        return str(_literal_backend_version(system, engine, None, None, None))
    except Exception:
        return "default"


@functools.lru_cache(maxsize=2048)  # about 34 kB a surface
def get_composite(
    aic_model: str,
    num_layers: int,
    hidden: int,
    gpu_id: str,
    engine: str,
    version: str,
    weight_dtype: str,
    checkpoint_dtype: str,
    kv_dtype: str,
    layout: Layout,
) -> KernelSurface | None:
    """The cached surface on a catalog GPU, or None where the package cannot price it (the
    row then stays on the roofline and `latency_source` says so)."""
    system = tables.SYSTEMS.get(gpu_id)
    if not aic_model or system is None or engine not in tables.ENGINES:
        return None
    args = (
        aic_model,
        num_layers,
        hidden,
        system,
        engine,
        version,
        weight_dtype,
        checkpoint_dtype,
        kv_dtype,
        layout,
    )
    path = _cache_path(args)
    if path is not None and path.with_suffix(".none").is_file():
        return None
    cached = _read_cached(path)
    if cached is not None:
        return cached
    try:
        surface = build_composite(*args)
    except NoSurface as exc:
        logging.getLogger(__name__).info(
            "%s on %s/%s: roofline (%s)", aic_model, gpu_id, engine, exc
        )
        _write_none(path, str(exc))
        return None
    _write_cached(path, surface)
    return surface


@functools.cache
def _code_digest() -> str:
    """The sha256 of the modules that build a surface: a kept surface (or a kept "cannot
    price") of older code is never read back."""
    here = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for name in ("composite.py", "surface.py", "tables.py", "axes.py"):
        digest.update((here / name).read_bytes())
    return digest.hexdigest()


def _cache_path(args: tuple) -> Path | None:
    """Where a surface is kept between processes (building one asks the engine ~4,000
    times, about a second): `$XDG_CACHE_HOME/specplan/surfaces/`, keyed by every argument,
    the package's version, the code that builds it and, for a local model folder, its
    config's bytes; None where no cache folder can be named (SPECPLAN_SURFACE_CACHE=off)."""
    if os.environ.get("SPECPLAN_SURFACE_CACHE", "").lower() == "off":
        return None
    try:
        from importlib.metadata import version

        parts = [repr(args), version("aiconfigurator-core"), str(CACHE_FORMAT), _code_digest()]
        local = Path(args[0]) / "config.json"
        if local.is_file():
            parts.append(hashlib.sha256(local.read_bytes()).hexdigest())
    except Exception:
        return None
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    key = hashlib.sha256("|".join(parts).encode()).hexdigest()[:32]
    return base / "specplan" / "surfaces" / f"{key}.npz"


_FIELDS = [f.name for f in dataclasses.fields(KernelSurface)]


def _read_cached(path: Path | None) -> KernelSurface | None:
    """The surface kept at `path`, or None (absent, unreadable or of another shape)."""
    if path is None or not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            got = {f: z[f] for f in _FIELDS}
        got["label"] = str(got["label"])
        got["layers"] = float(got["layers"])
        surface = KernelSurface(**got)
        if surface.attn_ms.shape != (Q_MAX, len(B_GRID), len(S_GRID)):
            return None
        return surface
    except Exception:
        return None


def _write_none(path: Path | None, why: str) -> None:
    """Keep that the package cannot price these arguments (a `.none` file beside where
    the surface would be, holding the reason): a sweep over combinations the tables lack
    asks the engine once, not once per process."""
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(why[:2000], encoding="utf-8")
        os.replace(tmp, path.with_suffix(".none"))
    except OSError:
        return


def _write_cached(path: Path | None, surface: KernelSurface) -> None:
    """Keep `surface` at `path`, atomically; a cache that cannot be written is skipped."""
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
        np.savez(tmp, **{f: np.asarray(getattr(surface, f)) for f in _FIELDS})
        os.replace(tmp, path)
    except OSError:
        return
