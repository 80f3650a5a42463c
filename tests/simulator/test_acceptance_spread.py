"""Per-request acceptance spread that cannot turn two-peaked (issue 27, wrong answer 4: s.d.
0.1 around 0.987 became Beta(0.31, 0.004), so 1% of requests accepted almost nothing)."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.serving import engine as serving


@pytest.mark.parametrize("mean", [0.987, 0.9, 0.7, 0.3, 0.02])
def test_the_levels_stay_one_peaked_around_the_mean(mean):
    rng = np.random.default_rng(0)
    levels = serving._beta_levels(rng, mean, 0.1, 200_000)
    assert levels.mean() == pytest.approx(mean, abs=0.003)
    # One peak, no pile-up at the far end: a Beta with both parameters >= 1.
    far = levels < mean / 2 if mean > 0.5 else levels > (1 + mean) / 2
    assert far.mean() < 1e-3, far.mean()
    cap = serving.max_acceptance_spread(mean)
    assert levels.std() <= cap * 1.02


def test_a_spread_below_the_cap_is_kept_as_given():
    levels = serving._beta_levels(np.random.default_rng(1), 0.7, 0.1, 200_000)
    assert levels.std() == pytest.approx(0.1, rel=0.02)
    assert serving.max_acceptance_spread(0.7) > 0.2


def test_speculative_p99_at_concurrency_one_is_not_a_fake_tail():
    """At concurrency 1, the P99 TPOT with spread 0.1 stays near the spread-0 one."""
    scenario = {
        "target": "llama-3.3-70b",
        "method": "eagle3",
        "gpu": "h100-sxm",
        "num_gpus": 4,
        "weight_dtype": "bf16",
        "kv_dtype": "bf16",
        "k": 3,
        "batch_size": 1,
        "acceptance_per_position": "0.987;0.9;0.8",
        "prompt_len": 1024,
        "output_len": 256,
    }
    model = serving.step_model(scenario, speculative=True)
    load = serving.Load(requests=400, concurrency=1, seed=2)
    lengths = serving.Lengths(1024), serving.Lengths(256)
    p99 = {
        s: np.percentile(
            serving.run(model, load, *lengths, acceptance_spread=s).requests["tpot_ms"], 99
        )
        for s in (0.0, 0.1)
    }
    assert p99[0.1] < 1.25 * p99[0.0], p99


def test_the_default_spread_comes_from_the_published_between_workload_spread():
    import pandas as pd

    from simulator.serving.spread import SPREAD_CSV, default_acceptance_spread

    table = pd.read_csv(SPREAD_CSV)
    assert table["source"].str.contains("acceptance_priors.csv").all()
    eagle3 = table[table["method"] == "eagle3"]["between_workload_sd"].max()
    assert default_acceptance_spread("eagle3") == pytest.approx(np.ceil(eagle3 * 100) / 100)
    assert default_acceptance_spread("mtp") == pytest.approx(
        np.ceil(table["between_workload_sd"].max() * 100) / 100
    )
    assert default_acceptance_spread("none") == 0.0
