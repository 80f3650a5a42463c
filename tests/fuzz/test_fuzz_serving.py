"""Fuzz the request-level engine (`simulator.serving.engine.run`) with loads, lengths and KV
caches drawn at random, down to a cache that holds no request: every run must end (the
harness's CPU limit), and every request must either finish, with latencies >= 0, or be
refused for being longer than the cache holds.

Its inputs come from the serve flags and the Load page, already fuzzed as parsers; this
looks for the states the engine can reach, such as a request that preempts itself for
ever (found by hand, then fixed: such a request is refused).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from simulator.serving import engine as serving
from tests.fuzz.harness import FUZZ, run_case

SCENARIO = dict(
    target="llama-3.1-8b",
    gpu="h100-sxm",
    method="eagle3",
    k=3,
    acceptance_rate=0.7,
    prompt_len=512,
    output_len=128,
)
MODELS = {
    "baseline": serving.step_model(SCENARIO, speculative=False),
    "spec": serving.step_model(SCENARIO, speculative=True),
    "schedule": serving.schedule_model(SCENARIO, [(1, 4, 3), (5, 16, 1), (17, 10**6, 0)]),
}


@st.composite
def lengths(draw, means):
    mean = draw(st.sampled_from(means))
    kind = draw(st.sampled_from(serving.LENGTH_KINDS))
    if kind == "fixed":
        return serving.Lengths(mean)
    most = mean if kind == "uniform" else serving.MAX_LOG_SPREAD
    return serving.Lengths(mean, kind, draw(st.floats(0, most)))


def check_run(result: serving.RunResult, requests: int) -> None:
    req = result.requests
    finished = req["e2e_ms"].notna().to_numpy()
    assert finished.sum() + result.extra.get("refused", 0) == requests == len(req)
    for col in ("ttft_ms", "e2e_ms"):
        assert (req.loc[finished, col] >= 0).all(), col
    assert np.isnan(req.loc[~finished, "ttft_ms"]).all()


@FUZZ
@given(
    arm=st.sampled_from(sorted(MODELS)),
    kv_blocks=st.sampled_from([None, 1, 3, 10, 40, 100, 1000]),
    prompt=lengths([1, 16, 300, 2000, 9000]),
    output=lengths([1, 2, 50, 700]),
    requests=st.sampled_from([1, 5, 80, 300]),
    rate=st.sampled_from([None, 0.01, 1.0, 50.0, 1e4]),
    concurrency=st.sampled_from([1, 3, 64, 1000]),
    seed=st.integers(0, 1000),
    max_num_seqs=st.sampled_from([1, 4, 256]),
    budget=st.sampled_from([16, 512, 8192]),
    spread=st.sampled_from([0.0, 0.1, serving.MAX_ACCEPTANCE_SPREAD]),
)
def test_serving_engine(
    arm, kv_blocks, prompt, output, requests, rate, concurrency, seed, max_num_seqs, budget, spread
):
    model = MODELS[arm]
    if kv_blocks is not None and arm != "schedule":
        model = replace(model, kv_blocks=kv_blocks)
    load = (
        serving.Load(requests=requests, rate=rate, seed=seed)
        if rate is not None
        else serving.Load(requests=requests, concurrency=concurrency, seed=seed)
    )
    run_case(
        "serving_engine",
        lambda: serving.run(
            model,
            load,
            prompt,
            output,
            acceptance_spread=spread,
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=budget,
        ),
        lambda result: check_run(result, requests),
    )
