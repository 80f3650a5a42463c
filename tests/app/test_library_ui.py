"""The library on the dashboard: what one session keeps, a new session (a restart, a
teammate) lists, calibrates with and reopens; without a database the pages still work and
say that nothing is kept."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest

from library import open_library
from library.kinds import save_profile


@pytest.fixture
def db(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'team.db'}"
    monkeypatch.setenv("SPECPLAN_DB_URL", url)
    monkeypatch.setenv("SPECPLAN_USER", "ana")
    return url


def _texts(elements) -> list[str]:
    return [e.value for e in elements]


def _table(at, column: str):
    """The frame of the first st.dataframe with this column (AppTest has no keys for them)."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def _upload_and_keep(at, data: bytes, name: str):
    at.file_uploader(key="profile_upload").set_value([("cpu.json", data, "application/json")])
    at.run()
    at.text_input(key="library_keep_name").set_value(name)
    at.text_input(key="library_keep_notes").set_value("first run")
    next(b for b in at.button if b.label == "Save to library").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_an_upload_kept_is_listed_and_calibrates_in_a_new_session(app, db, profile_json):
    at = _upload_and_keep(app("profiles"), profile_json, "test cpu <b>run</b>")
    assert any("Kept as" in s for s in _texts(at.success))
    # A new session: the same server after a restart, or a teammate.
    at = app("profiles")
    table = _table(at, "saved by")
    assert table["name"].tolist() == ["test cpu <b>run</b>"]
    assert table[["saved by", "notes"]].iloc[0].tolist() == ["ana", "first run"]
    at.button(key="library_calibrate").click().run()
    assert at.selectbox(key="calibrate_with").value == "library: test cpu <b>run</b>"
    assert any("Fit:" in c.value for c in at.caption)
    assert not at.exception


def test_search_rename_annotate_and_delete_with_confirmation(app, db, profile_doc):
    import json

    lib = open_library(db)
    for device in ("NVIDIA H200", "AMD EPYC"):
        doc = {**profile_doc, "device": {**profile_doc["device"], "name": device}}
        save_profile(lib, f"{device} profile", json.dumps(doc).encode())
    at = app("profiles")
    at.text_input(key="library_search").set_value("h200").run()
    assert _table(at, "saved by")["name"].tolist() == ["NVIDIA H200 profile"]
    h200 = lib.get("profile", "NVIDIA H200 profile").id
    at.text_input(key=f"library_new_name:{h200}").set_value("h200 nightly").run()
    at.button(key="library_rename").click().run()
    assert lib.get("profile", "h200 nightly").device == "NVIDIA H200"
    at.text_input(key="library_search").set_value("").run()
    at.selectbox(key="library_entry").set_value("profile: h200 nightly").run()
    at.text_input(key=f"library_notes:{h200}").set_value("driver 580").run()
    at.button(key="library_annotate").click().run()
    assert lib.get("profile", "h200 nightly").notes == "driver 580"
    assert at.button(key="library_delete").disabled
    at.checkbox(key=f"library_confirm:{h200}").check().run()
    at.button(key="library_delete").click().run()
    assert [e.name for e in lib.entries()] == ["AMD EPYC profile"]
    assert any("Deleted" in s for s in _texts(at.success))


def test_a_taken_name_gets_a_clear_message(app, db, profile_json, profile_doc):
    import json

    lib = open_library(db)
    other = {**profile_doc, "device": {**profile_doc["device"], "name": "Other"}}
    save_profile(lib, "taken", json.dumps(other).encode())
    at = _upload_and_keep(app("profiles"), profile_json, "taken")
    assert any("a profile named 'taken' is already kept" in e for e in _texts(at.error))
    assert lib.get("profile", "taken").device == "Other"


def test_without_a_database_uploads_stay_session_only(app, monkeypatch, profile_json):
    monkeypatch.setenv("SPECPLAN_DB_URL", "off")
    at = app("profiles")
    at.file_uploader(key="profile_upload").set_value([("cpu.json", profile_json, "x")]).run()
    assert any("nothing is kept" in i for i in _texts(at.info))
    assert "uploaded: cpu.json" in at.selectbox(key="calibrate_with").options
    assert not at.exception


def test_an_unreadable_database_leaves_the_pages_running(app, tmp_path, monkeypatch):
    path = tmp_path / "broken.db"
    path.write_bytes(b"not sqlite" * 500)
    monkeypatch.setenv("SPECPLAN_DB_URL", f"sqlite:///{path}")
    for page in ("profiles", "roi", "reports"):
        at = app(page)
        assert not at.exception
    at = app("profiles")
    assert any("not a readable SQLite database" in i for i in _texts(at.info))
    assert path.read_bytes() == b"not sqlite" * 500


def test_a_scenario_saved_on_roi_opens_by_its_link(app, db):
    at = app("roi", query={"target": "llama-3.1-8b", "gpu": "h100-sxm", "batch_size": "32"})
    at.text_input(key="scenario_name:roi").set_value("8b at 32").run()
    at.button(key="scenario_save:roi").click().run()
    assert any("Saved as '8b at 32'" in s for s in _texts(at.success))
    at = app("sizer")  # another session, another page
    assert at.selectbox(key="scenario_open:sizer").value == "8b at 32"
    (link,) = at.link_button
    url = urlparse(link.proto.url)
    params = {k: v[0] for k, v in parse_qs(url.query).items()}
    assert url.path == "/"
    assert (params["target"], params["gpu"], params["batch_size"]) == (
        "llama-3.1-8b",
        "h100-sxm",
        "32",
    )
    # The link reproduces the scenario.
    again = app("roi", query=params)
    assert again.session_state["target"] == "llama-3.1-8b"
    assert again.session_state["batch_size"] == 32


def test_a_report_saved_reopens_with_the_same_numbers(app, db):
    at = app("reports", query={"target": "llama-3.1-8b", "gpu": "h100-sxm"})
    shown = _table(at, "speedup [x]")
    at.text_input(key="report_save_name").set_value("q3 plan").run()
    at.button(key="report_save").click().run()
    assert not at.exception
    lib = open_library(db)
    assert lib.get("report", "q3 plan").facts["rows"] == len(shown)
    # A new session opens the table by its link: the same rows, the same outputs.
    at = app("reports", query={"report": "q3 plan"})
    again = _table(at, "speedup [x]")
    assert again.equals(shown)
    assert any("the outputs are those saved" in c.value for c in at.caption)


def test_a_calibrated_report_without_a_price_reopens_as_saved(app, db, profile_json):
    """A CPU has no catalog price, so its costs are missing (NaN) in the saved outputs and
    in the recomputed ones: that is the same table, not a difference."""
    save_profile(open_library(db), "team cpu", profile_json)
    linked = {"profile": "library:team cpu"}
    scenario = {"gpu": "cpu", "target": "llama-3.2-1b", "method": "ngram", "num_gpus": "1"}
    at = app("reports", query={**scenario, **linked})
    assert _table(at, "speedup [x]")["$/1M tok after"].isna().all()
    at.text_input(key="report_save_name").set_value("cpu plan").run()
    at.button(key="report_save").click().run()
    at = app("reports", query={"report": "cpu plan", **linked})
    assert any("the outputs are those saved" in c.value for c in at.caption)
    assert not at.warning


def test_a_library_that_stops_answering_mid_session(app, db, monkeypatch, profile_json):
    from library import LibraryUnavailable
    from library.store import Library

    save_profile(open_library(db), "kept", profile_json)
    at = app("profiles")
    assert _table(at, "saved by")["name"].tolist() == ["kept"]

    def gone(*args, **kwargs):
        raise LibraryUnavailable("cannot read the library: server closed the connection")

    for method in ("table", "table_version", "entries", "get", "content"):
        monkeypatch.setattr(Library, method, gone)
    for page in ("profiles", "roi", "reports"):
        at.switch_page(f"views/{page}.py").run()
        assert not at.exception, [e.value for e in at.exception]
        assert any("The library did not answer" in w.value for w in at.warning)


def test_a_saved_report_keeps_its_engine_and_temperature(app, db):
    """Issue 34, wrong answer 1: a saved report said engine=vllm where SGLang was chosen.
    The rows keep the sidebar's engine and temperature, and reopen priced with them."""

    from library.kinds import load_report

    query = {"target": "llama-3.3-70b", "method": "eagle3", "gpu": "h100-sxm", "num_gpus": "4"}
    at = app("reports", query={**query, "engine": "sglang", "temperature": "0.7"})
    shown = _table(at, "speedup [x]")
    at.text_input(key="report_save_name").set_value("sglang plan").run()
    at.button(key="report_save").click().run()
    rows, outputs, _ = load_report(open_library(db), "sglang plan")
    assert rows["engine"].tolist() == ["sglang"] * len(rows)
    assert rows["temperature"].tolist() == [0.7] * len(rows)
    assert outputs["engine"].tolist() == ["sglang"] * len(rows)
    # Reopened in a session whose sidebar says vLLM: the saved rows' engine, not the sidebar's.
    again = app("reports", query={"report": "sglang plan"})
    assert again.data_editor[0].value["engine"].tolist() == ["sglang"] * len(rows)
    assert _table(again, "speedup [x]").equals(shown)


def test_saved_scenarios_and_reports_are_renamed_and_deleted_on_the_dashboard(app, db):
    """Issue 34, smaller defects: saved scenarios and reports could only be removed from
    the CLI. Each bar renames its pick and deletes it behind a confirmation, and the
    library lists each entry's engine."""
    from library.export import listing

    at = app("roi", query={"target": "llama-3.1-8b", "engine": "sglang"})
    at.text_input(key="scenario_name:roi").set_value("draft plan").run()
    at.button(key="scenario_save:roi").click().run()
    saved = open_library(db).get("scenario", "draft plan")
    at.text_input(key=f"scenario:roi_new_name:{saved.id}").set_value("final plan").run()
    at.button(key="scenario:roi_rename").click().run()
    assert any("Renamed 'draft plan' to 'final plan'" in s for s in _texts(at.success))
    assert at.selectbox(key="scenario_open:roi").value == "final plan"
    at = app("reports", query={"target": "llama-3.1-8b", "engine": "trtllm"})
    at.text_input(key="report_save_name").set_value("q3").run()
    at.button(key="report_save").click().run()
    table = listing(open_library(db).entries()).set_index("name")
    assert table.loc["final plan", "engine"] == "sglang"
    assert table.loc["q3", "engine"] == "trtllm"
    # Delete stays off until confirmed; then the report is gone from the library.
    entry = open_library(db).get("report", "q3")
    assert at.button(key="reports_delete").disabled
    at.checkbox(key=f"reports_confirm:{entry.id}").check().run()
    at.button(key="reports_delete").click().run()
    assert any("Deleted 'q3'" in s for s in _texts(at.success))
    assert [e.name for e in open_library(db).entries("report")] == []
    assert any("No saved reports yet" in c.value for c in at.caption)
