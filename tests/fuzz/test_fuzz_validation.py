"""Fuzz the Validation page's upload (`app/figures_validation.read_validation_csv`): the
bundled `cpu_validation.csv` cut to a few points, with one cell, a header name, the
number of points or of a row's fields changed, or blank lines first, then parsed and
drawn as the page draws it.

A failure here names the input, and the assertion says what was wrong with the figures.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from app import figures_validation as fv
from tests.fuzz.harness import FUZZ, NASTY_NUMBERS, nasty_text, run_case, warm

ROOT = Path(__file__).resolve().parents[2]
ROWS = list(csv.reader(io.StringIO((ROOT / "data/validation/cpu_validation.csv").read_text())))
HEADER, BODY = ROWS[0], ROWS[1:7]
READ = ["mode", "workload", "batch", "k", "measured_speedup", "predicted_speedup", "error"]
READ += ["sequence_steps", "predicted_speedup_isolated_draft", "p1", "p2", "p3"]


def _draw(data: bytes):
    """What the page does with an upload: parse, summarise, both figures, batch filter."""
    df = fv.read_validation_csv(data, "up.csv")
    summary = fv.error_summary(df)
    figures = [fv.predicted_vs_measured(df), fv.acceptance_by_position(df)]
    batches = sorted(int(b) for b in df["batch"].unique())
    return df, summary, figures, batches


def check_drawn(result) -> None:
    """Finite errors, speedups in (0, K + 1], whole batches, figures of at most the groups
    the file may hold, and no trace name that plotly would read as a tag."""
    df, summary, figures, batches = result
    assert summary["points"] == len(df) > 0
    assert math.isfinite(summary["median_abs_error"]), summary
    for col in ("measured_speedup", "predicted_speedup"):
        v = df[col].to_numpy(float)
        assert np.isfinite(v).all() and (v > 0).all() and (v <= fv.MAX_SPEEDUP).all(), (col, v)
    assert all(1 <= b <= fv.MAX_BATCH_SIZE for b in batches)
    for fig in figures:
        assert len(fig.data) <= 2 * fv.MAX_GROUPS + 2
        assert not any("<" in str(t.name) for t in fig.data)


def _csv(rows) -> bytes:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue().encode("utf-8", "surrogatepass")


warm(lambda: _draw(_csv([HEADER, *BODY])))


@FUZZ
@given(
    kind=st.sampled_from(["cell", "cell", "cell", "header", "rows", "extra", "short", "blank"]),
    row=st.integers(0, len(BODY) - 1),
    column=st.sampled_from(READ),
    value=st.sampled_from([str(x) for x in NASTY_NUMBERS]) | nasty_text(),
    copies=st.sampled_from([0, 2, 400, 2_000, 10_001]),
)
def test_validation_upload(kind, row, column, value, copies):
    rows = [list(HEADER), *(list(r) for r in BODY)]
    j = HEADER.index(column)
    if kind == "cell":
        rows[1 + row][j] = value
    elif kind == "header":
        rows[0][j] = value
    elif kind == "rows":
        rows = [rows[0], *(rows[1 + i % len(BODY)] for i in range(copies))]
    elif kind == "extra":  # a field more than the header names, first or last
        rows[1 + row] = [value, *rows[1 + row]] if copies % 2 else [*rows[1 + row], value]
    elif kind == "short":
        del rows[1 + row][j]
    prefix = b"\n" * (copies % 3) if kind == "blank" else b""
    run_case("validation_csv", lambda: _draw(prefix + _csv(rows)), check_drawn)
