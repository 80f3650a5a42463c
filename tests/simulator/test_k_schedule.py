"""The Sizer's K per batch written as vLLM's `tune_speculative_k` writes it (issue 35 item
5): ties within 1% to the smaller K, each anchor's K from it to the next, the same keys."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from simulator.planning import k_schedule
from simulator.planning.sizer import price_grid

BASE = {
    "target": "llama-3.1-8b",
    "gpu": "h100-sxm",
    "method": "eagle3",
    "acceptance_rate": 0.7,
    "prompt_len": 512,
    "output_len": 256,
}


def _grid(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["batch_size", "k", "spec_tok_s"])


def test_a_k_within_one_percent_of_the_best_ties_to_the_smaller():
    grid = _grid([(1, 0, 100.0), (1, 2, 180.0), (1, 3, 181.5), (1, 4, 170.0)])
    assert k_schedule.select_k(grid) == {1: 2}
    assert k_schedule.select_k(grid, relative_tolerance=0.0) == {1: 3}


def test_a_batch_where_nothing_runs_is_left_out():
    grid = _grid([(1, 0, 100.0), (1, 2, 150.0), (8, 0, np.nan), (8, 2, np.nan)])
    assert k_schedule.select_k(grid) == {1: 2}


def test_the_schedule_runs_from_each_anchor_to_the_next_as_vllms_build_schedule():
    selected = {1: 3, 8: 3, 32: 2, 128: 2, 256: 0}
    assert k_schedule.build_schedule(selected, 512) == [[1, 31, 3], [32, 255, 2], [256, 512, 0]]
    with pytest.raises(ValueError, match="start at 1"):
        k_schedule.build_schedule({2: 3}, 8)
    with pytest.raises(ValueError, match="cover"):
        k_schedule.build_schedule({1: 3, 64: 1}, 32)


def test_the_document_has_the_tuners_keys_and_each_choice_is_near_the_best():
    grid = price_grid(BASE, k_max=5)
    doc = k_schedule.tune_document(grid, global_k=5)
    assert set(doc) == {
        "num_speculative_tokens_per_batch_size",
        "configured_global_num_speculative_tokens",
        "max_num_speculative_tokens_observed",
        "selection",
        "batch_decisions",
    }
    schedule = doc["num_speculative_tokens_per_batch_size"]
    assert schedule[0][0] == 1 and schedule[-1][1] == doc["selection"]["max_batch_size"]
    assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(schedule))
    for d in doc["batch_decisions"]:
        assert -1.0 <= d["selected_vs_best_percent"] <= 0.0
        better = [c for c in d["candidates"] if c["k"] < d["selected_k"]]
        best = max(c["median_objective"] for c in d["candidates"])
        assert all(c["median_objective"] < 0.99 * best for c in better)
