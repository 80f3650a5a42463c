"""Acceptance page: a vLLM /metrics scrape becomes alpha and tau, a scrape without the
counters says so, and the measured figures feed the planning pages."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from app.samples import EXAMPLE_SCRAPE
from simulator import predict
from simulator.metrics import parse_vllm_metrics

NO_SPEC = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0"} 3.0
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0"} 123456.0
"""


def _metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def test_empty_page_asks_for_a_scrape(app):
    at = app("acceptance")
    assert not at.error
    assert any("Paste a scrape" in i.value for i in at.info)


def test_example_scrape_gives_tau_alpha_and_per_position_rates(app, charts):
    at = app("acceptance")
    at.button(key="load_example").click().run()
    assert not at.exception and not at.error
    # 18452 drafts, 35203 accepted tokens: tau = 1 + 35203 / 18452.
    assert _metric(at, "Mean accepted tokens τ") == f"{1 + 35203 / 18452:.3f}"
    expected = parse_vllm_metrics(EXAMPLE_SCRAPE)
    assert _metric(at, "Acceptance rate α") == f"{expected.alpha:.3f}"
    assert _metric(at, "K") == "3"
    bars = charts(at)["acceptance_positions"]["data"][0]
    np.testing.assert_allclose(bars["y"], [14390 / 18452, 11810 / 18452, 9003 / 18452])
    assert at.session_state["measured_acceptance"]["tau"] == pytest.approx(1 + 35203 / 18452)


def test_scrape_without_counters_says_so(app):
    at = app("acceptance")
    at.text_area(key="scrape_text").input(NO_SPEC).run()
    assert not at.exception
    assert any("no speculative-decoding counters" in e.value for e in at.error)
    assert not at.metric


def test_malformed_scrape_names_the_line(app):
    at = app("acceptance")
    at.text_area(key="scrape_text").input("vllm:spec_decode_num_drafts_total{oops 1 2 3 4\n").run()
    assert not at.exception
    assert any("row 1" in e.value for e in at.error)


def test_uploaded_scrape_is_read_and_a_binary_one_is_refused(app):
    at = app("acceptance")
    up = at.file_uploader(key="scrape_upload")
    up.set_value(("metrics.txt", EXAMPLE_SCRAPE.encode(), "text/plain")).run()
    assert not at.error
    assert "metrics.txt" in at.subheader[0].value
    at.file_uploader(key="scrape_upload").set_value(
        ("metrics.txt", b"\xff\xfe\xfa binary", "text/plain")
    ).run()
    assert not at.exception
    assert any("UTF-8" in e.value for e in at.error)


def test_measured_acceptance_feeds_the_roi_page(app):
    at = app("acceptance")
    at.button(key="load_example").click().run()
    at.button(key="use_measured").click().run()
    assert at.session_state["workload"] == "measured"
    at.session_state["k"] = "3"
    at.switch_page("views/roi.py").run()
    assert not at.exception, [e.value for e in at.exception]
    row = at.session_state["roi_row"]
    metrics = parse_vllm_metrics(EXAMPLE_SCRAPE)
    assert row["acceptance_per_position"] == metrics.acceptance_per_position
    expected = predict(
        pd.DataFrame(
            [
                {
                    "target": "llama-3.3-70b",
                    "method": "eagle",
                    "gpu": "h100-sxm",
                    "num_gpus": 4,
                    "k": 3,
                    "batch_size": 16,
                    "acceptance_per_position": metrics.acceptance_per_position,
                }
            ]
        )
    ).iloc[0]
    # At K = 3 the measured rates give back the scrape's own tau (to the rounding of the
    # four-decimal per-position string).
    assert expected["tau"] == pytest.approx(metrics.mean_accepted_tokens, abs=2e-4)
    assert row["k"] == 3
    assert row["tau"] == pytest.approx(expected["tau"])
    assert row["speedup"] == pytest.approx(expected["speedup"])
