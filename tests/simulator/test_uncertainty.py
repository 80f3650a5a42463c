"""The validated error carried to replicas, $ per month and payback as ranges (issue 27:
"Replica counts, $/month and payback appear exact")."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from simulator.planning.uncertainty import (
    get_money_range,
    get_payback_range,
    get_paying_batches,
    get_speedup_error_by_batch,
)


def test_the_error_is_the_median_of_the_batchs_bucket_else_of_all():
    scored = pd.DataFrame(
        {
            "predicted_speedup": [1.2, 1.1, 1.3, 0.9, np.nan],
            "batch_bucket": ["1", "1", "2-16", "2-16", ">16"],
            "abs_error": [0.10, 0.20, 0.04, 0.06, 0.9],
        }
    )
    got = get_speedup_error_by_batch([1, 8, 64], scored)
    # Batch 1: (0.10 + 0.20) / 2; 2-16: (0.04 + 0.06) / 2; >16 has no scored case: all four.
    np.testing.assert_allclose(got, [0.15, 0.05, np.median([0.10, 0.20, 0.04, 0.06])])


def test_replicas_cost_saving_and_payback_by_hand():
    # 1,000 tok/s of demand; the baseline serves 300 tok/s a replica (4 replicas), speculation
    # 500 (2), +-20%: 400 (3 replicas) to 600 (2). $2/GPU-hour, 1 GPU, 730 hours.
    r = get_money_range(
        demand_tok_s=1000.0,
        baseline_tok_s=300.0,
        spec_tok_s=500.0,
        hourly_usd_per_gpu=2.0,
        num_gpus=1,
        error=0.2,
        hours=730.0,
    )
    assert [float(x) for x in r.replicas_spec] == [3.0, 2.0]
    assert [float(x) for x in r.monthly_cost_spec_usd] == [4380.0, 2920.0]
    assert [float(x) for x in r.monthly_saving_usd] == [1460.0, 2920.0]
    low, high = get_payback_range(10_000.0, r.monthly_saving_usd)
    assert float(low) == pytest.approx(10_000 / 2920) and float(high) == pytest.approx(
        10_000 / 1460
    )
    # $/1M tokens: 2 / (tok/s x 3600) x 1e6; the fractional saving is its fall x tokens a month.
    per_mtok = [2.0 / (t * 3600) * 1e6 for t in (400.0, 600.0)]
    np.testing.assert_allclose([float(x) for x in r.cost_per_mtok_spec], per_mtok)
    base = 2.0 / (300.0 * 3600) * 1e6
    tokens = 1000.0 * 3600 * 730 / 1e6
    np.testing.assert_allclose(
        [float(x) for x in r.fractional_saving_usd], [(base - m) * tokens for m in per_mtok]
    )


def test_a_saving_that_vanishes_at_the_low_end_pays_back_never_there():
    r = get_money_range(
        demand_tok_s=1000.0,
        baseline_tok_s=300.0,
        spec_tok_s=340.0,
        hourly_usd_per_gpu=2.0,
        num_gpus=1,
        error=0.2,
    )
    low, high = get_payback_range(5000.0, r.monthly_saving_usd)
    assert np.isfinite(low) and np.isinf(high)


def test_paying_batches_survive_the_low_end():
    got = get_paying_batches([1, 8, 32], [1.5, 1.1, 1.3], [0.1, 0.1, 0.3])
    assert got.tolist() == [1]
