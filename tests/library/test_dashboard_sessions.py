"""Two dashboard sessions on one server, on SQLite and on PostgreSQL: what one saves the
other lists without a restart; a name taken by one is refused to the other, clearly."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests.library.test_store import ROOT

ENTRY = ROOT / "app" / "streamlit_app.py"


@pytest.fixture
def dashboard(db_url, monkeypatch):
    """`dashboard(page)`: a new browser session on the Profiles (or another) page of a
    server whose library is `db_url`."""
    monkeypatch.setenv("SPECPLAN_DB_URL", db_url)

    def open_page(page: str, query: dict | None = None) -> AppTest:
        at = AppTest.from_file(str(ENTRY), default_timeout=60)
        for key, value in (query or {}).items():
            at.query_params[key] = value
        at.switch_page(f"views/{page}.py")
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        return at

    return open_page


def _save_scenario(at, name: str) -> AppTest:
    at.text_input(key="scenario_name:roi").set_value(name).run()
    at.button(key="scenario_save:roi").click().run()
    assert not at.exception
    return at


def test_what_one_session_saves_the_other_lists(dashboard):
    one = dashboard("roi", {"target": "llama-3.1-8b", "batch_size": "32"})
    two = dashboard("roi")
    assert any("No saved scenarios yet" in c.value for c in two.caption)
    _save_scenario(one, "8b at 32")
    two.run()  # the other session's next rerun, no restart
    assert two.selectbox(key="scenario_open:roi").options == ["8b at 32"]
    # The same name from the other session, for another scenario: refused, clearly.
    two.number_input(key="batch_size").set_value(64).run()
    _save_scenario(two, "8b at 32")
    assert any("a scenario named '8b at 32' is already kept" in e.value for e in two.error)
    one.run()
    assert one.selectbox(key="scenario_open:roi").options == ["8b at 32"]
    (link,) = one.link_button
    assert "batch_size=32" in link.proto.url
