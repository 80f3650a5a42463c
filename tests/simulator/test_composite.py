"""MoE and MLA targets priced from aiconfigurator-core's engine (issue 37): the surfaces
reproduce the engine's steps, the layout columns reach them, and what they cannot price
stays on the roofline and says so."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from simulator.errors import InputError
from simulator.inputs.catalog import default_models
from simulator.kernels.composite import Layout, compile_engine, get_composite
from simulator.model.predict import predict

DSV3 = "deepseek-ai/DeepSeek-V3"
EP8 = Layout(8, 1, 1, 8)


def _models():
    models = default_models()
    spec = models["deepseek-v3"]
    if not spec.aic_model:
        models = {**models, "deepseek-v3": dataclasses.replace(spec, aic_model=DSV3)}
    return models


@pytest.fixture(scope="module")
def surface():
    s = get_composite(DSV3, 61, 7168, "h200", "sglang", "", "fp8", "fp8", "fp8", EP8)
    assert s is not None
    return s


def _rule_off_on(monkeypatch, name: str, off, on, *args):
    """The surface of `args` with the table rule `composite.<name>` set to `off`, then to
    `on` (no disk cache, in-process cache cleared around each)."""
    from simulator.kernels import composite

    monkeypatch.setenv("SPECPLAN_SURFACE_CACHE", "off")
    got = []
    for value in (off, on):
        monkeypatch.setattr(composite, name, value)
        get_composite.cache_clear()
        got.append(get_composite(*args))
    get_composite.cache_clear()
    return tuple(got)


def test_a_decode_forward_is_the_engines_step(surface):
    """layers * (layer(B) + attn(B, L)) + lm_head(B) is the engine's decode step at grid
    points (batch and KV length on the grids: no interpolation), within the 0.1% that
    making each term monotone in tokens, queries and KV length moves it."""
    engine = compile_engine(DSV3, "h200_sxm", "sglang", "", "fp8", "fp8", "fp8", EP8)
    for b, kv in ((1, 1024), (32, 4096), (256, 16384)):
        want = engine.decode_step_latency(b, kv - 1, 0)
        assert float(surface.forward_ms(b, 1, kv)) == pytest.approx(want, rel=1e-3)


def test_verify_prices_more_tokens_and_reads(surface):
    """A verify forward of K+1 tokens per sequence costs more than a decode step (its MoE
    GEMMs see B(K+1) tokens) and less than K+1 decode steps."""
    for b in (1, 16, 128):
        one = float(surface.forward_ms(b, 1, 2048))
        four = float(surface.forward_ms(b, 4, 2048))
        assert one < four < 4 * one
        assert four == pytest.approx(float(surface.forward_ms(4 * b, 1, 2048)), rel=1e-9)


def test_attention_dp_splits_the_batch_over_ranks():
    """TP1 DP8 EP8: a replica batch of 64 puts 8 sequences on each attention rank."""
    lay = Layout(1, 8, 1, 8)
    s = get_composite(DSV3, 61, 7168, "h200", "sglang", "", "fp8", "fp8", "fp8", lay)
    engine = compile_engine(DSV3, "h200_sxm", "sglang", "", "fp8", "fp8", "fp8", lay)
    assert float(s.forward_ms(64, 1, 1024)) == pytest.approx(
        engine.decode_step_latency(8, 1023, 0), rel=1e-3
    )


def test_predict_prices_the_layout_it_is_given():
    rows = pd.DataFrame(
        {
            "target": "deepseek-v3",
            "gpu": "h200",
            "engine": "sglang",
            "num_gpus": 8,
            "moe_ep_size": [1, 8],
            "kv_dtype": "fp8",
            "batch_size": 32,
        }
    )
    out = predict(rows, models=_models(), break_even=False)
    assert list(out["latency_source"].astype(str)) == [
        "kernels:sglang-0.5.14/h200 TP8",
        "kernels:sglang-0.5.14/h200 TP8 EP8",
    ]
    assert np.all(np.isfinite(out["baseline_tpot_ms"]))
    assert out["baseline_tpot_ms"].iloc[0] != out["baseline_tpot_ms"].iloc[1]


def test_what_the_tables_cannot_price_stays_on_the_roofline():
    """A dense target with attention DP, and an MoE model aiconfigurator cannot build,
    keep the roofline and say so."""
    models = _models()
    rows = pd.DataFrame(
        {
            "target": ["llama-3.1-8b", "deepseek-v3"],
            "gpu": ["h200", "mi300x"],
            "engine": "vllm",
            "num_gpus": [2, 8],
            "attention_dp_size": [2, 1],
        }
    )
    out = predict(rows, models=models, break_even=False)
    assert list(out["latency_source"].astype(str)) == ["roofline", "roofline"]


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ({"num_gpus": 8, "tp_size": 4}, "num_gpus"),
        ({"num_gpus": 8, "attention_dp_size": 3}, "attention_dp_size"),
        ({"num_gpus": 8, "moe_ep_size": 3}, "moe_ep_size"),
        ({"num_gpus": 8, "moe_ep_size": 4, "moe_tp_size": 4}, "moe_tp_size"),
        ({"num_gpus": 8, "moe_ep_size": 0}, "moe_ep_size"),
    ],
)
def test_an_impossible_layout_is_refused_naming_the_field(row, field):
    base = {"target": "deepseek-v3", "gpu": "h200"}
    with pytest.raises(InputError) as err:
        predict(pd.DataFrame([{**base, **row}]), models=_models())
    assert err.value.field == field


def test_the_layout_fills_from_num_gpus():
    out = predict(
        pd.DataFrame(
            [
                {
                    "target": "deepseek-v3",
                    "gpu": "h200",
                    "num_gpus": 16,
                    "attention_dp_size": 4,
                    "moe_ep_size": 8,
                }
            ]
        ),
        models=_models(),
        break_even=False,
    )
    row = out.iloc[0]
    assert (row["tp_size"], row["moe_tp_size"], row["num_gpus"]) == (4, 2, 16)


def test_a_surface_kept_on_disk_reads_back_the_same(surface, tmp_path):
    """The disk cache returns the surface it was given; a damaged file is not read."""
    from simulator.kernels import composite

    path = tmp_path / "s.npz"
    composite._write_cached(path, surface)
    back = composite._read_cached(path)
    assert back.label == surface.label and back.layers == surface.layers
    for f in ("layer_ms", "attn_ms", "lm_head_ms", "prefill_attn_per_token_ms"):
        assert np.array_equal(getattr(back, f), getattr(surface, f))
    path.write_bytes(b"not an npz")
    assert composite._read_cached(path) is None


def test_attention_dp_replicates_the_dense_weights_and_splits_the_latent_cache():
    """DeepSeek-V3 on 8 H200s: TP1 DP8 keeps a copy of the attention and shared weights per
    rank (more weights) but caches each sequence's MLA latent on one GPU instead of all
    eight (SGLang's reason for --enable-dp-attention): more KV tokens."""
    rows = pd.DataFrame(
        {
            "target": "deepseek-v3",
            "gpu": "h200",
            "num_gpus": 8,
            "attention_dp_size": [1, 8],
            "moe_ep_size": [1, 8],
            "kv_dtype": "fp8",
        }
    )
    tp, dp = predict(rows, models=_models(), break_even=False).itertuples()
    spec = _models()["deepseek-v3"]
    extra_gb = 7 * spec.always_active_params * 1.0 / 2**30
    assert dp.weights_gb - tp.weights_gb == pytest.approx(extra_gb, rel=1e-6)
    assert dp.kv_capacity_tokens_baseline > 4 * tp.kv_capacity_tokens_baseline


def _step(aic_model, system, engine, weight, layout, **modes):
    """The package's decode step at batch 4, KV 2,048, compiled with the given modes."""
    from aiconfigurator_core.sdk.engine import EngineHandle

    handle = EngineHandle.compile(
        aic_model,
        system,
        engine,
        tp_size=layout.tp_size,
        attention_dp_size=layout.attention_dp_size,
        moe_tp_size=layout.moe_tp_size,
        moe_ep_size=layout.moe_ep_size,
        kvcache_quant_mode="fp8",
        fmha_quant_mode="bfloat16",
        **modes,
    )
    return handle.decode_step_latency(4, 2047, 0)


def test_vllm_block_fp8_gemms_are_not_priced_off_the_collection_floor():
    """vLLM's fp8_block GEMM tables on B200 sit on a ~0.17 ms floor (27x its bf16 table at
    small m): MiniMax-M2.5 fp8 TP4 EP1 at batch 4 priced 26 ms a step where SGLang's tables
    give 7 ms and the measured vLLM runs 9 ms. Priced from vLLM's per-tensor fp8 table it
    lands within 2x of SGLang's."""
    from simulator.kernels import tables

    lay = Layout(4, 1, 4, 1)
    mm = "MiniMaxAI/MiniMax-M2.5"
    system = tables.SYSTEMS["b200"]
    floor = _step(mm, system, "vllm", "fp8", lay)
    vllm = compile_engine(mm, system, "vllm", "", "fp8", "fp8", "fp8", lay)
    sglang = compile_engine(mm, system, "sglang", "", "fp8", "fp8", "fp8", lay)
    ours = vllm.decode_step_latency(4, 2047, 0)
    theirs = sglang.decode_step_latency(4, 2047, 0)
    assert floor > 3 * theirs
    assert theirs / 2 < ours < 2 * theirs


def test_trtllm_serves_mxfp4_experts_with_mxfp8_activations_on_blackwell_only():
    """gpt-oss's MXFP4 experts run W4A8_MXFP4_MXFP8 on TensorRT-LLM on SM >= 100 and
    W4A16_MXFP4 below it (TensorRT-LLM ModelConfig.get_mxfp4_quant_algo)."""
    from simulator.kernels import tables

    gpt = "openai/gpt-oss-120b"
    lay = Layout(1, 1, 1, 1)
    for gpu, faster in (("b200", True), ("h200", False)):
        system = tables.SYSTEMS[gpu]
        ours = compile_engine(gpt, system, "trtllm", "", "fp4", "fp4", "fp8", lay)
        label = _step(gpt, system, "trtllm", "fp4", lay)
        step = ours.decode_step_latency(4, 2047, 0)
        assert (step < 0.8 * label) if faster else step == pytest.approx(label)


def test_fp8_on_a_bf16_checkpoint_falls_back_to_block_scaled_fp8(monkeypatch):
    """GLM-5 (bf16 checkpoint) served at fp8 on SGLang: the package collects its DSA
    attention only with block-scaled fp8 GEMMs, so per-tensor fp8 left all 76 silicon runs
    on the roofline (-45%); block-scaled fp8, the vendor's own fp8 release, prices them."""
    spec = default_models()["glm-5"]
    args = (spec.aic_model, spec.num_layers, spec.hidden_size, "h200", "sglang", "", "fp8")
    lay = Layout(8, 1, 8, 1)
    args = (*args, spec.checkpoint_dtype, "fp8", lay)
    off, s = _rule_off_on(monkeypatch, "FP8_BLOCK_RETRY", False, True, *args)
    assert off is None
    assert s is not None and s.label.endswith("(fp8 as block-scaled fp8)")
    assert 0 < float(s.forward_ms(8, 1.0, 2048.0)) < 200


def test_a_weight_dtype_without_tables_stays_on_the_roofline():
    """int8 weights have no quant mode in the package: the roofline, not a KeyError."""
    spec = default_models()["qwen3-30b-a3b"]
    rows = pd.DataFrame(
        {"target": ["qwen3-30b-a3b"], "gpu": ["h200"], "weight_dtype": ["int8"], "engine": "sglang"}
    )
    assert spec.aic_model
    out = predict(rows, break_even=False)
    assert list(out["latency_source"].astype(str)) == ["roofline"]


def test_what_the_package_cannot_price_is_kept_and_not_asked_again(monkeypatch, tmp_path):
    """A sweep over combinations the tables lack asked aiconfigurator's engine again in
    every process (and, past the in-process cache's size, within one): the "cannot price"
    is kept on disk beside the surfaces, keyed by the code that decided it."""
    from simulator.kernels import composite

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    spec = default_models()["glm-5"]
    args = (spec.aic_model, spec.num_layers, spec.hidden_size, "h200", "sglang", "", "fp8")
    monkeypatch.setattr(composite, "FP8_BLOCK_RETRY", False)
    get_composite.cache_clear()
    assert get_composite(*args, spec.checkpoint_dtype, "fp8", Layout(8, 1, 8, 1)) is None
    (kept,) = list((tmp_path / "specplan" / "surfaces").glob("*.none"))
    assert kept.read_text(encoding="utf-8")

    def never(*_args, **_kwargs):
        raise AssertionError("built again")

    monkeypatch.setattr(composite, "build_composite", never)
    get_composite.cache_clear()
    assert get_composite(*args, spec.checkpoint_dtype, "fp8", Layout(8, 1, 8, 1)) is None
    get_composite.cache_clear()


def test_a_moe_split_without_tables_is_priced_at_the_other_split(monkeypatch):
    """TensorRT-LLM's tables hold gpt-oss's MXFP4 MoE only at MoE TP 1: `--tp_size 2`
    without `--ep_size` (MoE TP2, 21 silicon runs on B200) was on the roofline at +47%.
    The same GPUs at EP2 hold and read the same share of the expert weights; the surface
    is the engine's EP2 step and its label says so."""
    gpt = "openai/gpt-oss-120b"
    args = (gpt, 36, 2880, "b200", "trtllm", "", "fp4", "fp4", "fp8", Layout(2, 1, 2, 1))
    off, s = _rule_off_on(monkeypatch, "MOE_SHARE_SWAP", False, True, *args)
    assert off is None
    assert s is not None and s.label.endswith("TP2 (MoE TP2 as EP2)")
    ep2 = compile_engine(gpt, "b200_sxm", "trtllm", "", "fp4", "fp4", "fp8", Layout(2, 1, 1, 2))
    assert float(s.forward_ms(8, 1, 1024)) == pytest.approx(
        ep2.decode_step_latency(8, 1023, 0), rel=1e-2
    )


def test_vllm_mla_tables_from_before_the_collector_fix_take_trtllms_block(monkeypatch):
    """vLLM's H200 MLA module tables predate aiconfigurator#1423 (B200's were re-collected
    with it; their own note: the earlier rows ran a never-in-serving chain, +34%): a
    Kimi-K2.5 MLA block at TP8, batch 4 costs 2.3x TensorRT-LLM's on the same GPU. The
    surface takes TensorRT-LLM's block and keeps vLLM's MoE, norms and LM head; B200's
    re-collected tables are kept."""
    from simulator.kernels import composite

    spec = default_models()["kimi-k2.5"]
    lay = Layout(8, 1, 8, 1)
    args = (spec.aic_model, spec.num_layers, spec.hidden_size)
    rest = ("vllm", "", "int4", spec.checkpoint_dtype, "bf16", lay)
    stale, fixed = _rule_off_on(monkeypatch, "MLA_BLOCK_FROM", None, "trtllm", *args, "h200", *rest)
    _, b200 = _rule_off_on(monkeypatch, "MLA_BLOCK_FROM", None, "trtllm", *args, "b200", *rest)
    assert fixed.label.endswith("(MLA block from trtllm)") and "MLA" not in b200.label
    vllm = compile_engine(
        spec.aic_model, "h200_sxm", "vllm", "", "int4", spec.checkpoint_dtype, "bf16", lay
    )
    ops = dict((o[0], o[1]) for o in vllm.decode_step_per_op(4, 1023, 0))
    trt = composite.mla_donor(
        spec.aic_model, "h200_sxm", "vllm", "", "int4", spec.checkpoint_dtype, "bf16", lay
    )
    block = dict((o[0], o[1]) for o in trt.decode_step_per_op(4, 1023, 0))["generation_mla_block"]
    assert ops["generation_mla_block"] > 1.5 * block
    want = sum(ops.values()) - ops["generation_mla_block"] + block
    assert float(fixed.forward_ms(4, 1, 1024)) == pytest.approx(want, rel=1e-2)
    assert float(stale.forward_ms(4, 1, 1024)) == pytest.approx(sum(ops.values()), rel=1e-2)


def test_prefill_missing_the_kv_dtype_is_priced_at_bf16_kv_and_decode_keeps_it(monkeypatch):
    """SGLang 0.5.14 on H200 has no fp8-KV context attention at Qwen3.5's head size 256:
    the 16 silicon runs of Qwen3.5-397B at TP8 EP8 were on the roofline for want of prefill
    alone. Prefill is priced at bf16 KV; decode keeps the fp8 cache's tables."""
    spec = default_models()["qwen3.5-397b-a17b"]
    lay = Layout(8, 1, 1, 8)
    args = (spec.aic_model, spec.num_layers, spec.hidden_size, "h200", "sglang", "", "fp8")
    fp8 = (*args, spec.checkpoint_dtype, "fp8", lay)
    off, s = _rule_off_on(monkeypatch, "PREFILL_KV_AS", None, "bf16", *fp8)
    assert off is None
    bf16 = get_composite(*args, spec.checkpoint_dtype, "bf16", lay)
    get_composite.cache_clear()
    assert s is not None and s.label.endswith("prefill at bf16 KV)")
    assert np.allclose(s.prefill_attn_per_token_ms, bf16.prefill_attn_per_token_ms, rtol=0.05)
    engine = compile_engine(
        spec.aic_model,
        "h200_sxm",
        "sglang",
        "",
        "fp8",
        spec.checkpoint_dtype,
        "fp8",
        lay,
        ("fp8_block", "fp8_block"),
    )
    assert float(s.forward_ms(16, 1, 4096)) == pytest.approx(
        engine.decode_step_latency(16, 4095, 0), rel=1e-2
    )


def test_a_per_layer_qk_norm_pays_its_all_reduces_under_tp(monkeypatch):
    """MiniMax-M2's QK norm spans all heads (config `qk_norm_type` "per_layer"): with the
    heads split over TP ranks each layer all-reduces the q and k variances (vLLM's and
    SGLang's MiniMaxText01RMSNormTP), an op the package's engine does not price. Its
    vLLM runs on B200, H200 and H100 (293) read 12-13% too fast without it."""
    from simulator.kernels import composite
    from simulator.kernels.surface import _allreduce_ms

    spec = default_models()["minimax-m2.5"]
    args = (spec.aic_model, spec.num_layers, spec.hidden_size, "b200", "vllm", "", "fp8")
    rest = (spec.checkpoint_dtype, "fp8")
    monkeypatch.setenv("SPECPLAN_SURFACE_CACHE", "off")
    version = composite._literal_version("b200_sxm", "vllm", "")
    for lay in (Layout(4, 1, 4, 1), Layout(1, 1, 1, 1)):
        get_composite.cache_clear()
        with_norm = float(get_composite(*args, *rest, lay).forward_ms(16, 1, 1024))
        monkeypatch.setattr(composite, "_per_layer_qk_norm", lambda model: False)
        get_composite.cache_clear()
        without = float(get_composite(*args, *rest, lay).forward_ms(16, 1, 1024))
        monkeypatch.undo()
        monkeypatch.setenv("SPECPLAN_SURFACE_CACHE", "off")
        tokens = np.array([2.0 * 16])
        ar = _allreduce_ms("b200_sxm", "vllm", version, lay.tp_size, tokens)[0]
        assert with_norm - without == pytest.approx(spec.num_layers * 2.0 * float(ar), abs=1e-9)
    get_composite.cache_clear()
    assert composite._per_layer_qk_norm(spec.aic_model)
    assert not composite._per_layer_qk_norm("openai/gpt-oss-120b")


def test_fp4_without_nvfp4_attention_tables_keeps_attention_at_bf16(monkeypatch):
    """NVIDIA's GLM-5 NVFP4 export quantises the experts and excludes every attention
    projection and the DSA indexer (its hf_quant_config.json, bundled by the package);
    SGLang has no DSA module table at NVFP4 GEMMs, so its 10 fp4 runs sat on the roofline
    at -48%. Priced as the export is: NVFP4 experts, bf16 attention."""
    import json

    from simulator.inputs.hf_config import bundled_config_path

    quant = bundled_config_path("nvidia/GLM-5-NVFP4").with_name(
        "nvidia--GLM-5-NVFP4_hf_quant_config.json"
    )
    excluded = json.loads(quant.read_text())["quantization"]["exclude_modules"]
    assert "model.layers.0.self_attn.q_b_proj" in excluded
    spec = default_models()["glm-5"]
    args = (spec.aic_model, spec.num_layers, spec.hidden_size, "b200", "sglang", "", "fp4")
    lay = Layout(8, 1, 8, 1)
    full = (*args, spec.checkpoint_dtype, "fp8", lay)
    off, s = _rule_off_on(monkeypatch, "FP4_ATTENTION_AS", None, "bfloat16", *full)
    assert off is None
    assert s is not None and s.label.endswith("(fp4 experts, bf16 attention)")
    engine = compile_engine(
        spec.aic_model,
        "b200_sxm",
        "sglang",
        "",
        "fp4",
        spec.checkpoint_dtype,
        "fp8",
        lay,
        ("bfloat16", "nvfp4"),
    )
    assert float(s.forward_ms(8, 1, 2048)) == pytest.approx(
        engine.decode_step_latency(8, 2047, 0), rel=1e-2
    )
