"""Sizer decisions, engine launch configs, and the pre-flight checklist."""

import itertools
import json
import shlex

import pandas as pd
import pytest

from simulator import predict
from simulator.inputs.catalog import default_models
from simulator.planning import layouts
from simulator.planning.launch import (
    engine_command,
    sglang_command,
    trtllm_draft_len_schedule,
    vllm_command,
    vllm_schedule,
)
from simulator.planning.layouts import Layout
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


# ---------------------------------------------------------------------------- layouts
DSV3_ROW = dict(
    target="deepseek-v3",
    gpu="h200",
    engine="sglang",
    num_gpus=8,
    method="none",
    prompt_len=1024,
    output_len=128,
)


def _launch(engine, target, layout=None, nodes=1, **over):
    kw = dict(
        target=default_models()[target],
        method="none",
        k=0,
        num_gpus=8,
        gpu_memory_utilization=0.9,
        max_model_len=4096,
        max_num_seqs=64,
        kv_dtype="bf16",
        weight_dtype="bf16",
        layout=layout,
        nodes=nodes,
        **over,
    )
    if engine == "trtllm":
        kw["kv_cache_tokens"] = 80_000
    return engine_command(engine, **kw)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_a_dense_rows_command_is_the_same_with_its_plain_tp_layout(engine):
    """A dense row's plain TP writes the command it wrote before layouts (no new flag)."""
    assert _launch(engine, "llama-3.3-70b", Layout(8)) == _launch(engine, "llama-3.3-70b")
    for flag in ("--enable-expert-parallel", "--data-parallel-size", "--ep-size", "--dp"):
        assert flag not in shlex.split(_launch(engine, "llama-3.3-70b").splitlines()[-1])


def test_vllm_carries_attention_dp_and_expert_parallel():
    """vLLM's data- and expert-parallel deployment docs: TP1 DP8 EP8 is
    `--tensor-parallel-size 1 --data-parallel-size 8 --enable-expert-parallel`, and each DP
    rank schedules its own batch, so --max-num-seqs is the plan's 64 over 8 ranks."""
    cmd = _launch("vllm", "deepseek-v3", Layout(1, 8, moe_ep_size=8))
    args = shlex.split(cmd.splitlines()[-1])
    assert args[args.index("--tensor-parallel-size") + 1] == "1"
    assert args[args.index("--data-parallel-size") + 1] == "8"
    assert "--enable-expert-parallel" in args
    assert args[args.index("--max-num-seqs") + 1] == "8"
    tp_ep = shlex.split(_launch("vllm", "deepseek-v3", Layout(8, moe_ep_size=8)))
    assert tp_ep[tp_ep.index("--tensor-parallel-size") + 1] == "8"
    assert "--enable-expert-parallel" in tp_ep and "--data-parallel-size" not in tp_ep


def test_sglang_carries_dp_attention_and_ep_size():
    """SGLang's server arguments: --tp is every GPU of the replica, --dp with
    --enable-dp-attention splits attention, --ep-size spreads the experts; a replica over
    two hosts adds --nnodes and --node-rank."""
    cmd = _launch("sglang", "deepseek-v3", Layout(2, 4, moe_ep_size=8), nodes=2)
    args = shlex.split(cmd.splitlines()[-1])
    assert args[args.index("--tp") + 1] == "8"
    assert args[args.index("--dp") + 1] == "4"
    assert "--enable-dp-attention" in args
    assert args[args.index("--ep-size") + 1] == "8"
    assert args[args.index("--nnodes") + 1] == "2"
    assert args[args.index("--max-running-requests") + 1] == "64"  # the replica's, split


def test_trtllm_carries_attention_dp_and_moe_sizes_in_its_yaml():
    """TensorRT-LLM's parallel-strategy docs: `enable_attention_dp`, and
    moe_expert_parallel_size x moe_tensor_parallel_size = tensor_parallel_size; its batch
    and KV pool are per attention-DP rank."""
    cmd = _launch("trtllm", "deepseek-v3", Layout(1, 8, moe_ep_size=8))
    body = cmd.split("<<'EOF'\n")[1].split("\nEOF")[0]
    assert "enable_attention_dp: true" in body
    assert "moe_expert_parallel_size: 8" in body
    assert "moe_tensor_parallel_size: 1" in body
    assert "max_tokens: 10000" in body  # 80,000 planned tokens over 8 ranks
    args = shlex.split(cmd.splitlines()[-1])
    assert args[args.index("--tp_size") + 1] == "8"
    assert args[args.index("--max_batch_size") + 1] == "8"
    hybrid = _launch("trtllm", "deepseek-v3", Layout(8, moe_tp_size=2, moe_ep_size=4))
    assert "moe_expert_parallel_size: 4" in hybrid and "moe_tensor_parallel_size: 2" in hybrid
    assert "enable_attention_dp" not in hybrid


def test_a_layout_of_other_gpus_than_the_command_is_refused():
    with pytest.raises(ValueError, match="TP4"):
        _launch("vllm", "deepseek-v3", Layout(4))


def test_layouts_span_moe_targets_and_leave_dense_ones_at_tp():
    """8 GPUs: an MoE target gets attention DP 1, 2, 4, 8 each with EP 1 or 8 (TensorRT-LLM,
    whose attention DP spans every GPU: DP 1 or 8); a dense one TP8 alone."""
    models = default_models()
    moe = layouts.span(8, models["deepseek-v3"], "sglang")
    assert [x.describe() for x in moe[:3]] == ["TP8", "TP8 EP8", "TP4 DP2"]
    assert len(moe) == 8 and all(x.num_gpus == 8 for x in moe)
    assert all(x.moe_tp_size * x.moe_ep_size == 8 for x in moe)
    assert len(layouts.span(8, models["deepseek-v3"], "trtllm")) == 4
    assert layouts.span(8, models["llama-3.3-70b"], "sglang") == (Layout(8),)
    assert layouts.span(1, models["deepseek-v3"], "vllm") == (Layout(1),)


def test_layout_problems_name_the_engine_or_the_target():
    models = default_models()
    dense, moe = models["llama-3.3-70b"], models["deepseek-v3"]
    assert "has none" in layouts.problem(Layout(8, moe_ep_size=8), dense, "vllm")
    assert "dense" in layouts.problem(Layout(1, 8), dense, "sglang")
    assert "TP1 DP8" in layouts.problem(Layout(2, 4), moe, "trtllm")
    assert "EP8" in layouts.problem(Layout(8, moe_tp_size=2, moe_ep_size=4), moe, "vllm")
    assert layouts.problem(Layout(2, 4, moe_ep_size=8), moe, "sglang") == ""


def test_hosts_per_replica_follow_aiconfigurators_system_files():
    """h200_sxm.yaml and gb200.yaml: num_gpus_per_node 8 and 4."""
    assert layouts.get_nodes("h200", 8) == 1
    assert layouts.get_nodes("h200", 16) == 2
    assert layouts.get_nodes("gb200", 8) == 2
    assert layouts.get_nodes("mi300x", 8) == 1


def test_the_sizer_chooses_an_moe_targets_layout_and_says_which():
    """No layout in the row: each of the GPU count's corners is sized and the one serving
    the most tokens/s per replica is kept; a row's own layout is taken as given."""
    result = size(DSV3_ROW, k_max=0, demand_tok_s=20_000.0, slo_tpot_ms=100.0)
    tried = result.layouts
    assert list(tried["layout"]) == ["TP8", "TP8 EP8", "TP1 DP8", "TP1 DP8 EP8"]
    chosen = tried[tried["chosen"]].iloc[0]
    assert result.layout == chosen["layout"] == result.choice["layout"]
    usable = tried[tried["passed_over"] == ""]
    assert chosen["tok_s_per_replica"] == usable["tok_s_per_replica"].max()
    assert result.choice["tok_s_per_replica"] == pytest.approx(chosen["tok_s_per_replica"])
    given = size({**DSV3_ROW, "tp_size": 8, "moe_ep_size": 8}, k_max=0, demand_tok_s=20_000.0)
    assert given.layouts is None and given.layout == "TP8 EP8"
    dense = size(BASE, k_max=0)
    assert dense.layouts is None and dense.layout == ""
