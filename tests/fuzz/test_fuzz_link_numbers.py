"""Fuzz the dashboard's pages with links whose numbers overflow or sit at the edge of
their inputs (`?batch_size=1e400`, `?prompt_len=1e309`, `?k_max=inf`, twenty nines):
each page opens without an exception, says which parameter it ignored, and drops it from
the address. `test_fuzz_links` checks the link readers as pure functions, which were
right; this is the family that found Streamlit seeding a URL-bound input from the link
as first read and stopping the page on `int(float('inf'))` (issue 24, "Hardening" 2).
A page run costs what `test_fuzz_pages` says: this draws PAGE_CASES per page in `make
test` and LINK_LONG_CASES in `make fuzz` (13 parameters x 23 values need fewer cases than
the catalogs' combinations there).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.widgets import LINK_NUMBERS, link_problems, plain
from tests.fuzz.harness import EXPLORE, FUZZ, LONG, run_case
from tests.fuzz.test_fuzz_pages import PAGE_CASES, PAGES, _open, check_page

LINK_LONG_CASES = 60
"""Cases per page in `make fuzz`."""
LINK_FUZZ = settings(FUZZ, max_examples=LINK_LONG_CASES if LONG or EXPLORE else PAGE_CASES)

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


class Ignored(Exception):
    """The page opened, ignoring the link's parameters named here, and said so."""


def _open_link(page: str, query: dict[str, str]):
    """The page opened on the link: no exception, no metric reading nan or inf (as
    `check_page`), and every parameter `link_problems` rejects named in a warning and
    gone from the address (then Ignored, counted as a refusal)."""
    at = _open(page, query)
    check_page(at)
    said = " ".join(w.value for w in at.sidebar.warning)
    ignored = link_problems(query)
    for key in ignored:
        assert f"Ignored the link's {plain(key)} " in said, (key, query[key], said[:300])
        # Gone, or (load_points, load_requests: the harness keeps the Load page small and
        # those inputs are bound to the address) replaced by the input's own value.
        assert at.query_params.get(key) != query[key], key
    if ignored:
        raise Ignored(", ".join(f"{key}={query[key]}" for key in ignored))
    return at


def _named(exc: BaseException) -> None:
    assert isinstance(exc, Ignored) and "=" in str(exc), exc


@pytest.mark.parametrize("page", PAGES)
@LINK_FUZZ
@given(
    query=st.dictionaries(
        st.sampled_from(NUMBER_KEYS), st.sampled_from(EDGE_NUMBERS), min_size=1, max_size=4
    )
)
def test_link_numbers(page, query):
    run_case(
        f"link_numbers_{page}",
        lambda: _open_link(page, query),
        refusals=(Ignored,),
        refusal_check=_named,
    )
