"""The fuzz suite's counts file, as `make fuzz` writes it on a fresh clone."""

from __future__ import annotations

import json

from tests.fuzz.conftest import write_counts


def test_counts_are_written_into_a_folder_that_does_not_exist_yet(tmp_path):
    out = tmp_path / "artifacts" / "fuzz-counts.json"
    tally = {"scenario_csv": {"cases": 3, "refusals": 2, "ok": 1, "failures": 0}}
    total = {"cases": 3, "refusals": 2, "ok": 1, "failures": 0}
    write_counts(str(out), tally, total)
    assert json.loads(out.read_text()) == {"scenario_csv": total, "total": total}
