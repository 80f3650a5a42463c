"""Fuzz whole Parquet scenario tables (`python -m simulator predict --in x.parquet` and
`serve --in x.parquet`): every column of any Arrow type at once, and the table's shape
drawn too: no rows, no columns, blank or unknown column names, nulls everywhere, one row
group per row. `test_fuzz_scenarios.test_scenario_parquet` varies one column of a fixed
table; this is the family that found an empty table written as "0 predictions" and a
`serve` that raised on it (issue 24, "Hardening" 3).

The reader lives in simulator/inputs/io.py (validation in simulator/inputs/scenarios.py). A valid
table gives one prediction per row (one serve row per scenario and arm); anything else
is refused naming the file, a row or a column.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.harness import FUZZ, check_predictions, nasty_text, run_case, warm
from tests.fuzz.test_fuzz_scenarios import (
    ARROW_KINDS,
    BASE,
    CliRefused,
    _arrow_column,
    _cli,
    check_serving,
)

TMP = Path(tempfile.mkdtemp(prefix="specplan-fuzz-parquet-"))
SHAPES = [
    "as_is",
    "as_is",
    "as_is",
    "no_columns",
    "blank_name",
    "unknown_name",
    "all_null",
    "row_groups",
]
RETYPED = st.dictionaries(
    st.integers(0, len(BASE[0]) - 1), st.sampled_from(ARROW_KINDS), max_size=3
)
"""Columns given another Arrow type than text (as a valid table holds them), by position."""
SERVE_ROWS = 3
"""Scenarios a serve case takes at most: each is two runs of 20 requests."""


def _table(retyped: dict[int, str], rows: int, shape: str, row: int, text: str):
    import pyarrow as pa

    names = list(BASE[0])
    body = [BASE[1 + i % (len(BASE) - 1)] for i in range(rows)]
    if shape == "no_columns":
        return pa.table({})
    columns = []
    for j in range(len(names)):
        kind = retyped.get(j, "text")
        values = [r[j] for r in body]
        if shape == "all_null":
            columns.append(pa.nulls(rows, pa.string()))
        elif kind == "text" or not rows:
            columns.append(pa.array(values, pa.string()))
        else:
            columns.append(_arrow_column(kind, values, row, text))
    if shape == "blank_name":
        names[row % len(names)] = ""
    elif shape == "unknown_name":
        names.append(text.strip() or "x")
        columns.append(pa.array([text] * rows, pa.string()))
    return pa.Table.from_arrays(columns, names=names)


def _named(exc: BaseException) -> None:
    """The error line names the file, a row or a column."""
    text = str(exc)
    assert "error" in text and any(n in text for n in ("field '", "row ", ".parquet")), text


def _case(retyped, rows, shape, row, text, command):
    import pyarrow.parquet as pq

    table = _table(retyped, rows, shape, row, text)
    src, out = TMP / "in.parquet", TMP / f"{command}-out.csv"
    pq.write_table(table, src, row_group_size=1 if shape == "row_groups" else None)
    if command == "predict":
        return rows, _cli(["predict", "--in", str(src), "--out", str(out)])
    argv = ["serve", "--in", str(src), "--out", str(out), "--rate", "2", "--requests", "20"]
    return rows, _cli(argv)


def check_predicted(result) -> None:
    rows, out = result
    check_predictions(out)
    assert len(out) == rows > 0, f"{rows} scenario rows gave {len(out)} predictions"


def check_served(result) -> None:
    rows, out = result
    check_serving(out)
    assert set(out["scenario"]) == set(range(1, rows + 1)), (rows, sorted(set(out["scenario"])))


warm(lambda: _case({}, 2, "as_is", 0, "", "predict"))


@FUZZ
@given(
    retyped=RETYPED,
    rows=st.sampled_from([0, 1, 2, 3, 4, 9, 40]),
    shape=st.sampled_from(SHAPES),
    row=st.integers(0, 100),
    text=nasty_text(),
    serve=st.booleans(),
)
def test_parquet_tables(retyped, rows, shape, row, text, serve):
    if serve:
        rows = min(rows, SERVE_ROWS)
    command = "serve" if serve else "predict"
    run_case(
        "parquet_tables",
        lambda: _case(retyped, rows, shape, row, text, command),
        check_served if serve else check_predicted,
        refusals=(CliRefused,),
        refusal_check=_named,
    )
