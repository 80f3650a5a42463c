"""Fuzz the dashboard's pages with links whose numbers overflow or sit at the edge of
their inputs (`?batch_size=1e400`, `?prompt_len=1e309`, `?k_max=inf`, twenty nines):
each page opens without an exception, says which parameter it ignored, and drops it from
the address. `test_fuzz_links` checks the link readers as pure functions, which were
right; this is the family that found Streamlit seeding a URL-bound input from the link
as first read and stopping the page on `int(float('inf'))` (issue 24, "Hardening" 2).
A page run costs what `test_fuzz_pages` says, so this draws as many cases per page.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.widgets import LINK_NUMBERS, link_problems, plain
from tests.fuzz.harness import run_case
from tests.fuzz.test_fuzz_pages import PAGE_FUZZ, PAGES, _open, check_page

EDGE_NUMBERS = [
    "1e400",
    "-1e400",
    "1e309",
    "1e308",
    "inf",
    "-inf",
    "Infinity",
    "nan",
    "9" * 20,
    "9" * 400,
    "18446744073709551616",
    "1e19",
    "1e-400",
    "-0",
    "0",
    "1",
    "16",
    "4096",
    "4097",
    "0.5",
    "1e3",
    "+16",
    " 16",
]
NUMBER_KEYS = sorted(LINK_NUMBERS)


def check_link(at, query: dict[str, str]) -> None:
    """`check_page`, and every parameter `link_problems` rejects is named in a warning
    and gone from the address."""
    check_page(at)
    said = " ".join(w.value for w in at.sidebar.warning)
    for key in link_problems(query):
        assert f"Ignored the link's {plain(key)} " in said, (key, query[key], said[:300])
        assert key not in at.query_params, key


@pytest.mark.parametrize("page", PAGES)
@PAGE_FUZZ
@given(
    query=st.dictionaries(
        st.sampled_from(NUMBER_KEYS), st.sampled_from(EDGE_NUMBERS), min_size=1, max_size=4
    )
)
def test_link_numbers(page, query):
    run_case(f"link_numbers_{page}", lambda: _open(page, query), lambda at: check_link(at, query))
