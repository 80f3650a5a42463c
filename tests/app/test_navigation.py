"""Every page of the navigation opens without an exception, and the sidebar says which
profile calibrates the latency model."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.app.conftest import shown

VIEWS = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "app" / "views").glob("*.py"))


def test_every_view_is_in_the_navigation():
    entry = (Path(__file__).resolve().parents[2] / "app" / "streamlit_app.py").read_text()
    for view in VIEWS:
        assert f'"{view}.py"' in entry, view


@pytest.mark.parametrize("view", VIEWS)
def test_page_opens_cleanly(app, view):
    at = app(view)
    assert not at.exception
    assert at.title, view
    assert any("Latency:" in c.value or "Calibrated by" in c.value for c in at.sidebar.caption)


def _calibration_note(at) -> str:
    notes = [
        c.value for c in at.sidebar.caption if "Latency:" in c.value or "Calibrated" in c.value
    ]
    assert len(notes) == 1, notes
    return shown(notes[0])


def test_a_cpu_profile_does_not_claim_a_gpu_scenario(app, profile_json):
    at = app()
    at.switch_page("views/profiles.py").run()
    at.file_uploader(key="profile_upload").set_value(
        [("cpu.json", profile_json, "application/json")]
    ).run()
    at.selectbox(key="calibrate_with").set_value("uploaded: cpu.json").run()
    at.switch_page("views/roi.py").run()
    assert not at.exception, [e.value for e in at.exception]
    note = _calibration_note(at)
    assert at.selectbox(key="gpu").value == "h100-sxm"
    assert "does not apply to this scenario's GPU, h100-sxm" in note
    assert "catalog" in note and "Calibrated by" not in note
    assert at.session_state["roi_row"]["latency_source"] == "roofline"

    at.selectbox(key="gpu").set_value("cpu").run()
    note = _calibration_note(at)
    assert "Calibrated by **uploaded: cpu.json** (device: cpu)" in note
    assert "does not apply" not in note
    assert at.session_state["roi_row"]["latency_source"] != "roofline"


@pytest.mark.parametrize("view", VIEWS)
def test_every_page_takes_the_links_bundled_profile_and_keeps_it_in_the_link(app, view):
    at = app(view, query={"profile": "cpu/tiny.json"})
    assert "**bundled: cpu/tiny.json** (device: cpu)" in _calibration_note(at)
    assert at.query_params["profile"] == "cpu/tiny.json"
