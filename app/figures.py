"""Figure builders: plain functions from DataFrames to plotly figures, so tests can check
`fig.data[i].x / .y` without a browser. Pages only arrange them. No model math here: the
numbers come from the simulator; these functions only draw them.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

BASELINE_COLOR = "#7f8c8d"
SPEC_COLOR = "#1f6feb"
GOOD = "#2da44e"
BAD = "#cf222e"
MEMORY_COLORS = {
    "target weights": "#1f6feb",
    "draft weights": "#8250df",
    "reserves (activations, CUDA graphs, runtime)": "#bf8700",
    "KV cache": "#2da44e",
    "held back (1 - utilisation)": "#d0d7de",
}
_LEGEND_BELOW = {"orientation": "h", "yanchor": "top", "y": -0.2, "xanchor": "left", "x": 0}
"""Below the axis title: a legend of several rows above the plot would cover the title."""


def layout(
    fig: go.Figure, title: str, x: str, y: str, *, height: int = 380, hovermode: str = "x unified"
) -> go.Figure:
    """Title, axis titles, height, margins and a legend below the plot: every figure's frame."""
    fig.update_layout(
        title={"text": title, "font": {"size": 15}},
        xaxis_title=x,
        yaxis_title=y,
        height=height,
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        legend=_LEGEND_BELOW,
        hovermode=hovermode,
    )
    return fig


def _log_batch_axis(fig: go.Figure, batches) -> None:
    """A log batch axis labelled at the batch sizes themselves (powers of two where there
    are many), instead of plotly's 1 2 5 10 2 5 minor labels."""
    values = sorted({int(b) for b in np.asarray(batches, dtype=float) if b > 0})
    if len(values) > 10:
        values = [v for v in values if v & (v - 1) == 0] or values
    fig.update_xaxes(type="log", tickvals=values, ticktext=[f"{v:,}" for v in values])


def _log_value_axis(fig: go.Figure, values) -> None:
    """A log y axis labelled 1-2-5 across the data (0.2, 0.5, 1, 2, 5, ...)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v) & (v > 0)]
    if not v.size:
        return
    lo, hi = v.min() / 1.5, v.max() * 1.5
    ticks = [
        m * 10.0**e
        for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
        for m in (1, 2, 5)
    ]
    ticks = [t for t in ticks if lo <= t <= hi]
    fig.update_yaxes(type="log", tickvals=ticks, ticktext=[f"{t:g}" for t in ticks])


def crossover_batch(batch, speedup) -> float | None:
    """Batch size where a speedup curve first falls to 1, interpolated on a log-batch axis;
    None when it never does in the range (or starts at or below 1)."""
    b = np.asarray(batch, dtype=float)
    s = np.asarray(speedup, dtype=float)
    order = np.argsort(b)
    b, s = b[order], s[order]
    for i in range(1, len(b)):
        if s[i - 1] > 1.0 >= s[i]:
            lo, hi = math.log(b[i - 1]), math.log(b[i])
            frac = (s[i - 1] - 1.0) / (s[i - 1] - s[i])
            return float(math.exp(lo + frac * (hi - lo)))
    return None


def speedup_vs_k(df: pd.DataFrame, *, highlight: str | None = None) -> go.Figure:
    """Speedup against K, one line per acceptance curve.

    `df` columns: curve (legend label), k, speedup. The `highlight` curve (the user's) is
    drawn thicker; a dashed line marks speedup 1.
    """
    fig = go.Figure()
    for curve, rows in df.groupby("curve", sort=False):
        rows = rows.sort_values("k")
        strong = curve == highlight
        fig.add_trace(
            go.Scatter(
                x=rows["k"].to_numpy(),
                y=rows["speedup"].to_numpy(),
                name=str(curve),
                mode="lines+markers",
                line={"width": 4 if strong else 1.5},
                marker={"size": 8 if strong else 5},
            )
        )
    fig.add_hline(y=1.0, line_dash="dash", line_color=BASELINE_COLOR)
    fig.update_xaxes(dtick=1)
    return layout(fig, "Speedup against K", "K (speculative tokens per step)", "speedup (x)")


def speedup_vs_batch(
    df: pd.DataFrame, *, crossover: float | None = None, band: pd.DataFrame | None = None
) -> go.Figure:
    """Speedup against batch size (log axis), one line per curve, the crossover marked.

    `df` columns: curve, batch_size, speedup, k. The first curve is the main one, whose
    `crossover` (see `crossover_batch`) gets a vertical line and a label. `band` (columns
    batch_size, low, high) shades the typical error around it.
    """
    fig = go.Figure()
    if band is not None and len(band):
        band = band.sort_values("batch_size")
        fig.add_trace(
            go.Scatter(
                x=np.concatenate([band["batch_size"], band["batch_size"][::-1]]),
                y=np.concatenate([band["high"], band["low"][::-1]]),
                fill="toself",
                fillcolor="rgba(99, 110, 250, 0.15)",
                line={"width": 0},
                name="typical error",
                hoverinfo="skip",
            )
        )
    for i, (curve, rows) in enumerate(df.groupby("curve", sort=False)):
        rows = rows.sort_values("batch_size")
        fig.add_trace(
            go.Scatter(
                x=rows["batch_size"].to_numpy(),
                y=rows["speedup"].to_numpy(),
                name=str(curve),
                mode="lines+markers",
                line={"width": 3 if i == 0 else 1.5, "dash": "solid" if i == 0 else "dot"},
                customdata=rows["k"].to_numpy(),
                hovertemplate="batch %{x}: %{y:.2f}x at K=%{customdata}<extra></extra>",
            )
        )
    fig.add_hline(y=1.0, line_dash="dash", line_color=BASELINE_COLOR)
    if crossover is not None:
        fig.add_vline(x=crossover, line_color=BAD, line_width=2)
        fig.add_annotation(
            x=math.log10(crossover),
            yref="paper",
            y=0.98,
            text=f"crossover ≈ batch {crossover:,.0f}: beyond it speculation is slower ",
            showarrow=False,
            xanchor="right",
            font={"color": BAD},
        )
    else:
        fig.add_annotation(
            xref="paper",
            yref="paper",
            x=0.98,
            y=0.95,
            showarrow=False,
            text="speculation pays over the whole range",
            font={"color": GOOD},
            xanchor="right",
        )
    _log_batch_axis(fig, df["batch_size"])
    return layout(
        fig, "Speedup against batch size", "batch size (concurrent sequences)", "speedup (x)"
    )


def cost_before_after(df: pd.DataFrame) -> go.Figure:
    """$ per 1M tokens and monthly cost, baseline against speculative.

    `df` columns: case, cost_per_mtok, monthly_cost_usd (one row per case).
    """
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=("$ per 1M output tokens", "monthly cost ($)")
    )
    colors = [BASELINE_COLOR if c == "baseline" else SPEC_COLOR for c in df["case"]]
    for col, (name, fmt) in enumerate(
        (("cost_per_mtok", "$%{y:.3f}"), ("monthly_cost_usd", "$%{y:,.0f}")), start=1
    ):
        fig.add_trace(
            go.Bar(
                x=df["case"].to_numpy(),
                y=df[name].to_numpy(dtype=float),
                marker_color=colors,
                texttemplate=fmt,
                textposition="auto",
                showlegend=False,
                name=name,
            ),
            row=1,
            col=col,
        )
    fig.update_layout(
        title={"text": "Cost before and after", "font": {"size": 15}},
        height=380,
        margin={"l": 10, "r": 10, "t": 70, "b": 10},
    )
    return fig


def memory_breakdown(df: pd.DataFrame, *, total_gb: float | None = None) -> go.Figure:
    """Stacked memory of one replica: one bar per configuration, one trace per component.

    `df`: index = configuration ('baseline', 'with speculation'), columns = components
    in GiB (see `MEMORY_COLORS`).
    """
    fig = go.Figure()
    for comp in df.columns:
        fig.add_trace(
            go.Bar(
                x=df.index.to_numpy(),
                y=df[comp].to_numpy(dtype=float),
                name=str(comp),
                marker_color=MEMORY_COLORS.get(comp),
                texttemplate="%{y:.1f}",
                textposition="inside",
                hovertemplate=f"{comp}: %{{y:.2f}} GiB<extra></extra>",
            )
        )
    fig.update_layout(barmode="stack")
    if total_gb is not None:
        fig.add_hline(
            y=total_gb,
            line_dash="dash",
            line_color=BASELINE_COLOR,
            annotation_text=f"VRAM {total_gb:,.0f} GiB",
            annotation_position="top left",
        )
    fig = layout(fig, "Memory per replica", "", "GiB", height=420)
    fig.update_layout(hovermode="closest")
    return fig


def tpot_by_batch(grid: pd.DataFrame, *, slo_tpot_ms: float | None = None) -> go.Figure:
    """TPOT against batch for every K of the sizer's grid, the SLO as a horizontal line.

    `grid` columns: k, batch_size, spec_tpot_ms (K = 0 is speculation off).
    """
    fig = go.Figure()
    for k, rows in grid.groupby("k"):
        rows = rows.sort_values("batch_size")
        off = int(k) == 0
        fig.add_trace(
            go.Scatter(
                x=rows["batch_size"].to_numpy(),
                y=rows["spec_tpot_ms"].to_numpy(),
                name="off (K=0)" if off else f"K={int(k)}",
                mode="lines+markers",
                line={"width": 3 if off else 1.5, "color": BASELINE_COLOR if off else None},
                marker={"size": 5},
            )
        )
    if slo_tpot_ms is not None:
        fig.add_hline(
            y=slo_tpot_ms,
            line_color=BAD,
            line_dash="dash",
            annotation_text=f"SLO {slo_tpot_ms:g} ms",
            annotation_position="top left",
        )
    _log_batch_axis(fig, grid["batch_size"])
    return layout(fig, "Time per output token by K", "batch size", "TPOT (ms)", height=420)


def best_k_by_batch(best: pd.DataFrame) -> go.Figure:
    """Best K at each batch size, green where it meets the SLO and fits, red otherwise.

    `best` columns: batch_size, best_k, speedup, meets_slo, fits.
    """
    ok = best["meets_slo"].to_numpy(dtype=bool) & best["fits"].to_numpy(dtype=bool)
    labels = [str(int(b)) for b in best["batch_size"]]
    fig = go.Figure(
        go.Bar(
            x=labels,
            y=best["best_k"].to_numpy(dtype=float),
            marker_color=[GOOD if o else BAD for o in ok],
            customdata=np.stack([best["speedup"].to_numpy(dtype=float)], axis=-1),
            texttemplate="%{y}",
            textposition="outside",
            hovertemplate="batch %{x}: K=%{y}, %{customdata[0]:.2f}x<extra></extra>",
            name="best K",
        )
    )
    fig.update_xaxes(type="category")
    fig = layout(
        fig, "Best K per batch (green: meets SLO and fits)", "batch size", "best K", height=420
    )
    fig.update_layout(hovermode="closest", showlegend=False)
    return fig


PALETTE = ["#1f6feb", "#cf222e", "#2da44e", "#8250df", "#bf8700", "#0a7ea4", "#d63384"]
"""Colours of the series of one figure (query lengths, batches), in order."""


def _median_with_bars(rows: pd.DataFrame, x: str, color: str, *, mode="markers", **kw):
    """Medians as points with asymmetric p10-p90 error bars (columns median_ms, p10_ms,
    p90_ms) against column `x`."""
    return go.Scatter(
        x=rows[x].to_numpy(),
        y=rows["median_ms"].to_numpy(dtype=float),
        error_y={
            "type": "data",
            "symmetric": False,
            "array": (rows["p90_ms"] - rows["median_ms"]).to_numpy(dtype=float),
            "arrayminus": (rows["median_ms"] - rows["p10_ms"]).to_numpy(dtype=float),
        },
        mode=mode,
        marker={"color": color, "size": 9},
        line={"color": color},
        **kw,
    )


def profile_latency(measured: pd.DataFrame, predicted: pd.DataFrame) -> go.Figure:
    """Measured step latency against batch, one colour per query length, with the
    prediction drawn as lines of the same colour.

    `measured` columns: query_len, batch, median_ms, p10_ms, p90_ms.
    `predicted` columns: query_len, batch, ms, curve ('fitted roofline', ...).
    """
    fig = go.Figure()
    dashes = {"fitted roofline": "solid", "catalog roofline": "dot"}
    for i, (q, rows) in enumerate(measured.groupby("query_len")):
        color = PALETTE[i % len(PALETTE)]
        rows = rows.sort_values("batch")
        fig.add_trace(
            _median_with_bars(
                rows, "batch", color, name=f"measured q={int(q)}", legendgroup=f"q{q}"
            )
        )
        pred = predicted[predicted["query_len"] == q]
        for curve, prow in pred.groupby("curve", sort=False):
            prow = prow.sort_values("batch")
            fig.add_trace(
                go.Scatter(
                    x=prow["batch"].to_numpy(),
                    y=prow["ms"].to_numpy(dtype=float),
                    mode="lines",
                    line={"color": color, "dash": dashes.get(str(curve), "dash")},
                    name=f"{curve} q={int(q)}",
                    legendgroup=f"q{q}",
                )
            )
    _log_batch_axis(fig, measured["batch"])
    _log_value_axis(fig, np.concatenate([measured["p10_ms"], measured["p90_ms"], predicted["ms"]]))
    fig = layout(
        fig,
        "Step latency against batch: measured (points, p10-p90 bars) vs roofline (lines)",
        "batch size",
        "ms per forward",
        height=460,
    )
    fig.update_layout(hovermode="closest")
    return fig


def draft_in_loop(loop: pd.DataFrame, isolated: pd.DataFrame) -> go.Figure:
    """The draft's forward time at each position of a speculative round (points with
    p10-p90 bars), one colour per batch, against its isolated decode step (dotted line).

    `loop` columns: batch, position, median_ms, p10_ms, p90_ms.
    `isolated` columns: batch, median_ms (the profile's q = 1 step of the draft).
    """
    fig = go.Figure()
    alone = isolated.set_index("batch")["median_ms"]
    for i, (batch, rows) in enumerate(loop.groupby("batch")):
        color = PALETTE[i % len(PALETTE)]
        rows = rows.sort_values("position")
        fig.add_trace(
            _median_with_bars(
                rows,
                "position",
                color,
                name=f"in the loop, B={int(batch)}",
                legendgroup=f"b{batch}",
                mode="lines+markers",
            )
        )
        if batch in alone.index:
            fig.add_trace(
                go.Scatter(
                    x=[rows["position"].min(), rows["position"].max()],
                    y=[float(alone[batch])] * 2,
                    mode="lines",
                    line={"color": color, "dash": "dot"},
                    name=f"isolated step, B={int(batch)}",
                    legendgroup=f"b{batch}",
                )
            )
    fig.update_xaxes(dtick=1)
    fig = layout(
        fig,
        "Draft forward time inside the loop (after a verify forward) vs on its own",
        "draft position in the round",
        "ms per draft forward",
        height=420,
    )
    fig.update_layout(hovermode="closest")
    return fig


def acceptance_by_position(df: pd.DataFrame) -> go.Figure:
    """Per-position acceptance: measured bars against the i.i.d. model's alpha^i line.

    `df` columns: position (1-based), measured, iid.
    """
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            x=df["position"].to_numpy(),
            y=df["measured"].to_numpy(dtype=float),
            name="measured (accepted_per_pos / drafts)",
            marker_color=SPEC_COLOR,
            texttemplate="%{y:.2f}",
            textposition="inside",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=df["position"].to_numpy(),
            y=df["iid"].to_numpy(dtype=float),
            name="i.i.d. model α^i",
            mode="lines+markers",
            line={"color": BAD},
        )
    )
    fig.update_xaxes(dtick=1)
    fig.update_yaxes(range=[0, 1.1])
    fig = layout(fig, "Acceptance by draft position", "draft position i", "P(position i accepted)")
    fig.update_layout(hovermode="closest")
    return fig
