"""Reports page: the editable scenario table runs through the simulator, and the CSV the
download button serves parses back into the numbers the page shows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from simulator import OUTPUT_COLUMNS, predict
from simulator.inputs.scenarios import INPUT_COLUMNS
from simulator.planning.reports import read_report_csv
from tests.app.conftest import default_positions, shown, visit_and_return

SHOWN_TO_COLUMN = {
    "speedup [x]": "speedup",
    "TPOT [ms]": "spec_tpot_ms",
    "tok/s per user": "spec_tok_s_per_user",
    "tok/s per replica": "spec_tok_s",
    "max concurrency": "max_concurrency_spec",
    "$/1M tok before": "cost_per_mtok_baseline",
    "$/1M tok after": "cost_per_mtok_spec",
    "$/month": "monthly_cost_spec_usd",
    "saving $/month": "monthly_saving_usd",
}


def _results(at) -> pd.DataFrame:
    """The results table (the other dataframe on the page is the editor)."""
    return next(d for d in at.dataframe if d.key != "report_editor").value


def _edit(at, edited=None, added=None, deleted=None):
    at.session_state["report_editor"] = {
        "edited_rows": edited or {},
        "added_rows": added or [],
        "deleted_rows": deleted or [],
    }
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_table_is_prefilled_from_the_scenario(app):
    at = app("reports", query={"batch_size": "32", "k": "4"})
    table = at.data_editor[0].value
    # The baseline and the ROI page's K and batch (the Sizer's operating point, K=4 at
    # batch 32 here too, is that row).
    assert table["method"].tolist() == ["none", "eagle"]
    assert table["batch_size"].tolist()[:2] == [32, 32]
    assert table["k"].tolist()[:2] == [0, 4]
    # The chat x EAGLE prior (tau 2.94 at K=3), planned by position along the EAGLE decay.
    rates = [float(x) for x in table["acceptance_per_position"].iloc[1].split(";")]
    assert len(rates) == 16 and rates == sorted(rates, reverse=True)
    assert 1 + sum(rates[:3]) == pytest.approx(2.94, abs=1e-4)
    assert at.data_editor[0].editing_mode == "dynamic"


def test_downloaded_csv_parses_back_into_the_numbers_shown(app):
    at = app("reports")
    assert not at.error
    shown = _results(at)
    csv = read_report_csv(at.session_state["report_csv"])
    for col in (*INPUT_COLUMNS, *OUTPUT_COLUMNS, "monthly_saving_usd", "preflight"):
        assert col in csv.columns, col
    assert len(csv) == len(shown)
    for label, col in SHOWN_TO_COLUMN.items():
        np.testing.assert_allclose(
            csv[col].to_numpy(dtype=float), shown[label].to_numpy(dtype=float), err_msg=col
        )
    header = at.session_state["report_csv"].splitlines()[0]
    assert "speedup [x]" in header and "spec_tpot_ms [ms]" in header
    urls = [b.proto.url for b in at.get("download_button")]
    assert any(u.endswith(".csv") for u in urls) and any(u.endswith(".txt") for u in urls)


def test_editing_a_row_reruns_the_simulator(app):
    at = app("reports")
    _edit(at, edited={1: {"k": 5, "batch_size": 64}})
    shown = _results(at)
    expected = predict(
        pd.DataFrame(
            [
                {
                    "target": "llama-3.3-70b",
                    "method": "eagle",
                    "gpu": "h100-sxm",
                    "num_gpus": 4,
                    "k": 5,
                    "batch_size": 64,
                    "acceptance_per_position": default_positions(),
                }
            ]
        )
    ).iloc[0]
    assert shown["K"].iloc[1] == 5
    assert shown["speedup [x]"].iloc[1] == pytest.approx(expected["speedup"])
    csv = read_report_csv(at.session_state["report_csv"])
    assert csv["speedup"].iloc[1] == pytest.approx(expected["speedup"])
    assert "vllm serve" in at.session_state["report_launch_config"]
    assert '"num_speculative_tokens":5' in at.session_state["report_launch_config"]


def test_bad_cell_names_row_and_field_and_the_page_survives(app):
    at = app("reports")
    _edit(at, edited={1: {"batch_size": 0}})
    assert any("row 2" in shown(e.value) and "batch_size" in shown(e.value) for e in at.error)
    _edit(at, edited={0: {"target": "no-such-model"}})
    assert any("row 1" in shown(e.value) and "target" in shown(e.value) for e in at.error)


def test_requests_per_day_past_the_limit_is_named_not_priced_as_infinite(app):
    # The editor's max_value stops a typed 1e308; a table handed over by other means must
    # not give an infinite demand and a NaN saving either.
    at = app("reports")
    _edit(at, edited={1: {"requests_per_day": 1e308}})
    assert any("row 2" in shown(e.value) and "requests_per_day" in shown(e.value) for e in at.error)


def test_added_rows_and_an_emptied_table(app):
    at = app("reports")
    _edit(
        at,
        added=[
            {
                "target": "llama-3.1-8b",
                "method": "draft_model",
                "draft": "llama-3.2-1b",
                "gpu": "l40s",
                "num_gpus": 1,
                "k": 4,
                "acceptance_rate": 0.7,
                "batch_size": 8,
                "prompt_len": 512,
                "output_len": 128,
            }
        ],
    )
    # The scenario's three rows (baseline, ROI's K and batch, the Sizer's point), then it.
    assert len(_results(at)) == 4
    assert read_report_csv(at.session_state["report_csv"])["gpu"].iloc[3] == "l40s"
    _edit(at, deleted=[0, 1, 2])
    assert any("table is empty" in i.value for i in at.info)


def _summary(at) -> str:
    return next(c.value for c in at.caption if "scenarios, each an alternative" in c.value)


def test_summary_names_the_row_with_the_largest_saving_not_a_sum(app):
    at = app("reports")
    _edit(at, added=[{**at.data_editor[0].value.iloc[1].to_dict(), "k": 2, "batch_size": 4}])
    saving = _results(at)["saving $/month"].to_numpy(dtype=float)
    assert len(saving) == 4 and (saving[1:] > 0).all()
    best = int(np.argmax(saving))
    text = _summary(at)
    assert f"row {best + 1} (eagle K=" in text
    assert f"${saving[best]:,.0f} a month" in text
    assert f"${np.nansum(saving):,.0f}" not in text and "all rows" not in text


def test_summary_with_no_saving_says_so(app):
    at = app("reports", query={"method": "none"})
    assert len(_results(at)) == 1
    assert "No row saves money" in _summary(at)


@pytest.mark.parametrize(
    "query",
    [
        # Only the speculative arm cannot run: a 3B draft beside an 8B target on an L4.
        {
            "target": "llama-3.1-8b",
            "method": "draft_model",
            "draft": "llama-3.2-3b",
            "gpu": "l4",
            "num_gpus": "1",
        },
        # Neither arm runs: DeepSeek-V3 in bf16 (its weights are released in fp8) on 8 H200s.
        {
            "target": "deepseek-v3",
            "method": "mtp",
            "gpu": "h200",
            "num_gpus": "8",
            "weight_dtype": "bf16",
        },
    ],
)
def test_a_scenario_where_no_k_runs_is_tabled_with_its_reason(app, query):
    """The 'best' K took the largest speedup of all-NaN speedups: pandas raised and the
    page showed only Streamlit's error box."""
    at = app("reports", query=query)
    table = at.data_editor[0].value
    assert table["k"].tolist() == [0, 1]
    status = _results(at)["status"].astype(str).tolist()
    assert status[1].startswith("cannot run")
    assert status[0] == ("ok" if query["target"] == "llama-3.1-8b" else status[1])


def test_edits_survive_a_visit_to_another_page(app):
    """Streamlit forgets an editor's edits once its page is left; the table the user
    edited must still be there when they come back, and Reset must still reset it."""
    at = app("reports")
    added = {**at.data_editor[0].value.iloc[0].to_dict(), "batch_size": 5}
    _edit(at, edited={1: {"batch_size": 7}}, added=[added], deleted=[2])
    assert _results(at)["batch"].tolist() == [16, 7, 5]
    visit_and_return(at, "reports")
    table = at.data_editor[0].value  # the editor's starting table (AppTest shows no edits)
    assert table["batch_size"].tolist() == [16, 7, 5]
    assert _results(at)["batch"].tolist() == [16, 7, 5]
    # An edit on top of them applies once, and a second visit keeps it too.
    _edit(at, edited={0: {"batch_size": 9}})
    assert _results(at)["batch"].tolist() == [9, 7, 5]
    visit_and_return(at, "reports", via="sizer")
    table = at.data_editor[0].value
    assert table["batch_size"].tolist() == [9, 7, 5]
    at.button(key="report_reset").click()
    at.run()
    # Prefilled again: the scenario's two rows and the Sizer's operating point.
    table = at.data_editor[0].value
    assert table["batch_size"].tolist()[:2] == [16, 16]
    assert not {5, 7, 9} & set(table["batch_size"])
    assert _results(at)["batch"].tolist() == table["batch_size"].tolist()


def test_a_row_that_cannot_run_gets_its_reason_not_a_launch_command(app):
    """Llama 3.3 70B on one L4 (24 GB): the launch config held a vLLM command that fails at
    start-up; the row's section now says why there is none. The row that runs keeps its,
    the sidebar's engine's (vLLM by default; issue 34)."""
    at = app("reports")
    _edit(at, edited={1: {"gpu": "l4", "num_gpus": 1}})
    sections = at.session_state["report_launch_config"].split("# SpecPlan launch configuration: ")
    row1, row2 = sections[1], sections[2]
    assert "vllm serve" in row1 and "python -m sglang" not in row1
    assert "vllm serve" not in row2 and "sglang" not in row2
    assert "# No command: cannot run: the target's weights and reserves exceed" in row2


def test_launch_commands_agree_with_the_sizers_max_model_len(app):
    """Issue 27: Reports launched --max-model-len 1280 (prompt + output) where the Sizer
    launched 8192 for the same scenario."""
    at = app("sizer")
    sizer = " ".join(c.value for c in at.code)
    at.switch_page("views/reports.py").run()
    assert "--max-model-len 8192" in sizer
    assert "--max-model-len 8192" in at.session_state["report_launch_config"]
    assert "--max-model-len 1280" not in at.session_state["report_launch_config"]


def test_the_results_grid_puts_the_decision_columns_first(app):
    """Issue 27, Layout: cost after, replicas, $/month, saving and status sat off to the
    right of the results grid. Issue 34: at 1024 px with the sidebar open (a 564 px grid)
    the money columns still needed a sideways scroll. The decision columns come first, with
    widths that fit that grid, and the ranges right after status."""
    import json

    at = app("reports")
    grid = next(d for d in at.dataframe if "speedup [x]" in d.value.columns)
    results = grid.value
    decision = ["#", "method", "K", "batch", "speedup [x]", "replicas", "$/month"]
    decision += ["saving $/month"]
    assert list(results.columns[: len(decision) + 4]) == [
        *decision,
        "status",
        "speedup range",
        "replicas ± error",
        "$/month ± error",
    ]
    config = json.loads(grid.proto.columns)
    widths = [config[c]["width"] for c in decision]
    assert all(isinstance(w, int) for w in widths) and sum(widths) <= 564, widths
    assert results["#"].tolist() == list(range(1, len(results) + 1))


def test_a_setup_that_cannot_run_gets_the_smallest_gpu_count_in_its_checklist(app):
    """Issue 27: a setup that cannot run showed 'K = 1' and 'alpha 0.79 vs break-even
    0.02' in its checklist and suggested no GPU count. 70B with EAGLE on one L4: no K or
    alpha verdict, and the fewest L4s per replica (tensor parallel) that hold it."""
    at = app("reports")
    _edit(at, edited={1: {"gpu": "l4", "num_gpus": 1}})
    at.selectbox(key="report_check_row").set_value(2).run()
    edited = at.session_state["report_rows_edited"].iloc[1]
    row = {c: v for c, v in edited.items() if c in INPUT_COLUMNS and pd.notna(v) and v != ""}
    runs = [
        n
        for n in (2, 4, 8, 16)
        if predict(pd.DataFrame([{**row, "gpu": "l4", "num_gpus": n}]))["status"].iloc[0] == "ok"
    ]
    text = " ".join(c.value for c in at.main.caption).replace("\\", "")
    assert "alpha" not in text and "K = " not in text, text
    assert f"{runs[0]} x NVIDIA L4 24GB per replica (tensor parallel {runs[0]}) hold it" in text


def test_the_operating_point_row_comes_from_the_scenario_not_another_pages_state(app):
    """Issue 27: Reports prefilled its third row from the Sizer's result left in the
    session, so the same link gave another table after a visit to the Sizer. The row is
    the Sizer's operating point for the scenario, found from the scenario itself."""
    from simulator.planning.sizer import size

    fresh = app("reports").session_state["report_rows"]
    choice = size(
        {**fresh.iloc[1][["target", "method", "gpu", "num_gpus"]].to_dict(), **_sizer_base()},
        k_max=8,
        slo_tpot_ms=20.0,
        demand_tok_s=2_000_000 * 256 / 86400,
    ).choice
    assert choice["k"] > 0
    row = fresh.iloc[-1]
    assert (int(row["k"]), int(row["batch_size"])) == (choice["k"], choice["batch_size"])
    # What another page left in the session does not change the table.
    stale = {"choice": {**choice, "k": 5, "batch_size": 7}}
    left = app("reports", state={"sizer_result": stale}).session_state["report_rows"]
    pd.testing.assert_frame_equal(left, fresh)
    via_sizer = app("sizer")
    via_sizer.switch_page("views/reports.py")
    via_sizer.run()
    pd.testing.assert_frame_equal(via_sizer.session_state["report_rows"], fresh)


def _sizer_base() -> dict:
    return {
        "weight_dtype": "bf16",
        "kv_dtype": "bf16",
        "prompt_len": 1024,
        "output_len": 256,
        "acceptance_per_position": default_positions(),
        "gpu_memory_utilization": 0.9,
    }


def test_replicas_and_cost_carry_the_validated_error_as_ranges(app):
    """Issue 27: the table's replicas and $/month appeared exact. Each row carries them at
    the model's median |error| in its batch's bucket (and, issue 34, the acceptance band's
    tokens/s at its ends), in the grid and in the CSV."""
    from simulator.planning.uncertainty import get_money_range, get_speedup_error_by_batch
    from simulator.validation.published import load_published, score

    at = app("reports")
    csv = read_report_csv(at.session_state["report_csv"])
    scored = score(load_published("data/validation/published.csv"))
    err = get_speedup_error_by_batch(csv["batch_size"].to_numpy(), scored)
    r = get_money_range(
        demand_tok_s=csv["demand_tok_s"].to_numpy(),
        baseline_tok_s=csv["baseline_tok_s"].to_numpy(),
        spec_tok_s=csv["spec_tok_s"].to_numpy(),
        hourly_usd_per_gpu=csv["gpu_hourly_usd"].to_numpy(),
        num_gpus=csv["num_gpus"].to_numpy(),
        error=err,
        acceptance_ends=tuple(
            csv[f"spec_tok_s_at_alpha_{end}"].fillna(csv["spec_tok_s"]).to_numpy()
            for end in ("low", "high")
        ),
    )
    spec = csv["method"] != "none"
    np.testing.assert_allclose(csv.loc[spec, "speedup_error"], err[spec])
    np.testing.assert_allclose(csv.loc[spec, "replicas_spec_high"], r.replicas_spec[0][spec])
    np.testing.assert_allclose(csv.loc[spec, "replicas_spec_low"], r.replicas_spec[1][spec])
    np.testing.assert_allclose(
        csv.loc[spec, "monthly_cost_spec_high_usd"], r.monthly_cost_spec_usd[0][spec]
    )
    shown = _results(at)
    i = int(np.flatnonzero(spec.to_numpy())[0])
    lo, hi = int(r.replicas_spec[1][i]), int(r.replicas_spec[0][i])
    assert shown["replicas ± error"].iloc[i] == (f"{lo}" if lo == hi else f"{lo}-{hi}")


def test_money_columns_read_as_dollars_like_their_ranges(app):
    """Stop 25's review: '$/month' showed a bare number ('12345') beside '$/month ±
    error' ('$11,000-$13,000'), so the two read as different units."""
    import json

    at = app("reports")
    grid = next(d for d in at.dataframe if d.key != "report_editor")
    config = json.loads(grid.proto.columns)
    for column in ("$/month", "saving $/month"):
        assert config[column]["type_config"]["format"] == "dollar", column


ISSUE_34 = {
    "target": "llama-3.3-70b",
    "method": "eagle3",
    "gpu": "h100-sxm",
    "num_gpus": "4",
    "batch_size": "32",
    "k": "3",
}


@pytest.mark.parametrize("engine", ["sglang", "trtllm"])
def test_reports_follow_the_sidebars_engine_and_temperature_as_roi_does(app, engine):
    """Issue 34, wrong answer 1: with SGLang chosen ROI said 1.65x and 6 -> 4 replicas for
    Llama-3.3-70B + EAGLE-3 on 4x H100 at batch 32; Reports, its CSV and a saved report
    said 1.91x and 5 -> 3 with engine=vllm. The editor, the CSV and the launch config now
    carry the sidebar's engine and temperature."""
    query = {**ISSUE_34, "engine": engine, "temperature": "0.7"}
    roi = app("roi", query=query).session_state["roi_row"]
    at = app("reports", query=query)
    table = at.data_editor[0].value
    assert table["engine"].tolist() == [engine] * len(table)
    assert table["temperature"].tolist() == [0.7] * len(table)
    csv = read_report_csv(at.session_state["report_csv"])
    assert csv["engine"].tolist() == [engine] * len(csv)
    spec = csv[(csv["k"] == 3) & (csv["batch_size"] == 32)].iloc[0]
    assert spec["speedup"] == pytest.approx(roi["speedup"], rel=1e-9)
    assert spec["replicas_spec"] == roi["replicas_spec"]
    assert spec["replicas_baseline"] == roi["replicas_baseline"]
    costs = next(d.value for d in at.dataframe if "how it was set" in d.value.columns)
    assert "per head forward" in costs["charged"].tolist()
    launch = at.session_state["report_launch_config"]
    if engine == "sglang":
        assert "python -m sglang.launch_server" in launch and "vllm serve" not in launch
    else:
        assert "trtllm-serve" in launch and "speculative_config:" in launch
        assert "decoding_type: Eagle3" in launch and "vllm serve" not in launch


def test_the_report_range_carries_the_acceptance_band_as_roi_does(app):
    """Issue 34, wrong answer 2 on Reports: its ranges held the step-time error alone
    while ROI's held the acceptance's band too. The 70B EAGLE-3 prior is a dynamic tree's
    planned as a chain: the report row at ROI's K and batch gives ROI's speedup range, its
    α band and the reason, in the grid and the CSV, and its replicas follow the band."""
    from tests.app.test_roi import _range_caption, _speedup_span

    query = {**ISSUE_34, "k": "3"}
    roi_low, roi_high = _speedup_span(_range_caption(app("roi", query=query)))
    at = app("reports", query=query)
    csv = read_report_csv(at.session_state["report_csv"])
    row = csv[(csv["k"] == 3) & (csv["batch_size"] == 32) & (csv["method"] == "eagle3")]
    row = row.iloc[0]
    assert row["alpha_low"] < row["alpha_high"] - 0.05
    assert "planned as a chain" in row["acceptance_band"]
    assert f"{row['speedup_low']:.2f}" == f"{roi_low:.2f}"
    assert f"{row['speedup_high']:.2f}" == f"{roi_high:.2f}"
    step_only = row["spec_tok_s"] * (1 - row["speedup_error"])
    assert row["replicas_spec_high"] >= np.ceil(row["demand_tok_s"] / step_only)
    i = int(row.name)
    assert _results(at)["speedup range"].iloc[i] == f"{roi_low:.2f}x-{roi_high:.2f}x"
    basis = next(c.value for c in at.main.caption if "acceptance's own band" in c.value)
    assert f"α {row['alpha_low']:.3f}-{row['alpha_high']:.3f}" in basis.replace("\\", "")
    # An α typed into the table is no prior's: its range is the step-time error's alone.
    _edit(at, edited={i: {"acceptance_rate": 0.6, "acceptance_per_position": ""}})
    csv = read_report_csv(at.session_state["report_csv"])
    typed = csv.iloc[i]
    assert "taken as given" in typed["acceptance_band"] and np.isnan(typed["alpha_low"])
    assert typed["speedup_low"] == pytest.approx(typed["speedup"] * (1 - typed["speedup_error"]))
