"""Each engine's default cap on running requests bounds the batch (issue 35 item 3):
SGLang runs 48 requests with speculation on, vLLM 1,024 on a 70+ GiB GPU that is not an
A100 and 256 otherwise, TensorRT-LLM 2,048; the row says when the cap, not the KV cache,
binds; the deployment search's own max_num_seqs replaces the engines' defaults."""

from __future__ import annotations

import pandas as pd
import pytest

from simulator.errors import InputError
from simulator.inputs.catalog import default_gpus
from simulator.model import admission
from simulator.model.defaults import DEFAULTS
from simulator.model.predict import predict
from simulator.serving.engine import step_model

CAPPED = "not the KV cache, bounds the batch"


def _row(engine: str, method: str = "eagle3", batch: int = 64, gpu: str = "h100-sxm") -> dict:
    row = {"target": "llama-3.1-8b", "gpu": gpu, "engine": engine, "method": method}
    row["batch_size"] = batch
    if method != "none":
        row["acceptance_rate"] = 0.7
    return row


@pytest.mark.parametrize(
    "engine,speculative,gpu,cap",
    [
        ("sglang", True, "h100-sxm", 48),
        ("sglang", False, "h100-sxm", 4096),
        ("vllm", True, "h100-sxm", 1024),
        ("vllm", True, "a100-80gb", 256),
        ("vllm", False, "l40s", 256),
        ("trtllm", True, "b200", 2048),
        ("other", True, "h100-sxm", 256),
    ],
)
def test_each_engines_default_cap(engine, speculative, gpu, cap):
    spec = default_gpus()[gpu]
    assert admission.default_cap(engine, speculative, gpu, spec.memory_gb) == cap


def test_every_rule_cites_its_source():
    for rule in admission.rules():
        assert rule.basis in ("public", "assumed")
        assert rule.basis == "assumed" or rule.source, rule


def test_sglang_runs_48_requests_with_speculation_and_says_why():
    out = predict(pd.DataFrame([_row("sglang"), _row("vllm")]))
    assert out["effective_batch_spec"].tolist() == [48, 64]
    assert out["effective_batch_baseline"].tolist() == [64, 64]
    assert CAPPED in str(out["warnings"].iloc[0])
    assert CAPPED not in str(out["warnings"].iloc[1])


def test_vllm_on_an_h100_is_bounded_by_its_kv_cache_not_256():
    """It was capped at 256 on every GPU: vLLM's default is 1,024 on 70+ GiB GPUs."""
    out = predict(pd.DataFrame([_row("vllm", "none", 512), _row("vllm", "none", 512, "l40s")]))
    h100, l40s = out["effective_batch_baseline"].tolist()
    assert 256 < h100 < 512
    assert l40s <= 256
    assert CAPPED not in str(out["warnings"].iloc[0])


def test_per_rank_caps_count_every_attention_dp_rank():
    gpu = default_gpus()["h200"]
    assert admission.default_cap("vllm", True, "h200", gpu.memory_gb, dp=4) == 4096
    assert admission.default_cap("sglang", True, "h200", gpu.memory_gb, dp=4) == 48


def test_a_max_num_seqs_set_for_every_engine_replaces_their_defaults():
    out = predict(pd.DataFrame([_row("sglang")]), defaults=DEFAULTS.replace(max_num_seqs=64))
    assert out["effective_batch_spec"].iloc[0] == 64


def test_the_request_level_simulation_admits_the_same_cap():
    spec = step_model(_row("sglang"), speculative=True)
    plain = step_model(_row("vllm"), speculative=True)
    assert spec.max_num_seqs == 48
    assert plain.max_num_seqs == 1024


def test_a_rows_own_cap_is_the_launchs_and_is_checked():
    rows = pd.DataFrame(
        [{**_row("sglang"), "max_num_seqs": 64}, {**_row("vllm"), "max_num_seqs": 32}]
    )
    out = predict(rows)
    assert out["effective_batch_spec"].tolist() == [64, 32]
    assert out["max_num_seqs"].tolist() == [64, 32]
    assert CAPPED in str(out["warnings"].iloc[1])
    for bad, words in ((0, "at least 1"), (2.5, "whole number"), (10**7, "above")):
        with pytest.raises(InputError) as err:
            predict(pd.DataFrame([{**_row("sglang"), "max_num_seqs": bad}]))
        assert err.value.field == "max_num_seqs" and words in err.value.bare_message
