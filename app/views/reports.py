"""Reports: an editable scenario table, prefilled from the planning pages, run through the
simulator; the sizing report (every input and output column, units in the headers) and
the launch configuration as downloads."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from app import acceptance_band, engine_notes, library_saves, sim, widgets
from app.formatting import span
from app.operating_point import DEFAULT_UTIL, operating_point, row_command
from app.operating_point import carried as _carried
from simulator.errors import InputError
from simulator.inputs.specs import KV_DTYPES, METHODS, WEIGHT_DTYPES
from simulator.kernels.tables import ENGINE_CHOICES
from simulator.model.predict import CANNOT_RUN_REASONS, status_reasons
from simulator.planning.preflight import K_MAX_SENSIBLE
from simulator.planning.reports import (
    MAX_REQUESTS_PER_DAY,
    add_economics,
    add_error_ranges,
    add_preflight,
    launch_config_text,
    report_csv,
)

ROWS_KEY = "report_rows"
EDITOR_KEY = "report_editor"
# The table as last shown, edits applied. Streamlit forgets an editor's edits once its page
# is left, so a return to this page starts the editor from this table instead.
EDITED_KEY = "report_rows_edited"
EDITOR_COLUMNS = (
    "target",
    "method",
    "draft",
    "gpu",
    "num_gpus",
    "engine",
    "weight_dtype",
    "kv_dtype",
    "k",
    "acceptance_rate",
    "acceptance_per_position",
    "temperature",
    "batch_size",
    "prompt_len",
    "output_len",
    "gpu_hourly_usd",
    "gpu_memory_utilization",
    "requests_per_day",
)
SHOWN = {
    # The decision first, narrow enough to read at 1024 px with the sidebar open: what the
    # row runs, and what it does to speed and money (`DECISION_WIDTHS`).
    "method": "method",
    "k": "K",
    "batch_size": "batch",
    "speedup": "speedup [x]",
    "replicas_spec": "replicas",
    "monthly_cost_spec_usd": "$/month",
    "monthly_saving_usd": "saving $/month",
    "status": "status",
    # Then the ranges (inserted here, `RANGES`), the cost per token and how it gets there.
    "cost_per_mtok_spec": "$/1M tok after",
    "cost_per_mtok_baseline": "$/1M tok before",
    "target": "target",
    "alpha": "α (i.i.d., same τ at this K)",
    "spec_tpot_ms": "TPOT [ms]",
    "spec_tok_s_per_user": "tok/s per user",
    "spec_tok_s": "tok/s per replica",
    "max_concurrency_spec": "max concurrency",
    "fits": "fits",
    "preflight": "pre-flight",
}
ROW = "#"
# Pixels per decision column: 564 in all, the results grid's width at a 1024 px window with
# the sidebar open.
DECISION_WIDTHS = {
    ROW: 34,
    "method": 92,
    "K": 34,
    "batch": 54,
    "speedup [x]": 86,
    "replicas": 72,
    "$/month": 84,
    "saving $/month": 108,
}
RANGES = {
    # label: (report column at the low end, at the high end, format)
    "speedup range": ("speedup_low", "speedup_high", "{:.2f}x"),
    "replicas ± error": ("replicas_spec_low", "replicas_spec_high", "{:.0f}"),
    "$/month ± error": ("monthly_cost_spec_low_usd", "monthly_cost_spec_high_usd", "${:,.0f}"),
}
K_SEARCH = range(1, K_MAX_SENSIBLE + 1)  # as the ROI page's 'best K'


def _range_basis(report: pd.DataFrame) -> str:
    """What each speculative row's range holds: the step-time error at its batch and the
    acceptance band it was given; rows that hold the same are named together."""
    rows: dict[str, list[int]] = {}
    for i, r in enumerate(report.to_dict("records"), start=1):
        if not np.isfinite(float(r.get("speedup_error", np.nan))):
            continue
        text = f"±{float(r['speedup_error']):.0%} step time"
        low, high = float(r.get("alpha_low", np.nan)), float(r.get("alpha_high", np.nan))
        if np.isfinite([low, high]).all() and high - low > 1e-6:
            text += f", α {low:.3f}-{high:.3f} ({r['acceptance_band']})"
        elif r.get("acceptance_band"):
            text += f" ({r['acceptance_band']})"
        rows.setdefault(text, []).append(i)
    parts = [
        f"row{'s' if len(ids) > 1 else ''} {', '.join(map(str, ids))}: {text}"
        for text, ids in rows.items()
    ]
    return (
        "Ranges (the columns after status) hold the model's validated step-time error at "
        "each row's batch (Validation page) and the acceptance's own band: "
        + "; ".join(parts)
        + "."
    )


st.title("Reports")
st.caption(
    "One row per scenario. The table starts from the scenario in the sidebar: the baseline, "
    "speculation at the ROI page's K and batch, and the Concurrency sizer's operating point "
    "for it; edit, add or delete rows, and the results "
    "and downloads follow."
)
scenario = widgets.scenario_inputs()


def _prefill() -> pd.DataFrame:
    """Rows from the current scenario: the baseline, speculation at the ROI page's K and
    batch, and the Sizer's operating point for this scenario (`operating_point`, never a
    result another page left in the session) where it speculates and is another row."""
    batch = int(_carried("batch_size", 16))
    k_choice = str(_carried("k", "best"))
    base = scenario.base()
    if scenario.speculative:
        k = sim.best_k(base, batch, K_SEARCH) if k_choice == "best" else int(k_choice)
    else:
        k = 0
    util = float(_carried("gpu_memory_utilization", DEFAULT_UTIL))
    rows = [scenario.row(0, batch, method="none", draft="")]
    if scenario.speculative:
        rows.append(scenario.row(k, batch))
        choice = operating_point(scenario)
        if choice and choice["k"] > 0 and (choice["k"], choice["batch_size"]) != (k, batch):
            rows.append(scenario.row(int(choice["k"]), int(choice["batch_size"])))
    df = pd.DataFrame(rows)
    for col in EDITOR_COLUMNS:
        if col not in df.columns:
            df[col] = np.nan
    df.loc[df["method"] == "none", ["acceptance_rate", "acceptance_per_position"]] = np.nan
    df["gpu_memory_utilization"] = util
    df["requests_per_day"] = scenario.requests_per_day
    # The sidebar's engine and temperature price every row, as on the ROI page.
    df["engine"] = scenario.engine
    df["temperature"] = float(scenario.temperature)
    for col in ("draft", "acceptance_per_position"):
        df[col] = df[col].astype(object).fillna("").astype(str)
    for col in ("acceptance_rate", "gpu_hourly_usd", "temperature"):
        df[col] = df[col].astype(float)
    return df[list(EDITOR_COLUMNS)].reset_index(drop=True)


def _best_saving(report: pd.DataFrame) -> str:
    """The row that saves the most a month against the same row without speculation."""
    savings = pd.to_numeric(report["monthly_saving_usd"], errors="coerce").to_numpy(float)
    savings = np.where(np.isfinite(savings), savings, -np.inf)
    i = int(np.argmax(savings))
    if savings[i] <= 0:
        return "No row saves money against its own setup without speculation."
    r = report.iloc[i]
    return (
        f"Largest monthly saving: row {i + 1} ({widgets.plain(r['method'])} K={int(r['k'])}, "
        f"batch {int(r['batch_size'])} on {int(r['num_gpus'])} x {widgets.plain(r['gpu'])}), "
        f"${savings[i]:,.0f} a month against the same setup without speculation."
    )


def _kernel_source(rows: pd.DataFrame) -> str:
    """A kernel-table latency source among `rows` if any has one, else the first row's:
    the engine's host costs apply wherever one row is priced by its tables."""
    sources = rows.get("latency_source", pd.Series(dtype=str)).astype(str)
    return next(
        (s for s in sources if s.startswith("kernels")), sources.iloc[0] if len(sources) else ""
    )


def _reset() -> None:
    for key in (ROWS_KEY, EDITOR_KEY, EDITED_KEY):
        st.session_state.pop(key, None)


if EDITOR_KEY not in st.session_state and EDITED_KEY in st.session_state:
    # Back from another page: the edits are gone from the editor, not from this table.
    st.session_state[ROWS_KEY] = st.session_state.pop(EDITED_KEY)
library_saves.report_from_link(ROWS_KEY, (EDITOR_KEY, EDITED_KEY), EDITOR_COLUMNS)
try:
    if ROWS_KEY not in st.session_state:
        st.session_state[ROWS_KEY] = _prefill()
except InputError as exc:
    widgets.show_error(exc, "Scenario")
    st.stop()

models, gpus = sim.models(), sim.gpus()
config = {
    "target": st.column_config.SelectboxColumn("target", options=list(models), required=True),
    "method": st.column_config.SelectboxColumn("method", options=list(METHODS), required=True),
    "draft": st.column_config.SelectboxColumn("draft", options=["", *models]),
    "gpu": st.column_config.SelectboxColumn("gpu", options=list(gpus), required=True),
    "num_gpus": st.column_config.NumberColumn("GPUs", min_value=1, max_value=64, step=1),
    "engine": st.column_config.SelectboxColumn(
        "engine",
        options=list(ENGINE_CHOICES),
        help="its kernel tables and host costs price the row; the launch config is its",
    ),
    "weight_dtype": st.column_config.SelectboxColumn("weights", options=list(WEIGHT_DTYPES)),
    "kv_dtype": st.column_config.SelectboxColumn("KV", options=list(KV_DTYPES)),
    "k": st.column_config.NumberColumn("K", min_value=0, max_value=16, step=1),
    "acceptance_rate": st.column_config.NumberColumn(
        "α", min_value=0.0, max_value=1.0, step=0.001, format="%.3f"
    ),
    "acceptance_per_position": st.column_config.TextColumn(
        "per-position",
        help="p1;p2;... instead of α (leave α empty then); the CSV holds every position",
        width="small",
    ),
    "temperature": st.column_config.NumberColumn(
        "temperature",
        min_value=0.0,
        max_value=100.0,
        step=0.1,
        help="sampling temperature; above 0 each step pays the rejection sampler",
    ),
    "batch_size": st.column_config.NumberColumn("batch", min_value=1, step=1),
    "prompt_len": st.column_config.NumberColumn("prompt", min_value=0, step=1),
    "output_len": st.column_config.NumberColumn("output", min_value=1, step=1),
    "gpu_hourly_usd": st.column_config.NumberColumn(
        "$/GPU-h", min_value=0.0, format="%.2f", help="empty: catalog price"
    ),
    "gpu_memory_utilization": st.column_config.NumberColumn(
        "mem util", min_value=0.05, max_value=1.0, step=0.01
    ),
    "requests_per_day": st.column_config.NumberColumn(
        "requests/day", min_value=0, max_value=MAX_REQUESTS_PER_DAY, step=1000
    ),
}
st.button("Reset from the current scenario", on_click=_reset, key="report_reset")
edited = st.data_editor(
    st.session_state[ROWS_KEY],
    key=EDITOR_KEY,
    num_rows="dynamic",
    column_config=config,
    hide_index=True,
)
st.session_state[EDITED_KEY] = edited

scenarios = edited.dropna(how="all").reset_index(drop=True)
if not len(scenarios):
    st.info("The table is empty: add a row, or reset it from the current scenario.")
    st.stop()
rpd = pd.to_numeric(scenarios.pop("requests_per_day"), errors="coerce").fillna(
    scenario.requests_per_day
)
try:
    predictions = sim.run_predict(scenarios)
    report = add_preflight(add_economics(predictions, rpd.to_numpy()), models)
    error = sim.speedup_error(report["batch_size"].to_numpy(dtype=float))
    if error is not None:
        report = add_error_ranges(report, error, acceptance_band.report_ends(scenarios))
except InputError as exc:
    widgets.show_error(exc, "Scenario table")
    st.stop()
csv_text = report_csv(report)
st.session_state["report_csv"] = csv_text

st.subheader("Results")
shown = report[list(SHOWN)].rename(columns=SHOWN)
shown.insert(0, ROW, range(1, len(shown) + 1))
if "speedup_error" in report:
    # The model's validated error and the acceptance band, carried to replicas and $/month.
    at = shown.columns.get_loc("status") + 1
    for offset, (label, (lo, hi, fmt)) in enumerate(RANGES.items()):
        shown.insert(
            at + offset,
            label,
            [
                span([a, b], fmt.format) if np.isfinite([a, b]).all() else ""
                for a, b in zip(report[lo].to_numpy(float), report[hi].to_numpy(float), strict=True)
            ],
        )
formats = {
    SHOWN["alpha"]: "%.3f",
    "speedup [x]": "%.2f",
    "TPOT [ms]": "%.2f",
    "tok/s per user": "%.1f",
    "tok/s per replica": "%.0f",
    "$/1M tok before": "%.3f",
    "$/1M tok after": "%.3f",
    # Dollars with separators, the sign before the $, as the ranges beside them.
    "$/month": "dollar",
    "saving $/month": "dollar",
}
columns = {
    label: st.column_config.NumberColumn(format=fmt, width=DECISION_WIDTHS.get(label))
    for label, fmt in formats.items()
}
for label in (ROW, "method", "K", "batch", "replicas"):
    columns[label] = st.column_config.Column(width=DECISION_WIDTHS[label])
columns["status"] = st.column_config.TextColumn(width="small")
columns["pre-flight"] = st.column_config.TextColumn(width="large")
st.dataframe(shown, hide_index=True, key="report_results", column_config=columns)
if "speedup_error" in report:
    st.caption(widgets.plain(_range_basis(report)))
c1, _ = st.columns([1, 4])
which = c1.selectbox(
    "Pre-flight checklist for row",
    list(range(1, len(report) + 1)),
    index=min(1, len(report) - 1),
    key="report_check_row",
    persist_state="session",
)
widgets.checklist_panel(
    report.iloc[int(which) - 1].to_dict(), title=None, horizontal=True, per_row=3
)
library_saves.report_bar(
    edited.dropna(how="all"),
    report,
    rows_key=ROWS_KEY,
    clear=(EDITOR_KEY, EDITED_KEY),
    columns=EDITOR_COLUMNS,
)

# ---------------------------------------------------------------------------- launch
configs = []
for i, r in enumerate(report.to_dict("records"), start=1):
    engine = str(r.get("engine") or "vllm")
    configs.append(
        launch_config_text(
            title=f"row {i}: {r['target']} on {int(r['num_gpus'])} x {r['gpu']}, "
            f"{r['method']} K={int(r['k'])}, batch {int(r['batch_size'])}, engine {engine}",
            engine=engine,
            command=row_command(r, models),
            cannot_run="; ".join(
                reason
                for reason in status_reasons(str(r["status"]))
                if reason in CANNOT_RUN_REASONS
            ),
        )
    )
launch_text = "\n\n".join(configs)
st.session_state["report_launch_config"] = launch_text

st.caption(
    f"{len(report)} scenarios, each an alternative to the others. {_best_saving(report)} "
    "The CSV holds every input and output column with its unit in the header."
)
# A row sized to the buttons: a quarter of the page each cut 'Launch config' at 1024 px.
downloads = st.container(horizontal=True)
downloads.download_button(
    "Report (CSV)",
    csv_text,
    file_name="specplan-report.csv",
    mime="text/csv",
    on_click="ignore",
    icon=":material/download:",
    key="download_report",
)
downloads.download_button(
    "Launch config",
    launch_text,
    file_name="specplan-launch.txt",
    mime="text/plain",
    on_click="ignore",
    icon=":material/terminal:",
    key="download_launch",
)
for engine, rows in report.groupby(report["engine"].fillna("vllm").astype(str)):
    engine_notes.engine_assumptions(
        engine,
        sorted(rows["method"].astype(str).unique()),
        _kernel_source(rows),
        key=f"reports_engine_costs_{engine}",
    )
