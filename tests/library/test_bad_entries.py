"""Issue 36, the library: an entry whose content does not fit its kind is refused at
import, and one that reached the database anyway (an older copy, a hand edit) is shown as
unreadable while every page goes on; exports, figures and searches that broke it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from sqlalchemy import event
from sqlalchemy.exc import IntegrityError

from library import LibraryError, NameTaken, open_library
from library.export import EXPORT_SCHEMA
from library.kinds import load_report, load_scenario, save_scenario, save_validation
from simulator.cli.main import main
from tests.library.test_store import PROFILE


@pytest.fixture
def cli_db(db_url, monkeypatch):
    """The CLI's library is `db_url` (SQLite, then PostgreSQL)."""
    monkeypatch.setenv("SPECPLAN_DB_URL", db_url)
    monkeypatch.setenv("SPECPLAN_USER", "cli-user")
    return db_url


def _export(tmp_path: Path, kind: str, content: str, **extra) -> str:
    value = {
        "schema": EXPORT_SCHEMA,
        "kind": kind,
        "name": f"bad {kind}",
        "content": content,
        "content_encoding": "utf-8",
        **extra,
    }
    path = tmp_path / f"{kind}.json"
    path.write_text(json.dumps(value))
    return str(path)


NOT_THEIR_KIND = [
    ("scenario", "not json", "content"),
    ("scenario", "[1, 2]", "content"),
    ("scenario", '{"params": {}}', "page"),
    ("scenario", '{"page": "roi", "params": [1]}', "params"),
    ("scenario", '{"page": "roi", "params": {"k": 4}}', "params"),
    ("report", '{"rows": 1}', "rows"),
    ("report", '{"rows": [], "outputs": [], "model_version": 3}', "model_version"),
    ("report", '{"rows": [1], "outputs": [], "model_version": "x"}', "rows"),
    ("profile", "{}", "schema"),
]


@pytest.mark.parametrize("kind, content, field", NOT_THEIR_KIND)
def test_import_refuses_content_that_does_not_fit_its_kind(
    cli_db, tmp_path, capsys, kind, content, field
):
    assert main(["library", "import", _export(tmp_path, kind, content)]) == 2
    assert f"field '{field}'" in capsys.readouterr().err
    assert open_library(cli_db).entries() == []


def test_import_of_a_benchmark_needs_its_engine_as_its_save_does(cli_db, tmp_path, capsys):
    assert main(["library", "import", _export(tmp_path, "benchmark", "[1]")]) == 2
    assert "needs its device" in capsys.readouterr().err


BAD_ENTRIES = [
    ("scenario", b"not json"),
    ("scenario", b'{"params": {}}'),
    ("report", b'{"rows": 1}'),
    ("profile", b"not a profile"),
    ("model", b"{}"),
    ("scrape", b"no metrics here"),
    ("benchmark", b"[1, 2, 3]"),
    ("validation", b"\xff\xfe"),
]


def _insert_bad_entries(lib) -> None:
    """Entries the kinds' saves refuse, put in through the store itself."""
    for i, (kind, content) in enumerate(BAD_ENTRIES):
        lib.save(kind, f"bad {kind} {i}", content, device="H100", engine="vllm")


def test_a_bad_entry_reads_as_a_refusal_naming_its_field(lib):
    _insert_bad_entries(lib)
    with pytest.raises(LibraryError, match="field 'content'"):
        load_scenario(lib, "bad scenario 0")
    with pytest.raises(LibraryError, match="field 'page'"):
        load_scenario(lib, "bad scenario 1")
    with pytest.raises(LibraryError, match="field 'rows'"):
        load_report(lib, "bad report 2")


def test_export_of_a_bad_entry_refuses_as_csv_and_backs_up_as_json(cli_db, tmp_path, capsys):
    lib = open_library(cli_db)
    _insert_bad_entries(lib)
    for kind, name in (("scenario", "bad scenario 0"), ("report", "bad report 2")):
        out = tmp_path / f"{kind}.csv"
        assert main(["library", "export", name, "--kind", kind, "--out", str(out)]) == 2
        assert "field '" in capsys.readouterr().err and not out.exists()
        out = tmp_path / f"{kind}.json"
        assert main(["library", "export", name, "--kind", kind, "--out", str(out)]) == 0


def test_a_benchmark_holding_a_list_of_numbers_exports_as_csv_or_says_why(cli_db, tmp_path, capsys):
    lib = open_library(cli_db)
    _insert_bad_entries(lib)
    out = tmp_path / "b.csv"
    code = main(["library", "export", "bad benchmark 6", "--out", str(out)])
    if code == 0:
        assert pd.read_csv(out).iloc[:, -1].tolist() == [1, 2, 3]
    else:
        assert code == 2 and "field 'content'" in capsys.readouterr().err


# ---------------------------------------------------------------- validation figures
@pytest.mark.parametrize("value", [math.nan, math.inf, 10**400])
def test_a_figure_that_is_not_a_finite_number_is_refused_naming_it(lib, value):
    errors = pd.DataFrame({"case": ["a"], "error": [0.1]})
    with pytest.raises(LibraryError, match=r"field 'figures'.*figure 'median_abs_error'"):
        save_validation(lib, "run", errors, {"median_abs_error": value})
    assert lib.entries() == []


@pytest.mark.parametrize("value", ["NaN", "Infinity", "1" + "0" * 400])
def test_an_export_whose_figures_are_not_finite_is_refused(cli_db, tmp_path, capsys, value):
    path = Path(_export(tmp_path, "validation", "case,error\na,0.1\n"))
    path.write_text(path.read_text()[:-1] + f', "figures": {{"median_abs_error": {value}}}}}')
    assert main(["library", "import", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "field 'figures'" in err
    assert open_library(cli_db).entries() == []


def test_an_integrity_error_is_reported_as_it_is_not_as_a_name_taken(lib):
    @event.listens_for(lib.engine, "before_cursor_execute")
    def _fail(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith("INSERT INTO VALIDATION_FIGURES"):
            raise IntegrityError(statement, parameters, Exception("CHECK failed (simulated)"))

    errors = pd.DataFrame({"case": ["a"], "error": [0.1]})
    with pytest.raises(LibraryError, match=r"CHECK failed .simulated.*nothing was saved") as err:
        save_validation(lib, "run", errors, {"median_abs_error": 0.1})
    assert not isinstance(err.value, NameTaken)
    event.remove(lib.engine, "before_cursor_execute", _fail)
    assert lib.entries() == []


# ---------------------------------------------------------------- deep nesting
def test_an_export_nested_100000_deep_is_refused_naming_the_file(cli_db, tmp_path, capsys):
    path = tmp_path / "deep.json"
    body = '"facts": ' + "[" * 100_000 + "]" * 100_000
    path.write_text(f'{{"schema": "{EXPORT_SCHEMA}", {body}}}')
    assert main(["library", "import", str(path)]) == 2
    err = capsys.readouterr().err
    assert "deep.json" in err and "deep" in err and "Traceback" not in err


def test_brackets_inside_text_do_not_count_as_nesting(cli_db, tmp_path, capsys):
    lib = open_library(cli_db)
    save_scenario(lib, "brackets", "roi", {"note": "[" * 5000 + '"{'})
    out = tmp_path / "s.json"
    assert main(["library", "export", "brackets", "--out", str(out)]) == 0
    lib.delete("scenario", "brackets")
    assert main(["library", "import", str(out)]) == 0
    assert load_scenario(lib, "brackets")[1]["note"] == "[" * 5000 + '"{'


# ---------------------------------------------------------------- export --out
@pytest.mark.parametrize("out", ["", "{tmp}/", "{tmp}/sub/", "/proc/x.json", "{tmp}/f/x.json"])
def test_export_out_is_checked_as_predict_out_is(cli_db, tmp_path, capsys, monkeypatch, out):
    (tmp_path / "sub").mkdir()
    (tmp_path / "f").write_text("a file")
    save_scenario(open_library(cli_db), "s", "roi", {"k": "4"})
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    assert main(["library", "export", "s", "--out", out.format(tmp=tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "field '--out'" in err and "Traceback" not in err
    assert list(cwd.iterdir()) == []


def test_export_writes_its_temporary_file_beside_the_target(cli_db, tmp_path, monkeypatch):
    save_scenario(open_library(cli_db), "s", "roi", {"k": "4"})
    cwd, target = tmp_path / "cwd", tmp_path / "out" / "s.json"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    made = []
    from simulator.inputs import io

    real = io._claim
    monkeypatch.setattr(io, "_claim", lambda path: made.append(path) or real(path))
    assert main(["library", "export", "s", "--out", str(target)]) == 0
    assert Path(made[-1]).parent == target.parent  # the temporary file the export renames
    assert json.loads(target.read_text())["name"] == "s" and list(cwd.iterdir()) == []


# ---------------------------------------------------------------- search
def test_search_treats_percent_and_underscore_as_text(lib):
    for name in ("a_b", "axb", "50%", "500"):
        save_scenario(lib, name, "roi", {"k": name})
    assert [e.name for e in lib.entries(search="a_b")] == ["a_b"]
    assert [e.name for e in lib.entries(search="50%")] == ["50%"]
    assert lib.table(("scenario",), "a_b")["name"].tolist() == ["a_b"]
    assert lib.table(("scenario",), "%")["name"].tolist() == ["50%"]


def test_profile_import_keeps_a_real_profile(cli_db, tmp_path):
    src = tmp_path / "p.json"
    src.write_bytes(PROFILE.read_bytes())
    assert main(["library", "import", str(src)]) == 0
