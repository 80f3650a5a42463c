"""Figures of the Load & SLO page: latency percentiles and goodput against load, from the
request-level simulation's summary table (`simulator.serving.simulate`, one row per load
and arm). Plain functions, so tests can read `fig.data[i].x / .y`."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from app.figures import BAD, BASELINE_COLOR, SPEC_COLOR, frame, hline, hline_label, vline

ARM_COLORS = {"baseline": BASELINE_COLOR, "spec": SPEC_COLOR}


def load_axis(table: pd.DataFrame) -> tuple[str, str]:
    """The column that holds the load and its axis title."""
    if table["rate"].notna().any():
        return "rate", "request rate (requests/s)"
    return "concurrency", "concurrency (requests in flight)"


def tail_crossover(table: pd.DataFrame, metric: str = "tpot_p99_ms") -> float | None:
    """The smallest load at which speculation's `metric` is worse than the baseline's."""
    x, _ = load_axis(table)
    arm = table["arm"].astype(str).to_numpy()
    load = table[x].to_numpy(dtype=float)
    value = table[metric].to_numpy(dtype=float)
    spec = arm == "spec"
    known = ~np.isnan(value)
    for at in np.unique(load[spec & ~np.isnan(load)]):  # ascending
        here = (load == at) & known
        # A few points at most: the mean of each arm's (NaN-free) values at this load.
        s, b = value[here & spec], value[here & (arm == "baseline")]
        if len(s) and len(b) and s.mean() > b.mean():
            return float(at)
    return None


def latency_vs_load(
    table: pd.DataFrame, metric: str, title: str, *, slo_ms: float | None = None
) -> go.Figure:
    """P50 (dotted) and P99 (solid) of `metric` ('tpot' or 'ttft') per arm, the SLO line."""
    x, x_title = load_axis(table)
    traces = []
    for arm, rows in table.groupby("arm", sort=False):
        rows = rows.sort_values(x)
        for q, dash in (("p50", "dot"), ("p99", "solid")):
            traces.append(
                {
                    "type": "scatter",
                    "x": rows[x].to_numpy(),
                    "y": rows[f"{metric}_{q}_ms"].to_numpy(),
                    "name": f"{arm} {q.upper()}",
                    "mode": "lines+markers",
                    "line": {"color": ARM_COLORS.get(str(arm)), "dash": dash},
                    "hovertemplate": f"{arm} {q.upper()}: %{{y:.1f}} ms<extra></extra>",
                }
            )
    shapes, notes = [], []
    if slo_ms is not None:
        shapes.append(hline(slo_ms, color=BAD, dash="dash"))
        notes.append(hline_label(slo_ms, "SLO"))
    cross = tail_crossover(table, f"{metric}_p99_ms")
    if cross is not None:
        shapes.append(vline(cross, color=BAD, width=1))
    return go.Figure(
        data=traces, layout=frame(title, x_title, "ms", shapes=shapes, annotations=notes)
    )


def goodput_vs_load(table: pd.DataFrame) -> go.Figure:
    """Goodput (requests/s meeting both SLOs) per arm, with the offered load for scale."""
    x, x_title = load_axis(table)
    traces = []
    for arm, rows in table.groupby("arm", sort=False):
        rows = rows.sort_values(x)
        traces.append(
            {
                "type": "scatter",
                "x": rows[x].to_numpy(),
                "y": rows["goodput_rps"].to_numpy(),
                "name": str(arm),
                "mode": "lines+markers",
                "line": {"color": ARM_COLORS.get(str(arm))},
            }
        )
    if x == "rate":
        loads = np.sort(table["rate"].unique())
        traces.append(
            {
                "type": "scatter",
                "x": loads,
                "y": loads,
                "name": "offered",
                "mode": "lines",
                "line": {"color": "#d0d7de", "dash": "dash"},
            }
        )
    return go.Figure(
        data=traces, layout=frame("Goodput at the SLO", x_title, "requests/s meeting both SLOs")
    )
