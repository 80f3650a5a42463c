"""Profiles page: uploads are validated one by one, a bad one is reported inline, and the
chosen profile calibrates the other pages."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from simulator import predict
from simulator.inputs.profile import MAX_PROFILE_BYTES, load_profile
from simulator.model.calibration import Calibration
from tests.app.conftest import shown


def _upload(at, files):
    at.file_uploader(key="profile_upload").set_value(files).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_page_opens_with_or_without_bundled_profiles(app):
    at = app("profiles")
    assert not at.error
    # Issue 34, smaller defects: "none: catalog roofline" hid that the pages price on the
    # engine's kernel tables wherever they cover the GPU.
    assert at.selectbox(key="calibrate_with").value == (
        "none: kernel tables where they cover the GPU, else the roofline"
    )


def test_json_and_csv_uploads_load_and_plot_against_the_roofline(
    app, charts, profile_json, profile_csv
):
    at = app("profiles")
    _upload(
        at,
        [
            ("cpu.json", profile_json, "application/json"),
            ("cpu.csv", profile_csv, "text/csv"),
        ],
    )
    assert not at.error
    assert len([s for s in at.success if "Test CPU" in s.value]) == 2
    assert {"uploaded: cpu.json", "uploaded: cpu.csv"} <= set(
        at.selectbox(key="calibrate_with").options
    )
    at.selectbox(key="plot_profile").set_value("uploaded: cpu.json").run()
    fig = charts(at)["profile_latency"]
    measured = [t for t in fig["data"] if t["name"].startswith("measured")]
    assert [t["name"] for t in measured] == ["measured q=1", "measured q=4"]
    rows = load_profile(profile_json, name="cpu.json").measurements_for("tiny")
    first = rows[(rows["context_len"] == 128) & (rows["query_len"] == 1)]
    np.testing.assert_allclose(measured[0]["y"], first["median_ms"].to_numpy())
    assert any(t["name"].startswith("fitted roofline") for t in fig["data"])


def test_malformed_uploads_show_the_loaders_message_and_the_rest_keeps_working(
    app, charts, profile_json
):
    doc = json.loads(profile_json)
    doc["schema"] = "specplan.profile/v0"
    bad_row = json.loads(profile_json)
    bad_row["measurements"][3]["median_ms"] = "fast"
    at = app("profiles")
    _upload(
        at,
        [
            ("broken.json", b"{not json", "application/json"),
            ("old.json", json.dumps(doc).encode(), "application/json"),
            ("row.json", json.dumps(bad_row).encode(), "application/json"),
            ("binary.csv", b"\xff\xfe\x00garbage", "text/csv"),
            ("good.json", profile_json, "application/json"),
        ],
    )
    errors = [shown(e.value) for e in at.error]
    assert len(errors) == 4
    assert any("broken.json" in e and "not valid JSON" in e for e in errors)
    assert any("old.json" in e and "schema" in e for e in errors)
    assert any("row.json" in e and "measurements[3].median_ms" in e for e in errors)
    assert any("binary.csv" in e and "UTF-8" in e for e in errors)
    assert "uploaded: good.json" in at.selectbox(key="calibrate_with").options
    assert "uploaded: broken.json" not in at.selectbox(key="calibrate_with").options
    assert "profile_latency" in charts(at)


def test_oversized_upload_is_refused_before_parsing(app):
    at = app("profiles")
    _upload(at, [("huge.json", b" " * (MAX_PROFILE_BYTES + 1), "application/json")])
    assert any("huge.json" in e.value and "limit" in e.value for e in at.error)


def test_chosen_profile_calibrates_the_roi_page(app, profile_json):
    at = app("profiles")
    _upload(at, [("cpu.json", profile_json, "application/json")])
    at.selectbox(key="calibrate_with").set_value("uploaded: cpu.json").run()
    assert any("Calibrated by" in c.value for c in at.sidebar.caption)
    assert any("Fit:" in c.value for c in at.caption)
    for key, value in {
        "target": "tiny",
        "gpu": "cpu",
        "num_gpus": 1,
        "method": "none",
        "prompt_len": 100,
        "output_len": 56,
        "batch_size": 8,
    }.items():
        at.session_state[key] = value
    at.switch_page("views/roi.py").run()
    assert not at.exception, [e.value for e in at.exception]
    row = at.session_state["roi_row"]
    cal = Calibration.from_profiles([load_profile(profile_json, name="cpu.json")])
    expected = predict(
        pd.DataFrame(
            [
                {
                    "target": "tiny",
                    "gpu": "cpu",
                    "method": "none",
                    "batch_size": 8,
                    "prompt_len": 100,
                    "output_len": 56,
                    "gpu_hourly_usd": np.nan,
                }
            ]
        ),
        calibration=cal,
    ).iloc[0]
    # Context 100 + 56/2 = 128 tokens, batch 8, q 1: a measured point of the profile.
    assert row["latency_source"] == expected["latency_source"] == "target:measured"
    assert row["baseline_tpot_ms"] == pytest.approx(expected["baseline_tpot_ms"])
    # The measured forward, plus the prefill and host cost of a serving engine's step.
    assert row["target_step_ms"] == pytest.approx(0.25 + 0.01 * 8 * (1 + 128 / 512))
    assert row["baseline_tpot_ms"] == pytest.approx(
        row["target_step_ms"] + row["prefill_ms_baseline"] + row["engine_ms_baseline"]
    )


def test_fitted_roofline_line_is_what_predict_uses_beyond_the_grid(profile_json):
    from app import sim

    profile = load_profile(profile_json, name="cpu.json")
    line = sim.profile_prediction("test:cpu.json", profile, "tiny", 128, [128, 256], [1])
    fitted = line[line["curve"] == "fitted roofline"].sort_values("batch")
    cal = Calibration.from_profiles([profile])
    rows = [
        {"target": "tiny", "gpu": "cpu", "method": "none", "batch_size": b, "prompt_len": 100}
        for b in (128, 256)
    ]
    # Context 100 + 56/2 = 128; batches 128 and 256 lie beyond the measured 1..64.
    expected = predict(pd.DataFrame(rows).assign(output_len=56), calibration=cal)
    assert set(expected["latency_source"]) == {"target:fitted"}
    np.testing.assert_allclose(fitted["ms"], expected["target_step_ms"], rtol=1e-9)


def test_a_profile_with_the_draft_in_the_loop_plots_it_against_the_isolated_step(app, charts):
    from tests.app.conftest import sample_profile_doc

    doc = sample_profile_doc()
    target = json.loads(json.dumps(doc["models"][0]))
    target["id"] = "specplan-byte-target"
    doc["models"].append(target)
    for r in list(doc["measurements"]):
        doc["measurements"].append({**r, "model": "specplan-byte-target"})
    doc["draft_in_loop"] = [
        {
            "draft": "tiny",
            "target": "specplan-byte-target",
            "batch": b,
            "context_len": 512,
            "position": i,
            "query_len": 2 if i == 1 else 1,
            "median_ms": ms,
            "p10_ms": ms * 0.9,
            "p90_ms": ms * 1.1,
            "repeats": 30,
        }
        for b in (1, 4)
        for i, ms in zip((1, 2, 3), (0.9, 0.6, 0.5), strict=True)
    ]
    at = app("profiles")
    _upload(at, [("pair.json", json.dumps(doc).encode(), "application/json")])
    at.selectbox(key="plot_profile").set_value("uploaded: pair.json").run()
    assert not at.exception and not at.error
    fig = charts(at)["draft_in_loop"]
    names = [t["name"] for t in fig["data"]]
    assert names == [
        "in the loop, B=1",
        "isolated step, B=1",
        "in the loop, B=4",
        "isolated step, B=4",
    ]
    np.testing.assert_allclose(fig["data"][0]["y"], [0.9, 0.6, 0.5])
    # The dotted line is the profile's own q = 1 step of the draft at that batch and context.
    iso = 0.25 + 0.01 * 1 * 1 * 2.0
    np.testing.assert_allclose(fig["data"][1]["y"], [iso, iso])
    caption = " ".join(c.value for c in at.caption)
    assert f"{2.0 / (3 * iso):.2f}" in caption


def test_text_from_an_upload_shows_literally_and_makes_no_image(app):
    from tests.app.conftest import sample_profile_doc

    doc = sample_profile_doc()
    doc["device"]["name"] = "![t](http://127.0.0.1:9/pixel.png) <img src=x>"
    at = app("profiles")
    _upload(
        at, [("![x](http://127.0.0.1:9/f.png).json", json.dumps(doc).encode(), "application/json")]
    )
    message = next(s.value for s in at.success)
    # The image syntax is escaped: Markdown shows the characters, the browser fetches nothing.
    import re

    assert not re.search(r"(?<!\\)[!\[\]<>]", message), message
    assert shown(message).startswith("![x](http://127.0.0.1:9/f.png).json: ![t](http")


def test_plain_leaves_nothing_for_markdown_to_read():
    from app.text import WORD_JOINER, plain

    text = "![i](http://h/p.png) <b>x</b> [l](www.h.org) a@h.org :red[x] $x$ **b** _i_ # h |t|\nz"
    escaped = plain(text)
    # Every character Markdown or Streamlit reads as markup is escaped; bare URLs, www. and
    # e-mail addresses carry an invisible word joiner; line breaks are spaces.
    assert not re.search(r"(?<!\\)[!\[\]<>:&$*_~#|`]", escaped), escaped
    assert "://" not in escaped and "www." not in escaped and f"{WORD_JOINER}@" in escaped
    assert "\n" not in escaped
    assert shown(escaped) == text.replace("\n", " ")


def test_an_upload_logs_no_session_state_warning(app, profile_json, state_warnings):
    """Issue 27: a new upload is put in the plot's Profile box through the session state;
    the box must not also be given a default, or Streamlit logs a warning."""
    at = _upload(app("profiles"), [("cpu.json", profile_json, "application/json")])
    assert at.selectbox(key="plot_profile").value == "uploaded: cpu.json"
    _upload(at, [("cpu.json", profile_json, "application/json"), ("cpu.csv", b"", "text/csv")])
    assert not [r for r in state_warnings if "default value" in r], state_warnings
