"""`profiler run --out` in a folder that accepts no files (issue 24, "Hardening" 6): the
folder is probed with a real file before anything is measured, so a run never measures
and then loses its points to a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiler import cli, measure


def _no_setup(args):
    raise AssertionError("the device was set up before --out was probed")


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
@pytest.mark.parametrize("out", ["/proc/specplan-x.json", "/proc/new/sub/specplan-x.json"])
def test_out_in_a_folder_that_accepts_no_files_exits_2_before_measuring(out, capsys, monkeypatch):
    # /proc takes no new file, even from root, whom os.access lets write anywhere.
    monkeypatch.setattr(measure, "_setup", _no_setup)
    with pytest.raises(SystemExit) as info:
        cli.main(["run", "--target", "tiny", "--device", "cpu", "--quiet", "--out", out])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--out" in err and "/proc" in err and "Traceback" not in err, err


def test_probing_leaves_nothing_behind(tmp_path):
    out = tmp_path / "p.json"
    measure.check_out(out)
    assert list(tmp_path.iterdir()) == []
