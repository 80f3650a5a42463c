"""`simulator.inputs.io.csv_frame`: the CSV reader of the published set and the Validation page's
upload refuses what pandas would read wrong without a word."""

from __future__ import annotations

import io

import pandas as pd
import pytest

from simulator.errors import InputError
from simulator.inputs.io import csv_frame


def test_a_row_one_field_longer_is_refused_not_shifted():
    text = b"a,b,c\n1,2,3,4\n"
    # pandas takes the first field as the index and moves every value one column left.
    assert pd.read_csv(io.BytesIO(text)).iloc[0].tolist() == [2, 3, 4]
    with pytest.raises(InputError, match="row 2: has 4 fields where the header names 3"):
        csv_frame(text, "t.csv")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (b"a,b,c\n1,2\n", "row 2: has 2 fields"),
        (b"a,b,c\n1,2,3\n\n1,2,3,4\n", "row 3: has 4 fields"),  # blank lines are not rows
        (b"a, b,a\n1,2,3\n", "row 1, field 'a': column appears twice"),
        (b"", "is empty"),
        (b"\xff\xfe,a\n", "not a readable CSV table"),
    ],
)
def test_what_pandas_would_misread_is_refused(text, needle):
    with pytest.raises(InputError) as exc:
        csv_frame(text, "t.csv")
    assert needle in str(exc.value)


def test_names_are_stripped_and_a_byte_order_mark_and_blank_lines_are_skipped():
    df = csv_frame(b"\xef\xbb\xbf\n a ,b\n\n1,x\n2,y\n", "t.csv", dtype=str)
    assert list(df.columns) == ["a", "b"]
    assert df.to_dict("list") == {"a": ["1", "2"], "b": ["x", "y"]}


@pytest.mark.parametrize(("sep", "word"), [(";", "semicolons"), ("\t", "tabs")])
def test_a_table_separated_otherwise_is_named_as_such(sep, word):
    """A spreadsheet in many locales saves ';' between fields: one column of unknown name
    otherwise, and a message about a missing column that would not say why."""
    text = f"mode{sep}workload{sep}batch\nx{sep}y{sep}1\n".encode()
    with pytest.raises(InputError, match=f"row 1: the header's names are separated by {word}"):
        csv_frame(text, "t.csv")
