"""Fuzz the dashboard's readers of a link's query parameters, as pure functions: each
parameter is taken in range (a dropdown's: one of its options) or reported
(`link_problems`), never passed on to an input that would stop the page or drop it
without a word."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from app.widgets import (
    LINK_K_VALUES,
    LINK_NUMBERS,
    LINK_PARAMS,
    alpha_from_param,
    link_problems,
    positions_from_param,
)
from simulator.inputs.catalog import default_gpus, default_models
from simulator.inputs.specs import METHODS
from tests.fuzz.harness import FUZZ, nasty_text, run_case

CHOICES = {"target": list(default_models()), "gpu": list(default_gpus()), "method": list(METHODS)}
"""Dropdowns and their options, as the sidebar passes them to `link_problems`."""
KEYS = [*LINK_NUMBERS, "k", "pos", "acceptance_rate", *CHOICES]
SAMPLES = ("best", "16", "0.9", "0.5_0.4", "1;0.9;0.8", "4096", "abc")
NEAR_CHOICES = ("llama-3.1-8b", "h100-sxm", "eagle", "H100-SXM", " eagle", "none")
VALUE = nasty_text() | st.sampled_from([*SAMPLES, *NEAR_CHOICES])


class Refused(Exception):
    """A parameter reported by link_problems (its message names the key)."""


def _read(params: dict[str, str]):
    problems = link_problems(params, CHOICES)
    kept = {k: v for k, v in params.items() if k not in problems}
    assert set(kept) <= LINK_PARAMS, set(kept) - LINK_PARAMS  # no name passes unread
    for key, options in CHOICES.items():
        if key in kept:
            assert kept[key] in options, (key, kept[key])
    for key, (low, high, whole) in LINK_NUMBERS.items():
        if key in kept:
            # What the pages do with a kept value: int() or float() of the text.
            number = int(kept[key]) if whole else float(kept[key])
            assert math.isfinite(number) and low <= number <= high, (key, kept[key])
    if "k" in kept:
        assert kept["k"] in LINK_K_VALUES
        if kept["k"] != "best":
            int(kept["k"])
    alpha = alpha_from_param(params.get("acceptance_rate"))
    assert alpha is None or 0 <= alpha <= 1
    pos = positions_from_param(params["pos"]) if "pos" in params else None
    if pos is not None:
        rates = [float(r) for r in pos.split(";")]
        assert all(0 <= r <= 1 for r in rates) and rates == sorted(rates, reverse=True)
    if problems:
        raise Refused("; ".join(f"{k}: {why}" for k, why in problems.items()))
    return kept


def _named(exc: BaseException) -> None:
    assert any(f"{k}:" in str(exc) for k in KEYS) or "not a parameter" in str(exc), exc


NAMES = st.sampled_from(KEYS) | st.sampled_from(["batchsize", "K", "gpus", ""]) | nasty_text()
"""Parameter names: the ones the pages read, near misses, and anything at all."""


@FUZZ
@given(params=st.dictionaries(NAMES, VALUE, max_size=5))
def test_link_parameters(params):
    run_case("query_params", lambda: _read(params), refusals=(Refused,), refusal_check=_named)


@FUZZ
@given(value=st.lists(VALUE, max_size=40).map("_".join) | VALUE)
def test_link_positions(value):
    run_case("query_params", lambda: _read({"pos": value}))
