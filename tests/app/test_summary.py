"""The decision summary (Markdown) the ROI page offers (issue 27, What users expect)."""

from __future__ import annotations

from app.summary import decision_summary

ROW = {
    "speedup": 1.71,
    "monthly_saving_usd": 20_382.4,
    "replicas_baseline": 6,
    "replicas_spec": 4,
    "cost_per_mtok_baseline": 3.67,
    "cost_per_mtok_spec": 2.147,
    "baseline_tpot_ms": 30.3,
    "spec_tpot_ms": 17.7,
}


def _text(**kw):
    args = dict(
        title="t",
        method_label="EAGLE-3",
        k=4,
        batch=32,
        row=ROW,
        crossover=180.4,
        pays_from_start=True,
        basis="From a published prior.",
    )
    return decision_summary(**{**args, **kw})


def test_the_summary_says_where_to_turn_it_on_and_what_it_saves():
    text = _text()
    assert "Turn on EAGLE-3 below batch 180" in text and "keep it off above batch 180" in text
    assert "saves $20,382 a month" in text and "6 -> 4 replicas" in text
    assert "From a published prior." in text


def test_every_batch_or_none():
    assert "pays at every batch sampled" in _text(crossover=None)
    assert "Keep EAGLE-3 off" in _text(pays_from_start=False)
    assert "costs $5 a month more" in _text(row={**ROW, "monthly_saving_usd": -5})


def test_the_roi_page_offers_it(app):
    at = app("roi")
    labels = [b.proto.label for b in at.get("download_button")]
    assert "Decision summary (Markdown)" in labels


def test_the_summary_names_engine_range_schedule_command_and_link(app):
    """Issue 34, smaller defects: the summary named none of the engine, the range, the K
    schedule, the launch command or the link."""
    query = {"engine": "sglang", "target": "llama-3.3-70b", "method": "eagle3", "num_gpus": "4"}
    at = app("roi", query={**query, "gpu": "h100-sxm", "batch_size": "32"})
    text = at.session_state["roi_summary"]
    assert "Engine: SGLang." in text
    assert "With the model's typical error at batch 32" in text
    schedule = text.split("K schedule (batch range: K): ")[1].split(".\n")[0]
    assert schedule.startswith("1-") and ": " in schedule
    assert "python -m sglang.launch_server" in text and "--max-running-requests 32" in text
    link = text.split("Reopen these figures: ")[1].split("\n")[0]
    assert link.startswith("/?") and "engine=sglang" in link and "target=llama-3.3-70b" in link
