"""Fuzz the Reports page's scenario editor: cells edited to what the browser's editor can
send (any number a JSON double holds, an emptied cell, any text in a text or dropdown
column), rows added and deleted, then the page run as AppTest runs it. The page must
not raise: each table is either priced (a results row per scenario, its speedups finite
and above 0 where the row runs) or refused with an error that names a row and a column
of the table; and the downloads follow the table shown.

The page lives in app/views/reports.py (the table goes through app/sim.run_predict and
simulator/planning/reports.py). A page run costs what `test_fuzz_pages` says, so this draws as
many cases as one page there.
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from app.views.reports import EDITOR_COLUMNS
from simulator.inputs.catalog import default_gpus, default_models
from simulator.inputs.specs import KV_DTYPES, METHODS, WEIGHT_DTYPES
from simulator.kernels.tables import ENGINE_CHOICES
from simulator.planning.reports import read_report_csv
from tests.fuzz.harness import NASTY_NUMBERS, NASTY_TEXT, run_case
from tests.fuzz.test_fuzz_pages import PAGE_FUZZ, _open

TEXT_COLUMNS = ("target", "method", "draft", "gpu", "engine", "weight_dtype", "kv_dtype")
TEXT_COLUMNS += ("acceptance_per_position",)
NUMBER_COLUMNS = tuple(c for c in EDITOR_COLUMNS if c not in TEXT_COLUMNS)
DOUBLES = sorted(
    {float(x) for x in NASTY_NUMBERS if abs(x) <= sys.float_info.max} | {1e6, 64.0, 3.0, 0.7, 0.05},
    key=str,
)
"""What a number cell can hold once the browser sends it: a finite double (JSON has no
inf or NaN; an emptied cell is null)."""
TEXTS = [*NASTY_TEXT[:38], "llama-3.1-8b", "eagle", "h100-sxm", "fp8", "0.9;0.8", "none", ""]


class Refused(Exception):
    """The page showed an error for the table (its text)."""


PLAUSIBLE = {
    "target": st.sampled_from(sorted(default_models())),
    "method": st.sampled_from(METHODS),
    "draft": st.sampled_from(["", *sorted(default_models())]),
    "gpu": st.sampled_from(sorted(default_gpus())),
    "num_gpus": st.sampled_from([1, 2, 4, 8]),
    "engine": st.sampled_from(ENGINE_CHOICES),
    "weight_dtype": st.sampled_from(WEIGHT_DTYPES),
    "kv_dtype": st.sampled_from(KV_DTYPES),
    "k": st.integers(0, 16),
    "acceptance_rate": st.floats(0, 1),
    "acceptance_per_position": st.sampled_from(["", "0.9;0.8;0.7", "0.5"]),
    "temperature": st.floats(0, 100),
    "batch_size": st.integers(1, 4096),
    "prompt_len": st.integers(0, 200_000),
    "output_len": st.integers(1, 100_000),
    "gpu_hourly_usd": st.floats(0, 100),
    "gpu_memory_utilization": st.floats(0.05, 1),
    "requests_per_day": st.floats(0, 1e10),
}
"""What the editor's own controls let a user choose in each column."""


def cell(column: str) -> st.SearchStrategy:
    """A value the editor's controls allow two times in three, else a hostile one."""
    hostile = st.sampled_from(TEXTS) if column in TEXT_COLUMNS else st.sampled_from(DOUBLES)
    return st.integers(0, 2).flatmap(lambda i: PLAUSIBLE[column] if i else hostile | st.none())


@st.composite
def edits(draw) -> dict:
    """An editor state: cells edited in the two prefilled rows, at times a row added (a
    copy of one with a cell changed) or a row deleted."""
    edited: dict[int, dict] = {}
    for _ in range(draw(st.integers(1, 3))):
        column = draw(st.sampled_from(EDITOR_COLUMNS))
        edited.setdefault(draw(st.integers(0, 1)), {})[column] = draw(cell(column))
    added = []
    if draw(st.booleans()):
        column = draw(st.sampled_from(EDITOR_COLUMNS))
        added.append({column: draw(cell(column))})
    deleted = [draw(st.integers(0, 1))] if draw(st.integers(0, 4)) == 0 else []
    return {"edited_rows": edited, "added_rows": added, "deleted_rows": deleted}


def _edit(state: dict):
    at = _open("reports", {})
    table = at.data_editor[0].value
    if state["added_rows"]:  # a copy of the spec row with the drawn cell
        row = table.iloc[len(table) - 1].to_dict()
        state = {**state, "added_rows": [{**row, **state["added_rows"][0]}]}
    at.session_state["report_editor"] = state
    at.run()
    assert not at.exception, [e.value[:300] for e in at.exception]
    errors = [e.value for e in at.error]
    if errors:
        raise Refused(" | ".join(errors))
    return at


def _named(exc: BaseException) -> None:
    text = str(exc)
    assert isinstance(exc, Refused) and "row " in text and "field" in text, text


def check_priced(at) -> None:
    """A results row per scenario row; speedups finite and above 0 where the row runs;
    the report download holds the same rows."""
    results = next(d for d in at.dataframe if d.key != "report_editor").value
    if any("table is empty" in i.value for i in at.info):
        assert results is None or len(results) == 0
        return
    report = read_report_csv(at.session_state["report_csv"])
    assert len(report) == len(results) > 0
    ok = report["status"].astype(str) == "ok"
    speedup = pd.to_numeric(report.loc[ok, "speedup"], errors="coerce").to_numpy(float)
    assert np.isfinite(speedup).all() and (speedup > 0).all(), speedup
    assert at.session_state["report_launch_config"].count("row ") >= len(report)


@PAGE_FUZZ
@given(state=edits())
def test_reports_editor(state):
    run_case(
        "reports_editor",
        lambda: _edit(state),
        check_priced,
        refusals=(Refused,),
        refusal_check=_named,
    )
