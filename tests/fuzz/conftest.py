"""Fuzz-suite hooks: the per-parser counts at the end of the run (and, with
SPECPLAN_FUZZ_COUNTS=<path>, as JSON for the closing note)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.fuzz.harness import FUZZ, TALLY


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not TALLY:
        return
    tr = terminalreporter
    tr.section(f"fuzz counts ({FUZZ.max_examples} cases per parser test)")
    tr.write_line(f"{'parser':<22}{'cases':>8}{'refusals':>10}{'ok':>8}{'failures':>10}")
    total = {"cases": 0, "refusals": 0, "ok": 0, "failures": 0}
    for parser in sorted(TALLY):
        c = TALLY[parser]
        tr.write_line(
            f"{parser:<22}{c['cases']:>8}{c['refusals']:>10}{c['ok']:>8}{c['failures']:>10}"
        )
        for key in total:
            total[key] += c[key]
    tr.write_line(
        f"{'total':<22}{total['cases']:>8}{total['refusals']:>10}{total['ok']:>8}"
        f"{total['failures']:>10}"
    )
    out = os.environ.get("SPECPLAN_FUZZ_COUNTS")
    if out:
        write_counts(out, TALLY, total)


def write_counts(path: str, tally: dict, total: dict) -> None:
    """The counts per parser and their total as JSON at `path`, its folder made if need
    be (a fresh clone has no artifacts/ until a browser test writes a screenshot)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        # Every count written, zeros included: a missing "failures" would not say 0.
        counts = {p: {k: c[k] for k in total} for p, c in sorted(tally.items())}
        json.dump({**counts, "total": total}, fh, indent=2)
