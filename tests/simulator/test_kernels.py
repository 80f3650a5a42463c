"""Step times from aiconfigurator-core's measured kernel tables (simulator/kernels/)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from simulator.errors import InputError
from simulator.inputs.catalog import DATA_DIR, default_models
from simulator.kernels import tables
from simulator.kernels.source import get_surface, shape_of
from simulator.model.predict import predict

REFERENCE = DATA_DIR / "validation" / "kernel_reference_h200.csv"


@pytest.mark.parametrize("engine", tables.ENGINES)
@pytest.mark.parametrize("system", ["h100_sxm", "h200_sxm", "b200_sxm"])
def test_the_tables_relied_on_are_where_and_what_they_were(system, engine):
    version = tables.resolve_version(system, engine)
    assert version is not None, f"no {engine} GEMM/attention tables for {system}"
    for table in ("gemm", "generation_attention", "context_attention"):
        df = tables.load_table(str(tables.table_path(system, engine, version, table)), table)
        assert set(tables.REQUIRED_COLUMNS[table]) <= set(df.columns)
        assert len(df) > 100
    ar = tables.allreduce_table(system, engine, version)
    assert ar is not None and set(tables.REQUIRED_COLUMNS["allreduce"]) <= set(ar.columns)


def test_a_moved_table_fails_loudly(tmp_path):
    with pytest.raises(tables.KernelTableError, match="not found"):
        tables.load_table(str(tmp_path / "gemm_perf.parquet"), "gemm")
    pd.DataFrame({"m": [1], "latency": [0.1]}).to_parquet(tmp_path / "bad.parquet")
    with pytest.raises(tables.KernelTableError, match="missing"):
        tables.load_table(str(tmp_path / "bad.parquet"), "gemm")


def test_decode_step_matches_the_engines_own_estimates_on_h200():
    ref = pd.read_csv(REFERENCE)
    assert ref["source"].str.contains("aiconfigurator-core").all()
    scen = pd.DataFrame(
        {
            "target": ref["model"],
            "gpu": ref["gpu"],
            "engine": ref["engine"],
            "engine_version": ref["engine_version"],
            "weight_dtype": ref["weight_dtype"],
            "kv_dtype": ref["kv_dtype"],
            "batch_size": ref["batch_size"],
            "prompt_len": ref["context_len"],
            "output_len": 2,
            "serving": "decode_only",
        }
    )
    out = predict(scen)
    assert (out["context_len"] == ref["kv_len"]).all()
    assert out["latency_source"].astype(str).str.startswith("kernels:").all()
    err = out["target_step_ms"].to_numpy() / ref["decode_ms"].to_numpy() - 1.0
    worst = int(np.argmax(np.abs(err)))
    assert np.abs(err).max() <= 0.10, ref.iloc[worst].to_dict()


def test_latency_source_names_what_priced_each_row():
    scen = pd.DataFrame(
        {
            "target": ["llama-3.1-8b"] * 5 + ["deepseek-v3"],
            "gpu": ["h200", "h200", "mi300x", "h200", "h200", "h200"],
            "engine": ["vllm", "sglang", "vllm", "other", "vllm", "vllm"],
            "weight_dtype": ["bf16", "fp8", "bf16", "bf16", "int4", "fp8"],
            "num_gpus": [1, 1, 1, 1, 1, 8],
        }
    )
    src = predict(scen)["latency_source"].astype(str).tolist()
    assert src[0] == "kernels:vllm-0.24.0/h200"
    assert src[1] == "kernels:sglang-0.5.14/h200"
    assert src[2:5] == ["roofline"] * 3  # MI300X, no engine tables, int4
    # MoE and MLA: the engine's composite; vLLM's H200 MLA tables predate the collector fix
    assert src[5] == "kernels:vllm-0.24.0/h200 TP8 (MLA block from trtllm)"


def test_every_output_depends_on_the_engine():
    base = {"target": "llama-3.1-70b", "gpu": "h200", "num_gpus": 4, "weight_dtype": "fp8"}
    rows = [
        {**base, "engine": e, "method": "eagle3", "acceptance_rate": 0.7} for e in tables.ENGINES
    ]
    out = predict(pd.DataFrame(rows))
    for col in ("target_step_ms", "spec_step_ms", "engine_ms_spec", "speedup"):
        assert out[col].nunique() == 3, col


def test_an_unknown_engine_or_version_is_refused_naming_the_field():
    with pytest.raises(InputError) as exc:
        predict(pd.DataFrame({"target": ["llama-3.1-8b"], "gpu": ["h200"], "engine": ["tgi"]}))
    assert exc.value.field == "engine"
    bad = {"target": ["llama-3.1-8b"], "gpu": ["h200"], "engine_version": ["9.9"]}
    with pytest.raises(InputError) as exc:
        predict(pd.DataFrame(bad))
    assert exc.value.field == "engine_version"


def test_a_version_the_gpu_has_no_tables_for_falls_back_to_the_roofline():
    scen = pd.DataFrame(
        {
            "target": ["llama-3.1-8b"],
            "gpu": ["h200"],
            "engine": ["vllm"],
            "engine_version": ["0.14.0"],
        }
    )
    assert predict(scen)["latency_source"].astype(str).tolist() == ["roofline"]


def test_verify_reads_each_sequences_kv_once():
    s = get_surface(
        shape_of(default_models()["llama-3.1-8b"]), "h200", "vllm", "", "bf16", "bf16", 1
    )
    b, kv = np.array([1.0, 16.0, 64.0]), 2049.0
    decode = s.forward_ms(b, 1.0, kv)
    shared = s.forward_ms(b, 4.0, kv)
    separate = s.forward_ms(b, 4.0, kv, separate=True)
    assert (shared >= decode).all() and (separate > shared).all()
    # Four queries over one KV read cost far less than four reads once attention dominates.
    assert shared[-1] / decode[-1] < 1.3 < separate[-1] / decode[-1]


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_each_extra_verify_query_costs_at_most_its_share_of_the_attention(engine):
    """Issue 35: TensorRT-LLM's verify over decode jumped from 1.25 at K = 3 to 1.85 at
    K = 4 (70B, 4x H100, batch 32). Packed as K + 1 queries per KV head, the verify read
    the table at 80 query heads over 2 KV heads, where its 96- and 128-head points time
    the non-speculative kernel's fallback for head groups it has no kernel for; the
    engine's speculative kernel tiles any group. Work grows linearly with the queries over
    one KV read, so q queries cost at most q / (q - 1) times q - 1 queries."""
    s = get_surface(
        shape_of(default_models()["llama-3.3-70b"]), "h100-sxm", engine, "", "bf16", "bf16", 4
    )
    for kv in (1024.0, 4096.0):
        attn = np.array([s.attention_ms(32, kv, q) for q in range(1, 9)])
        growth = attn[1:] / attn[:-1]
        allowed = np.arange(2, 9) / np.arange(1, 8)
        assert (growth <= allowed * (1 + 1e-9)).all(), (kv, growth.round(2))
        verify = [float(s.forward_ms(32, q, kv) / s.forward_ms(32, 1, kv)) for q in (4, 5)]
        assert verify[1] < verify[0] * 1.15, (kv, verify)


def test_tensor_parallelism_adds_all_reduces_and_splits_the_gemms():
    shape = shape_of(default_models()["llama-3.1-70b"])
    one = get_surface(shape, "h200", "vllm", "", "fp8", "fp8", 1)
    four = get_surface(shape, "h200", "vllm", "", "fp8", "fp8", 4)
    assert 0.2 < four.forward_ms(8, 1, 2048) / one.forward_ms(8, 1, 2048) < 0.5


def test_surfaces_evaluate_vectorised_and_interpolate_between_grid_points():
    s = get_surface(
        shape_of(default_models()["qwen3-32b"]), "h100-sxm", "trtllm", "", "fp8", "fp8", 2
    )
    b = np.arange(1.0, 300.0)
    t = s.forward_ms(b, 1.0, 1536.0)
    assert t.shape == b.shape and np.isfinite(t).all()
    assert t[-1] > t[0]
    mid = s.forward_ms(24.0, 1.0, 1536.0)
    assert min(s.forward_ms(16.0, 1.0, 1536.0), s.forward_ms(32.0, 1.0, 1536.0)) <= mid
    assert mid <= max(s.forward_ms(16.0, 1.0, 1536.0), s.forward_ms(32.0, 1.0, 1536.0))


def test_prefill_chunks_cost_more_with_more_tokens_and_nothing_without():
    s = get_surface(shape_of(default_models()["llama-3.1-8b"]), "h200", "vllm", "", "fp8", "fp8", 1)
    assert s.prefill_ms(0.0, 1024.0) == 0.0
    costs = s.prefill_ms(np.array([64.0, 512.0, 4096.0]), 1024.0)
    assert (np.diff(costs) > 0).all()


def test_kernel_rows_pay_their_engines_host_costs_per_step_round_and_draft_forward():
    from simulator.kernels.engines import ENGINE_HOST
    from simulator.model.defaults import DEFAULTS

    row = dict(
        target="llama-3.1-8b",
        gpu="h100-sxm",
        method="draft_model",
        draft="llama-3.2-1b",
        k=3,
        mean_accepted_tokens=2.5,
        batch_size=16,
    )
    for engine, h in ENGINE_HOST.items():
        out = predict(pd.DataFrame([{**row, "engine": engine}])).iloc[0]
        assert out["engine_ms_baseline"] == pytest.approx(h.step_ms + 16 * h.per_seq_ms)
        expected = h.step_ms + 16 * h.per_seq_ms + h.round_ms + 3 * h.draft_forward_ms
        assert out["engine_ms_spec"] == pytest.approx(expected)
        assert out["baseline_step_ms"] == pytest.approx(
            out["target_step_ms"] + out["prefill_ms_baseline"] + out["engine_ms_baseline"]
        )
    bare = predict(pd.DataFrame([row]), defaults=DEFAULTS.without_engine()).iloc[0]
    assert bare["engine_ms_spec"] == 0 and bare["latency_source"].startswith("kernels:")


def test_eagle_heads_cost_k_head_forwards_and_more_with_k():
    rows = [
        dict(target="llama-3.1-8b", gpu="h200", method="eagle", k=k, acceptance_rate=0.7)
        for k in (1, 2, 4)
    ]
    d = predict(pd.DataFrame(rows))["draft_step_ms"].to_numpy()
    assert d[1] == pytest.approx(2 * d[0]) and d[2] == pytest.approx(4 * d[0])


def test_the_launch_command_follows_the_engine_and_maps_k_to_its_flags():
    from simulator.planning.launch import engine_command

    models = default_models()
    common = dict(
        target=models["llama-3.1-8b"],
        method="eagle3",
        k=4,
        num_gpus=2,
        gpu_memory_utilization=0.9,
        max_model_len=4096,
        max_num_seqs=64,
        head_repo="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
    )
    assert '"num_speculative_tokens":4' in engine_command("vllm", **common)
    sglang = engine_command("sglang", **common)
    assert "--speculative-num-steps 4" in sglang and "--speculative-num-draft-tokens 5" in sglang
    trt = engine_command("trtllm", **common)
    assert "decoding_type: Eagle3" in trt and "max_draft_len: 4" in trt and "trtllm-serve" in trt
    mtp = engine_command("trtllm", **{**common, "method": "mtp", "k": 2})
    assert "num_nextn_predict_layers: 2" in mtp


def test_the_seam_shaped_forward_matches_the_surface_and_leaves_uncovered_rows_nan():
    from simulator.kernels import source

    models = default_models()
    t = models["llama-3.1-8b"]
    key = [np.array([0, 0, 1]), np.array([0, 0, 0])]

    def resolve(i):
        gpu = "mi300x" if i == 2 else "h200"
        return source.resolve(t, None, gpu, "vllm", "", "bf16", "bf16", source.Layout(), False)

    plan = source.plan_rows(key, resolve)
    ms = source.forward_ms(plan, "target", np.array([1.0, 64.0, 1.0]), 4.0, 2049.0)
    s = get_surface(shape_of(t), "h200", "vllm", "", "bf16", "bf16", 1)
    assert ms[:2] == pytest.approx(s.forward_ms(np.array([1.0, 64.0]), 4.0, 2049.0))
    assert np.isnan(ms[2])


def test_eagle3_heads_cost_less_than_eagle_heads_for_their_32k_draft_vocabulary():
    rows = [
        dict(target="llama-3.1-8b", gpu="h100-sxm", method=m, k=3, mean_accepted_tokens=2.5)
        for m in ("eagle", "eagle3")
    ]
    e1, e3 = predict(pd.DataFrame(rows))["draft_step_ms"]
    assert e3 < e1


def test_on_the_tables_70b_tp4_speedup_falls_with_batch_and_crosses_below_one():
    batches = [2, 4, 8, 16, 32, 64, 128, 256]
    rows = [
        dict(
            target="llama-3.3-70b",
            gpu="h100-sxm",
            num_gpus=4,
            method="draft_model",
            draft="llama-3.2-1b",
            k=5,
            acceptance_rate=0.7,
            batch_size=b,
            prompt_len=512,
            output_len=256,
        )
        for b in batches
    ]
    out = predict(pd.DataFrame(rows))
    assert out["latency_source"].astype(str).str.startswith("kernels:").all()
    speedup = out["speedup"].to_numpy()
    assert speedup[0] > 1.5 and (np.diff(speedup) < 0).all() and speedup[-1] < 1.0


def test_each_extra_eagle_step_at_batch_one_costs_what_the_public_k_sweep_says():
    # vLLM PR #16937 (H100, batch 1, Llama-3.1-8B, EAGLE at K = 2, 4, 7) and PR #16035
    # (K = 2, 4): a round grows by 0.82 and 0.89 ms per extra draft step
    # (data/engine_host_costs.csv shows the derivation). The model's kernels plus host
    # cost per head forward must give the same slope.
    row = dict(
        target="llama-3.1-8b",
        gpu="h100-sxm",
        engine="vllm",
        method="eagle",
        batch_size=1,
        prompt_len=128,
        output_len=256,
        weight_dtype="bf16",
        kv_dtype="bf16",
        mean_accepted_tokens=2.1,
    )
    out = predict(pd.DataFrame([{**row, "k": 2}, {**row, "k": 7}]), break_even=False)
    slope = (out["spec_step_ms"].iloc[1] - out["spec_step_ms"].iloc[0]) / 5
    assert 0.78 <= slope <= 0.93


def test_every_engine_host_cost_says_where_it_comes_from(tmp_path):
    from simulator.kernels.engines import HOST_COSTS_CSV, SOURCES, load_host_costs

    for (engine, term), note in SOURCES.items():
        assert note["derivation"], (engine, term)
        if note["basis"] == "public":
            assert note["source"].startswith("https://"), (engine, term)
    rows = HOST_COSTS_CSV.read_text().splitlines()
    short = tmp_path / "short.csv"
    short.write_text("\n".join(r for r in rows if not r.startswith("sglang,,round_ms")))
    with pytest.raises(ValueError, match="sglang lacks"):
        load_host_costs(short)


def test_axes_find_the_same_intervals_as_a_binary_search():
    """The surfaces' grids are located without np.searchsorted (simulator.kernels.axes);
    every point, on the grid, between, below and above, gets the interval and weight the
    search gives, so the kernel tables' prices stay bit for bit; NaN gets a NaN weight."""
    from simulator.kernels.axes import Axis
    from simulator.kernels.surface import B_GRID, M_GRID, P_GRID, S_GRID

    rng = np.random.default_rng(3)
    for grid in (M_GRID, B_GRID, S_GRID, P_GRID, np.array([0.5, 1.7, 3.2])):
        axis = Axis(grid)
        x = np.concatenate(
            [
                rng.uniform(-5.0, grid[-1] * 1.5, 20_000),
                grid,
                grid + 1e-9,
                grid - 1e-9,
                np.arange(-3.0, min(grid[-1], 5000.0) + 3.0),
                [np.nan, 0.0],
            ]
        )
        want_i = np.clip(np.searchsorted(grid, x) - 1, 0, len(grid) - 2)
        want_w = np.maximum((x - grid[want_i]) / (grid[want_i + 1] - grid[want_i]), 0.0)
        i, w = axis.where(x)
        known = ~np.isnan(x)
        assert (i[known] == want_i[known]).all(), grid
        assert (w[known] == want_w[known]).all(), grid
        assert np.isnan(w[~known]).all()


def test_a_version_with_host_costs_of_its_own_overrides_only_the_terms_it_gives(tmp_path):
    """SGLang 0.4.4's round and head costs are its own (the EAGLE-3 paper's runs); its other
    terms, and every other version's, are SGLang's; a version without an engine row, or a
    term given twice, is refused naming the line."""
    from simulator.kernels import engines

    old = engines.host_for("sglang", "0.4.4")
    new = engines.host_for("sglang", "0.5.14")
    assert new == engines.host_for("sglang") == engines.ENGINE_HOST["sglang"]
    assert old.head_per_seq_ms > 0 == new.head_per_seq_ms
    assert old.step_ms == new.step_ms and old.per_seq_ms == new.per_seq_ms
    assert set(engines.own_terms("sglang@0.4.4")) == {
        "round_ms",
        "head_forward_ms",
        "head_per_seq_ms",
    }
    rows = engines.HOST_COSTS_CSV.read_text().splitlines()
    twice = tmp_path / "twice.csv"
    twice.write_text("\n".join([*rows, next(r for r in rows if r.startswith("vllm,,step_ms"))]))
    with pytest.raises(ValueError, match=r"line \d+: vllm gives step_ms twice"):
        engines.load_host_costs(twice)
    orphan = tmp_path / "orphan.csv"
    orphan.write_text("\n".join([*rows, "mlc,0.1,step_ms,1.0,assumed,,made up"]))
    with pytest.raises(ValueError, match=r"mlc@0\.1 has no mlc figures"):
        engines.load_host_costs(orphan)


def test_a_row_naming_sglang_0_4_4_pays_its_host_costs_on_the_nearest_tables_and_says_so():
    """0.4.4 has no kernel tables: the row is priced from the oldest SGLang tables on its
    GPU, pays 0.4.4's head cost per running request, and its warnings say both."""
    from simulator.kernels import tables

    row = dict(
        target="llama-3.1-8b",
        gpu="h100-sxm",
        method="eagle3",
        k=3,
        engine="sglang",
        mean_accepted_tokens=2.8,
        batch_size=32,
    )
    old, new = predict(pd.DataFrame([{**row, "engine_version": "0.4.4"}, row])).to_dict("records")
    oldest = tables.resolve_version("h100_sxm", "sglang", "0.4.4")
    assert oldest == tables.versions("h100_sxm", "sglang", "generation_attention")[0]
    assert f"-{oldest}/" in old["latency_source"]
    assert "no kernel tables of its own" in old["warnings"]
    assert "no kernel tables of its own" not in str(new["warnings"])
    assert old["speedup"] < new["speedup"]
