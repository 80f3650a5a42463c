"""Figures of the Load & SLO page: latency percentiles and goodput against load, from the
request-level simulation's summary table (`simulator.serving.engine.simulate`, one row per load
and arm). Plain functions, so tests can read `fig.data[i].x / .y`."""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class TailVerdict:
    """Where speculation's P99 is worse than the baseline's over the loads sampled.

    `kind`: 'none' (at no load sampled), 'all' (at every load sampled), 'beyond' (above
    `at`), 'below' (below `at`), 'mixed' (the curves cross more than once, at `crossings`).
    `at` and `crossings` are interpolated loads; `text` is the sentence the page shows."""

    kind: str
    at: float | None
    crossings: tuple[float, ...]
    text: str


def plain_load(x: float, unit: str) -> str:
    """A load as people say it: whole requests in flight; requests/s to two significant
    figures below 10 and whole above."""
    if "flight" in unit or x >= 10:
        return f"{round(x):,}"
    return f"{x:.2g}" if x >= 1 else f"{x:.2f}".rstrip("0")


def _differences(table: pd.DataFrame, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(loads, speculative minus baseline `metric`) at each load both arms have a value."""
    x, _ = load_axis(table)
    known = table.dropna(subset=[x, metric])
    arms = known.groupby([x, "arm"])[metric].mean().unstack("arm")
    if not {"spec", "baseline"} <= set(arms.columns):
        return np.zeros(0), np.zeros(0)
    arms = arms.dropna().sort_index()
    return arms.index.to_numpy(dtype=float), (arms["spec"] - arms["baseline"]).to_numpy()


def tail_verdict(
    table: pd.DataFrame, unit: str, metric: str = "tpot_p99_ms", what: str = "P99 TPOT"
) -> TailVerdict | None:
    """Where speculation makes `metric` worse, with each crossing found by linear
    interpolation of the two arms' difference between the sampled loads on either side;
    None where either arm has no value."""
    load, diff = _differences(table, metric)
    if not len(load):
        return None
    worse = diff > 0
    if not worse.any():
        return TailVerdict(
            "none",
            None,
            (),
            f"Speculation makes the {what} worse at no load "
            f"sampled ({plain_load(load[0], unit)} to "
            f"{plain_load(load[-1], unit)} {unit}).",
        )
    if worse.all():
        return TailVerdict(
            "all",
            None,
            (),
            f"Speculation makes the {what} worse at every "
            f"load sampled ({plain_load(load[0], unit)} to "
            f"{plain_load(load[-1], unit)} {unit}).",
        )
    change = np.flatnonzero(worse[1:] != worse[:-1])
    crossings = tuple(
        float(load[i] + (load[i + 1] - load[i]) * diff[i] / (diff[i] - diff[i + 1])) for i in change
    )
    if len(crossings) == 1:
        at = plain_load(crossings[0], unit)
        if worse[-1]:
            return TailVerdict(
                "beyond",
                crossings[0],
                crossings,
                f"Beyond {at} {unit}, speculation makes the {what} worse than without it.",
            )
        return TailVerdict(
            "below",
            crossings[0],
            crossings,
            f"Speculation makes the {what} "
            f"worse only at light load, below {at} {unit}; above it, better.",
        )
    shown = ", ".join(plain_load(c, unit) for c in crossings)
    return TailVerdict(
        "mixed",
        None,
        crossings,
        f"Speculation's {what} crosses the "
        f"baseline's more than once, at about {shown} {unit}: see the chart.",
    )


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
    verdict = tail_verdict(table, "", f"{metric}_p99_ms")
    for cross in verdict.crossings if verdict else ():
        shapes.append(vline(cross, color=BAD, width=1))
        notes.append(
            {
                "text": "P99s cross",
                "showarrow": False,
                "xref": "x",
                "x": cross,
                "xanchor": "left",
                "yref": "y domain",
                "y": 1,
                "yanchor": "top",
            }
        )
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
