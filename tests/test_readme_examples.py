"""The README's shell examples read files the repository ships (issue 34, smaller defects:
they named a `scenarios.csv` nobody had): every `examples/` path exists, and each one-line
`simulator predict` example runs as written, into a temporary folder."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from simulator.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PREDICT_LINES = [
    line.split("  #")[0].strip()
    for line in README.splitlines()
    if line.startswith(".venv/bin/python -m simulator predict --in examples/")
]


def test_every_example_file_the_readme_names_is_shipped():
    named = set(re.findall(r"examples/[\w./-]+\.(?:csv|yaml)", README))
    assert {"examples/scenarios.csv", "examples/scenarios-cpu.csv"} <= named
    assert [p for p in sorted(named) if not (ROOT / p).is_file()] == []


@pytest.mark.parametrize("line", PREDICT_LINES)
def test_each_predict_example_runs_as_written(line, tmp_path, monkeypatch):
    assert len(PREDICT_LINES) >= 3
    args = shlex.split(line)[3:]
    out = args.index("--out") + 1
    args[out] = str(tmp_path / Path(args[out]).name)
    monkeypatch.chdir(ROOT)
    assert main(args) == 0
    assert (tmp_path / Path(args[out]).name).stat().st_size > 0
