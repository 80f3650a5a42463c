"""A `ModelSpec` from a Hugging Face checkpoint's config.json (and hf_quant_config.json).

`read_config` reads the decoder's shapes and counts its parameters (plain integers) from
them: embedding, attention (grouped-query, MLA with its q/kv low-rank projections, the
sparse-attention indexer, gated-delta-net linear attention), dense MLP, routed and shared
experts, router, norms and an untied LM head. Multi-token-prediction modules are not in
`total_params` (a model card's headline figure leaves them out too: DeepSeek-V3's 671B is
the main model, its 14B MTP module apart); their count is `num_nextn_predict_layers`.

Families: dense (Llama, Mistral, Qwen2/Qwen3, MiMo, Gemma), MoE (Mixtral, Qwen2/Qwen3-MoE,
Qwen3.5, Llama 4, gpt-oss, MiniMax-M2, GLM-4.5) and MLA + MoE (DeepSeek-V2/V3/R1/V3.2,
Kimi-K2.x, GLM-5). A multimodal wrapper (`text_config`) is priced as its text model: the
vision tower is not priced, and the spec's `source` says so.

Layers the model does not price, and what is done with them:

- hybrid linear attention (Qwen3.5's `layer_types` "linear_attention",
  `full_attention_interval`), sliding windows (`sliding_window` with `use_sliding_window`;
  gpt-oss's and Gemma's `layer_types` "sliding_attention"; Llama 4's chunked attention),
  DeepSeek-V3.2 / GLM-5 sparse attention (`index_topk`).
- Where aiconfigurator-core has a model of the architecture (`AIC_ARCHITECTURES`), its
  kernel tables price the step as that package models it, and the memory model counts
  KV cache only for the layers whose cache grows with the context: `kv_layers` is the
  number of full-attention layers. A sliding or chunked layer's cache, bounded by its
  window, is neglected; a linear-attention layer's recurrent state likewise. Sparse
  attention keeps a full cache on every layer (its indexer's small key cache neglected).
- Where it has none, a config using such a layer raises `InputError` naming the field:
  nothing is priced as what it is not.

`aic_model` is the Hugging Face id where aiconfigurator-core bundles that very config, else
a local folder holding it (`materialise`), else "" (the roofline prices the model).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
from functools import cache
from pathlib import Path
from typing import Any

from simulator.errors import InputError
from simulator.inputs.specs import ModelSpec

MAX_CONFIG_BYTES = 4 * 1024 * 1024
"""A config.json is a few kB (Gemma's, with its vision tower, ~10 kB; a ModelOpt
hf_quant_config.json listing every excluded module ~300 kB)."""
MAX_DEPTH = 32
"""Deepest nesting a config may have: real ones reach 4 (quantization config groups)."""

DENSE_ARCHITECTURES = frozenset(
    {
        "LlamaForCausalLM",
        "MistralForCausalLM",
        "Mistral3ForConditionalGeneration",
        "Qwen2ForCausalLM",
        "Qwen3ForCausalLM",
        "Qwen3VLForConditionalGeneration",
        "Qwen3_5ForConditionalGeneration",
        "MiMoForCausalLM",
        "GemmaForCausalLM",
        "Gemma2ForCausalLM",
        "Gemma3ForCausalLM",
        "Gemma3ForConditionalGeneration",
    }
)
MOE_ARCHITECTURES = frozenset(
    {
        "MixtralForCausalLM",
        "Qwen2MoeForCausalLM",
        "Qwen3MoeForCausalLM",
        "Qwen3VLMoeForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration",
        "Qwen3NextForCausalLM",
        "Llama4ForConditionalGeneration",
        "Llama4ForCausalLM",
        "GptOssForCausalLM",
        "MiniMaxM2ForCausalLM",
        "Glm4MoeForCausalLM",
    }
)
MLA_ARCHITECTURES = frozenset(
    {
        "DeepseekV2ForCausalLM",
        "DeepseekV3ForCausalLM",
        "DeepseekV32ForCausalLM",
        "GlmMoeDsaForCausalLM",
        "KimiK25ForConditionalGeneration",
    }
)
ARCHITECTURES = DENSE_ARCHITECTURES | MOE_ARCHITECTURES | MLA_ARCHITECTURES
"""What `read_config` prices. Others aiconfigurator-core models (Nemotron-H's Mamba
layers, Nemotron-NAS's per-layer blocks, DeepSeek-V4's compressed attention, Kimi-K3's
KDA, MiniMax-M3, Step-3.7, MiMo-V2-Flash, Gemma 4) have layers this reader does not count."""

_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "half": "fp16"}
_FULL_CACHE = {"full_attention", "deepseek_sparse_attention"}
"""Layer types whose KV cache grows with the context (sparse attention reads a subset of
a full cache)."""
_LAYER_TYPES = _FULL_CACHE | {"sliding_attention", "linear_attention", "chunked_attention"}


@cache
def _aic() -> tuple[frozenset[str], frozenset[str], Path | None]:
    """(architectures aiconfigurator-core models, Hugging Face ids its engine builds from
    its bundled configs, the folder of those configs); empty where it is not installed."""
    if importlib.util.find_spec("aiconfigurator_core") is None:
        return frozenset(), frozenset(), None
    from aiconfigurator_core.sdk import common

    folder = Path(importlib.util.find_spec("aiconfigurator_core").origin).parent / "model_configs"
    return (
        frozenset(common.ARCHITECTURE_TO_MODEL_FAMILY),
        frozenset(common.DefaultHFModels),
        folder if folder.is_dir() else None,
    )


@cache
def aic_version() -> str:
    """The installed aiconfigurator-core's version ("" where it is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("aiconfigurator-core")
    except PackageNotFoundError:
        return ""


def bundled_configs() -> dict[str, Path]:
    """Hugging Face id -> the config.json aiconfigurator-core ships for it."""
    folder = _aic()[2]
    if folder is None:
        return {}
    out = {}
    for path in sorted(folder.glob("*_config.json")):
        if not path.name.endswith("_hf_quant_config.json") and "--" in path.name:
            out[path.name[: -len("_config.json")].replace("--", "/", 1)] = path
    return out


def aic_architectures() -> frozenset[str]:
    """Architectures aiconfigurator-core's engine has a model of."""
    return _aic()[0]


def bundled_config_path(hf_id: str) -> Path | None:
    """The config.json aiconfigurator-core ships for `hf_id`, if it ships one."""
    folder = _aic()[2]
    if folder is None or "/" not in hf_id:
        return None
    path = folder / f"{hf_id.replace('/', '--')}_config.json"
    return path if path.is_file() else None


# --- JSON in ---------------------------------------------------------------------------


def _depth(value: Any) -> int:
    """Nesting depth of a parsed JSON value, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            if depth > MAX_DEPTH:
                return depth
            children = item.values() if isinstance(item, dict) else item
            stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return deepest


def parse_json(value: str | bytes | dict | None, source: str) -> dict | None:
    """A JSON object from text, bytes or a dict: at most `MAX_CONFIG_BYTES` and
    `MAX_DEPTH` deep, parsed with `json` (never eval). None stays None."""
    if value is None:
        return None
    if isinstance(value, dict):
        parsed: Any = value
    elif isinstance(value, (str, bytes, bytearray)):
        if len(value) > MAX_CONFIG_BYTES:
            raise InputError(f"is larger than {MAX_CONFIG_BYTES:,} bytes", file=source)
        if isinstance(value, (bytes, bytearray)):
            try:
                value = bytes(value).decode("utf-8-sig")
            except UnicodeDecodeError:
                raise InputError("is not UTF-8 text", file=source) from None
        try:
            parsed = json.loads(value)
        except RecursionError:
            raise InputError(f"nests deeper than {MAX_DEPTH} levels", file=source) from None
        except ValueError as exc:
            raise InputError(f"is not JSON ({exc})", file=source) from None
    else:
        raise InputError(
            f"expected JSON text or an object, got {type(value).__name__}", file=source
        )
    if not isinstance(parsed, dict):
        raise InputError(f"must be a JSON object, not {type(parsed).__name__}", file=source)
    if _depth(parsed) > MAX_DEPTH:
        raise InputError(f"nests deeper than {MAX_DEPTH} levels", file=source)
    return parsed


class _Fields:
    """Typed reads of one config object; a bad field raises InputError naming it."""

    def __init__(self, data: dict, source: str, prefix: str = ""):
        self.data, self.source, self.prefix = data, source, prefix

    def fail(self, name: str, message: str):
        raise InputError(message, file=self.source, field=self.prefix + name)

    def has(self, name: str) -> bool:
        return self.data.get(name) is not None

    def int(self, name: str, default: int | None = None, *, least: int = 1) -> int:
        value = self.data.get(name)
        if value is None:
            if default is None:
                self.fail(name, "is missing; a decoder's config.json gives it")
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(name, f"must be a whole number, not {type(value).__name__}")
        if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
            self.fail(name, f"must be a whole number, not {value!r}")
        if not least <= value <= 1 << 40:
            self.fail(name, f"{int(value)} must be in {least}..{1 << 40}")
        return int(value)

    def bool(self, name: str, default: bool) -> bool:
        value = self.data.get(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.fail(name, f"must be true or false, not {type(value).__name__}")
        return value

    def str(self, name: str, default: str = "") -> str:
        value = self.data.get(name)
        if value is None:
            return default
        if not isinstance(value, str):
            self.fail(name, f"must be a string, not {type(value).__name__}")
        return value[:500]

    def list(self, name: str) -> list | None:
        value = self.data.get(name)
        if value is None:
            return None
        if not isinstance(value, list):
            self.fail(name, f"must be a list, not {type(value).__name__}")
        return value

    def dict(self, name: str) -> dict:
        value = self.data.get(name)
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.fail(name, f"must be an object, not {type(value).__name__}")
        return value


def _architecture(top: _Fields) -> str:
    archs = top.list("architectures")
    if not archs or not isinstance(archs[0], str):
        top.fail(
            "architectures", "must be a list naming the model class, e.g. ['LlamaForCausalLM']"
        )
    arch = archs[0][:100]
    if arch not in ARCHITECTURES:
        top.fail(
            "architectures",
            f"'{arch}' is not an architecture SpecPlan prices (docs/model.md, 'Models "
            "from config.json', lists those it does)",
        )
    return arch


# --- the checkpoint's dtype ------------------------------------------------------------

_QUANT_ALGOS = {
    "fp8": "fp8",
    "fp8_block_scales": "fp8",
    "fp8_pb_wo": "fp8",
    "nvfp4": "fp4",
    "fp4": "fp4",
    "mxfp4": "fp4",
    "w4a16_awq": "int4",
    "w4a8_awq": "int4",
    "int4_awq": "int4",
    "w4a8_nvfp4_fp8": "fp4",
    "w8a8_sq_per_channel": "int8",
    "int8_sq": "int8",
}


def _from_hf_quant(quant: dict, source: str) -> str:
    section = _Fields(quant, source).dict("quantization")
    q = _Fields(section, source, "quantization.")
    algo = q.str("quant_algo").lower()
    if algo == "mixed_precision":
        layers = q.dict("quantized_layers")
        algos = {
            str(v.get("quant_algo", "")).lower() for v in layers.values() if isinstance(v, dict)
        }
        # The narrowest format is the MLP's or the experts' (the bulk of the weights).
        return "fp4" if any("fp4" in a for a in algos) else "fp8"
    if not algo:
        return ""
    if algo not in _QUANT_ALGOS:
        q.fail("quant_algo", f"'{algo}' is not one of {', '.join(sorted(_QUANT_ALGOS))}")
    return _QUANT_ALGOS[algo]


def _compressed_tensors(qc: _Fields) -> str:
    """The narrowest weight group's format: the experts' or the MLP's, the bulk of the
    weights (Kimi-K2.5: int4 experts, bf16 attention)."""
    found = []
    for group in qc.dict("config_groups").values():
        weights = group.get("weights") if isinstance(group, dict) else None
        if isinstance(weights, dict) and weights.get("num_bits") in (4, 8):
            floating = str(weights.get("type", "int")) == "float"
            found.append(
                (weights["num_bits"], ("fp" if floating else "int") + str(weights["num_bits"]))
            )
    if not found:
        qc.fail("config_groups", "names no 4- or 8-bit weight group")
    return min(found)[1]


def _from_quantization_config(qc: _Fields) -> str:
    method = qc.str("quant_method").lower()
    if method in ("fp8", "fbgemm_fp8"):
        return "fp8"
    if method in ("mxfp4", "nvfp4"):
        return "fp4"
    if method == "modelopt":
        algo = qc.str("quant_algo").lower()
        return "fp8" if algo.startswith("fp8") else "fp4"
    if method in ("awq", "gptq"):
        bits = qc.int("bits", 4)
        if bits not in (4, 8):
            qc.fail("bits", f"{bits}-bit weights are not priced (4 or 8)")
        return "int4" if bits == 4 else "int8"
    if method == "bitsandbytes":
        return "int4" if qc.bool("load_in_4bit", False) else "int8"
    if method == "compressed-tensors":
        return _compressed_tensors(qc)
    qc.fail("quant_method", f"'{method}' is not a quantisation SpecPlan prices")
    return ""


def checkpoint_dtype(top: _Fields, text: _Fields, quant: dict | None, quant_source: str) -> str:
    """The dtype the bulk of the weights ship in: hf_quant_config.json's algorithm, else
    `quantization_config`'s method, else `torch_dtype` (bf16 where none is given). A
    checkpoint quantising only its experts (gpt-oss: MXFP4 experts, bf16 attention) is
    given its experts' dtype."""
    if quant is not None:
        found = _from_hf_quant(quant, quant_source)
        if found:
            return found
    for fields in (top, text):
        if fields.has("quantization_config"):
            qc = _Fields(
                fields.dict("quantization_config"),
                top.source,
                fields.prefix + "quantization_config.",
            )
            return _from_quantization_config(qc)
    for fields in (top, text):
        for name in ("torch_dtype", "dtype"):
            value = fields.str(name).lower()
            if value:
                if value not in _DTYPES:
                    fields.fail(name, f"'{value}' is not one of {', '.join(_DTYPES)}")
                return _DTYPES[value]
    return "bf16"


# --- which layers attend how -----------------------------------------------------------


def _attention_kinds(arch: str, t: _Fields, layers: int) -> tuple[int, int, str]:
    """(full-attention layers, linear-attention layers, the field naming a layer kind the
    model does not price, or "")."""
    types = t.list("layer_types")
    if types is not None:
        if len(types) != layers or any(x not in _LAYER_TYPES for x in types):
            t.fail(
                "layer_types",
                f"must list one of {', '.join(sorted(_LAYER_TYPES))} for each of the "
                f"{layers} layers",
            )
        full = sum(1 for x in types if x in _FULL_CACHE)
        linear = types.count("linear_attention")
        if full < layers:
            return full, linear, "layer_types"
        return layers, 0, "index_topk" if t.has("index_topk") else ""
    interval = t.int("full_attention_interval", 0, least=0)
    if interval:
        full = layers // interval
        return full, layers - full, "" if full == layers else "full_attention_interval"
    if arch.startswith("Llama4") and t.has("attention_chunk_size"):
        # Llama 4: chunked attention with RoPE, and every fourth layer global without
        # (transformers' Llama4TextConfig default for `no_rope_layers`).
        flags = t.list("no_rope_layers") or [int((i + 1) % 4 != 0) for i in range(layers)]
        full = sum(1 for v in flags if v == 0)
        return full, 0, "" if full == layers else "attention_chunk_size"
    if t.has("sliding_window") and t.bool("use_sliding_window", True):
        # Qwen2's windows start at layer `max_window_layers`; Mistral v0.1's cover all.
        full = min(t.int("max_window_layers", 0, least=0), layers)
        return full, 0, "sliding_window"
    if t.has("index_topk"):
        return layers, 0, "index_topk"
    return layers, 0, ""


# --- parameters ------------------------------------------------------------------------


def _gqa_layer(t: _Fields, model_type: str, h: int, nh: int, kv: int, hd: int) -> int:
    """Parameters of one grouped-query attention block: q (doubled where the output is
    gated, Qwen3.5/Qwen3-Next), k, v, o, their biases, q/k norms and gpt-oss's sinks."""
    q = h * nh * hd * (2 if t.bool("attn_output_gate", False) else 1)
    params = q + 2 * h * kv * hd + nh * hd * h
    bias = t.bool("attention_bias", False)
    if bias or t.bool("qkv_bias", model_type.startswith("qwen2")):
        params += (nh + 2 * kv) * hd
    if bias:
        params += h
    if t.str("qk_norm_type") == "per_layer":
        params += (nh + kv) * hd
    elif model_type.startswith("qwen3") or (
        t.bool("use_qk_norm", False) and "llama4" not in model_type
    ):
        params += 2 * hd
    if model_type == "gpt_oss":
        params += nh
    return params


def _mla_layer(t: _Fields, h: int, nh: int) -> tuple[int, dict]:
    """Parameters of one multi-head latent attention block (q low-rank projection where
    `q_lora_rank` is set, the kv latent with its decoupled RoPE key, their norms, o, and
    the sparse-attention indexer where `index_topk` is set), and its shape fields."""
    nope, rope = t.int("qk_nope_head_dim"), t.int("qk_rope_head_dim")
    v, kvr = t.int("v_head_dim"), t.int("kv_lora_rank")
    qr = t.int("q_lora_rank", 0, least=0)
    q = h * qr + qr + qr * nh * (nope + rope) if qr else h * nh * (nope + rope)
    params = q + h * (kvr + rope) + kvr + kvr * nh * (nope + v) + nh * v * h
    if t.has("index_topk"):
        n, d = t.int("index_n_heads"), t.int("index_head_dim")
        params += (qr or h) * n * d + h * d + 2 * d + h * n
    shape = {
        "num_kv_heads": nh,
        "head_dim": nope + rope,
        "kv_lora_rank": kvr,
        "qk_rope_head_dim": rope,
        "v_head_dim": v,
    }
    return params, shape


def _linear_layer(t: _Fields, h: int) -> int:
    """Parameters of one gated delta-net block (Qwen3.5, Qwen3-Next): the q, k, v, z and
    b, a input projections, the short convolution, the decay parameters, the gated norm
    and the output projection."""
    nk, dk = t.int("linear_num_key_heads"), t.int("linear_key_head_dim")
    nv, dv = t.int("linear_num_value_heads"), t.int("linear_value_head_dim")
    kernel = t.int("linear_conv_kernel_dim", 4)
    keys, values = nk * dk, nv * dv
    return (
        h * (2 * keys + 2 * values)
        + h * 2 * nv
        + (2 * keys + values) * kernel
        + 2 * nv
        + dv
        + values * h
    )


def _moe_layer_count(arch: str, t: _Fields, layers: int) -> int:
    if t.has("first_k_dense_replace"):
        return layers - min(t.int("first_k_dense_replace", least=0), layers)
    if arch.startswith("Llama4"):
        step = t.int("interleave_moe_layer_step", 1)
        return sum(1 for i in range(layers) if (i + 1) % step == 0)
    if t.has("decoder_sparse_step") or t.has("mlp_only_layers"):
        step = t.int("decoder_sparse_step", 1)
        only = t.list("mlp_only_layers") or []
        return sum(1 for i in range(layers) if i not in only and (i + 1) % step == 0)
    return layers


def _moe(arch: str, t: _Fields, model_type: str, h: int, layers: int) -> dict:
    """The experts' shape and parameter counts: {num_experts, experts_per_token,
    moe_intermediate_size, num_shared_experts, moe_layers, expert (one routed expert),
    per_layer (router, routed and shared experts of one MoE layer)}."""
    name = next(
        (n for n in ("num_local_experts", "n_routed_experts", "num_experts") if t.has(n)), ""
    )
    if not name:
        t.fail("num_local_experts", "is missing; an MoE config names its number of experts")
    experts = t.int(name)
    top = t.int("num_experts_per_tok" if t.has("num_experts_per_tok") else "experts_per_token")
    if top > experts:
        t.fail("num_experts_per_tok", f"{top} exceeds the {experts} experts")
    size = t.int("moe_intermediate_size" if t.has("moe_intermediate_size") else "intermediate_size")
    expert = 3 * h * size + (2 * size + h if model_type == "gpt_oss" else 0)
    shared, gate = t.int("n_shared_experts", 0, least=0), 0
    if arch.startswith("Llama4"):
        shared = 1
    elif t.int("shared_expert_intermediate_size", 0, least=0):
        width = t.int("shared_expert_intermediate_size")
        if width % size:
            t.fail(
                "shared_expert_intermediate_size",
                f"{width} is not a multiple of moe_intermediate_size {size} (the model "
                "prices a shared expert as copies of a routed one)",
            )
        shared, gate = width // size, h
    bias = (
        model_type == "gpt_oss"
        or t.str("topk_method") == "noaux_tc"
        or t.bool("use_routing_bias", False)
    )
    router = h * experts + (experts if bias else 0)
    return {
        "num_experts": experts,
        "experts_per_token": top,
        "moe_intermediate_size": size,
        "num_shared_experts": shared,
        "moe_layers": _moe_layer_count(arch, t, layers),
        "expert": expert,
        "per_layer": router + experts * expert + shared * 3 * h * size + gate,
    }


def _mtp_layers(t: _Fields) -> int:
    for name in ("num_nextn_predict_layers", "mtp_num_hidden_layers"):
        if t.has(name):
            return t.int(name, least=0)
    if t.bool("use_mtp", False):
        return t.int("num_mtp_modules", 0, least=0)
    return 0


def _shape(arch: str, t: _Fields, top: _Fields) -> dict:
    """ModelSpec's shape fields and parameter counts of the text decoder `t`."""
    model_type = t.str("model_type") or top.str("model_type")
    layers, h, nh = t.int("num_hidden_layers"), t.int("hidden_size"), t.int("num_attention_heads")
    vocab = t.int("vocab_size")
    gemma = arch.startswith("Gemma")
    tied = t.bool("tie_word_embeddings", top.bool("tie_word_embeddings", gemma))
    full, linear, _ = _attention_kinds(arch, t, layers)
    out: dict[str, Any] = {"num_layers": layers, "hidden_size": h, "num_attention_heads": nh}
    if arch in MLA_ARCHITECTURES:
        attention, mla = _mla_layer(t, h, nh)
        out.update(mla)
    else:
        kv = t.int("num_key_value_heads", nh)
        if nh % kv:
            t.fail("num_key_value_heads", f"{nh} heads are not a multiple of {kv} KV heads")
        hd = t.int("head_dim", h // nh)
        attention = _gqa_layer(t, model_type, h, nh, kv, hd)
        out.update(num_kv_heads=kv, head_dim=hd)
    mixers = (layers - linear) * attention + (linear * _linear_layer(t, h) if linear else 0)
    dense_width = t.int("intermediate_size_mlp", 0, least=0) or t.int(
        "intermediate_size", 0, least=0
    )
    moe = (
        _moe(arch, t, model_type, h, layers)
        if arch not in DENSE_ARCHITECTURES or t.has("num_experts")
        else None
    )
    moe_layers = moe["moe_layers"] if moe else 0
    if layers - moe_layers and not dense_width:
        t.fail("intermediate_size", "is missing; the dense MLP layers need their width")
    norms = layers * h * (4 if arch.startswith(("Gemma2", "Gemma3")) else 2) + h
    embeddings = vocab * h * (1 if tied else 2)
    total = embeddings + norms + mixers + (layers - moe_layers) * 3 * h * dense_width
    active = total
    if moe:
        total += moe_layers * moe["per_layer"]
        active = (
            total - moe_layers * (moe["num_experts"] - moe["experts_per_token"]) * moe["expert"]
        )
        out.update(
            {
                k: moe[k]
                for k in (
                    "num_experts",
                    "experts_per_token",
                    "moe_intermediate_size",
                    "num_shared_experts",
                )
            }
        )
        out["num_dense_layers"] = layers - moe_layers
    out.update(
        total_params=total,
        active_params=active,
        intermediate_size=dense_width or out.get("moe_intermediate_size", 0),
        vocab_size=vocab,
        tie_word_embeddings=tied,
        max_position_embeddings=t.int("max_position_embeddings", 0, least=0),
        num_nextn_predict_layers=_mtp_layers(t),
        kv_layers=full if 0 < full < layers else 0,
    )
    return out


def _text_config(arch: str, top: _Fields) -> tuple[_Fields, bool]:
    """The text decoder's fields (a multimodal wrapper's `text_config`), and whether a
    vision tower sits beside it."""
    vision = top.has("vision_config")
    if top.has("text_config"):
        text = top.dict("text_config")
        return _Fields(text, top.source, "text_config."), vision
    return top, vision


def read_config(
    config: str | bytes | dict,
    quant: str | bytes | dict | None = None,
    *,
    model_id: str | None = None,
    source: str = "config.json",
    hf_repo: str | None = None,
) -> ModelSpec:
    """The ModelSpec of a checkpoint's config.json (`config`) and hf_quant_config.json
    (`quant`), each JSON text, bytes or a parsed object. `model_id` defaults to the repo
    name of `_name_or_path`, lowercased; `hf_repo` is the Hugging Face id where the
    caller knows it. Raises `InputError` naming the file and field (see the module)."""
    data = parse_json(config, source)
    quant_source = (
        str(Path(source).with_name("hf_quant_config.json")) if source else "hf_quant_config.json"
    )
    return _read(
        data, parse_json(quant, quant_source), model_id, source, quant_source, hf_repo, None
    )


def read_bundled(hf_id: str, config_path: Path) -> ModelSpec:
    """The ModelSpec of a config aiconfigurator-core ships (`config_path`, its
    hf_quant_config.json beside it): id the repo name lowercased, `aic_model` the
    Hugging Face id where its engine builds from that copy."""
    quant_path = config_path.with_name(
        config_path.name.replace("_config.json", "_hf_quant_config.json")
    )
    source = f"aiconfigurator-core {aic_version()} model_configs/{config_path.name}"
    data = parse_json(config_path.read_bytes(), source)
    quant = parse_json(quant_path.read_bytes(), source) if quant_path.is_file() else None
    ident = hf_id.rsplit("/", 1)[-1].lower()
    aic = hf_id if hf_id in _aic()[1] else None
    return _read(data, quant, ident, source, source, hf_id, aic)


def _read(
    data: dict,
    quant_data: dict | None,
    model_id: str | None,
    source: str,
    quant_source: str,
    hf_repo: str | None,
    aic_model: str | None,
) -> ModelSpec:
    """`read_config` of parsed objects; `aic_model` None: found by `_aic_model`."""
    top = _Fields(data, source)
    arch = _architecture(top)
    text, vision = _text_config(arch, top)
    layers = text.int("num_hidden_layers")
    full, _, unpriced = _attention_kinds(arch, text, layers)
    if unpriced and arch not in aic_architectures():
        text.fail(
            unpriced,
            f"{arch} uses layers SpecPlan does not price (hybrid linear, sliding-window or "
            "sparse attention) and aiconfigurator-core has no model of it",
        )
    shape = _shape(arch, text, top)
    dtype = checkpoint_dtype(top, text, quant_data, quant_source)
    named = top.str("_name_or_path").rstrip("/")
    repo = hf_repo or (named if named.count("/") == 1 and not named.startswith((".", "/")) else "")
    ident = (model_id or repo.rsplit("/", 1)[-1] or named.rsplit("/", 1)[-1] or "model").strip()
    notes = [source, arch]
    if vision:
        notes.append("text model only: the vision tower is not priced")
    if unpriced:
        notes.append(f"{unpriced}: KV cache counted on the {full} full-attention layers only")
    if shape["num_nextn_predict_layers"]:
        notes.append(f"{shape['num_nextn_predict_layers']} MTP layer(s) not in total_params")
    tokenizer = f"{text.str('model_type') or top.str('model_type') or arch}:{shape['vocab_size']}"
    return ModelSpec(
        id=ident.lower() if model_id is None else ident,
        name=(repo.rsplit("/", 1)[-1] if repo else ident)[:200],
        tokenizer=tokenizer,
        checkpoint_dtype=dtype,
        hf_repo=repo,
        source="; ".join(notes),
        aic_model=_aic_model(arch, data, quant_data, repo) if aic_model is None else aic_model,
        **shape,
    )


# --- what aiconfigurator-core builds it from -------------------------------------------


def cache_dir() -> Path:
    """Where configs are written for aiconfigurator-core to read:
    `$XDG_CACHE_HOME/specplan/model-configs` (default ~/.cache)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "specplan" / "model-configs"


def materialise(config: dict, quant: dict | None = None) -> Path:
    """A folder holding `config` as config.json (and `quant` as hf_quant_config.json),
    named by the first 16 hex digits of their content's sha256, so the same model is the
    same folder. Raises OSError where it cannot be written."""
    texts = {"config.json": json.dumps(config, indent=2, sort_keys=True)}
    if quant is not None:
        texts["hf_quant_config.json"] = json.dumps(quant, indent=2, sort_keys=True)
    digest = hashlib.sha256(json.dumps(texts, sort_keys=True).encode()).hexdigest()[:16]
    folder = cache_dir() / digest
    if all((folder / name).is_file() for name in texts):
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        tmp = folder / f".{name}.{os.getpid()}.tmp"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, folder / name)
    return folder


def _same_as_bundled(repo: str, config: dict, quant: dict | None) -> bool:
    """Whether aiconfigurator-core's own copy of `repo` is this config (and quant config)."""
    path = bundled_config_path(repo)
    if path is None:
        return False
    quant_path = path.with_name(path.name.replace("_config.json", "_hf_quant_config.json"))
    try:
        theirs = (
            json.loads(quant_path.read_text(encoding="utf-8")) if quant_path.is_file() else None
        )
        return theirs == quant and json.loads(path.read_text(encoding="utf-8")) == config
    except (OSError, ValueError):
        return False


def _aic_model(arch: str, config: dict, quant: dict | None, repo: str) -> str:
    """The bundled Hugging Face id where aiconfigurator-core's engine builds the model from
    its own copy of this config, else a local folder holding it, else "" (no model of
    the architecture there, or the folder cannot be written: the roofline prices it)."""
    archs, ids, _ = _aic()
    if arch not in archs:
        return ""
    if repo in ids and _same_as_bundled(repo, config, quant):
        return repo
    try:
        return str(materialise(config, quant))
    except OSError:
        return ""


def read_config_file(path: str | Path, *, model_id: str | None = None) -> ModelSpec:
    """`read_config` of a config.json file, or of a folder holding one; a
    hf_quant_config.json beside it is read too. `model_id` defaults to the config's repo
    name, else the folder's name, lowercased."""
    path = Path(path)
    file = path / "config.json" if path.is_dir() else path
    texts = {}
    for name, where in (("config", file), ("quant", file.with_name("hf_quant_config.json"))):
        if name == "quant" and not where.is_file():
            continue
        try:
            if where.stat().st_size > MAX_CONFIG_BYTES:
                raise InputError(f"is larger than {MAX_CONFIG_BYTES:,} bytes", file=str(where))
            texts[name] = where.read_bytes()
        except FileNotFoundError:
            raise InputError("file not found", file=str(where)) from None
        except IsADirectoryError:
            raise InputError("is a folder without a config.json", file=str(where)) from None
        except OSError as exc:
            raise InputError(f"cannot be read ({exc.strerror or exc})", file=str(where)) from None
    if model_id is None:
        named = str(parse_json(texts["config"], str(file)).get("_name_or_path") or "").rstrip("/")
        folder = file.parent.name if file.name == "config.json" else file.stem
        model_id = (named.rsplit("/", 1)[-1] or folder).lower()
    return read_config(texts["config"], texts.get("quant"), model_id=model_id, source=str(file))
