"""Fuzz the published-measurements table (`python -m simulator validate --published`): a
few bundled cases with one cell replaced by a nasty value, then loaded and scored.

The parser lives in simulator/validation/published.py (the scenario columns in
simulator/inputs/scenarios.py); a failure here names the cell, and the assertion says what was
wrong with the scores.
"""

from __future__ import annotations

import csv
import io
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from simulator.validation.published import MAX_SPEEDUP, load_published, score
from tests.fuzz.harness import FUZZ, NASTY_NUMBERS, nasty_text, run_case, warm

ROOT = Path(__file__).resolve().parents[2]
TMP = Path(tempfile.mkdtemp(prefix="specplan-fuzz-published-"))
ROWS = list(csv.reader(io.StringIO((ROOT / "data/validation/published.csv").read_text())))
HEADER, BODY = ROWS[0], ROWS[1:5]


def check_scores(out: pd.DataFrame) -> None:
    """A row per scored case, each case once; predicted and published speedups finite,
    above 0 and within K + 1; the error their ratio less one."""
    assert isinstance(out, pd.DataFrame) and out["case_id"].is_unique
    ok = out[out["status"] == "ok"]
    for col in ("predicted_speedup", "published_speedup"):
        v = ok[col].to_numpy(float)
        assert np.isfinite(v).all() and (v > 0).all() and (v <= MAX_SPEEDUP).all(), (col, v)
    expected = ok["predicted_speedup"] / ok["published_speedup"] - 1
    assert np.allclose(ok["error"], expected), ok[["error"]]


def _score(rows: list[list[str]]):
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    path = TMP / "published.csv"
    path.write_text(buf.getvalue(), encoding="utf-8", errors="surrogatepass")
    return score(load_published(path), source=str(path))


warm(lambda: _score([HEADER, *BODY]))


@FUZZ
@given(
    row=st.integers(0, len(BODY) - 1),
    column=st.sampled_from(HEADER),
    value=st.sampled_from([str(x) for x in NASTY_NUMBERS]) | nasty_text(),
    twice=st.booleans(),
)
def test_published_cells(row, column, value, twice):
    rows = [list(r) for r in BODY]
    rows[row][HEADER.index(column)] = value
    if twice:  # the same case again, as a copy-paste leaves it
        rows.append(list(rows[row]))
    run_case("published_csv", lambda: _score([HEADER, *rows]), check_scores)
