"""Every page of the navigation opens without an exception, and the sidebar says which
profile calibrates the latency model."""

from __future__ import annotations

import pytest

from tests.app.conftest import ROOT, shown, visit_and_return

VIEWS = sorted(p.stem for p in (ROOT / "app" / "views").glob("*.py"))


def test_every_view_is_in_the_navigation():
    entry = (ROOT / "app" / "streamlit_app.py").read_text()
    for view in VIEWS:
        assert f'"{view}.py"' in entry, view


@pytest.mark.parametrize("view", VIEWS)
def test_no_page_prints_a_stray_string(view):
    """Streamlit's magic writes any bare expression of a page script onto the page: a
    docstring under a constant there showed as text above the Reports title."""
    import ast

    tree = ast.parse((ROOT / "app" / "views" / f"{view}.py").read_text())
    stray = [
        node.lineno
        for node in tree.body[1:]
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    ]
    assert not stray, f"{view}.py: bare strings at lines {stray}"


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
    # Not the profile's: the kernel tables price the h100-sxm, as without a profile.
    assert at.session_state["roi_row"]["latency_source"].startswith("kernels:")

    at.selectbox(key="gpu").set_value("cpu").run()
    note = _calibration_note(at)
    assert "Calibrated by **uploaded: cpu.json** (device: cpu)" in note
    assert "does not apply" not in note
    assert not at.session_state["roi_row"]["latency_source"].startswith(("roofline", "kernels:"))


@pytest.mark.parametrize("view", VIEWS)
def test_every_page_takes_the_links_bundled_profile_and_keeps_it_in_the_link(app, view):
    at = app(view, query={"profile": "cpu/tiny.json"})
    assert "**bundled: cpu/tiny.json** (device: cpu)" in _calibration_note(at)
    assert at.query_params["profile"] == "cpu/tiny.json"


def _inputs(at) -> dict:
    """Every keyed input of the page's main area (the sidebar's are bound to the link), by
    key: its widget."""
    found = {}
    for kind in ("number_input", "text_area", "slider", "selectbox", "multiselect"):
        for w in getattr(at.main, kind):
            if w.key and not w.disabled:
                found[w.key] = w
    return found


def _change(w) -> None:
    """Set `w` to a valid value other than its own."""
    kind = type(w).__name__
    if kind == "NumberInput":
        step = w.step or 1
        w.set_value(w.value + step if w.max is None or w.value + step <= w.max else w.value - step)
    elif kind == "TextArea":
        w.set_value((w.value or "") + "x")
    elif kind == "Slider":
        lo, hi = w.min, w.max
        w.set_value((lo, hi) if isinstance(w.value, tuple) else (hi if w.value != hi else lo))
    elif kind == "Selectbox":
        now = w.index
        if len(w.options) > 1:
            w.select_index(len(w.options) - 1 if now != len(w.options) - 1 else 0)
    elif kind == "Multiselect":
        w.set_value(w.options[:1] if list(w.value) != list(w.options[:1]) else w.options)


def _values(at) -> dict:
    return {key: w.value for key, w in _inputs(at).items()}


def _as_the_browser_writes_the_link(at) -> None:
    """AppTest has no frontend: put each bound input's value into the link, as Chromium's
    address bar holds it (tests/app/test_link_pages_browser.py checks the real one)."""
    for w in _inputs(at).values():
        key = getattr(w.proto, "query_param_key", "")
        if key and w.value is not None:
            value = w.value
            at.query_params[key] = (
                [str(v) for v in value] if isinstance(value, tuple) else str(value)
            )


@pytest.mark.parametrize("view", [v for v in VIEWS if v != "roi"])
def test_inputs_survive_a_visit_to_another_page(app, view):
    """Streamlit resets a widget whose page is left unless it persists its state: a typed
    SLO, a pasted scrape or a chosen filter must be as the user left it on return."""
    # The load page's inputs are bound to the link: a short run comes from the link.
    at = app(view, query={"load_points": 2, "load_requests": 100} if view == "load" else None)
    before = _values(at)
    for w in _inputs(at).values():
        _change(w)
    at.run()
    left = _values(at)
    changed = {key for key in left if key in before and left[key] != before[key]}
    assert changed, f"{view}: no input changed"
    _as_the_browser_writes_the_link(at)
    visit_and_return(at, view)
    back = _values(at)
    lost = {key: (left[key], back.get(key)) for key in changed if back.get(key) != left[key]}
    assert not lost, f"{view}: inputs reset on return (left, found): {lost}"


def test_no_page_script_shows_a_stray_string():
    """Streamlit's magic writes every bare string statement of a page script onto the
    page: a constant's docstring there showed 'The pre-flight checks that judge the K
    itself' above ROI's headline. Only a script's own docstring (first) is kept off."""
    import ast
    from pathlib import Path

    views = Path(__file__).resolve().parents[2] / "app" / "views"
    stray = []
    for path in sorted(views.glob("*.py")):
        body = ast.parse(path.read_text(encoding="utf-8")).body
        for node in body[1:]:
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                stray.append(f"{path.name}:{node.lineno}")
    assert stray == []
