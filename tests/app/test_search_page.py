"""The Deployment search page: a tiny search run from the page, its fronts, the links that
open a configuration in the ROI calculator and the Sizer, and a refused specification."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pandas as pd

from app import figures_search
from app.widgets import LINK_PARAMS, link_problems
from simulator.search.table import finish

TINY = """
models: [llama-3.1-8b]
traffic: {rate: 5, prompt: {mean: 512}, output: {mean: 128}}
slo: {p99_tpot_ms: 30, p99_ttft_ms: 2000}
candidates:
  gpus: [h100-sxm]
  tp: [1]
  methods: [none, {method: eagle3, acceptance_rate: 0.8}]
  k: [2]
simulation: {requests: 60}
"""


def _spec_area(at):
    return next(t for t in at.text_area if t.label == "Specification (YAML)")


def test_page_runs_a_search_and_links_each_configuration(app):
    at = app("search")
    _spec_area(at).set_value(TINY).run()
    at.button(key="search_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("Cheapest within the SLO" in s.value for s in at.success)
    table = at.dataframe[0].value
    # Issue 34, smaller defects: the launch command beside the answer, not behind a click,
    # and the answer's range.
    full = finish(at.session_state["search_result"]["rows"])
    best = full[full["optimum"]].iloc[0]
    assert at.code[0].value == best["launch_command"]
    assert best["method"] == "eagle3"
    # Issue 34, smaller defects: the search launched --max-model-len 640 (prompt + output)
    # where the Sizer launches 8192 for the same requests.
    assert "--max-model-len 8192" in best["launch_command"]
    assert any(c.value.startswith("Range") and "replica(s)" in c.value for c in at.caption)
    assert set(table["method"]) == {"none", "eagle3"}
    assert (table["max_rate_rps"] > 0).all()


def test_links_carry_the_configuration_the_pages_can_read():
    row = pd.Series(
        {
            "id": 3,
            "target": "llama-3.1-8b",
            "method": "draft_model",
            "draft": "llama-3.2-1b",
            "gpu": "h100-sxm",
            "tp": 2,
            "kv_dtype": "bf16",
            "weight_dtype": "fp8",
            "k": "per batch",
            "acceptance": "acceptance_rate=0.7",
            "concurrency_at_max_rate": 37.4,
            "max_rate_rps": 4.0,
        }
    )
    links = figures_search.page_links(row, 1024, 256, 20.0)
    for url in links.values():
        query = {k: v[0] for k, v in parse_qs(urlparse(url).query).items()}
        assert set(query) <= LINK_PARAMS
        assert link_problems(query) == {}
        assert query["k"] == "best" and query["draft"] == "llama-3.2-1b"
        assert query["batch_size"] == "37" and query["requests_per_s"] == "20"
    assert urlparse(links["Concurrency sizer"]).path.endswith("/sizer")


def test_a_bad_specification_is_refused_naming_the_field(app):
    at = app("search")
    _spec_area(at).set_value(TINY.replace("gpus:", "gpu:")).run()
    assert not at.exception
    assert any("candidates.gpu" in e.value for e in at.error)


def test_front_figure_marks_the_front():
    table = pd.DataFrame(
        {
            "id": [1, 2, 3],
            "max_rate_rps": [1.0, 2.0, 1.0],
            "status": ["ok"] * 3,
            "method": ["none", "eagle3", "eagle3"],
            "cost_per_mtok_usd": [2.0, 1.0, 3.0],
            "tpot_p99_ms": [20.0, 25.0, 30.0],
            "on_cost_front": [True, True, False],
            "tp": [1] * 3,
            "gpu": ["h100-sxm"] * 3,
            "k": ["0", "2", "4"],
            "weight_dtype": ["default"] * 3,
        }
    )
    fig = figures_search.front_figure(table, "cost")
    front = fig.data[-1]
    assert list(front.x) == [1.0, 2.0] and list(front.y) == [25.0, 20.0]
    assert figures_search.selected_id({"selection": {"points": [{"customdata": 2}]}}) == 2
    assert figures_search.selected_id({"selection": {"points": []}}) is None


def test_an_answer_on_a_published_prior_carries_its_acceptance_band(app):
    """Issue 34, wrong answer 2 on the deployment search: its range held the step-time
    error alone. A specification whose acceptance is the published chat prior gets the
    prior's band too (wider than the error alone); a typed one says it is taken as given."""
    from app import sim

    alpha = sim.prior("chat", "eagle3", "llama-3.1-8b").alpha
    captions = {}
    for name, rate in (("prior", f"{alpha:.4f}"), ("typed", "0.8")):
        at = app("search")
        _spec_area(at).set_value(TINY.replace("acceptance_rate: 0.8", f"acceptance_rate: {rate}"))
        at.run()
        at.button(key="search_run").click().run()
        assert not at.exception, [e.value for e in at.exception]
        captions[name] = next(c.value for c in at.caption if c.value.startswith("Range"))
    typed, prior = captions["typed"].replace("\\", ""), captions["prior"].replace("\\", "")
    assert "taken as given" in typed and "acceptance α" not in typed
    assert "acceptance α" in prior and "spread across datasets" in prior, prior

    def width(text: str) -> float:
        lo, hi = text.split("Range: ")[1].split(" requests/s")[0].split("-")
        return float(hi) / float(lo)

    assert width(prior) > width(typed) * 1.02, (prior, typed)
