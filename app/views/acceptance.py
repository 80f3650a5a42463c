"""Acceptance from production: read vLLM's speculative-decoding counters from a /metrics
scrape, derive alpha and the mean accepted tokens, and feed them to the other pages."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import figures, sim, widgets
from app.presets import MEASURED
from app.samples import EXAMPLE_SCRAPE
from simulator.errors import InputError
from simulator.inputs.metrics import (
    FROM_DRAFTS,
    FROM_GIVEN,
    FROM_POSITIONS,
    MAX_SCRAPE_BYTES,
    InconsistentScrape,
    SpecDecodeMetrics,
    parse_vllm_metrics,
)
from simulator.model.acceptance import positions_iid

MAX_UPLOAD_MB = max(1, MAX_SCRAPE_BYTES // (1024 * 1024))
_K_HELP = {
    FROM_DRAFTS: "Measured: drafted tokens / drafts in the scrape.",
    FROM_POSITIONS: "Measured: the number of per-position counters in the scrape.",
    FROM_GIVEN: "As typed: this scrape does not count drafts or positions.",
}

st.title("Acceptance from production")
st.caption(
    "Paste what `curl http://<vllm-host>:8000/metrics` returns, or upload it. The "
    "speculative-decoding counters give the acceptance your traffic really sees; the "
    "planning pages can then use it instead of a published figure."
)


def _load_example() -> None:
    """The example goes into the text box, and a file kept from earlier is forgotten:
    otherwise the file, read first, would hide the example the user asked for."""
    st.session_state["scrape_text"] = EXAMPLE_SCRAPE
    widgets.forget_upload("scrape_upload")


def _use_everywhere() -> None:
    measured = st.session_state.get(sim.MEASURED_KEY)
    if measured:
        st.session_state["workload"] = MEASURED
        st.session_state["acceptance_rate"] = round(float(measured["alpha"]), 3)
        if st.session_state.get("method", "none") == "none":
            st.session_state["method"] = "eagle"


def _refuse(exc: InputError) -> None:
    """One error per problem; the planning pages keep the acceptance they already had."""
    if isinstance(exc, InconsistentScrape):
        for problem in exc.problems:
            st.error(
                f"Scrape refused: {widgets.plain(exc.file)}: {widgets.plain(problem)}",
                icon=":material/error:",
            )
    else:
        widgets.show_error(exc, "Cannot derive acceptance")
    kept = st.session_state.get(sim.MEASURED_KEY)
    if kept:
        st.info(
            f"The planning pages keep the figures from {widgets.plain(kept['source'])}: "
            f"α {kept['alpha']:.3f}, τ {kept['tau']:.3f} at K={kept['k']}."
        )


def _parse(payload: str | bytes, source: str, k: int) -> SpecDecodeMetrics | None:
    """The scrape's figures, or None (refused, with the reasons shown)."""
    try:
        return parse_vllm_metrics(payload, k=k or None, source=source)
    except InputError as exc:
        _refuse(exc)
        return None


def _measured(metrics: SpecDecodeMetrics, source: str) -> dict:
    """What the planning pages read from st.session_state[sim.MEASURED_KEY]."""
    return {
        "alpha": float(metrics.alpha),
        "tau": float(metrics.mean_accepted_tokens),
        "k": int(metrics.k),
        "mean_k": float(metrics.mean_k),
        "per_batch_k": bool(metrics.per_batch_k),
        "draft_acceptance_rate": float(metrics.draft_acceptance_rate),
        "acceptance_per_position": metrics.acceptance_per_position,
        "source": source,
        "model_names": list(metrics.model_names),
        "method": str(st.session_state.get("method", "")),
        "target": str(st.session_state.get("target", "")),
    }


def _k_shown(metrics: SpecDecodeMetrics) -> str:
    """K as measured: one number, or the schedule's largest and mean under a per-batch K."""
    if metrics.per_batch_k:
        return f"≤ {metrics.k} (mean {metrics.mean_k:.2f})"
    return f"{metrics.k}"


def _position_bounds(metrics: SpecDecodeMetrics) -> pd.DataFrame:
    """Per-batch schedule: the range each position's acceptance lies in."""
    rates = metrics.per_position_rates or []
    return pd.DataFrame(
        {
            "position": list(range(1, len(rates) + 1)),
            "at least (used)": rates,
            "at most": metrics.per_position_upper or rates,
        }
    )


left, right = st.columns([2, 1])
text = left.text_area(
    "Scrape (Prometheus text format)",
    key="scrape_text",
    persist_state="session",
    height=230,
    placeholder="# TYPE vllm:spec_decode_num_drafts_total counter\n"
    'vllm:spec_decode_num_drafts_total{engine="0"} 18452.0\n...',
)
upload = widgets.kept_upload(
    right,
    "…or upload a scrape file",
    type=["txt", "prom", "metrics"],
    max_upload_size=MAX_UPLOAD_MB,
    key="scrape_upload",
)
k_given = right.number_input(
    "K the server ran with (only for scrapes that cannot tell K)",
    0,
    16,
    0,
    key="scrape_k",
    persist_state="session",
    help="Used only for vLLM V0 scrapes without per-position counters. V1 scrapes count "
    "drafts, so K follows from drafted / drafts (or from the per-position counters); a K "
    "typed here does not override it. Leave 0.",
)
right.button("Load an example scrape", on_click=_load_example, key="load_example")

source, payload = None, None
if upload is not None:
    source, payload = upload
    if text and text.strip():
        st.info(
            f"Reading the uploaded file {widgets.plain(upload[0])}; the pasted text is not "
            "used while a file is uploaded. Remove the file to read the text."
        )
elif text and text.strip():
    source, payload = "pasted scrape", text


metrics = None
if payload is not None:
    metrics = _parse(payload, source, int(k_given))
else:
    st.info("Paste a scrape, upload one, or load the example.")

if metrics is not None:
    st.session_state[sim.MEASURED_KEY] = _measured(metrics, source)
    st.subheader(f"From {widgets.plain(source)}")
    m = st.columns(4)
    m[0].metric(
        "Mean accepted tokens τ",
        f"{metrics.mean_accepted_tokens:.3f}",
        help="Tokens emitted per target step, bonus token included: 1 + accepted / drafts.",
    )
    m[1].metric(
        "Acceptance rate α",
        f"{metrics.alpha:.3f}",
        help="Position 1's acceptance rate (exact under a per-batch K schedule)."
        if metrics.per_batch_k
        else "The i.i.d. per-token acceptance that gives this τ at this K.",
    )
    m[2].metric(
        "vLLM draft acceptance rate",
        f"{metrics.draft_acceptance_rate:.3f}",
        help="accepted / drafted = (τ - 1) / mean K. Not α.",
    )
    m[3].metric("K", _k_shown(metrics), help=_K_HELP[metrics.k_source])
    for note in metrics.notes:
        st.info(widgets.plain(note), icon=":material/info:")
    other = widgets.measured_mismatch(
        st.session_state[sim.MEASURED_KEY],
        str(st.session_state.get("target", "")),
        str(st.session_state.get("method", "")),
    )
    if other:
        st.warning(other, icon=":material/warning:")
    counters = pd.DataFrame(
        {
            "counter": [
                "drafts",
                "draft tokens",
                "accepted tokens",
                "emitted tokens (V0)",
            ],
            "value": [
                metrics.num_drafts,
                metrics.num_draft_tokens,
                metrics.num_accepted_tokens,
                metrics.num_emitted_tokens,
            ],
        }
    )
    c1, c2 = st.columns([1, 2])
    c1.dataframe(counters, hide_index=True, key="acceptance_counters")
    if metrics.per_position_rates:
        rates = metrics.per_position_rates
        df = pd.DataFrame(
            {
                "position": list(range(1, len(rates) + 1)),
                "measured": rates,
                "iid": positions_iid(metrics.alpha, len(rates)).ravel(),
            }
        )
        c2.plotly_chart(figures.acceptance_by_position(df), key="acceptance_positions")
        c2.caption(
            "Per-position rates are what the planning pages use in 'measured' mode: an "
            "i.i.d. α overstates τ at large K when the rates fall with position."
        )
        if metrics.per_batch_k:
            c2.dataframe(_position_bounds(metrics), hide_index=True, key="position_bounds")
    else:
        c2.info("This scrape has no per-position counters; the pages will use α.")
    st.button(
        "Use these figures on every page",
        on_click=_use_everywhere,
        type="primary",
        key="use_measured",
        icon=":material/check:",
    )
    if st.session_state.get("workload") == MEASURED:
        st.success("The planning pages use these figures (workload preset 'measured').")
