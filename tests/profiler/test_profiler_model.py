"""The random-weight decoder: cached decoding equals full attention, shapes and byte counts."""

from __future__ import annotations

import pytest
import torch

from profiler.model import ArchConfig, DecoderLM, KVCache, mla_note, weight_bytes
from profiler.runner import full_weight_bytes
from simulator.catalog import default_models
from simulator.specs import DTYPE_BYTES

SMALL = ArchConfig(
    vocab_size=256,
    hidden_size=64,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    head_dim=16,
    intermediate_size=128,
)
MOE = ArchConfig(
    vocab_size=256,
    hidden_size=64,
    num_layers=3,
    num_heads=4,
    num_kv_heads=1,
    head_dim=16,
    intermediate_size=128,
    num_experts=8,
    experts_per_token=2,
    moe_intermediate_size=32,
    num_shared_experts=1,
    num_dense_layers=1,
)


@pytest.fixture(scope="module")
def models() -> dict:
    torch.manual_seed(0)
    return {cfg: DecoderLM(cfg, dtype=torch.float32).eval() for cfg in (SMALL, MOE)}


@pytest.mark.parametrize("cfg", [SMALL, MOE], ids=["dense", "moe"])
def test_incremental_decoding_matches_full_causal_attention(models, cfg):
    model = models[cfg]
    ids = torch.randint(0, cfg.vocab_size, (3, 10))
    with torch.inference_mode():
        full = model(ids)
        cache = KVCache(cfg, 3, 16, dtype=torch.float32)
        parts = [model(ids[:, :6], cache), model(ids[:, 6:7], cache), model(ids[:, 7:], cache)]
    assert full.shape == (3, 10, cfg.vocab_size)
    torch.testing.assert_close(torch.cat(parts, dim=1), full, atol=1e-5, rtol=1e-4)
    assert cache.lengths.tolist() == [10, 10, 10]


def test_sequences_of_different_lengths_in_one_batch(models):
    model = models[SMALL]
    ids = torch.randint(0, 256, (3, 8))
    with torch.inference_mode():
        cache = KVCache(SMALL, 3, 12, dtype=torch.float32)
        model(ids[:, :6], cache)
        # Roll back to different accepted prefixes, then verify two new tokens per sequence.
        cache.lengths[:] = torch.tensor([2, 4, 6])
        out = model(ids[:, 6:8], cache)
        for b, length in enumerate([2, 4, 6]):
            ref = model(torch.cat([ids[b : b + 1, :length], ids[b : b + 1, 6:8]], dim=1))
            torch.testing.assert_close(out[b : b + 1], ref[:, length:], atol=1e-5, rtol=1e-4)
    assert cache.lengths.tolist() == [4, 6, 8]


def test_training_path_has_gradients():
    model = DecoderLM(SMALL, dtype=torch.float32)
    ids = torch.randint(0, 256, (2, 5))
    loss = torch.nn.functional.cross_entropy(model(ids[:, :-1]).flatten(0, 1), ids[:, 1:].flatten())
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())
    # Random init is scaled so that the untrained loss is near log(vocab).
    assert abs(loss.item() - torch.log(torch.tensor(256.0)).item()) < 1.0


def test_built_on_meta_costs_no_memory_and_counts_bytes():
    spec = default_models()["llama-3.1-8b"]
    meta = DecoderLM(ArchConfig.from_spec(spec), device="meta", dtype=torch.bfloat16)
    assert meta.embed.weight.device.type == "meta"
    assert weight_bytes(meta) == spec.total_params * 2


def test_tiny_from_catalog_matches_its_parameter_count():
    spec = default_models()["tiny"]
    cfg = ArchConfig.from_spec(spec)
    assert (cfg.num_layers, cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads) == (2, 64, 4, 2)
    model = DecoderLM(cfg, dtype=torch.bfloat16)
    assert model.embed.weight.dtype == torch.bfloat16
    assert weight_bytes(model) == spec.total_params * 2
    assert full_weight_bytes(spec, "bf16") == spec.total_params * 2


def test_parameter_arithmetic_matches_the_modules_for_every_catalog_model():
    """`ArchConfig.num_parameters` (no meta model, no torch._dynamo) counts what the modules
    hold: dense, GQA, tied, MoE with shared experts and a dense prefix, cut to a few layers."""
    for spec in default_models().values():
        for depth in {spec.num_layers, min(spec.num_layers, 2)}:
            cfg = ArchConfig.from_spec(spec, depth)
            meta = DecoderLM(cfg, device="meta", dtype=torch.bfloat16)
            assert cfg.num_parameters() * 2 == weight_bytes(meta), (spec.id, depth)


def test_tied_embeddings_stay_tied_after_materialising():
    spec = default_models()["llama-3.2-1b"]
    cfg = ArchConfig.from_spec(spec, num_layers=1)
    assert cfg.tie_word_embeddings
    small = ArchConfig(
        **{
            **cfg.to_dict(),
            "hidden_size": 64,
            "vocab_size": 128,
            "head_dim": 8,
            "intermediate_size": 64,
        }
    )
    model = DecoderLM(small)
    assert model.lm_head.weight is model.embed.weight


def test_kv_cache_bytes_match_the_simulator_formula():
    for ident in ("tiny", "llama-3.2-1b", "llama-3.3-70b"):
        spec = default_models()[ident]
        cfg = ArchConfig.from_spec(spec, num_layers=min(spec.num_layers, 2))
        cache = KVCache(cfg, 2, 8, device="meta", dtype=torch.bfloat16)
        per_token_layer = cache.nbytes() // (2 * 8 * cfg.num_layers)
        assert per_token_layer == spec.kv_values_per_token_per_layer * DTYPE_BYTES["bf16"]
        assert cache.k.shape == (cfg.num_layers, 2, cfg.num_kv_heads, 8, cfg.head_dim)
        assert cache.lengths.dtype == torch.long


def test_cache_fill_and_overflow():
    cache = KVCache(SMALL, 2, 8)
    cache.fill_(5)
    assert cache.lengths.tolist() == [5, 5]
    with pytest.raises(ValueError, match="max_len"):
        cache.fill_(9)
    model = DecoderLM(SMALL)
    with pytest.raises(ValueError, match="overflow"):
        model(torch.zeros(2, 4, dtype=torch.long), cache)


def test_a_prefix_cache_is_laid_out_and_read_as_a_fresh_one(models):
    """The profiler runs every query length and depth of a (batch, context) on the first
    elements of one big cache: contiguous, exactly context + q slots, and a step on it gives
    the logits a fresh cache with the same contents gives."""
    model = models[SMALL]
    one = ArchConfig(**{**SMALL.to_dict(), "num_layers": 1})
    base = KVCache(SMALL, 3, 16 + 9, dtype=torch.float32)
    for cfg, q in ((SMALL, 9), (SMALL, 2), (one, 1), (one, 5)):
        view = KVCache.prefix_of(base, cfg, 16 + q)
        shape = (cfg.num_layers, 3, cfg.num_kv_heads, 16 + q, cfg.head_dim)
        assert view.k.shape == view.v.shape == shape
        assert view.k.is_contiguous() and view.v.is_contiguous()
        assert view.k.data_ptr() == base.k.data_ptr() and view.v.data_ptr() == base.v.data_ptr()
        assert view.nbytes() == KVCache(cfg, 3, 16 + q, device="meta").nbytes()
        fresh = KVCache(cfg, 3, 16 + q, dtype=torch.float32)
        fresh.k.copy_(view.k)
        fresh.v.copy_(view.v)
        ids = torch.randint(0, 256, (3, q))
        with torch.inference_mode():
            view.fill_(16)
            fresh.fill_(16)
            got = model(ids, view, num_layers=cfg.num_layers)
            want = model(ids, fresh, num_layers=cfg.num_layers)
        torch.testing.assert_close(got, want, atol=0, rtol=0)
        assert view.lengths.tolist() == [16 + q] * 3
    with pytest.raises(ValueError, match="cannot view"):
        KVCache.prefix_of(base, SMALL, 26)
    with pytest.raises(ValueError, match="cannot view"):
        KVCache.prefix_of(base, ArchConfig(**{**SMALL.to_dict(), "num_kv_heads": 4}), 8)


def test_shallow_run_uses_the_first_layers(models):
    model = models[SMALL]
    ids = torch.randint(0, 256, (1, 4))
    one = ArchConfig(**{**SMALL.to_dict(), "num_layers": 1})
    with torch.inference_mode():
        out = model(ids, KVCache(one, 1, 4, dtype=torch.float32), num_layers=1)
    assert out.shape == (1, 4, 256)


def test_moe_spec_cut_to_a_few_layers_keeps_only_moe_layers():
    spec = default_models()["deepseek-v3"]
    assert ArchConfig.from_spec(spec).num_dense_layers == 3
    assert ArchConfig.from_spec(spec, num_layers=2).num_dense_layers == 0
    assert "MLA" in mla_note(spec)
    assert mla_note(default_models()["tiny"]) == ""


def test_bad_configs_are_rejected():
    with pytest.raises(ValueError, match="multiple"):
        ArchConfig(**{**SMALL.to_dict(), "num_kv_heads": 3})
    with pytest.raises(ValueError, match="head_dim"):
        ArchConfig(**{**SMALL.to_dict(), "head_dim": 15})


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_graph_replay_matches_eager():
    device = torch.device("cuda")
    model = DecoderLM(SMALL, device=device, dtype=torch.float32).eval()
    cache = KVCache(SMALL, 2, 17, device=device, dtype=torch.float32)
    ids = torch.randint(0, 256, (2, 1), device=device)
    with torch.inference_mode():

        def step():
            cache.lengths.fill_(16)
            return model(ids, cache)

        eager = step().clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = step()
        graph.replay()
        torch.cuda.synchronize()
    torch.testing.assert_close(out, eager, atol=1e-4, rtol=1e-4)
    assert cache.lengths.tolist() == [17, 17]
