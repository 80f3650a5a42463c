"""The steady-state serving model: prefill per step, engine costs, the batch that runs,
open-loop rates, and setups that cannot run. Expected values are computed by hand from
the catalog's figures and the defaults, not read back from the code under test."""

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from simulator import predict
from simulator.inputs.catalog import default_gpus, default_models
from simulator.model import admission
from simulator.model.defaults import DEFAULTS
from simulator.model.latency import ModelArrays
from simulator.model.memory import get_kv_bytes_per_token
from simulator.model.steady import get_prefill_ms

EAGLE_8B = dict(
    target="llama-3.1-8b",
    gpu="h100-sxm",
    method="eagle",
    k=3,
    mean_accepted_tokens=2.5,
    batch_size=16,
    prompt_len=1024,
    output_len=256,
)


def _one(**row):
    return predict(pd.DataFrame([row])).iloc[0]


def test_prefill_tokens_and_time_by_hand():
    row = _one(**EAGLE_8B, engine="other")  # the roofline's prefill (kernels: test_kernels)
    # B * tau * P / O with speculation, B * P / O without.
    assert row["prefill_tokens_per_step_spec"] == pytest.approx(16 * 2.5 * 1024 / 256)
    assert row["prefill_tokens_per_step_baseline"] == pytest.approx(16 * 1024 / 256)
    m, g = default_models()["llama-3.1-8b"], default_gpus()["h100-sxm"]
    n = 16 * 1024 / 256
    matmul = m.active_params - m.vocab_size * m.hidden_size  # untied: the input embedding
    flops = 2 * matmul * n + 4 * m.num_layers * n * (1024 / 2) * m.num_attention_heads * m.head_dim
    expected_ms = flops / (DEFAULTS.prefill_compute_efficiency * g.bf16_tflops * 1e12) * 1e3
    assert row["prefill_ms_baseline"] == pytest.approx(expected_ms, rel=1e-9)
    # The step is the decode forward plus prefill plus the engine's host cost.
    assert row["baseline_step_ms"] == pytest.approx(
        row["target_step_ms"] + row["prefill_ms_baseline"] + row["engine_ms_baseline"]
    )


def test_decode_only_has_no_prefill_and_speculation_pays_more_without_it():
    steady = _one(**EAGLE_8B)
    decode = _one(**EAGLE_8B, serving="decode_only")
    assert decode["prefill_tokens_per_step_spec"] == 0 and decode["prefill_ms_spec"] == 0
    # Prefill per generated token is the same in both arms: a fixed cost the speedup
    # cannot shrink, so steady state gains less.
    assert steady["speedup"] < decode["speedup"]


def test_engine_costs_are_charged_per_step_per_draft_forward_and_per_round():
    roofline = {**EAGLE_8B, "method": "draft_model", "draft": "llama-3.2-1b", "engine": "other"}
    row = _one(**roofline)
    d = DEFAULTS
    assert row["engine_ms_baseline"] == pytest.approx(d.engine_step_ms + d.engine_per_seq_ms * 16)
    expected = d.engine_step_ms + d.engine_per_seq_ms * 16 + d.engine_round_ms
    expected += 3 * d.engine_draft_forward_ms
    assert row["engine_ms_spec"] == pytest.approx(expected)
    bare = predict(
        pd.DataFrame([roofline]),
        defaults=DEFAULTS.without_engine(),
    ).iloc[0]
    assert bare["engine_ms_spec"] == 0 and bare["speedup"] > row["speedup"]


def test_sampling_costs_the_rejection_sampler_not_the_baseline():
    greedy = _one(**EAGLE_8B)
    sampled = _one(**EAGLE_8B, temperature=0.8)
    assert sampled["baseline_step_ms"] == pytest.approx(greedy["baseline_step_ms"])
    m, g = default_models()["llama-3.1-8b"], default_gpus()["h100-sxm"]
    passes = DEFAULTS.sampler_vocab_passes * 16 * 4 * m.vocab_size * 4
    sampler_ms = passes / (DEFAULTS.bandwidth_efficiency * g.hbm_bandwidth_gbps * 1e9) * 1e3
    extra = sampled["spec_step_ms"] - greedy["spec_step_ms"]
    assert extra == pytest.approx(DEFAULTS.engine_sampled_round_ms + sampler_ms, rel=1e-9)


def test_kv_capacity_caps_the_batch_that_runs():
    # 70B bf16 on two 80 GB GPUs with a 1B draft: batch 64 does not fit.
    row = _one(
        target="llama-3.3-70b",
        gpu="h100-sxm",
        num_gpus=2,
        method="draft_model",
        draft="llama-3.2-1b",
        k=4,
        acceptance_rate=0.7,
        batch_size=64,
        prompt_len=1024,
        output_len=256,
    )
    # Steady state holds P + O/2 tokens per request, plus K lookahead slots with a draft.
    expected_spec = np.floor(row["kv_capacity_tokens_spec"] / (1024 + 128 + 4))
    expected_base = np.floor(row["kv_capacity_tokens_baseline"] / (1024 + 128))
    assert row["effective_batch_spec"] == expected_spec < 64
    assert row["effective_batch_baseline"] == min(expected_base, 64)
    assert row["effective_batch_spec"] < row["effective_batch_baseline"]
    # Throughput is counted at the batch that runs.
    assert row["spec_tok_s"] == pytest.approx(
        row["effective_batch_spec"] * row["tau"] * 1e3 / row["spec_step_ms"]
    )
    assert row["speedup"] == pytest.approx(row["spec_tok_s"] / row["baseline_tok_s"])
    assert "effective_batch" in row["warnings"]
    kv = get_kv_bytes_per_token(default_models()["llama-3.3-70b"])
    assert row["kv_bytes_per_token"] == kv


def test_max_num_seqs_caps_the_batch():
    """The engine's default cap (vLLM's 1,024 on a 70+ GiB GPU), or the row's own."""
    short = {**EAGLE_8B, "batch_size": 1000, "prompt_len": 64, "output_len": 64}
    row = _one(**short)
    gpu = default_gpus()[short["gpu"]]
    cap = admission.default_cap("vllm", True, gpu.id, gpu.memory_gb)
    assert min(cap, 1000) == row["effective_batch_baseline"] == row["effective_batch_spec"]
    row = _one(**short, max_num_seqs=256)
    assert row["effective_batch_baseline"] == row["effective_batch_spec"] == 256


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        (dict(target="llama-3.1-405b", gpu="l4"), "weights and reserves exceed"),
        (
            dict(
                target="llama-3.1-8b",
                gpu="h100-sxm",
                method="draft_model",
                draft="qwen2.5-0.5b",
                k=3,
                acceptance_rate=0.7,
            ),
            "tokenizers differ",
        ),
        (
            dict(target="llama-3.2-1b", gpu="h100-sxm", prompt_len=200_000, output_len=256),
            "context window",
        ),
    ],
)
def test_setups_that_cannot_run_get_no_numbers(row, reason):
    out = _one(**row)
    assert reason in out["status"]
    for col in ("speedup", "spec_tok_s", "cost_per_mtok_spec"):
        assert np.isnan(out[col]), col


def test_a_draft_that_only_does_not_fit_beside_the_target_keeps_the_baseline():
    # 70B fp8 fills one H100 to the brim; an 8B draft cannot join it.
    out = _one(
        target="llama-3.3-70b",
        gpu="h100-sxm",
        weight_dtype="fp8",
        method="draft_model",
        draft="llama-3.1-8b",
        k=3,
        acceptance_rate=0.7,
        prompt_len=512,
        output_len=128,
    )
    assert "cannot run with speculation" in out["status"]
    assert np.isnan(out["speedup"]) and np.isnan(out["spec_tok_s"])
    assert out["baseline_tok_s"] > 0 and np.isfinite(out["cost_per_mtok_baseline"])


def test_cannot_run_rows_are_nan_in_the_csv_and_exit_zero(tmp_path):
    src = tmp_path / "in.csv"
    pd.DataFrame(
        [
            dict(target="llama-3.1-405b", gpu="l4"),
            dict(target="llama-3.1-8b", gpu="h100-sxm"),
        ]
    ).to_csv(src, index=False)
    out = tmp_path / "out.csv"
    run = subprocess.run(
        [sys.executable, "-m", "simulator", "predict", "--in", str(src), "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    table = pd.read_csv(out)
    assert np.isnan(table.loc[0, "speedup"]) and "cannot run" in table.loc[0, "status"]
    assert table.loc[1, "status"] == "ok" and table.loc[1, "baseline_tok_s"] > 0


def test_request_rate_solves_littles_law():
    base = dict(
        target="llama-3.1-70b",
        gpu="h100-sxm",
        num_gpus=4,
        method="draft_model",
        draft="llama-3.2-1b",
        k=4,
        acceptance_rate=0.75,
        prompt_len=512,
        output_len=256,
    )
    out = predict(pd.DataFrame([{**base, "request_rate": r} for r in (0.5, 2.0, 4.0)]))
    m, g = default_models()["llama-3.1-70b"], default_gpus()["h100-sxm"]
    # TTFT: the prompt's prefill alone, priced at the compute roofline, split over TP 4.
    t = ModelArrays.from_specs([m])
    ttft_ms = get_prefill_ms(t, 512.0, 512.0, g.bf16_tflops, g.interconnect_gbps, 4.0)[0]
    for _, row in out.iterrows():
        # Mean requests in the engine = rate x (TTFT + output x TPOT).
        lat_s = (ttft_ms + 256 * row["baseline_tpot_ms"]) / 1e3
        assert row["effective_batch_baseline"] == pytest.approx(
            row["request_rate"] * lat_s, rel=1e-6
        )
        assert row["baseline_tok_s"] == pytest.approx(row["request_rate"] * 256)
        # Open loop: the gain is each request's time per token.
        assert row["speedup"] == pytest.approx(row["baseline_tpot_ms"] / row["spec_tpot_ms"])
    # More load, more requests in flight, slower tokens.
    assert out["effective_batch_baseline"].is_monotonic_increasing
    assert out["baseline_tpot_ms"].is_monotonic_increasing


def test_a_rate_beyond_the_replica_is_overloaded():
    row = _one(target="llama-3.1-70b", gpu="h100-sxm", num_gpus=4, request_rate=1000.0)
    assert "overloaded" in row["status"] and np.isnan(row["baseline_tok_s"])


def test_batch_and_rate_together_are_refused():
    from simulator import InputError

    with pytest.raises(InputError, match="request_rate"):
        _one(target="llama-3.1-8b", gpu="h100-sxm", batch_size=4, request_rate=1.0)


def test_self_speculation_shares_weights_and_a_compressed_draft_cache_is_cheaper():
    base = dict(
        target="llama-3.1-8b",
        gpu="a100-80gb",
        num_gpus=8,
        method="draft_model",
        draft="llama-3.1-8b",
        k=2,
        mean_accepted_tokens=2.5,
        batch_size=64,
        prompt_len=32000,
        output_len=96,
        serving="decode_only",
    )
    full = _one(**base)
    window = _one(**base, draft_context_len=512)
    assert full["draft_weights_gb"] == 0
    assert window["draft_step_ms"] < 0.5 * full["draft_step_ms"]
    assert window["speedup"] > full["speedup"]
