"""The random-weight decoder: cached decoding equals full attention, shapes and byte counts."""

from __future__ import annotations

import pytest
import torch

from profiler.model import ArchConfig, DecoderLM, KVCache, mla_note, weight_bytes
from profiler.runner import full_weight_bytes
from simulator.inputs.catalog import default_models
from simulator.inputs.specs import DTYPE_BYTES

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
@pytest.mark.parametrize(
    ("dtype", "tol"),
    [(torch.float32, 1e-4), (torch.bfloat16, 2e-2), (torch.float16, 2e-2)],
    ids=["fp32", "bf16", "fp16"],
)
@pytest.mark.parametrize("q", [1, 4])
@pytest.mark.parametrize("valid_context", [True, False], ids=["valid", "ragged"])
def test_cuda_graph_replay_matches_eager(dtype, tol, q, valid_context):
    device = torch.device("cuda")
    model = DecoderLM(SMALL, device=device, dtype=dtype).eval()
    cache = KVCache(SMALL, 2, 16 + q, device=device, dtype=dtype)
    ids = torch.randint(0, 256, (2, q), device=device)
    with torch.inference_mode():

        def step():
            if valid_context:
                return model(ids, cache, context_len=16)
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
    torch.testing.assert_close(out, eager, atol=tol, rtol=tol)
    assert cache.lengths.tolist() == [16 + q, 16 + q]


# ------------------------------------------------------------ the engine-grade attention path
def reference_logits(model: DecoderLM, ids: torch.Tensor, k_cache, v_cache, lengths):
    """Logits of `ids` `[B, q]` after `lengths[b]` cached slots, computed the textbook way
    from the model's weights: separate q/k/v and gate/up matmuls, RMSNorm in fp32, rotary
    from the angles, every KV head repeated for its query heads, softmax over an explicit
    mask. `k_cache`/`v_cache`: `[layers, B, kv, slots, dim]`, read, not written. fp64."""
    cfg = model.cfg
    kv, hd, heads = cfg.num_kv_heads, cfg.head_dim, cfg.num_heads
    b, q = ids.shape
    dd = torch.float64

    def norm(x, w):
        return w.to(dd) * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + cfg.norm_eps)

    def rope(x, pos):  # x [B, n, q, hd], pos [B, q]
        inv = 1.0 / cfg.rope_theta ** (torch.arange(0, hd, 2, dtype=dd) / hd)
        ang = pos[..., None].to(dd) * inv
        c, s = torch.cat((ang.cos(), ang.cos()), -1)[:, None], torch.cat((ang.sin(),) * 2, -1)
        a, bb = x.chunk(2, dim=-1)
        return x * c + torch.cat((-bb, a), dim=-1) * s[:, None]

    pos = lengths[:, None] + torch.arange(q)
    x = model.embed.weight.to(dd)[ids]
    for i, layer in enumerate(model.layers):
        w = layer.attn.qkv_proj.weight.to(dd)
        wq, wk, wv = w.split([heads * hd, kv * hd, kv * hd])
        hx = norm(x, layer.attn_norm.weight)
        xq = rope((hx @ wq.T).view(b, q, heads, hd).transpose(1, 2), pos)
        xk = rope((hx @ wk.T).view(b, q, kv, hd).transpose(1, 2), pos)
        xv = (hx @ wv.T).view(b, q, kv, hd).transpose(1, 2)
        outs = []
        for s in range(b):
            n = int(lengths[s])
            keys = torch.cat((k_cache[i, s, :, :n].to(dd), xk[s]), dim=1)  # [kv, n+q, hd]
            vals = torch.cat((v_cache[i, s, :, :n].to(dd), xv[s]), dim=1)
            keys = keys.repeat_interleave(heads // kv, dim=0)
            vals = vals.repeat_interleave(heads // kv, dim=0)
            score = xq[s] @ keys.transpose(1, 2) / hd**0.5  # [heads, q, n+q]
            allowed = torch.arange(n + q)[None, :] <= n + torch.arange(q)[:, None]
            score = score.masked_fill(~allowed, float("-inf"))
            outs.append(score.softmax(-1) @ vals)
        att = torch.stack(outs).transpose(1, 2).reshape(b, q, heads * hd)
        x = x + att @ layer.attn.o_proj.weight.to(dd).T
        hx = norm(x, layer.mlp_norm.weight)
        gate, up = (hx @ layer.mlp.gate_up.weight.to(dd).T).chunk(2, dim=-1)
        x = x + (torch.nn.functional.silu(gate) * up) @ layer.mlp.down.weight.to(dd).T
    return norm(x, model.norm.weight) @ model.lm_head.weight.to(dd).T


@pytest.mark.parametrize(
    ("dtype", "tol"), [(torch.float32, 1e-4), (torch.bfloat16, 6e-2)], ids=["fp32", "bf16"]
)
@pytest.mark.parametrize("q", [1, 4])
def test_fused_decoder_matches_the_textbook_reference(dtype, tol, q):
    """The fused projections, F.rms_norm, table rotary and folded-head attention over the
    valid context give the logits of the unfused, explicitly masked computation."""
    torch.manual_seed(1)
    model = DecoderLM(SMALL, dtype=dtype, seed=3).eval()
    cache = KVCache(SMALL, 3, 40, dtype=dtype)
    ids = torch.randint(0, 256, (3, q))
    want = reference_logits(model, ids, cache.k.clone(), cache.v.clone(), torch.full((3,), 21))
    with torch.inference_mode():
        got = model(ids, cache, context_len=21)
    torch.testing.assert_close(got.double(), want, atol=tol, rtol=tol)
    assert cache.lengths.tolist() == [21 + q] * 3


def test_ragged_lengths_match_the_textbook_reference(models):
    model = models[SMALL]
    cache = KVCache(SMALL, 3, 24, dtype=torch.float32)
    lengths = torch.tensor([3, 11, 17])
    cache.lengths.copy_(lengths)
    ids = torch.randint(0, 256, (3, 3))
    want = reference_logits(model, ids, cache.k.clone(), cache.v.clone(), lengths)
    with torch.inference_mode():
        got = model(ids, cache)
    torch.testing.assert_close(got.double(), want, atol=1e-4, rtol=1e-4)


def test_both_verify_attention_kernels_agree(models):
    """'lower_right' (SDPA's causal_lower_right with enable_gqa) and the folded heads with
    the additive block give the same verification logits."""
    model = models[SMALL]
    cache = KVCache(SMALL, 2, 30, dtype=torch.float32)
    ids = torch.randint(0, 256, (2, 5))
    with torch.inference_mode():
        folded = model(ids, cache, context_len=19)
        model.verify_attention = "lower_right"
        try:
            lower_right = model(ids, cache, context_len=19)
        finally:
            model.verify_attention = "fold"
    torch.testing.assert_close(lower_right, folded, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("q", [1, 4])
def test_attention_reads_only_the_valid_context_whatever_the_cache_holds(models, monkeypatch, q):
    """Same context, 1k or 16k allocated slots: every SDPA call sees keys and values of
    exactly context + q slots, a decode step gets no mask, and the logits agree."""
    model = models[SMALL]
    seen = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def spy(query, key, value, attn_mask=None, **kw):
        seen.append((tuple(key.shape), tuple(value.shape), attn_mask))
        return sdpa(query, key, value, attn_mask=attn_mask, **kw)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    ids = torch.randint(0, 256, (2, q))
    small, big = KVCache(SMALL, 2, 1024, dtype=torch.float32), KVCache(SMALL, 2, 16384)
    big.k[:, :, :, :1024].copy_(small.k)
    big.v[:, :, :, :1024].copy_(small.v)
    with torch.inference_mode():
        out = [model(ids, cache, context_len=700) for cache in (small, big)]
    torch.testing.assert_close(out[0], out[1], atol=0, rtol=0)
    assert len(seen) == 2 * SMALL.num_layers
    for key, value, mask in seen:
        assert key[-2] == value[-2] == 700 + q
        assert key[1] == value[1] == SMALL.num_kv_heads  # the cache itself, never expanded
        assert (mask is None) == (q == 1)
        if mask is not None:
            assert mask.shape[-1] == 700 + q


def test_valid_context_path_refuses_an_overflow():
    model = DecoderLM(SMALL)
    cache = KVCache(SMALL, 2, 8)
    with pytest.raises(ValueError, match="overflow"):
        model(torch.zeros(2, 3, dtype=torch.long), cache, context_len=6)


def test_files_saved_with_split_projections_still_load(models):
    """Trained files written before the projections were fused (q/k/v, gate/up apart)."""
    model = models[SMALL]
    legacy = {}
    for name, tensor in model.state_dict().items():
        if name.endswith("qkv_proj.weight"):
            q, k, v = tensor.split([64, 32, 32])
            stem = name[: -len("qkv_proj.weight")]
            legacy |= {f"{stem}q_proj.weight": q, f"{stem}k_proj.weight": k}
            legacy[f"{stem}v_proj.weight"] = v
        elif name.endswith("gate_up.weight"):
            gate, up = tensor.chunk(2)
            stem = name[: -len("gate_up.weight")]
            legacy |= {f"{stem}gate.weight": gate, f"{stem}up.weight": up}
        else:
            legacy[name] = tensor
    fresh = DecoderLM(SMALL, dtype=torch.float32, seed=9)
    fresh.load_state_dict(legacy)
    for (name, a), b in zip(model.state_dict().items(), fresh.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, atol=0, rtol=0, msg=name)


CUDA_DTYPES = [(torch.float32, 1e-4), (torch.bfloat16, 2e-2), (torch.float16, 2e-2)]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize(("dtype", "tol"), CUDA_DTYPES, ids=["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("verify", ["fold", "lower_right"])
def test_cuda_engine_path_matches_the_reference_in_every_dtype(dtype, tol, verify):
    """On a GPU the SDPA backends differ by dtype (flash/cuDNN/efficient for half types,
    efficient or math for fp32) and may return non-contiguous outputs."""
    device = torch.device("cuda")
    model = DecoderLM(SMALL, device=device, dtype=dtype, seed=3).eval()
    model.verify_attention = verify
    for q in (1, 4):
        cache = KVCache(SMALL, 3, 64, device=device, dtype=dtype)
        ids = torch.randint(0, 256, (3, q), device=device)
        want = reference_logits(
            model.cpu(),
            ids.cpu(),
            cache.k.cpu(),
            cache.v.cpu(),
            torch.full((3,), 37),
        )
        model.to(device)
        with torch.inference_mode():
            got = model(ids, cache, context_len=37)
        torch.testing.assert_close(got.double().cpu(), want, atol=tol * 3, rtol=tol * 3)
