"""The Validation page's "Serving runs" tab: absolute TPOT and TTFT against the measured
serving runs aiconfigurator-core ships (`python -m simulator validate --serving bundled`)."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from simulator.validation import serving_runs

FAMILIES = ("dense", "MoE")
"""The runs' two families: dense decoders (GEMM and attention tables) and MoE / MLA
models (aiconfigurator-core's engine, one surface per model, GPU, engine and layout)."""


@st.cache_resource(show_spinner="Pricing the serving runs…", max_entries=4)
def _scored(kernels: bool, family: str = "dense"):
    """The bundled runs of one family scored once per session source (the file ships with
    the package)."""
    from simulator.inputs.catalog import default_models

    runs = serving_runs.load_runs(serving_runs.bundled_runs_path(), default_models())
    runs = runs[runs["family"] == family].reset_index(drop=True)
    return serving_runs.score(runs, kernels=kernels)


@st.cache_resource(max_entries=4)
def _view(kernels: bool, family: str = "dense") -> dict:
    """What the tab shows of the scored runs, built once per source: the tab renders on
    every rerun of the page, whichever tab is open, and the summaries, the figure and the
    CSV took a third of a rerun."""
    errors = _scored(kernels, family)
    tables = serving_runs.summarise(errors)
    overall = tables.pop("overall").iloc[0]
    shown = {}
    for name, table in tables.items():
        shown[name] = table.copy()
        for c in ("tpot_median_abs", "tpot_signed", "ttft_median_abs"):
            shown[name][c] = (100 * shown[name][c]).round(1)
    return {
        "note": serving_runs.excluded_note(errors),
        "overall": overall,
        "tables": shown,
        "figure": _figure(errors),
        "csv": errors.to_csv(index=False).encode(),
    }


def _figure(errors) -> go.Figure:
    fig = go.Figure()
    for engine, part in errors.groupby("engine"):
        fig.add_scatter(
            x=part["measured_tpot_ms"],
            y=part["predicted_tpot_ms"],
            mode="markers",
            name=str(engine),
            text=part["target"]
            + " · "
            + part["gpu"]
            + " · "
            + part["num_gpus"].astype(str)
            + " GPUs",
            hovertemplate="%{text}<br>measured %{x:.1f} ms, predicted %{y:.1f} ms",
        )
    top = float(errors[["measured_tpot_ms", "predicted_tpot_ms"]].max().max())
    fig.add_scatter(x=[0, top], y=[0, top], mode="lines", name="exact", line={"dash": "dot"})
    fig.update_layout(
        xaxis_title="measured TPOT (ms)", yaxis_title="predicted TPOT (ms)", height=420
    )
    return fig


def render() -> None:
    st.caption(
        "Absolute time per output token against the measured serving runs aiconfigurator-core "
        "0.12.0 ships (`systems/silicon_sample.csv`, Apache-2.0): aggregated serving with "
        "vLLM, SGLang and TensorRT-LLM on H100, H200, B200 and GB200. Each run is priced as "
        "`simulator predict` would: method none, steady serving, batch = concurrency (x the "
        "attention-DP ranks). Measured TTFT includes queueing; the predicted one is the "
        "prompt's prefill alone. `python -m simulator validate --serving bundled --out "
        "tpot_errors.csv` reproduces these tables."
    )
    roofline = st.toggle(
        "Price on the roofline (the model before the kernel tables)", key="serving_roofline"
    )
    dense, moe = st.tabs(["Dense models", "MoE and MLA models"])
    with dense:
        st.caption(
            "Llama-3.1-8B/70B and Qwen3-32B in fp8, tensor parallelism 1-8, concurrency 4-512: "
            "the GEMM and attention tables."
        )
        _render_family(not roofline, "dense")
    with moe:
        st.caption(
            "DeepSeek-R1/V3, Kimi-K2.5, GLM-5, MiniMax-M2.5, Qwen3-235B, Qwen3.5-397B and "
            "gpt-oss-120b in fp8, fp4 and int4, with tensor, expert and attention-data "
            "parallelism: aiconfigurator-core's engine over its MoE, MLA and comm tables, one "
            "surface per model, GPU, engine and layout (about a second each the first time, "
            "then kept on disk). InferenceMAX runs are priced at the KV dtype their benchmark "
            "script served and left out where their sweep ran MTP drafts; docs/model.md "
            "section 10 names the table rules each row's source shows."
        )
        if st.session_state.get("serving_moe_scored") or st.button(
            "Score the MoE runs", key="serving_moe_button"
        ):
            st.session_state["serving_moe_scored"] = True
            _render_family(not roofline, "MoE")


def _render_family(kernels: bool, family: str) -> None:
    view = _view(kernels, family)
    st.caption(view["note"])
    overall = view["overall"]
    c1, c2, c3 = st.columns(3)
    c1.metric("runs", int(overall["runs"]))
    c2.metric("median |TPOT error|", f"{100 * overall['tpot_median_abs']:.1f}%")
    c3.metric("signed median", f"{100 * overall['tpot_signed']:+.1f}%")
    st.plotly_chart(view["figure"], key=f"serving_runs_figure_{family}")
    for name, table in view["tables"].items():
        st.markdown(f"**By {name}** (percent)")
        st.dataframe(table, key=f"serving_runs_{family}_{name}")
    st.download_button(
        "Download the errors per run (CSV)",
        view["csv"],
        file_name=f"tpot_errors_{family.lower()}.csv",
        key=f"serving_runs_download_{family}",
    )
