"""`profiler.groundtruth.staging.staged`: a run's files replace the previous run's together,
or not at all."""

from __future__ import annotations

import pytest

from profiler.groundtruth.staging import staged


def _files(folder) -> dict[str, str]:
    return {p.name: p.read_text() for p in folder.iterdir() if p.is_file()}


def test_every_file_replaces_its_namesake_on_success(tmp_path):
    (tmp_path / "a.csv").write_text("old a")
    (tmp_path / "keep.csv").write_text("not part of the run")
    with staged(tmp_path, "run", log=pytest.fail) as stage:
        (stage / "a.csv").write_text("new a")
        (stage / "b.json").write_text("new b")
        assert _files(tmp_path)["a.csv"] == "old a"
    assert _files(tmp_path) == {
        "a.csv": "new a",
        "b.json": "new b",
        "keep.csv": "not part of the run",
    }
    assert not (tmp_path / ".run_new").exists()


@pytest.mark.parametrize("error", [RuntimeError("refused"), KeyboardInterrupt()])
def test_a_failure_changes_nothing_and_keeps_what_was_written(tmp_path, error):
    (tmp_path / "a.csv").write_text("old a")
    (tmp_path / "b.json").write_text("old b")
    lines = []
    with pytest.raises(type(error)), staged(tmp_path, "run", log=lines.append) as stage:
        (stage / "a.csv").write_text("new a")
        raise error
    assert _files(tmp_path) == {"a.csv": "old a", "b.json": "old b"}
    assert _files(tmp_path / ".run_new") == {"a.csv": "new a"}
    assert "unchanged" in lines[0] and "a.csv" in lines[0] and ".run_new" in lines[0]


def test_a_failure_before_any_file_leaves_no_folder(tmp_path):
    with pytest.raises(ValueError), staged(tmp_path, "run", log=pytest.fail):
        raise ValueError("before any file")
    assert list(tmp_path.iterdir()) == []


def test_a_folder_left_by_an_earlier_failure_is_replaced(tmp_path):
    (tmp_path / ".run_new").mkdir()
    (tmp_path / ".run_new" / "stale.csv").write_text("from a failed run")
    with staged(tmp_path, "run", log=pytest.fail) as stage:
        (stage / "a.csv").write_text("new a")
    assert _files(tmp_path) == {"a.csv": "new a"}
