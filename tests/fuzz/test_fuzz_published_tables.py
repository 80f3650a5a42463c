"""Fuzz the published table's shape (`python -m simulator validate --published`): a few
bundled cases with a column renamed to a near miss (`batchsize`, `Prompt_Len`, `alpha`),
deleted, given twice, added under any name, or the columns or rows reordered, cut or
repeated. `test_fuzz_published.test_published_cells` changes cells of a fixed header;
this is the family that found a misspelt scenario column scored at its default without
a word (issue 24, "Hardening" 4).

A near miss of a scenario column must be refused naming it; a reordered table scores as
the original does; anything else is refused naming the file, row or column, or scored
sanely (`test_fuzz_published.check_scores`).
"""

from __future__ import annotations

import csv
import io
import random

import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from simulator.errors import InputError
from simulator.inputs.scenarios import INPUT_COLUMNS
from simulator.validation.published import load_published, score
from tests.fuzz.harness import FUZZ, check_refusal, nasty_text, run_case
from tests.fuzz.test_fuzz_published import HEADER, ROWS, TMP, check_scores

BODY = ROWS[1:7]
SCENARIO_NAMES = [c for c in HEADER if c in INPUT_COLUMNS and len(c) >= 4]
"""Scenario columns of the file long enough that one slip leaves a near miss."""
ALIASES = {"acceptance_rate": "alpha", "mean_accepted_tokens": "tau", "target": "model"}
KINDS = ["typo", "typo", "alias", "delete", "twice", "unknown", "reorder", "rows", "blank"]


def _typo(name: str, how: int, at: int) -> str:
    """A slip of the keyboard: underscores dropped, another case, a letter dropped or
    doubled, two letters swapped."""
    i = 1 + at % (len(name) - 2)
    slips = [
        name.replace("_", "") if "_" in name else name.upper(),
        name.upper(),
        name.title(),
        name[:i] + name[i + 1 :],
        name[:i] + name[i] + name[i:],
    ]
    return slips[how % len(slips)]


def _write(rows: list[list[str]]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    path = TMP / "published-table.csv"
    path.write_text(buf.getvalue(), encoding="utf-8", errors="surrogatepass")
    return str(path)


def _score(rows: list[list[str]]) -> pd.DataFrame:
    path = _write(rows)
    return score(load_published(path), source=path)


ORIGINAL = _score([HEADER, *BODY])


def _mutate(kind: str, column: str, how: int, at: int, text: str):
    """The table, and the name a refusal must give (None: any)."""
    header, body = list(HEADER), [list(r) for r in BODY]
    j = header.index(column)
    must_name = None
    if kind == "typo":
        header[j] = must_name = _typo(column, how, at)
    elif kind == "alias":
        column = list(ALIASES)[how % len(ALIASES)]
        header[header.index(column)] = must_name = ALIASES[column]
    elif kind == "delete":
        del header[j]
        for r in body:
            del r[j]
    elif kind == "twice":
        header.append(column)
        for r in body:
            r.append(r[j])
    elif kind == "unknown":
        header.append(text)
        for r in body:
            r.append(text)
    elif kind == "reorder":
        order = list(range(len(header)))
        random.Random(at).shuffle(order)
        header = [header[i] for i in order]
        body = [[r[i] for i in order] for r in body]
    elif kind == "rows":
        body = [body[(at + i * how) % len(body)] for i in range(1 + how % 8)]
    else:
        header[j] = ""
    return [header, *body], must_name


def _check_reordered(out: pd.DataFrame) -> None:
    check_scores(out)
    pd.testing.assert_frame_equal(out, ORIGINAL)


@FUZZ
@given(
    kind=st.sampled_from(KINDS),
    column=st.sampled_from(HEADER),
    typo_of=st.sampled_from(SCENARIO_NAMES),
    how=st.integers(0, 100),
    at=st.integers(0, 100),
    text=nasty_text(),
)
def test_published_tables(kind, column, typo_of, how, at, text):
    table, must_name = _mutate(kind, typo_of if kind == "typo" else column, how, at, text)

    def named(exc: BaseException) -> None:
        check_refusal(exc)
        if must_name is not None:
            assert isinstance(exc, InputError) and exc.field == must_name, (must_name, str(exc))

    def check(out: pd.DataFrame) -> None:
        assert must_name is None, f"a column named {must_name!r} was scored without a word"
        (_check_reordered if kind == "reorder" else check_scores)(out)

    run_case("published_tables", lambda: _score(table), check, refusal_check=named)
