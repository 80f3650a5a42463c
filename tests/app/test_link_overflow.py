"""Links whose numbers overflow (issue 24, "Hardening" 2): the page says it ignored the
value and opens on the input's default. Streamlit seeds a URL-bound number input from the
address as the page first read it, not from `st.query_params` after the link layer drops
a key, and its `int(float('1e400'))` raised; the link layer now drops the value there too.
"""

from __future__ import annotations

import pytest

from app import widgets

OVERFLOWING = [
    ("roi", "batch_size", "1e400"),
    ("roi", "batch_size", "inf"),
    ("roi", "batch_size", "-inf"),
    ("sizer", "output_len", "1e400"),
    ("roi", "prompt_len", "1e309"),
    ("load", "prompt_len", "1e309"),
    ("sizer", "k_max", "1e400"),
    ("roi", "requests_per_day", "1e400"),
    ("sizer", "slo_tpot_ms", "1e400"),
    ("sizer", "max_model_len", "-1e400"),
]


@pytest.mark.parametrize(("page", "key", "value"), OVERFLOWING)
def test_an_overflowing_number_in_a_link_is_ignored_and_said(app, page, key, value):
    at = app(page, query={key: value})  # the fixture asserts no exception
    said = " ".join(w.value for w in at.sidebar.warning)
    assert f"Ignored the link's {widgets.plain(key)} " in said, said
    assert key not in at.query_params


def test_the_input_opens_on_its_default_and_the_rest_of_the_link_is_kept(app):
    at = app("roi", query={"batch_size": "1e400", "prompt_len": "2048"})
    assert at.number_input(key="batch_size").value == 16
    assert at.number_input(key="prompt_len").value == 2048
