"""Validation: the simulator's predicted speedup against real speculative decoding measured
on a machine by `python -m profiler validate`, from the bundled CSV or an uploaded one."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app import engine_imports, serving_runs_view, sim, widgets
from app import figures_validation as fv
from simulator.errors import InputError
from simulator.validation.published import Summary, summarise
from simulator.validation.refit import CV_CSV, cv_summary, read_cv

VALIDATION_DIR = Path(__file__).resolve().parents[2] / "data" / "validation"
MAX_UPLOAD_MB = max(1, fv.MAX_CSV_BYTES // (1024 * 1024))


def _filter_key(name: str, options: list) -> str:
    """A filter's widget key, one per set of options: a file with other modes, workloads
    or batches starts with all of its own selected, not with the last file's choices
    (which would match none of its points); one with the same options keeps the choice."""
    digest = hashlib.sha1("\x1f".join(map(str, options)).encode()).hexdigest()[:12]
    return f"{name}:{digest}"


@st.cache_data(show_spinner=False, max_entries=16)
def _parse(data: bytes, name: str) -> pd.DataFrame:
    return fv.read_validation_csv(data, name)


@st.cache_resource(show_spinner=False, max_entries=2)
def _published_view(key: tuple[str, int]) -> tuple[Summary, go.Figure, bytes]:
    """What the published tab shows, built once per version of published.csv (`key`: its
    path and modification time): nothing on the tab depends on an input. Shared, not copied: the
    page only reads these (`st.plotly_chart` serialises the figure)."""
    errors = sim.published_errors()
    shown = errors.rename(columns={"published_speedup": "measured_speedup"}).assign(
        mode=errors["source_id"], workload=errors["method"], batch=errors["batch_size"]
    )
    csv = errors.to_csv(index=False).encode()
    return summarise(errors), fv.predicted_vs_measured(shown), csv


def _bundled() -> dict[str, Path]:
    if not VALIDATION_DIR.is_dir():
        return {}
    return {p.name: p for p in sorted(VALIDATION_DIR.glob("*_validation.csv"))}


CV_LABELS = {
    "in_sample": "in-sample",
    "cross_validated": "cross-validated",
    "signed_in_sample": "signed in",
    "signed_cross_validated": "signed cv",
}


def _cross_validated(errors: pd.DataFrame) -> None:
    """In-sample against leave-one-source-out errors, from the bundled table when it was
    written by this version of the model."""
    table = read_cv(CV_CSV, errors)
    if table is None:
        st.warning(
            "No cross-validated figures for this version of the model: run `python -m "
            "simulator validate --published data/validation/published.csv --cross-validate "
            "--out data/validation/published_cv.csv` (about a minute).",
            icon=":material/warning:",
        )
        return
    s = cv_summary(table)
    overall = s["all"].iloc[0]
    c1, c2, c3 = st.columns(3)
    c1.metric("median |error| in-sample", f"{overall['in_sample']:.1%}")
    c2.metric(
        "cross-validated (leave one source out)",
        f"{overall['cross_validated']:.1%}",
        help="Each source scored with the constants fitted on the development set refitted "
        "without it: the error to expect on a source the fit has not seen.",
    )
    c3.metric("signed, cross-validated", f"{overall['signed_cross_validated']:+.1%}")
    st.markdown("**In-sample against cross-validated**, by source and by engine")
    for name in ("source", "engine"):
        table = s[name].rename(columns=CV_LABELS).round(3)
        st.dataframe(table, key=f"published_cv_{name}")


st.title("Validation")
published_tab, machine_tab, serving_tab, engine_tab = st.tabs(
    ["Published measurements", "Real runs on this machine", "Serving runs", "Your engine"]
)

with engine_tab:
    engine_imports.validation_section()

with published_tab:
    st.caption(
        "The model against speedups that vLLM, SGLang and research engines published "
        "(`data/validation/published.csv`: each case cites its source, table and line, "
        "and states what the source left out). One set of defaults for every case; "
        "`python -m simulator validate --published data/validation/published.csv --out "
        "errors.csv` reproduces this table. Error = predicted / published - 1."
    )
    try:
        errors = sim.published_errors()
    except (InputError, OSError) as exc:
        st.error(f"Published set unreadable: {widgets.plain(exc)}", icon=":material/error:")
        errors = None
    if errors is not None:
        summary, scatter, errors_csv = _published_view(
            (str(sim.PUBLISHED_CSV), sim.modified_ns(sim.PUBLISHED_CSV))
        )
        below = int((summary.reversals["predicted_speedup"] < 1.0).sum())
        p1, p2, p3, p4 = st.columns(4)
        p1.metric("published cases scored", summary.cases)
        p2.metric("median |error| vs published", f"{summary.median_abs_error:.1%}")
        p3.metric("signed median", f"{summary.signed_median:+.1%}", help="+ means optimistic")
        p4.metric(
            "reversals predicted as slowdowns",
            f"{below} of {len(summary.reversals)}",
            help="Published speedups below 1 that the model also predicts below 1: the sign right.",
        )
        missed = len(summary.reversals) - below
        if missed:
            st.caption(
                f"Of {len(summary.reversals)} published slowdowns, {missed} predicted as "
                "speed-ups (the sign wrong); the errors per case (download below) list them."
            )
        _cross_validated(errors)
        st.plotly_chart(scatter, key="published_scatter")
        for title, table in (
            ("By batch", summary.by_batch),
            ("By method", summary.by_method),
            ("By source", summary.by_source),
        ):
            st.markdown(f"**{title}**")
            st.dataframe(table.round(3), key=f"published_{title.split()[-1]}")
        st.download_button(
            "Download the errors per case (CSV)",
            errors_csv,
            file_name="published_errors.csv",
            mime="text/csv",
            key="published_download",
        )
        with st.expander("Every scored case"):
            st.dataframe(errors, hide_index=True, key="published_all")

with machine_tab:
    st.caption(
        "SpecPlan checks itself: `python -m profiler validate` runs real speculative decoding "
        "with a small trained byte-level draft/target pair on the machine, measures the speedup "
        "over plain decoding, profiles the same two models and asks the simulator for its "
        "prediction at every point, using the acceptance measured there. Points on the dashed "
        "line are predicted exactly; the grey cone is ±10%."
    )

    bundled = _bundled()
    upload = widgets.kept_upload(
        st,
        "Upload a validation CSV (`<device>_validation.csv`)",
        type=["csv"],
        max_upload_size=MAX_UPLOAD_MB,
        key="validation_upload",
        help="Read as data only: CSV text, checked column by column.",
    )
    df = None
    source = ""
    if upload is not None:
        name, data = upload
        try:
            df = _parse(data, name)
            source = f"uploaded: {name}"
        except InputError as exc:
            widgets.show_error(exc, "Rejected")
    if df is None and bundled:
        choice = st.selectbox(
            "Bundled validation", list(bundled), key="validation_bundled", persist_state="session"
        )
        try:
            df = _parse(sim.file_bytes(bundled[choice]), f"data/validation/{choice}")
            source = f"bundled: data/validation/{choice}"
        except InputError as exc:
            widgets.show_error(exc, "Bundled file rejected")
    if df is None:
        st.info(
            "No validation data: nothing under data/validation/ and nothing uploaded. Run "
            "`python -m profiler validate` and upload `data/validation/cpu_validation.csv`."
        )
        st.stop()

    modes = list(dict.fromkeys(df["mode"]))
    workloads = list(dict.fromkeys(df["workload"]))
    c1, c2, c3 = st.columns(3)
    batches = sorted(int(b) for b in df["batch"].unique())
    pick_modes = c1.multiselect(
        "Decoding",
        modes,
        default=modes,
        key=_filter_key("validation_modes", modes),
        persist_state="session",
    )
    pick_workloads = c2.multiselect(
        "Workload",
        workloads,
        default=workloads,
        key=_filter_key("validation_workloads", workloads),
        persist_state="session",
    )
    pick_batches = c3.multiselect(
        "Batch",
        batches,
        default=batches,
        key=_filter_key("validation_batches", batches),
        persist_state="session",
    )
    view = df[
        df["mode"].isin(pick_modes)
        & df["workload"].isin(pick_workloads)
        & df["batch"].isin(pick_batches)
    ]
    if view.empty:
        st.warning("No points match the filters.")
        st.stop()

    s = fv.error_summary(view)
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("points", s["points"])
    m2.metric("median |error|", f"{s['median_abs_error']:.1%}")
    m3.metric("90th percentile |error|", f"{s['p90_abs_error']:.1%}")
    m4.metric("inside ±10%", f"{s['within_band']:.0%}")
    ablation = ""
    iso = None
    if "predicted_speedup_isolated_draft" in view:
        iso_pred = pd.to_numeric(view["predicted_speedup_isolated_draft"], errors="coerce")
        iso = (iso_pred / view["measured_speedup"] - 1).abs()
    if iso is not None and iso.notna().any():
        ablation = (
            f" Without the profile's in-loop draft times (the draft priced as K isolated "
            f"steps) the median |error| would be {iso.median():.1%}."
        )
    st.caption(f"Source: {widgets.plain(source)}. Error = predicted / measured - 1.{ablation}")

    st.plotly_chart(fv.predicted_vs_measured(view), key="validation_scatter")
    st.plotly_chart(fv.acceptance_by_position(view), key="validation_acceptance")

    worst = view.assign(abs_error=(view["predicted_speedup"] / view["measured_speedup"] - 1).abs())
    cols = [
        c
        for c in (
            "mode",
            "workload",
            "batch",
            "k",
            "tau_measured",
            "measured_speedup",
            "predicted_speedup",
            "error",
            "spec_step_ms",
            "predicted_spec_step_ms",
        )
        if c in worst
    ]
    st.subheader("Worst points")
    st.dataframe(
        worst.sort_values("abs_error", ascending=False)[cols].head(10),
        hide_index=True,
        key="validation_worst",
    )
    with st.expander("All points"):
        st.dataframe(view, hide_index=True, key="validation_all")

with serving_tab:
    serving_runs_view.render()
