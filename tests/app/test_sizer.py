"""Concurrency sizer page: memory bars, best K per batch, replicas and the launch command
are what `simulator.planning.sizer` and `simulator.planning.launch` say."""

from __future__ import annotations

import json
import re
import shlex

import numpy as np
import pandas as pd
import pytest

from simulator import predict
from simulator.planning.launch import vllm_schedule
from simulator.planning.sizer import schedule_ranges, size
from tests.app.conftest import default_positions

BASE = {
    "target": "llama-3.3-70b",
    "method": "eagle",
    "gpu": "h100-sxm",
    "num_gpus": 4,
    "weight_dtype": "bf16",
    "kv_dtype": "bf16",
    "prompt_len": 1024,
    "output_len": 256,
    "acceptance_per_position": default_positions(),
}
DEMAND = 2_000_000 * 256 / 86400  # the default requests/day x output tokens


def _speculative_config(command: str) -> dict:
    args = shlex.split(command)
    return json.loads(args[args.index("--speculative-config") + 1])


def test_default_sizer_matches_the_simulator(app, charts):
    at = app("sizer")
    assert not at.error
    expected = size(
        {**BASE, "gpu_memory_utilization": 0.9}, k_max=8, slo_tpot_ms=20.0, demand_tok_s=DEMAND
    )
    shown = at.session_state["sizer_result"]
    assert shown["choice"] == expected.choice
    assert shown["baseline_choice"] == expected.baseline_choice
    figs = charts(at)
    assert set(figs) == {"sizer_memory", "sizer_tpot", "sizer_best_k"}
    np.testing.assert_allclose(figs["sizer_best_k"]["data"][0]["y"], expected.best["best_k"])
    # Speculation needs fewer replicas than the baseline for the same SLO here.
    assert expected.choice["replicas"] < expected.baseline_choice["replicas"]


def test_memory_bars_are_the_prediction_and_sum_to_vram(app, charts):
    at = app("sizer")
    k = at.session_state["sizer_result"]["choice"]["k"]
    row = predict(pd.DataFrame([{**BASE, "k": k, "batch_size": 1}])).iloc[0]
    bars = {t["name"]: np.asarray(t["y"]) for t in charts(at)["sizer_memory"]["data"]}
    np.testing.assert_allclose(
        bars["KV cache"], [row["kv_cache_gb_baseline"], row["kv_cache_gb_spec"]]
    )
    np.testing.assert_allclose(bars["draft weights"], [0.0, row["draft_weights_gb"]])
    total = sum(bars.values())
    np.testing.assert_allclose(total, [80 * 4, 80 * 4])  # 4 x H100 80 GB, whole VRAM


def test_lower_memory_utilisation_shrinks_the_kv_cache(app, charts):
    at = app("sizer")
    before = np.asarray(charts(at)["sizer_memory"]["data"][3]["y"])
    at.slider(key="gpu_memory_utilization").set_value(0.8).run()
    assert not at.exception
    after = np.asarray(charts(at)["sizer_memory"]["data"][3]["y"])
    # 10% of 4 x 80 GiB less for the engine comes straight out of the KV cache.
    np.testing.assert_allclose(before - after, [32.0, 32.0])


def test_launch_command_carries_the_best_k_schedule(app):
    at = app("sizer")
    choice = at.session_state["sizer_result"]["choice"]
    best = at.session_state["sizer_result"]["best"]
    ranges = [
        (lo, min(hi, choice["batch_size"]), k)
        for lo, hi, k in schedule_ranges(best)
        if lo <= choice["batch_size"]
    ]
    vllm = next(c.value for c in at.code if c.value.startswith("vllm serve"))
    spec = _speculative_config(vllm)
    assert spec["method"] == "eagle"
    assert spec["num_speculative_tokens"] == max(k for _, _, k in ranges)
    assert spec["num_speculative_tokens_per_batch_size"] == vllm_schedule(ranges)
    assert f"--max-num-seqs {choice['batch_size']}" in vllm
    sglang = next(c.value for c in at.code if "sglang.launch_server" in c.value)
    assert f"--speculative-num-steps {choice['k']}" in sglang
    trt = json.loads(next(c.value for c in at.code if c.value.startswith("{")))
    assert trt == {str(hi): k for _, hi, k in ranges}
    assert at.session_state["sizer_launch_config"].count("vllm serve") == 1
    assert at.get("download_button")


def test_the_k_schedule_is_offered_in_vllms_tuner_format(app):
    at = app("sizer")
    doc = json.loads(
        next(c.value for c in at.code if "configured_global_num_speculative_tokens" in c.value)
    )
    schedule = doc["num_speculative_tokens_per_batch_size"]
    assert schedule[0][0] == 1
    assert schedule[-1][1] == doc["selection"]["max_batch_size"]
    assert doc["selection"]["relative_tolerance"] == 0.01
    best = at.session_state["sizer_result"]["best"]
    assert doc["selection"]["max_batch_size"] == int(best["batch_size"].max())


def test_tokens_per_user_slo_is_the_same_as_its_tpot(app):
    at = app("sizer", query={"slo_kind": "tokens/s per user", "slo_tok_s": "40"})
    expected = size(
        {**BASE, "gpu_memory_utilization": 0.9},
        k_max=8,
        slo_tok_s_per_user=40.0,
        demand_tok_s=DEMAND,
    )
    assert at.session_state["sizer_result"]["choice"] == expected.choice


def test_impossible_slo_says_so_without_a_launch_command(app):
    at = app("sizer", query={"slo_tpot_ms": "1"})
    assert not at.exception
    assert any("No (K, batch) meets the SLO" in e.value for e in at.error)
    assert not [c for c in at.code if c.value.startswith("vllm serve")]


def test_method_none_sizes_the_baseline_only(app, charts):
    at = app("sizer", query={"method": "none"})
    names = [t["name"] for t in charts(at)["sizer_tpot"]["data"]]
    assert names == ["off (K=0)"]
    vllm = next(c.value for c in at.code if c.value.startswith("vllm serve"))
    assert "--speculative-config" not in vllm


def test_method_none_is_the_baseline_with_no_break_even_claim(app):
    at = app("sizer", query={"method": "none"})
    assert any("Method 'none' is the baseline" in i.value for i in at.info)
    text = " ".join(c.value for c in at.main.caption)
    assert "paying" not in text and "pays" not in text
    assert "Largest batch meeting the SLO and fitting in memory, by K: K=0:" in text


def test_a_speculative_method_states_where_speculation_pays(app):
    at = app("sizer")
    assert not [i for i in at.info if "baseline" in i.value]
    be = at.session_state["sizer_result"]["break_even_batch"]
    claim = f"stops paying at batch {be}." if be else "pays at every batch."
    assert any(f"Speculation {claim}" in c.value for c in at.caption)


@pytest.mark.parametrize("gpus", ["1", "8"])
def test_gpu_count_changes_capacity_as_predicted(app, gpus):
    at = app("sizer", query={"num_gpus": gpus})
    assert not at.exception
    k = (at.session_state["sizer_result"]["choice"] or {"k": 3})["k"] or 3
    row = predict(pd.DataFrame([{**BASE, "num_gpus": int(gpus), "k": k, "batch_size": 1}])).iloc[0]
    shown = next(m.value for m in at.metric if m.label == "KV tokens, baseline")
    assert shown == f"{row['kv_capacity_tokens_baseline']:,.0f}"


def test_p99_sizing_counts_replicas_from_the_simulated_rate(app):
    from simulator.serving.defaults import acceptance_spread, default_lengths
    from simulator.serving.tails import max_rate_at_slo

    at = app("sizer", state={"size_on": "P99 at the SLO (request-level simulation)"})
    assert not at.exception
    rates = at.session_state["sizer_p99_rates"]
    assert set(rates) == {False, True}
    k = at.session_state["sizer_result"]["choice"]["k"]
    expected = max_rate_at_slo(
        {**BASE, "k": k, "batch_size": 1},
        default_lengths(1024),
        default_lengths(256),
        speculative=True,
        slo_ttft_ms=2000.0,
        slo_tpot_ms=20.0,
        acceptance_spread=acceptance_spread("eagle"),  # the Load page's and the CLI's
    ).rate
    assert rates[True] == pytest.approx(expected, rel=1e-9)
    shown = {m.label: m.value for m in at.metric}
    demand = 2_000_000 / 86400
    assert shown[f"Replicas with speculation (K={k})"].split("-")[0] in {
        str(int(np.ceil(demand / rates[True]))),
        str(int(np.ceil(demand / rates[True])) - 1),
    }


@pytest.mark.parametrize(
    ("query", "shown"),
    [
        # Tokenizers differ: the baseline sizes, the speculative arm cannot run.
        (
            {"target": "qwen2.5-1.5b", "method": "draft_model", "draft": "qwen3-8b"},
            {"without speculation": None, "with speculation (K=3)": "tokenizers differ"},
        ),
        # The target alone does not fit: neither arm runs.
        (
            {"target": "deepseek-v3", "method": "none", "gpu": "a100-40gb", "num_gpus": "1"},
            {"without speculation": "weights and reserves exceed"},
        ),
    ],
)
def test_p99_sizing_says_which_arm_cannot_run(app, query, shown):
    """P99 sizing simulated each arm unguarded: a scenario that cannot run crashed the page
    (6 of 25 random catalog links in a walk)."""
    at = app("sizer", query={**query, "size_on": "P99 at the SLO (request-level simulation)"})
    assert not at.exception, [e.value for e in at.exception]
    metrics = {m.label.removeprefix("Replicas "): m.value for m in at.metric}
    captions = " ".join(c.value for c in at.main.caption).replace("\\", "")
    for arm, why in shown.items():
        if why is None:
            # A count, or a range where the sized rate's bracket spans two counts.
            assert re.fullmatch(r"\d+(-\d+)?", metrics[arm]), metrics
        else:
            assert metrics[arm] == "cannot run" and why in captions, (metrics, captions)


def test_a_draft_that_does_not_fit_is_not_sold_as_paying(app, charts):
    """An 8B target on an L4 with a 3B draft beside it: no K > 0 can run. The page said
    "Speculation pays at every batch" and put K = 0 bars under a caption that praised it."""
    at = app(
        "sizer",
        query={
            "target": "llama-3.1-8b",
            "method": "draft_model",
            "draft": "llama-3.2-3b",
            "gpu": "l4",
            "num_gpus": "1",
        },
    )
    assert not at.exception
    text = " ".join(c.value for c in at.main.caption).replace("\\", "")  # markdown escapes
    assert "pays at every batch" not in text
    assert "Cannot run with speculation: the draft's weights do not fit beside the target's" in text
    errors = " ".join(e.value for e in at.error)
    assert "With speculation, the target's and the draft's weights" in errors
    assert "It runs with fp8 weights or with 2 GPUs per replica." in errors
    assert at.session_state["sizer_result"]["break_even_batch"] == 1


def test_nothing_running_draws_no_best_k_bars(app, charts):
    query = {"target": "deepseek-v3", "method": "mtp", "gpu": "h200", "num_gpus": "8"}
    at = app("sizer", query={**query, "weight_dtype": "bf16"})
    assert not at.exception
    best_k = charts(at)["sizer_best_k"]
    assert np.isnan(np.asarray(best_k["data"][0]["y"], dtype=float)).all()
    assert best_k["layout"]["annotations"][0]["text"] == "nothing runs at any batch"
    text = " ".join(c.value for c in at.main.caption)
    assert "pays" not in text and "paying" not in text


def test_an_unchanged_replica_count_shows_no_arrow(app):
    """Speculation off (the draft cannot run): the replicas equal the baseline's, and the
    metric showed a red up arrow with '+0'."""
    at = app(
        "sizer",
        query={"target": "qwen2.5-1.5b", "method": "draft_model", "draft": "qwen3-8b"},
    )
    (replicas,) = [m for m in at.metric if m.label.startswith("Replicas (GPUs)")]
    assert not replicas.delta, replicas.delta


def test_max_model_len_above_the_context_window_is_capped_in_the_launch_command(app):
    """Llama 2 holds 4,096 tokens; the default max model length is 8,192. The launch
    command said --max-model-len 8192, which vLLM refuses at start-up."""
    at = app("sizer", query={"target": "llama-2-7b", "method": "ngram", "num_gpus": "1"})
    assert not at.exception, [e.value for e in at.exception]
    assert any("4,096-token context window" in w.value for w in at.warning)
    commands = " ".join(c.value for c in at.code)
    assert "--max-model-len 4096" in commands and "8192" not in commands
    assert "--context-length 4096" in commands
    text = " ".join(c.value for c in at.main.caption)
    assert "At the full 4,096 tokens per request" in text


def test_a_request_longer_than_the_context_window_is_said_not_counted(app):
    """4,000 + 256 tokens on TinyLlama (2,048-token window): the page said 'No (K, batch)
    meets the SLO and fits in memory', showed 3,123 max sequences and a green checklist
    row for KV headroom."""
    at = app("sizer", query={"target": "tinyllama-1.1b", "method": "eagle", "prompt_len": "4000"})
    errors = [e.value for e in at.error]
    assert any(
        "4,256 tokens exceed tinyllama-1.1b's 2,048-token context window" in e for e in errors
    )
    assert not any("meets the SLO" in e for e in errors)
    seqs = {m.label: m.value for m in at.metric if m.label.startswith("Max sequences")}
    assert set(seqs.values()) == {"cannot run"}, seqs
    text = " ".join(m.value for m in at.markdown)
    assert "Requests fit the context window" in text


def test_a_request_longer_than_the_drafts_window_runs_without_speculation(app):
    """Llama 2 7B holds 4,096 tokens, its TinyLlama draft 2,048: 3,000-token requests run
    only at K = 0."""
    query = {
        "target": "llama-2-7b",
        "method": "draft_model",
        "draft": "tinyllama-1.1b",
        "prompt_len": "3000",
        "output_len": "256",
    }
    at = app("sizer", query=query)
    assert any("the draft tinyllama-1.1b's 2,048-token context window" in e.value for e in at.error)
    seqs = {m.label: m.value for m in at.metric if m.label.startswith("Max sequences")}
    assert seqs["Max sequences, baseline"] != "cannot run"
    assert seqs["Max sequences, speculative"] == "cannot run"


def test_the_deployment_headline_follows_the_p99_basis(app):
    """Issue 27, wrong answer 2: sized on the P99, the headline still said the mean's
    replicas. 8B with a 1B draft on one H200, 50 requests/s, P99 TPOT 50 ms."""
    query = {
        "target": "llama-3.1-8b",
        "method": "draft_model",
        "gpu": "h200",
        "num_gpus": "1",
        "requests_per_day": "4320000",
        "slo_tpot_ms": "50",
    }
    at = app("sizer", query={**query, "size_on": "P99 at the SLO (request-level simulation)"})
    assert not at.exception, [e.value for e in at.exception]
    rates = at.session_state["sizer_p99_rates"]
    shown = {m.label: m.value for m in at.metric}
    headline = shown["Replicas (GPUs), P99 at the SLO"]
    # The operating point's arm: speculation where its K is above 0.
    speculates = at.session_state["sizer_result"]["choice"]["k"] > 0
    assert headline.split(" ")[0] == str(int(np.ceil(50 / rates[speculates])))
    captions = " ".join(c.value for c in at.main.caption)
    assert "over two seeds of" in captions and "warm-up cut" in captions
    # Issue 34, smaller defects: the caption and $/1M carried the mean basis's figures.
    rate = rates[speculates]
    tok_s = rate * 256
    assert f"Per replica {tok_s:,.0f} tok/s at P99 TPOT" in captions
    choice = at.session_state["sizer_result"]["choice"]
    mean_cost = choice["cost_per_mtok"] * choice["tok_s_per_replica"] / tok_s
    assert shown["$/1M tokens"].replace("$", "") == f"{mean_cost:.3f}"


def test_the_largest_batch_under_the_slo_stops_at_the_engines_cap(app):
    """Issue 27: it listed 512 where the engine's default caps a replica lower. Issue 35:
    the cap is the chosen engine's (SGLang runs 48 requests with speculation on)."""
    at = app("sizer", query={"slo_tpot_ms": "1000", "engine": "sglang"})
    text = " ".join(c.value for c in at.main.caption)
    largest = text.split("Largest batch meeting the SLO")[1].split(".")[0]
    assert "512" not in largest and "K=1: 48" in largest
    assert "sglang runs at most 48 requests at once" in text
    assert "--max-running-requests" in text


def test_a_k0_operating_point_launches_without_speculation(app):
    """8B with a 1B draft on one H200 at 50 requests/s: the operating point is K = 0 at
    batch 96 while the schedule speculates only below batch 65. The vLLM command loaded the
    1B draft anyway (issue 27): the launch runs no speculation and says what the low-load
    schedule would cost."""
    query = {
        "target": "llama-3.1-8b",
        "method": "draft_model",
        "gpu": "h200",
        "num_gpus": "1",
        "batch_size": "32",
        "requests_per_day": "4320000",
    }
    at = app("sizer", query=query)
    choice = at.session_state["sizer_result"]["choice"]
    assert choice["k"] == 0
    commands = [c.value for c in at.code]
    vllm = next(c for c in commands if c.startswith("vllm serve"))
    assert "--speculative-config" not in vllm and "Llama-3.2-1B" not in vllm
    assert "draft_len_schedule" not in at.session_state["sizer_launch_config"]
    text = " ".join(c.value for c in at.main.caption).replace("\\", "")
    assert "K = 0 at the operating point" in text, text
    assert "GiB" in text and "draft" in text


def test_the_deployment_carries_the_validated_error_as_ranges(app):
    """Issue 27: the Sizer's replicas and $/month appeared exact. At the model's error at
    the operating point's batch they are ranges, and the verdict says where speculation
    pays even at the low end."""
    from app.formatting import money
    from simulator.planning.uncertainty import get_money_range, get_speedup_error_by_batch
    from simulator.validation.published import load_published, score

    at = app("sizer")
    choice = at.session_state["sizer_result"]["choice"]
    base = at.session_state["sizer_result"]["baseline_choice"]
    scored = score(load_published("data/validation/published.csv"))
    err = float(get_speedup_error_by_batch([choice["batch_size"]], scored)[0])
    r = get_money_range(
        demand_tok_s=DEMAND,
        baseline_tok_s=base["tok_s_per_replica"],
        spec_tok_s=choice["tok_s_per_replica"],
        hourly_usd_per_gpu=choice["monthly_cost_usd"] / choice["gpus"] / 730.0,
        num_gpus=4,
        error=err,
    )
    text = " ".join(c.value for c in at.main.caption).replace("\\", "")
    reps = sorted({int(x) for x in r.replicas_spec})
    costs = sorted(float(x) for x in r.monthly_cost_spec_usd)
    assert f"±{err:.0%}" in text, text
    assert f"{'-'.join(map(str, reps))} replicas" in text, text
    assert f"{money(costs[0])}-{money(costs[1])} a month" in text or reps[0] == reps[-1], text
    assert "even at the model's low end" in text, text


def test_p99_sizing_carries_the_models_error_as_a_range_too(app):
    """Stop 25's review: the replicas and cost at the model's validated error showed on
    the mean basis only; sized on the P99 the page gave one exact-looking figure. On the
    P99 basis the range is the P99-sized rate at the error's two ends."""
    from simulator.planning.uncertainty import get_speedup_error_by_batch
    from simulator.validation.published import load_published, score

    query = {
        "target": "llama-3.1-8b",
        "method": "eagle3",
        "gpu": "h200",
        "num_gpus": "1",
        "requests_per_day": "864000",
        "slo_tpot_ms": "50",
        "size_on": "P99 at the SLO (request-level simulation)",
    }
    at = app("sizer", query=query)
    choice = at.session_state["sizer_result"]["choice"]
    assert choice["k"] > 0
    rate = at.session_state["sizer_p99_rates"][True]
    scored = score(load_published("data/validation/published.csv"))
    err = float(get_speedup_error_by_batch(np.array([choice["batch_size"]]), scored)[0])
    demand_rps = 864000 / 86400
    ends = sorted({int(np.ceil(demand_rps / (rate * (1 + s * err)))) for s in (-1, 1)})
    captions = " ".join(c.value for c in at.main.caption)
    assert f"With the model's typical error at batch {choice['batch_size']}" in captions
    assert f"{'-'.join(map(str, ends))} replicas" in captions


def test_the_range_carries_the_acceptance_band_of_a_tree_prior(app):
    """Issue 34 item 2: the Sizer's replicas and dollars carry the acceptance's band too."""
    query = {"target": "llama-3.3-70b", "method": "eagle3", "num_gpus": "4", "gpu": "h100-sxm"}
    text = " ".join(c.value for c in app("sizer", query=query).main.caption).replace("\\", "")
    ranged = text.split("With the model's typical error")[1]
    assert "acceptance α 0.763-0.907" in ranged and "planned as a chain" in ranged
    typed = app("sizer", query={**query, "acceptance_rate": "0.8"}).main.caption
    typed_text = " ".join(c.value for c in typed).split("With the model's typical error")[1]
    assert "taken as given" in typed_text


def test_the_sizer_shows_the_engines_host_costs_for_its_method(app):
    """Issue 34, smaller defects: each engine assumption on the page that uses it. A
    draft-model scenario pays the draft forward's host cost, not the head's."""
    at = app("sizer", query={"engine": "trtllm", "method": "draft_model"})
    costs = next(d.value for d in at.dataframe if "how it was set" in d.value.columns)
    charged = costs.set_index("charged")
    assert charged.loc["per draft-model forward", "basis"] == "assumed"
    assert "per head forward" not in charged.index


@pytest.mark.parametrize(
    ("engine", "head"),
    [
        ("vllm", "vllm serve"),
        ("sglang", "python -m sglang.launch_server"),
        ("trtllm", "trtllm-serve"),
    ],
)
def test_the_launch_command_is_the_chosen_engines(app, engine, head):
    """Issue 34, smaller defects: the Sizer's launch command followed no engine: vLLM's and
    SGLang's always, TensorRT-LLM's never. The chosen engine's comes first and alone in the
    download; the other engines' are offered beside it."""
    at = app(
        "sizer",
        query={"engine": engine, "method": "eagle3", "target": "llama-3.3-70b", "num_gpus": "4"},
    )
    choice = at.session_state["sizer_result"]["choice"]
    first = at.main.code[0].value
    assert head in first and f"{choice['batch_size']}" in first
    text = at.session_state["sizer_launch_config"]
    assert head in text
    heads = {"vllm serve", "sglang.launch_server", "trtllm-serve"}
    assert [h for h in heads if h in text] == [h for h in heads if h in head]
    shown = " ".join(c.value for c in at.code)
    assert all(h in shown for h in ("vllm serve", "sglang.launch_server", "trtllm-serve"))
