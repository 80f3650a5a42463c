"""Acceptance page: a vLLM /metrics scrape becomes alpha and tau, a scrape without the
counters says so, and the measured figures feed the planning pages."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from app.samples import EXAMPLE_SCRAPE
from simulator import predict
from simulator.inputs.metrics import parse_vllm_metrics

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


def _scrape(drafts, draft_tokens, accepted, per_pos=()) -> str:
    lines = [
        f"vllm:spec_decode_num_drafts_total {drafts}",
        f"vllm:spec_decode_num_draft_tokens_total {draft_tokens}",
        f"vllm:spec_decode_num_accepted_tokens_total {accepted}",
    ]
    lines += [
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}} {c}'
        for i, c in enumerate(per_pos)
    ]
    return "\n".join(lines) + "\n"


BAD_SCRAPES = {
    "rising": (_scrape(1000, 4000, 2400, [480, 500, 300, 240]), "rise with position"),
    "sum-above-total": (
        _scrape(1000, 4000, 2400, [800, 700, 500, 500, 100]),
        "per-position sum above the accepted total",
    ),
    "accepted-over-drafted": (_scrape(1000, 4000, 5000), "more accepted than drafted"),
    "non-integer-k": (_scrape(1000, 2500, 1900), "non-integer drafts per round"),
    "superscript-position": (
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="²"} 1\n',
        "plain integer",
    ),
    "huge-position": (
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="99999999999"} 1\n',
        "beyond the 64 positions",
    ),
    "tiny-drafts": (_scrape(1e-310, 4, 2), "at least 1"),
    "nan": ("vllm:spec_decode_num_drafts_total NaN\n", "finite count"),
}


@pytest.mark.parametrize("case", list(BAD_SCRAPES))
def test_refused_scrape_keeps_the_previous_acceptance(app, case):
    text, needle = BAD_SCRAPES[case]
    at = app("acceptance")
    at.button(key="load_example").click().run()
    at.button(key="use_measured").click().run()
    good = dict(at.session_state["measured_acceptance"])
    at.text_area(key="scrape_text").input(text).run()
    assert not at.exception, [e.value for e in at.exception]
    assert any(needle in e.value for e in at.error), [e.value for e in at.error]
    assert at.session_state["measured_acceptance"] == good
    assert at.session_state["workload"] == "measured"
    assert any("keep the figures from pasted scrape" in i.value for i in at.info)
    assert not at.metric


def test_each_inconsistency_is_its_own_error(app):
    at = app("acceptance")
    at.text_area(key="scrape_text").input(_scrape(1000, 4000, 5000, [480, 500, 300, 240])).run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 2
    assert any("more accepted than drafted" in e for e in errors)
    assert any("rise with position" in e for e in errors)


def test_typed_k_does_not_override_the_scrapes_k(app):
    at = app("acceptance")
    at.number_input(key="scrape_k").set_value(1).run()
    at.button(key="load_example").click().run()
    assert not at.exception and not at.error
    # At K = 1 the scrape's tau 1.91 would give alpha 1.000; its own K = 3 gives 0.790.
    assert _metric(at, "K") == "3"
    assert _metric(at, "Acceptance rate α") == "0.790"
    assert at.session_state["measured_acceptance"]["k"] == 3
    assert any("K typed (1) was not used" in i.value for i in at.info)


def test_typed_k_is_used_for_a_v0_scrape(app):
    v0 = (
        "vllm:spec_decode_num_draft_tokens_total 500\n"
        "vllm:spec_decode_num_accepted_tokens_total 300\n"
    )
    at = app("acceptance")
    at.number_input(key="scrape_k").set_value(5).run()
    at.text_area(key="scrape_text").input(v0).run()
    assert not at.exception and not at.error
    assert _metric(at, "K") == "5"
    assert _metric(at, "Mean accepted tokens τ") == "4.000"


def test_per_batch_k_scrape_uses_the_per_position_counters(app):
    # 600 rounds at K = 2 and 400 at K = 4 (mean 2.8), i.i.d. alpha 0.5.
    text = _scrape(1000, 2800, 825, [500, 250, 50, 25])
    at = app("acceptance")
    at.text_area(key="scrape_text").input(text).run()
    assert not at.exception and not at.error
    assert _metric(at, "K") == "≤ 4 (mean 2.80)"
    assert _metric(at, "Acceptance rate α") == "0.500"
    assert any("per-batch K schedule" in i.value for i in at.info)
    measured = at.session_state["measured_acceptance"]
    assert measured["per_batch_k"] and measured["k"] == 4
    assert measured["acceptance_per_position"] == parse_vllm_metrics(text).acceptance_per_position
    assert measured["acceptance_per_position"].startswith("0.5000;0.2500;")
    bounds = next(d.value for d in at.dataframe if "at most" in d.value.columns)
    assert list(bounds["position"]) == [1, 2, 3, 4]


def test_a_scrape_of_another_model_or_method_is_flagged(app):
    """Issue 34, smaller defects: a /metrics scrape of another model or method planned
    the scenario without a word. The example scrape's counters name Llama-3.3-70B: planning
    Llama-3.1-8B with it, or another method than the one it was loaded under, says so."""
    assert parse_vllm_metrics(EXAMPLE_SCRAPE).model_names == ("meta-llama/Llama-3.3-70B-Instruct",)
    at = app("acceptance", query={"method": "eagle"})
    at.button(key="load_example").click().run()
    assert not [w for w in at.warning if "may not measure" in w.value]
    at.button(key="use_measured").click().run()
    at.switch_page("views/roi.py").run()
    assert not [w for w in at.sidebar.warning if "may not measure" in w.value]
    at.session_state["target"] = "llama-3.1-8b"
    at.session_state["method"] = "draft_model"
    at.run()
    (warning,) = [w.value for w in at.sidebar.warning if "may not measure" in w.value]
    text = warning.replace("\\", "")
    assert (
        "meta-llama/Llama-3.3-70B-Instruct" in text and "meta-llama/Llama-3.1-8B-Instruct" in text
    )
    assert "method eagle" in text and "draft_model" in text


def test_a_local_snapshot_path_names_the_same_model_as_its_repo():
    from app.widgets import _same_model

    repo = "meta-llama/Llama-3.3-70B-Instruct"
    assert _same_model("/models/llama-3.3-70b-instruct/", repo)
    assert _same_model(repo, repo)
    assert not _same_model("meta-llama/Llama-3.1-8B-Instruct", repo)
    assert not _same_model("anything", "")
