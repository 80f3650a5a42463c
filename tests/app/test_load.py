"""The Load & SLO page: its curves are the request-level simulation's, and it names the
load beyond which speculation hurts the tail."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from app import figures_load


def test_page_draws_latency_and_goodput_from_the_simulation(app, charts):
    at = app("load", state={"load_points": 3, "load_requests": 100})
    figs = charts(at)
    assert {"load_tpot", "load_ttft", "load_goodput"} <= set(figs)
    table = at.dataframe[0].value
    assert set(table["arm"]) == {"baseline", "spec"}
    assert len(table) == 6
    # A request rate sets no concurrency: the empty column is not shown.
    assert "rate" in table and "concurrency" not in table
    tpot = figs["load_tpot"]
    p99 = next(t for t in tpot["data"] if t["name"] == "spec P99")
    rows = table[table["arm"] == "spec"].sort_values("rate")
    np.testing.assert_allclose(p99["y"], rows["tpot_p99_ms"].to_numpy(), rtol=1e-3)
    assert at.get("download_button")


def test_tail_crossover_is_the_first_load_where_speculation_is_worse():
    table = pd.DataFrame(
        {
            "arm": ["baseline", "spec"] * 3,
            "rate": [1, 1, 2, 2, 4, 4],
            "concurrency": [None] * 6,
            "tpot_p99_ms": [10, 6, 12, 11, 20, 25],
        }
    )
    assert figures_load.tail_crossover(table) == 4.0
    table.loc[5, "tpot_p99_ms"] = 19
    assert figures_load.tail_crossover(table) is None
    # A load the baseline did not reach (or a spec-only table) is no crossover, not a
    # KeyError; a NaN percentile compares as no crossover either.
    assert figures_load.tail_crossover(table[table["arm"] == "spec"]) is None
    table.loc[1, "tpot_p99_ms"] = np.nan
    table.loc[3, "tpot_p99_ms"] = 13
    assert figures_load.tail_crossover(table) == 2.0


@pytest.mark.parametrize("metric", ["tpot", "ttft"])
def test_latency_figure_has_p50_and_p99_per_arm_and_the_slo(metric):
    table = pd.DataFrame(
        {
            "arm": ["baseline", "spec"] * 2,
            "rate": [1.0, 1.0, 2.0, 2.0],
            "concurrency": [None] * 4,
            f"{metric}_p50_ms": [1, 2, 3, 4],
            f"{metric}_p99_ms": [5, 6, 7, 8],
        }
    )
    fig = figures_load.latency_vs_load(table, metric, "t", slo_ms=7.5)
    names = [t.name for t in fig.data]
    assert names == ["baseline P50", "baseline P99", "spec P50", "spec P99"]
    assert any(shape.y0 == 7.5 for shape in fig.layout.shapes)


def test_a_new_k_simulates_the_speculative_arm_alone(app, serving_runs):
    import streamlit as st

    st.cache_data.clear()
    st.cache_resource.clear()
    ran = serving_runs
    at = app("load", state={"load_points": 3, "load_requests": 100})
    assert sorted(ran) == [0, 0, 0, 3, 3, 3]
    before = at.dataframe[0].value
    ran.clear()
    at.number_input(key="load_k").set_value(5).run()
    assert not at.exception
    assert ran == [5, 5, 5]  # the baseline's runs are the ones already made
    after = at.dataframe[0].value
    baseline = before["arm"] == "baseline"
    pd.testing.assert_frame_equal(
        before[baseline].reset_index(drop=True),
        after[after["arm"] == "baseline"].reset_index(drop=True),
    )
    assert set(after.loc[after["arm"] == "spec", "k"]) == {5}


def test_requests_longer_than_the_kv_cache_are_refused_not_simulated_for_ever(app):
    # An 8B model on one L4 holds about 34,000 tokens of KV cache; lognormal prompts around
    # 8,000 tokens sometimes pass that. Such a request used to preempt itself for ever.
    at = app(
        "load",
        query={
            "target": "llama-3.1-8b",
            "gpu": "l4",
            "num_gpus": 1,
            "prompt_len": 8000,
            "output_len": 64,
        },
        state={"load_points": 2, "load_requests": 300},
    )
    table = at.dataframe[0].value
    assert table["refused"].max() >= 1
    assert any(
        "longer (prompt and output) than the context window or the KV" in w.value
        for w in at.warning
    )
    assert np.isfinite(table["tpot_p99_ms"]).all()


def test_a_speculative_arm_that_cannot_run_leaves_the_baseline_and_claims_nothing(app):
    """A 3B draft does not fit beside an 8B target on an L4. The page refused the whole
    scenario; now it shows the baseline's tails, says why the other arm is missing, and
    makes no claim about where speculation helps the tail."""
    at = app(
        "load",
        query={
            "target": "llama-3.1-8b",
            "method": "draft_model",
            "draft": "llama-3.2-3b",
            "gpu": "l4",
            "num_gpus": 1,
        },
        state={"load_points": 2, "load_requests": 100},
    )
    assert not at.error
    table = at.dataframe[0].value
    assert set(table["arm"]) == {"baseline"} and len(table) == 2
    warned = " ".join(w.value for w in at.warning).replace("\\", "")
    assert (
        "Only the baseline is simulated (cannot run with speculation: the draft's weights" in warned
    )
    assert not at.success
    assert not [w for w in at.warning if "makes the P99 TPOT worse" in w.value]
