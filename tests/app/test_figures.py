"""Figure builders, the workload presets and the report CSV, called directly: no browser."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from app import figures
from app.presets import pick_prior
from simulator import predict
from simulator.inputs.catalog import default_models, load_acceptance_priors
from simulator.model.acceptance import tau_iid
from simulator.planning.reports import (
    UNITS,
    add_economics,
    header,
    launch_config_text,
    read_report_csv,
    report_csv,
    strip_unit,
)

BASE = {
    "target": "llama-3.3-70b",
    "method": "eagle",
    "gpu": "h100-sxm",
    "num_gpus": 4,
    "prompt_len": 1024,
    "output_len": 256,
}


def test_speedup_vs_k_draws_one_line_per_curve_from_the_simulator():
    rows = [
        {**BASE, "k": k, "batch_size": 8, "acceptance_rate": a}
        for a in (0.6, 0.9)
        for k in (1, 2, 3, 4)
    ]
    pred = predict(pd.DataFrame(rows))
    pred["curve"] = [f"α {a}" for a in pred["acceptance_rate"]]
    fig = figures.speedup_vs_k(pred[["curve", "k", "speedup"]], highlight="α 0.9")
    assert [t.name for t in fig.data] == ["α 0.6", "α 0.9"]
    for trace, alpha in zip(fig.data, (0.6, 0.9), strict=True):
        expected = pred[pred["acceptance_rate"] == alpha].sort_values("k")
        np.testing.assert_array_equal(trace.x, expected["k"].to_numpy())
        np.testing.assert_allclose(trace.y, expected["speedup"].to_numpy())
    assert fig.data[1].line.width > fig.data[0].line.width
    # Higher acceptance, higher speedup at every K (the model's monotonicity).
    assert np.all(np.asarray(fig.data[1].y) > np.asarray(fig.data[0].y))


def test_the_legend_sits_at_the_foot_of_the_figure_whatever_its_rows():
    # Placed at y = -0.2 of the plot area, six rows of legend shrank the plot until the
    # legend's first row lay on the x axis title (the ROI page's speedup-against-K chart).
    curves = [f"curve {i}" for i in range(6)]
    df = pd.DataFrame(
        [{"curve": c, "k": k, "speedup": 1.0 + k / 10} for c in curves for k in (1, 2)]
    )
    legend = figures.speedup_vs_k(df).layout.legend
    assert (legend.yref, legend.yanchor, legend.y) == ("container", "bottom", 0)


def test_crossover_batch_interpolates_on_a_log_axis():
    # Falls from 1.5 at batch 10 to 0.5 at batch 100: halfway in log space is sqrt(1000).
    assert figures.crossover_batch([1, 10, 100], [2.0, 1.5, 0.5]) == pytest.approx(math.sqrt(1000))
    assert figures.crossover_batch([1, 10, 100], [2.0, 1.5, 1.1]) is None
    assert figures.crossover_batch([1, 10], [0.9, 0.8]) is None
    assert figures.crossover_batch([100, 1, 10], [0.5, 2.0, 1.5]) == pytest.approx(math.sqrt(1000))


def test_speedup_vs_batch_marks_the_crossover():
    df = pd.DataFrame(
        {"curve": "K=3", "batch_size": [1, 10, 100], "speedup": [2.0, 1.5, 0.5], "k": 3}
    )
    cross = figures.crossover_batch(df["batch_size"], df["speedup"])
    fig = figures.speedup_vs_batch(df, crossover=cross)
    np.testing.assert_array_equal(fig.data[0].x, [1, 10, 100])
    assert fig.layout.xaxis.type == "log"
    vlines = [s for s in fig.layout.shapes if s.x0 == s.x1]
    assert vlines and vlines[0].x0 == pytest.approx(cross)
    assert any("crossover" in a.text for a in fig.layout.annotations)
    never = figures.speedup_vs_batch(df.assign(speedup=[3.0, 2.0, 1.2]), crossover=None)
    assert any("whole range" in a.text for a in never.layout.annotations)


def test_cost_before_after_has_both_cases_in_both_panels():
    df = pd.DataFrame(
        {
            "case": ["baseline", "speculative"],
            "cost_per_mtok": [2.0, 1.0],
            "monthly_cost_usd": [7000.0, 3500.0],
        }
    )
    fig = figures.cost_before_after(df)
    assert len(fig.data) == 2
    assert list(fig.data[0].x) == ["baseline", "speculative"]
    np.testing.assert_allclose(fig.data[0].y, [2.0, 1.0])
    np.testing.assert_allclose(fig.data[1].y, [7000.0, 3500.0])
    # Issue 27, Layout: the halves' names sat centred above them and ran into each other at
    # 1024 px; each is now its own x axis title, under its own half.
    assert fig.layout.xaxis.title.text == "$ per 1M tokens"
    assert fig.layout.xaxis2.title.text == "$ per month"
    assert not fig.layout.annotations


def test_memory_breakdown_stacks_components_per_configuration():
    df = pd.DataFrame(
        {"target weights": [10.0, 10.0], "draft weights": [0.0, 1.0], "KV cache": [50.0, 49.0]},
        index=["baseline", "with speculation"],
    )
    fig = figures.memory_breakdown(df, total_gb=80.0)
    assert fig.layout.barmode == "stack"
    assert [t.name for t in fig.data] == list(df.columns)
    totals = np.sum([np.asarray(t.y) for t in fig.data], axis=0)
    np.testing.assert_allclose(totals, [60.0, 60.0])
    assert fig.layout.shapes[0].y0 == 80.0


def test_tpot_by_batch_and_best_k_follow_the_grid():
    grid = pd.DataFrame(
        {
            "k": [0, 0, 2, 2],
            "batch_size": [1, 64, 1, 64],
            "spec_tpot_ms": [20.0, 30.0, 10.0, 35.0],
        }
    )
    fig = figures.tpot_by_batch(grid, slo_tpot_ms=25.0)
    assert [t.name for t in fig.data] == ["off (K=0)", "K=2"]
    np.testing.assert_allclose(fig.data[1].y, [10.0, 35.0])
    assert fig.layout.shapes[0].y0 == 25.0
    best = pd.DataFrame(
        {
            "batch_size": [1, 64, 128],
            "best_k": [2, 0, 0],
            "speedup": [2.0, 1.0, np.nan],
            "spec_tok_s": [100.0, 900.0, np.nan],  # nothing runs at batch 128
            "meets_slo": [True, False, False],
            "fits": [True, True, False],
        }
    )
    bar = figures.best_k_by_batch(best)
    assert list(bar.data[0].x) == ["1", "64", "128"]
    np.testing.assert_allclose(bar.data[0].y, [2, 0, np.nan])
    assert list(bar.data[0].marker.color) == [figures.GOOD, figures.BAD, figures.BAD]
    assert not bar.layout.annotations


def test_profile_latency_pairs_measurements_with_predictions():
    measured = pd.DataFrame(
        {
            "query_len": [1, 1, 4, 4],
            "batch": [1, 8, 1, 8],
            "median_ms": [1.0, 2.0, 1.5, 4.0],
            "p10_ms": [0.9, 1.8, 1.4, 3.6],
            "p90_ms": [1.2, 2.4, 1.7, 4.8],
        }
    )
    predicted = pd.DataFrame(
        {"query_len": [1, 1, 4, 4], "batch": [1, 8, 1, 8], "ms": [1.1, 2.1, 1.4, 3.9]}
    ).assign(curve="fitted roofline")
    fig = figures.profile_latency(measured, predicted)
    names = [t.name for t in fig.data]
    assert names == [
        "measured q=1",
        "fitted roofline q=1",
        "measured q=4",
        "fitted roofline q=4",
    ]
    np.testing.assert_allclose(fig.data[0].y, [1.0, 2.0])
    np.testing.assert_allclose(fig.data[0].error_y.array, [0.2, 0.4])
    np.testing.assert_allclose(fig.data[0].error_y.arrayminus, [0.1, 0.2])
    np.testing.assert_allclose(fig.data[3].y, [1.4, 3.9])


def test_acceptance_by_position_draws_measured_and_iid():
    df = pd.DataFrame(
        {"position": [1, 2, 3], "measured": [0.8, 0.6, 0.4], "iid": [0.7, 0.49, 0.343]}
    )
    fig = figures.acceptance_by_position(df)
    np.testing.assert_allclose(fig.data[0].y, [0.8, 0.6, 0.4])
    np.testing.assert_allclose(fig.data[1].y, [0.7, 0.49, 0.343])


# ------------------------------------------------------------------------------- presets


def test_preset_prefers_a_chain_prior_for_the_same_target():
    models = default_models()
    prior = pick_prior(load_acceptance_priors(), "chat", "eagle", models["llama-3.3-70b"])
    # Meta's production EAGLE chain of 3 on Llama-3.3-70B, data/acceptance_priors.csv.
    assert prior.alpha == pytest.approx(0.797)
    assert "chain" in prior.hint.lower() and prior.k == 3


def test_preset_never_invents_a_figure():
    models = default_models()
    priors = load_acceptance_priors()
    assert pick_prior(priors, "creative", "eagle", models["llama-3.3-70b"]) is None
    assert pick_prior(priors, "code", "mtp", models["deepseek-v3"]) is None


def test_preset_derives_alpha_from_tau_when_only_tau_is_published():
    rows = [{"workload": "chat", "method": "eagle", "k": "3", "mean_accepted_tokens": "2.5"}]
    prior = pick_prior(rows, "chat", "eagle", None)
    assert prior.derived_alpha
    assert float(tau_iid(prior.alpha, 3)) == pytest.approx(2.5, abs=0.01)


# ------------------------------------------------------------------------------- report


def test_report_csv_round_trips_every_column_with_units():
    rows = [
        {**BASE, "k": 3, "batch_size": 16, "acceptance_rate": 0.8},
        {**BASE, "method": "none", "batch_size": 16},
    ]
    report = add_economics(predict(pd.DataFrame(rows)), 1_000_000)
    text = report_csv(report)
    head = text.splitlines()[0]
    assert "speedup [x]" in head and "spec_tpot_ms [ms]" in head
    assert "cost_per_mtok_spec [$/1M tokens]" in head
    back = read_report_csv(text)
    assert list(back.columns) == list(report.columns)
    for col in report.columns:
        if col in UNITS and col not in ("fits", "acceptance_per_position"):
            np.testing.assert_array_equal(
                back[col].to_numpy(dtype=float), report[col].to_numpy(dtype=float), err_msg=col
            )
    assert back["target"].tolist() == ["llama-3.3-70b", "llama-3.3-70b"]


def test_units_strip_back_to_column_names():
    assert header("speedup") == "speedup [x]"
    assert header("target") == "target"
    assert strip_unit("cost_per_mtok_spec [$/1M tokens]") == "cost_per_mtok_spec"


def test_add_economics_counts_whole_replicas():
    pred = predict(pd.DataFrame([{**BASE, "k": 3, "batch_size": 16, "acceptance_rate": 0.8}]))
    out = add_economics(pred, 2_000_000).iloc[0]
    demand = 2_000_000 * 256 / 86400
    assert out["demand_tok_s"] == pytest.approx(demand)
    assert out["replicas_spec"] == math.ceil(demand / pred["spec_tok_s"].iloc[0])
    assert out["monthly_saving_usd"] == pytest.approx(
        out["monthly_cost_baseline_usd"] - out["monthly_cost_spec_usd"]
    )


def test_launch_config_text_has_every_section():
    text = launch_config_text(
        title="t",
        vllm="vllm serve x",
        sglang="python -m sglang.launch_server",
        vllm_schedule=[[1, 16, 3], [17, 64, 1]],
        trtllm_schedule={16: 3, 64: 1},
    )
    assert "vllm serve x" in text and "sglang" in text
    assert "[[1, 16, 3], [17, 64, 1]]" in text
    assert '{"16": 3, "64": 1}' in text


def test_best_k_chart_has_whole_k_ticks_and_no_zero_labels():
    """Issue 27, Layout: fractional ticks on an integer K axis and "0" on empty bars."""
    import pandas as pd

    from app import figures

    best = pd.DataFrame(
        {
            "batch_size": [1, 2, 4],
            "best_k": [3, 1, 0],
            "speedup": [1.5, 1.1, 1.0],
            "meets_slo": [True, True, True],
            "fits": [True, True, True],
            "spec_tok_s": [10.0, 20.0, 30.0],
        }
    )
    fig = figures.best_k_by_batch(best)
    assert fig.layout.yaxis.dtick == 1
    assert list(fig.data[0].text) == ["3", "1", ""]


def test_a_log_latency_axis_within_one_decade_has_three_visible_ticks():
    """Issue 27, Layout: the Profiles chart's log axis showed one tick (500) for latencies of
    180-750 ms; the ticks are now inside the axis's own range, at least three of them."""
    measured = pd.DataFrame(
        {
            "query_len": [1, 1, 1],
            "batch": [1, 2, 4],
            "median_ms": [250.0, 400.0, 600.0],
            "p10_ms": [180.0, 300.0, 500.0],
            "p90_ms": [300.0, 750.0, 700.0],
        }
    )
    predicted = pd.DataFrame(
        {"query_len": [1, 1], "batch": [1, 4], "ms": [240.0, 620.0], "curve": "fitted roofline"}
    )
    axis = figures.profile_latency(measured, predicted).layout.yaxis
    low, high = 10 ** axis.range[0], 10 ** axis.range[1]
    shown = [t for t in axis.tickvals if low <= t <= high]
    assert len(shown) >= 3, (axis.tickvals, low, high)
