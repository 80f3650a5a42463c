"""Methods as the engines name them: EAGLE-3, Medusa's head count, MTP's trained depth,
and the best K a decaying acceptance gives."""

import shlex

import numpy as np
import pandas as pd
import pytest

from simulator import predict
from simulator.inputs.catalog import default_models, method_decay
from simulator.planning.launch import SGLANG_CHAIN_NOTE, sglang_command, vllm_command
from simulator.planning.sizer import size

BASE = dict(target="llama-3.1-8b", gpu="h100-sxm", batch_size=16, prompt_len=512, output_len=256)


def _one(**row):
    return predict(pd.DataFrame([{**BASE, **row}])).iloc[0]


def test_eagle3_is_an_eagle_head_with_a_wider_fusion():
    e1 = _one(method="eagle", k=3, mean_accepted_tokens=2.5)
    e3 = _one(method="eagle3", k=3, mean_accepted_tokens=2.5)
    h = default_models()["llama-3.1-8b"].hidden_size
    extra = (e3["draft_weights_gb"] - e1["draft_weights_gb"]) * 2**30 / 2  # bf16 params
    assert extra == pytest.approx(h * h, rel=1e-6)
    # On the roofline the wider fusion costs more; on the kernel tables the EAGLE-3 head's
    # 32k-token draft vocabulary makes it cheaper (test_kernels).
    r1 = _one(method="eagle", k=3, mean_accepted_tokens=2.5, engine="other")
    r3 = _one(method="eagle3", k=3, mean_accepted_tokens=2.5, engine="other")
    assert r3["draft_step_ms"] > r1["draft_step_ms"]
    assert e3["status"] == "ok"


def test_medusa_k_above_its_heads_cannot_run_and_its_heads_are_all_loaded():
    ok = _one(method="medusa", k=4, acceptance_rate=0.7, medusa_heads=5)
    assert ok["status"] == "ok"
    h, v = 4096, 128256
    assert ok["draft_weights_gb"] * 2**30 / 2 == pytest.approx(5 * (h * h + h * v))
    too_deep = _one(method="medusa", k=6, acceptance_rate=0.7, medusa_heads=5)
    assert "medusa_heads" in too_deep["status"] and np.isnan(too_deep["speedup"])


def test_mtp_depth_loads_modules_and_positions_past_it_lose_acceptance():
    one = _one(
        target="deepseek-v3",
        gpu="h200",
        num_gpus=8,
        method="mtp",
        k=1,
        acceptance_rate=0.85,
        mtp_depth=1,
        weight_dtype="fp8",
    )
    two = _one(
        target="deepseek-v3",
        gpu="h200",
        num_gpus=8,
        method="mtp",
        k=1,
        acceptance_rate=0.85,
        mtp_depth=2,
        weight_dtype="fp8",
    )
    assert two["draft_weights_gb"] == pytest.approx(2 * one["draft_weights_gb"])
    # From one measured position, MTP past its depth reuses its last module.
    reused = _one(method="mtp", k=4, acceptance_per_position="0.85", mtp_depth=1)
    trained = _one(method="mtp", k=4, acceptance_per_position="0.85", mtp_depth=4)
    assert reused["tau"] < trained["tau"]
    decay = method_decay("mtp", 1)
    assert decay.depth == 1 and decay.reuse_rho < 1


def test_launch_commands_use_the_engines_method_names():
    target = default_models()["llama-3.1-8b"]
    common = dict(
        target=target, num_gpus=1, gpu_memory_utilization=0.9, max_model_len=4096, max_num_seqs=64
    )
    vllm = vllm_command(method="eagle3", k=3, **common)
    spec = shlex.split(vllm)[shlex.split(vllm).index("--speculative-config") + 1]
    assert '"method":"eagle3"' in spec
    sglang = sglang_command(method="eagle3", k=3, **common)
    assert sglang.startswith(SGLANG_CHAIN_NOTE)
    argv = shlex.split(sglang.splitlines()[-1])
    assert argv[argv.index("--speculative-algorithm") + 1] == "EAGLE3"
    assert argv[argv.index("--speculative-num-draft-tokens") + 1] == "4"  # K+1


@pytest.mark.parametrize(
    ("method", "extra"),
    [
        ("eagle", {"mean_accepted_tokens": 2.94, "k": 3}),
        ("eagle3", {"mean_accepted_tokens": 2.94, "k": 3}),
        ("draft_model", {"draft": "llama-3.2-1b", "mean_accepted_tokens": 2.5, "k": 3}),
        ("ngram", {"mean_accepted_tokens": 1.8, "k": 3}),
    ],
)
def test_best_k_at_batch_16_is_interior(method, extra):
    base = {**BASE, "target": "llama-3.1-70b", "num_gpus": 4, "method": method, **extra}
    result = size(base, k_max=10, batches=[16])
    best = int(result.best["best_k"].iloc[0])
    assert 1 <= best < 10, result.best
