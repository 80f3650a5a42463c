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
    table = at.dataframe[-1].value
    assert set(table["arm"]) == {"baseline", "spec"}
    assert len(table) == 6
    # A request rate sets no concurrency: the empty column is not shown.
    assert "rate" in table and "concurrency" not in table
    tpot = figs["load_tpot"]
    p99 = next(t for t in tpot["data"] if t["name"] == "spec P99")
    rows = table[table["arm"] == "spec"].sort_values("rate")
    np.testing.assert_allclose(p99["y"], rows["tpot_p99_ms"].to_numpy(), rtol=1e-3)
    assert at.get("download_button")


def _table(loads, base, spec, kind="rate"):
    n = len(loads)
    return pd.DataFrame(
        {
            "arm": ["baseline", "spec"] * n,
            "rate": [x for x in loads for _ in "ab"] if kind == "rate" else [None] * 2 * n,
            "concurrency": [x for x in loads for _ in "ab"] if kind != "rate" else [None] * 2 * n,
            "tpot_p99_ms": [v for pair in zip(base, spec, strict=True) for v in pair],
        }
    )


def test_the_tail_crossing_is_interpolated_between_the_sampled_loads():
    """Issue 27, wrong answer 3: the first sampled load where speculation was worse was
    reported as a crossing; here speculation is better at 1 and 2, worse at 4: the P99s
    cross where the difference is 0, a sixth of the way from 2 to 4."""
    table = _table([1, 2, 4], [10, 12, 20], [6, 11, 25])
    verdict = figures_load.tail_verdict(table, "requests/s")
    assert verdict.kind == "beyond" and verdict.at == pytest.approx(2 + 2 / 6)
    assert verdict.text.startswith("Beyond 2.3 requests/s, speculation makes the P99 TPOT")


def test_worse_only_at_the_lowest_load_is_not_beyond_it():
    """70B EAGLE-3, concurrency 1-512: worse at 1 only, better at the 7 higher loads; the
    page said "beyond 1 request in flight"."""
    loads = [1, 74, 147, 220, 293, 366, 439, 512]
    base = [16.1, 30, 40, 50, 60, 70, 80, 90]
    spec = [16.5, 20, 25, 30, 35, 40, 45, 50]
    verdict = figures_load.tail_verdict(_table(loads, base, spec, "c"), "requests in flight")
    assert verdict.kind == "below"
    assert "Beyond" not in verdict.text and "below 4 requests in flight" in verdict.text


@pytest.mark.parametrize(
    ("spec", "kind", "says"),
    [
        ([11, 13, 21], "all", "at every load sampled"),
        ([6, 11, 19], "none", "at no load"),
    ],
)
def test_every_load_or_none_is_said_so(spec, kind, says):
    verdict = figures_load.tail_verdict(_table([0.5, 2, 4], [10, 12, 20], spec), "requests/s")
    assert verdict.kind == kind and says in verdict.text


def test_the_crossing_is_a_plain_rounded_number():
    table = _table([10.0, 18.643, 27.286], [10, 12, 20], [6, 11.999999, 25])
    text = figures_load.tail_verdict(table, "requests/s").text
    assert "18.643" not in text and "Beyond 19 requests/s" in text


def test_missing_arms_or_nan_give_no_verdict_not_an_error():
    table = _table([1, 2, 4], [10, 12, 20], [6, np.nan, 25])
    assert figures_load.tail_verdict(table[table["arm"] == "spec"], "requests/s") is None
    verdict = figures_load.tail_verdict(table, "requests/s")
    assert verdict.kind == "beyond" and 1 < verdict.at < 4


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
    # Three loads per arm, and the highest once more with another seed (the P99 check).
    assert sorted(ran) == [0, 0, 0, 0, 3, 3, 3, 3]
    before = at.dataframe[-1].value
    ran.clear()
    at.number_input(key="load_k").set_value(5).run()
    assert not at.exception
    assert ran == [5, 5, 5, 5]  # the baseline's runs are the ones already made
    after = at.dataframe[-1].value
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
    table = at.dataframe[-1].value
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
    table = at.dataframe[-1].value
    assert set(table["arm"]) == {"baseline"} and len(table) == 2
    warned = " ".join(w.value for w in at.warning).replace("\\", "")
    assert (
        "Only the baseline is simulated (cannot run with speculation: the draft's weights" in warned
    )
    assert not at.success
    assert not [w for w in at.warning if "makes the P99 TPOT worse" in w.value]


def test_the_page_says_how_much_another_seed_moves_the_p99(app):
    at = app("load", query={"load_points": 2, "load_requests": 100})
    text = " ".join(c.value for c in at.main.caption)
    assert "A rerun with another seed moves the P99 TPOT at the highest load by" in text


def test_the_pages_defaults_are_the_clis(app):
    """Issue 27: one default for `simulator serve` and this page (requests, lengths and
    their spread, acceptance spread by method)."""
    from simulator.cli.main import make_parser
    from simulator.serving.spread import default_acceptance_spread

    cli = make_parser().parse_args(["serve", "--in", "x.csv", "--out", "y.csv"])
    at = app("load", state={"load_points": 2})
    assert at.number_input(key="load_requests").value == cli.requests
    assert at.selectbox(key="length_kind").value == cli.lengths
    assert at.number_input(key="acceptance_spread").value == default_acceptance_spread("eagle")


def test_the_points_table_beside_the_charts_shows_what_fits_half_a_page(app):
    """Issue 27, Layout: the points table beside the goodput chart was clipped (eleven
    columns in half a page); it shows the P99s and goodput, the full table is below."""
    at = app("load", state={"load_points": 3, "load_requests": 100})
    brief, full = at.table[0].value, at.dataframe[-1].value
    assert list(brief.columns) == ["arm", "req/s", "P99 TPOT ms", "P99 TTFT ms", "goodput req/s"]
    assert len(brief) == len(full) and len(full.columns) > len(brief.columns)


def test_the_acceptance_spread_in_force_is_shown_with_its_cap(app):
    """Issue 34, smaller defects: the spread was capped silently where a wider one would
    pile requests at 0 or 1. The page says the figure in force and the cap."""
    from simulator.serving.engine import max_acceptance_spread

    at = app("load", query={"acceptance_rate": "0.95", "acceptance_spread": "0.4"})
    cap = max_acceptance_spread(0.95)
    text = " ".join(c.value for c in at.caption).replace("\\", "")
    assert f"In force: s.d. {cap:.3f}" in text and "0.40 entered" in text
    wide_ok = app("load", query={"acceptance_rate": "0.95", "acceptance_spread": "0.01"})
    text = " ".join(c.value for c in wide_ok.caption).replace("\\", "")
    assert "In force: s.d. 0.010" in text
