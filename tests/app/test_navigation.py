"""Every page of the navigation opens without an exception, and the sidebar says which
profile calibrates the latency model."""

from __future__ import annotations

from pathlib import Path

import pytest

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
