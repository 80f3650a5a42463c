"""Faults: each gets a clear message and loses nothing already stored."""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import OperationalError

from library import LibraryError, LibraryUnavailable, open_library
from library.kinds import save_benchmark, save_profile, save_validation
from library.store import make_engine, migrate
from tests.library.test_store import PROFILE, profile_bytes


def test_corrupt_sqlite_file_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "library.db"
    garbage = b"this is not a database " * 200
    path.write_bytes(garbage)
    with pytest.raises(LibraryUnavailable, match=r"is not a readable SQLite database .*left as"):
        open_library(f"sqlite:///{path}")
    assert path.read_bytes() == garbage


def test_truncated_sqlite_file_keeps_its_bytes(tmp_path):
    path = tmp_path / "library.db"
    lib = open_library(f"sqlite:///{path}")
    save_profile(lib, "kept", PROFILE.read_bytes())
    lib.close()
    for suffix in ("-wal", "-shm"):
        (tmp_path / f"library.db{suffix}").unlink(missing_ok=True)
    head = path.read_bytes()[:1000]  # the header survives, the pages are gone
    path.write_bytes(head)
    with pytest.raises(LibraryUnavailable, match=r"library\.db"):
        lib = open_library(f"sqlite:///{path}")
        lib.entries()
    assert path.read_bytes() == head


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_server_that_does_not_answer():
    url = f"postgresql+psycopg://someone:secret@127.0.0.1:{_closed_port()}/specplan"
    with pytest.raises(LibraryUnavailable, match="cannot open postgresql") as err:
        open_library(url)
    assert "secret" not in str(err.value)


@pytest.mark.parametrize(
    "url, message",
    [
        ("mysql://u@h/db", "'mysql' databases are not supported"),
        ("not a url", "is not a database URL"),
    ],
)
def test_an_unsupported_url(url, message):
    with pytest.raises(LibraryUnavailable, match=message):
        open_library(url)


def test_a_database_written_at_revision_1_upgrades_with_every_row(db_url):
    engine = make_engine(db_url)
    migrate(engine, "0001")
    when = datetime(2026, 11, 30, 8, 15, tzinfo=UTC)
    rows = [
        {
            "kind": kind,
            "name": f"old {kind} <i>{i}</i>",
            "notes": "written by schema 1",
            "created_by": "bo",
            "created_at": when,
            "content_hash": f"{i:064x}",
            "size_bytes": 3,
            "content": bytes([i, i, i]),
            "device": "NVIDIA H100",
            "model": "llama-3.3-70b",
            "engine": "vllm",
            "facts": json.dumps({"i": i}),
        }
        for i, kind in enumerate(("profile", "benchmark", "scenario", "report"))
    ]
    columns = list(rows[0])
    insert = text(
        f"INSERT INTO entries ({', '.join(columns)}) VALUES ({', '.join(':' + c for c in columns)})"
    )
    with engine.begin() as c:
        c.execute(insert, rows)
        assert c.execute(text("SELECT version_num FROM alembic_version")).scalar() == "0001"
    engine.dispose()

    lib = open_library(db_url)
    try:
        with lib.engine.connect() as c:
            assert c.execute(text("SELECT version_num FROM alembic_version")).scalar() == "0002"
        got = {e.kind: e for e in lib.entries()}
        assert len(got) == 4
        for i, row in enumerate(rows):
            e = got[row["kind"]]
            assert (e.name, e.notes, e.created_by, e.content_hash, e.size_bytes) == (
                row["name"],
                row["notes"],
                row["created_by"],
                row["content_hash"],
                3,
            )
            assert (e.device, e.model, e.engine, e.facts) == (
                "NVIDIA H100",
                "llama-3.3-70b",
                "vllm",
                {"i": i},
            )
            assert e.created_at == when
            assert (e.engine_version, e.model_version, e.updated_at) == ("", "", None)
            assert lib.content(row["kind"], row["name"]) == bytes([i, i, i])
        # The upgraded schema takes new writes.
        save_validation(lib, "after upgrade", got["report"] and _errors(), {"m": 1.0})
        assert lib.figures("m")[0][0] == "after upgrade"
    finally:
        lib.close()


def _errors():
    import pandas as pd

    return pd.DataFrame({"case_id": ["a"], "abs_error": [0.1]})


def test_a_schema_newer_than_this_copy(db_url):
    lib = open_library(db_url)
    save_profile(lib, "kept", PROFILE.read_bytes())
    with lib.engine.begin() as c:
        c.execute(text("UPDATE alembic_version SET version_num = :v"), {"v": "0099"})
    lib.close()
    with pytest.raises(LibraryUnavailable, match="schema this copy of SpecPlan does not know"):
        open_library(db_url)


def test_a_disk_that_fills_mid_write_stores_nothing_partial(tmp_path):
    url = f"sqlite:///{tmp_path / 'library.db'}"
    lib = open_library(url)
    save_profile(lib, "kept", PROFILE.read_bytes())
    with lib.engine.connect() as c:
        pages = c.exec_driver_sql("PRAGMA page_count").scalar()

    @event.listens_for(lib.engine, "connect")
    def _small_disk(dbapi_connection, _record):
        dbapi_connection.execute(f"PRAGMA max_page_count = {pages + 8}")

    lib.engine.dispose()  # new connections get the limit
    big = bytes(range(256)) * 4096  # 1 MiB: about 250 pages
    with pytest.raises(LibraryError, match=r"full.*nothing was changed"):
        save_benchmark(lib, "too big", big, device="H100", engine="vllm", engine_version="1")
    assert [e.name for e in lib.entries()] == ["kept"]
    assert lib.content("profile", "kept") == PROFILE.read_bytes()
    save_profile(lib, "small still fits", profile_bytes("B"))
    assert len(lib.entries()) == 2
    lib.close()


def test_a_failure_between_two_inserts_rolls_back_both(lib):
    """A validation run writes an entry row, then its figure rows: the database failing
    on the second insert (a full disk, a dropped connection) leaves neither."""
    save_profile(lib, "kept", PROFILE.read_bytes())

    @event.listens_for(lib.engine, "before_cursor_execute")
    def _fail(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith("INSERT INTO VALIDATION_FIGURES"):
            raise OperationalError(statement, parameters, Exception("disk full (simulated)"))

    with pytest.raises(LibraryError, match=r"disk full .simulated.*nothing was changed"):
        save_validation(lib, "run", _errors(), {"median_abs_error": 0.1, "p90": 0.3})
    event.remove(lib.engine, "before_cursor_execute", _fail)
    assert [e.name for e in lib.entries()] == ["kept"]
    assert lib.figures() == []


def test_a_folder_that_cannot_be_created(tmp_path):
    blocker = tmp_path / "a file"
    blocker.write_text("in the way")
    with pytest.raises(LibraryUnavailable, match="cannot create the library's folder"):
        open_library(f"sqlite:///{blocker / 'specplan' / 'library.db'}")
    assert blocker.read_text() == "in the way"


PAGES = ["roi", "sizer", "reports", "profiles", "acceptance", "load", "validation", "search"]


@pytest.fixture
def bad_library(db_url, monkeypatch):
    """A library holding one entry of each kind whose content does not fit the kind, put
    in through the store (as an older copy or a hand edit could), newest of its kind."""
    from tests.library.test_bad_entries import _insert_bad_entries

    monkeypatch.setenv("SPECPLAN_DB_URL", db_url)
    lib = open_library(db_url)
    save_profile(lib, "good", PROFILE.read_bytes())
    _insert_bad_entries(lib)
    yield lib
    lib.close()


@pytest.mark.parametrize("page", PAGES)
def test_a_bad_entry_in_the_database_leaves_every_page_working(bad_library, page):
    from streamlit.testing.v1 import AppTest

    from tests.library.test_dashboard_sessions import ENTRY

    at = AppTest.from_file(str(ENTRY), default_timeout=60)
    if page == "reports":
        at.query_params["report"] = "bad report 2"
    at.switch_page(f"views/{page}.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    shown = " ".join(str(m.value) for m in (*at.warning, *at.error, *at.caption, *at.info))
    if page in ("roi", "sizer"):
        assert "unreadable" in shown and "field 'page'" in shown
    if page == "reports":
        assert "'bad report 2' is unreadable" in shown and "field 'rows'" in shown
