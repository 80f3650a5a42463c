"""Sizer decisions, engine launch configs, and the pre-flight checklist."""

import itertools
import json
import shlex

import pandas as pd
import pytest

from simulator import predict
from simulator.inputs.catalog import default_models
from simulator.planning.launch import (
    sglang_command,
    trtllm_draft_len_schedule,
    vllm_command,
    vllm_schedule,
)
from simulator.planning.preflight import checklist
from simulator.planning.sizer import schedule_ranges, size

BASE = dict(
    target="llama-3.3-70b",
    method="draft_model",
    draft="llama-3.2-1b",
    gpu="h100-sxm",
    num_gpus=4,
    acceptance_rate=0.7,
    prompt_len=512,
    output_len=256,
    # The sizer's logic on the roofline, where speculation stops paying inside the batch
    # range (on this setup's kernel tables it still gains 2% at max_num_seqs).
    engine="other",
)


def test_best_k_falls_as_batch_grows_and_turns_off():
    result = size(BASE, k_max=8)
    ks = result.best["best_k"].tolist()
    assert ks[0] >= 3
    assert all(a >= b for a, b in itertools.pairwise(ks)), ks
    assert ks[-1] == 0
    assert result.break_even_batch is not None
    # At and past break-even no K beats the baseline.
    past = result.grid[
        (result.grid["batch_size"] >= result.break_even_batch) & (result.grid["k"] > 0)
    ]
    assert (past["speedup"] <= 1.0 + 1e-9).all()


def test_slo_limits_the_batch():
    loose = size(BASE, slo_tpot_ms=1000.0)
    tight = size(BASE, slo_tpot_ms=12.0)
    for k, b in tight.max_batch_under_slo.items():
        assert b is None or b <= loose.max_batch_under_slo[k]
    rows = tight.grid[tight.grid["usable"]]
    assert (rows["spec_tpot_ms"] <= 12.0).all()


def test_cheapest_choice_serves_demand():
    result = size(BASE, slo_tpot_ms=40.0, demand_tok_s=50_000.0)
    choice = result.choice
    assert choice["replicas"] * choice["tok_s_per_replica"] >= 50_000.0
    assert choice["gpus"] == choice["replicas"] * 4
    assert choice["monthly_cost_usd"] <= result.baseline_choice["monthly_cost_usd"] + 1e-6


def test_schedule_forms():
    best = pd.DataFrame({"batch_size": [1, 2, 4, 8, 16, 32], "best_k": [5, 5, 4, 3, 0, 0]})
    ranges = schedule_ranges(best)
    assert ranges == [(1, 2, 5), (3, 4, 4), (5, 8, 3), (9, 32, 0)]
    assert vllm_schedule(ranges) == [[1, 2, 5], [3, 4, 4], [5, 8, 3], [9, 32, 0]]
    assert trtllm_draft_len_schedule(ranges) == {2: 5, 4: 4, 8: 3, 32: 0}


def test_vllm_command_json_round_trips():
    models = default_models()
    ranges = [(1, 8, 4), (9, 64, 2), (65, 256, 0)]
    cmd = vllm_command(
        target=models["llama-3.3-70b"],
        method="draft_model",
        k=4,
        num_gpus=4,
        gpu_memory_utilization=0.9,
        max_model_len=8192,
        max_num_seqs=256,
        draft=models["llama-3.2-1b"],
        ranges=ranges,
    )
    argv = shlex.split(cmd)
    assert argv[:2] == ["vllm", "serve"]
    spec = json.loads(argv[argv.index("--speculative-config") + 1])
    assert spec["method"] == "draft_model" and spec["num_speculative_tokens"] == 4
    assert spec["num_speculative_tokens_per_batch_size"] == [[1, 8, 4], [9, 64, 2], [65, 256, 0]]
    assert argv[argv.index("--tensor-parallel-size") + 1] == "4"


def test_sglang_command():
    models = default_models()
    cmd = sglang_command(
        target=models["llama-3.1-8b"],
        method="eagle",
        k=3,
        num_gpus=1,
        gpu_memory_utilization=0.85,
        max_model_len=4096,
        max_num_seqs=64,
    )
    argv = shlex.split(cmd)
    assert (
        "--speculative-algorithm" in argv and argv[argv.index("--speculative-num-steps") + 1] == "3"
    )


def _row(**kw):
    return predict(pd.DataFrame([{**BASE, "k": 4, "batch_size": 8, **kw}])).iloc[0]


def test_preflight_green_and_red():
    models = default_models()
    good = {c.name: c.status for c in checklist(_row(), models)}
    assert good["Tokenizers match"] == "green"
    assert good["Acceptance above break-even"] == "green"
    bad = {
        c.name: c
        for c in checklist(
            _row(draft="qwen2.5-0.5b", k=12, acceptance_rate=0.3, batch_size=512), models
        )
    }
    assert bad["Tokenizers match"].status == "red"
    assert bad["K in a sensible range"].status == "red"
    assert bad["Acceptance above break-even"].status == "red"


NO_ROOM_FOR_THE_DRAFT = dict(
    BASE, target="llama-3.1-8b", draft="llama-3.2-3b", gpu="l4", num_gpus=1, prompt_len=1024
)
"""An 8B target fits an L4's 24 GB, and a 3B draft does not fit beside it."""


def test_a_draft_that_cannot_run_never_counts_as_paying():
    """Every K > 0 cannot run, so speedup is NaN at every batch: that used to leave the
    break-even batch None, which the Sizer read as "speculation pays at every batch"."""
    result = size(NO_ROOM_FOR_THE_DRAFT, k_max=4)
    spec = result.grid[result.grid["k"] > 0]
    assert spec["speedup"].isna().all()
    assert spec["status"].str.startswith("cannot run with speculation").all()
    assert result.break_even_batch == 1
    assert result.choice["k"] == 0 and result.choice == result.baseline_choice


def test_preflight_says_why_nothing_fits():
    models = default_models()

    def headroom(**kw):
        items = {c.name: c for c in checklist(_row(**kw), models)}
        return items["KV headroom for the concurrency asked"]

    draft = headroom(**{**NO_ROOM_FOR_THE_DRAFT, "k": 4, "batch_size": 8})
    assert draft.status == "red"
    assert draft.why.startswith("nothing fits beside the draft")
    too_long = headroom(target="llama-3.1-8b", gpu="l4", num_gpus=1, prompt_len=120_000)
    assert too_long.status == "red"
    assert "cannot hold one request of 120,256 tokens" in too_long.why
    nothing = headroom(target="llama-3.3-70b", gpu="l4", num_gpus=1)
    assert nothing.why == "nothing fits: weights and reserves exceed the memory"


def test_break_even_alpha_is_where_speedup_is_one():
    row = _row(batch_size=32)
    at_be = _row(batch_size=32, acceptance_rate=float(row["break_even_alpha"]))
    assert at_be["speedup"] == pytest.approx(1.0, rel=1e-6)


def test_break_even_alpha_holds_across_k_batch_and_method():
    # The Newton solve takes four steps; the speedup at its answer must still be 1 to
    # 1e-6 wherever a break-even exists, from K = 1 to 16 and batch 1 to 512.
    import numpy as np
    import pandas as pd

    from simulator import predict

    rng = np.random.default_rng(11)
    n = 400
    rows = pd.DataFrame(
        {
            "target": rng.choice(["llama-3.1-8b", "llama-3.3-70b", "qwen2.5-32b"], n),
            "gpu": rng.choice(["h100-sxm", "a100-80gb", "h200"], n),
            "num_gpus": rng.choice([1, 2, 4, 8], n),
            "method": rng.choice(["eagle", "ngram", "mtp", "eagle3"], n),
            "k": rng.integers(1, 17, n),
            "acceptance_rate": rng.uniform(0.05, 0.99, n),
            "batch_size": rng.choice([1, 4, 32, 128, 512], n),
            "prompt_len": rng.integers(64, 4096, n),
            "output_len": rng.integers(16, 1024, n),
        }
    )
    first = predict(rows)
    be = first["break_even_alpha"].to_numpy()
    has = np.isfinite(be) & (first["status"].astype(str) == "ok").to_numpy()
    assert has.sum() > 100
    again = predict(rows[has].assign(acceptance_rate=be[has]))
    assert np.allclose(again["speedup"], 1.0, rtol=0, atol=1e-6)


def test_a_grid_priced_once_sizes_every_slo_as_pricing_it_each_time():
    # The dashboard prices the (K, batch) grid once and re-sizes it for each SLO.
    from simulator.planning.sizer import price_grid

    grid = price_grid(BASE, k_max=6)
    before = grid.copy()
    for slo in (12.0, 40.0, 1000.0):
        fresh = size(BASE, k_max=6, slo_tpot_ms=slo, demand_tok_s=20_000.0)
        reused = size(BASE, k_max=6, slo_tpot_ms=slo, demand_tok_s=20_000.0, grid=grid)
        pd.testing.assert_frame_equal(fresh.grid, reused.grid)
        pd.testing.assert_frame_equal(fresh.best, reused.best)
        assert fresh.choice == reused.choice
        assert fresh.max_batch_under_slo == reused.max_batch_under_slo
    pd.testing.assert_frame_equal(grid, before)  # the given grid is not modified


def test_preflight_turns_red_for_a_request_longer_than_the_context_window():
    """A 4,000-token prompt on TinyLlama (2,048-token window) cannot run: the checklist
    said every item but break-even was green, and the headroom check counted sequences."""
    models = default_models()

    def items(**kw):
        return {c.name: c for c in checklist(_row(**kw), models)}

    long = items(target="tinyllama-1.1b", method="eagle", draft="", prompt_len=4000)
    window = long["Requests fit the context window"]
    assert window.status == "red"
    assert "4,256 tokens exceeds the target tinyllama-1.1b's 2,048-token" in window.why
    assert long["KV headroom for the concurrency asked"].status == "red"
    draft = items(target="llama-3.1-8b", draft="specplan-byte-draft", prompt_len=600)
    assert (
        "exceeds the draft specplan-byte-draft's 512-token"
        in draft["Requests fit the context window"].why
    )
    assert "with speculation" in draft["KV headroom for the concurrency asked"].why
    fits = items(target="tinyllama-1.1b", method="eagle", draft="", prompt_len=1000)
    assert fits["Requests fit the context window"].status == "green"
    assert fits["Requests fit the context window"].why == "1,256 of 2,048 tokens"
    one_step = items(target="tinyllama-1.1b", method="eagle", draft="", prompt_len=4000,
                     serving="decode_only")  # fmt: skip
    assert one_step["Requests fit the context window"].status == "green"


def test_trtllm_launch_caps_its_kv_pool_at_the_planned_tokens():
    """TensorRT-LLM's --kv_cache_free_gpu_memory_fraction is a share of the memory left
    free after the weights load, not of the whole GPU as vLLM's --gpu-memory-utilization
    (TensorRT-LLM's KvCacheConfig docs), so passing the utilisation through gave it a
    bigger KV pool than the plan sized the replica on. The command caps the pool at the
    planned tokens with kv_cache_config.max_tokens (the smaller of the two applies), in
    the one kv_cache_config mapping the fp8 KV dtype also goes in."""
    from simulator.planning.launch import engine_command

    models = default_models()
    common = dict(
        target=models["llama-3.1-8b"],
        method="eagle3",
        k=3,
        num_gpus=1,
        gpu_memory_utilization=0.9,
        max_model_len=4096,
        max_num_seqs=64,
        kv_dtype="fp8",
        kv_cache_tokens=412_345,
    )
    trt = engine_command("trtllm", **common)
    assert trt.count("kv_cache_config:") == 1
    block = trt.split("kv_cache_config:")[1].split("\n")[1:3]
    assert sorted(line.strip() for line in block) == ["dtype: fp8", "max_tokens: 412345"]
    for engine in ("vllm", "sglang"):  # their fraction is of the whole GPU, as planned
        assert "412345" not in engine_command(engine, **common)
