"""Fuzz the dashboard's pages over the catalogs: a link that picks any target, method,
draft, GPU and GPU count (and at times a batch, a prompt length, a K, a workload, the
weights' and the KV cache's dtypes, or a page's other mode: the Sizer's P99 sizing and
tokens/s SLO, the Load page's closed loop) opens the ROI calculator, the Sizer, the
Reports page and the Load & SLO page (two load points of 100 requests) without an
exception, and no figure a page shows as a metric reads 'nan' or
'inf'. A scenario that cannot run is a fine answer (the
page says why); a traceback is not.

This is what found the Reports page crashing wherever no K can run (a draft that does
not fit beside the target, or a target that does not fit at all), which the parsers'
fuzz tests could not reach. A page run costs far more than a parser call, so these tests
draw PAGE_CASES cases in `make test` and PAGE_LONG_CASES in `make fuzz`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from app.presets import MEASURED, WORKLOADS
from app.widgets import WEIGHT_CHOICES
from simulator.inputs.catalog import default_gpus, default_models
from simulator.inputs.specs import KV_DTYPES, METHODS
from tests.fuzz.harness import EXPLORE, FUZZ, LONG, run_case, warm

ENTRY = Path(__file__).resolve().parents[2] / "app" / "streamlit_app.py"
PAGES = ("roi", "sizer", "reports", "load")
SMALL_LOAD = {"load_points": 2, "load_requests": 100}
"""The Load page's inputs in these cases: its default, six points of 300 requests, costs
a second a case."""
PAGE_CASES = 8
PAGE_LONG_CASES = 150
"""Cases per page: 8 (about 3 s a page) in `make test`, 150 in `make fuzz`."""

MODELS = sorted(default_models())
GPUS = sorted(default_gpus())
PAGE_FUZZ = settings(FUZZ, max_examples=PAGE_LONG_CASES if LONG or EXPLORE else PAGE_CASES)


@st.composite
def links(draw) -> dict[str, str]:
    method = draw(st.sampled_from(METHODS))
    query = {
        "target": draw(st.sampled_from(MODELS)),
        "method": method,
        "gpu": draw(st.sampled_from(GPUS)),
        "num_gpus": draw(st.sampled_from(["1", "2", "4", "8"])),
    }
    if method == "draft_model":
        query["draft"] = draw(st.sampled_from(MODELS))
    extras = {
        "batch_size": st.sampled_from(["1", "16", "256", "4096"]),
        "prompt_len": st.sampled_from(["1", "100000", "1000000"]),
        "k": st.sampled_from(["best", "1", "8", "16"]),
        "workload": st.sampled_from([*WORKLOADS, MEASURED]),
        "weight_dtype": st.sampled_from(WEIGHT_CHOICES),
        "kv_dtype": st.sampled_from(KV_DTYPES),
        # Modes of one page each; the other pages ignore them. The Sizer's P99 sizing
        # simulates each arm.
        "size_on": st.just("P99 at the SLO (request-level simulation)"),
        "slo_kind": st.just("tokens/s per user"),
        "load_kind": st.just("concurrency (closed loop)"),
    }
    for key, values in extras.items():
        if draw(st.booleans()):
            query[key] = draw(values)
    return query


def _open(page: str, query: dict[str, str]) -> AppTest:
    at = AppTest.from_file(str(ENTRY), default_timeout=60)
    for key, value in query.items():
        at.query_params[key] = value
    if page == "load":
        for key, value in SMALL_LOAD.items():
            at.session_state[key] = value
    if page != "roi":
        at.switch_page(f"views/{page}.py")
    at.run()
    return at


def check_page(at: AppTest) -> None:
    assert not at.exception, [e.value[:300] for e in at.exception]
    for m in at.metric:
        shown = f"{m.value} {m.delta or ''}".lower()
        assert "nan" not in shown and "inf" not in shown, (m.label, m.value, m.delta)


for _page in PAGES:
    warm(lambda page=_page: _open(page, {}))


@pytest.mark.parametrize("page", PAGES)
@PAGE_FUZZ
@given(query=links())
def test_pages_over_the_catalogs(page, query):
    if _on_composite(query.get("target")):
        # An MoE or MLA target's first page builds the engine's surfaces, about 1 s per
        # (model, GPU, engine, layout) and kept on disk: a one-time cost, not a hang.
        warm(lambda: _open(page, query))
    run_case(f"page_{page}", lambda: _open(page, query), check_page)


def _on_composite(target: str | None) -> bool:
    spec = default_models().get(str(target))
    return bool(spec and spec.aic_model and (spec.is_moe or spec.is_mla or spec.kv_layers))
