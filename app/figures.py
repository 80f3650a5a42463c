"""Figure builders: plain functions from DataFrames to plotly figures, so tests can check
`fig.data[i].x / .y` without a browser. Pages only arrange them. No model math here: the
numbers come from the simulator; these functions only draw them.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

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
_LEGEND_BELOW = {
    "orientation": "h",
    "yref": "container",
    "yanchor": "bottom",
    "y": 0,
    "xanchor": "left",
    "x": 0,
}
"""At the foot of the figure, below the axis title: a legend of several rows above the
plot would cover the title, and one placed a fraction of the plot's height below it
(y = -0.2 of the plot area) touched the axis title once its rows shrank the plot."""


def frame(
    title: str,
    x: str,
    y: str,
    *,
    height: int = 380,
    hovermode: str = "x unified",
    xaxis: dict | None = None,
    yaxis: dict | None = None,
    **more,
) -> dict:
    """Every figure's layout: title, axis titles (merged into `xaxis` and `yaxis`),
    height, margins and a legend below the plot, plus `more` layout keys.

    Figures are built in one `go.Figure(data=..., layout=...)` call: plotly validates a
    layout once there, where each `update_layout`, `add_hline` or `update_xaxes` call
    validates again (a figure took ~16 ms that way, ~5 ms this way).
    """
    return {
        "title": {"text": title, "font": {"size": 15}},
        "xaxis": {"title": {"text": x}, **(xaxis or {})},
        "yaxis": {"title": {"text": y}, **(yaxis or {})},
        "height": height,
        "margin": {"l": 10, "r": 10, "t": 50, "b": 10},
        "legend": _LEGEND_BELOW,
        "hovermode": hovermode,
        **more,
    }


def hline(y: float, **line) -> dict:
    """A horizontal line across the plot at `y` (what `fig.add_hline` draws)."""
    return {
        "type": "line",
        "xref": "x domain",
        "x0": 0,
        "x1": 1,
        "yref": "y",
        "y0": y,
        "y1": y,
        "line": line,
    }


def vline(x: float, **line) -> dict:
    """A vertical line across the plot at `x` (what `fig.add_vline` draws)."""
    return {
        "type": "line",
        "xref": "x",
        "x0": x,
        "x1": x,
        "yref": "y domain",
        "y0": 0,
        "y1": 1,
        "line": line,
    }


def hline_label(y: float, text: str, *, left: bool = False) -> dict:
    """The label `fig.add_hline(annotation_text=...)` puts above a line's right end (or
    its left end, `annotation_position='top left'`)."""
    return {
        "text": text,
        "showarrow": False,
        "xref": "x domain",
        "x": 0 if left else 1,
        "xanchor": "left" if left else "right",
        "yref": "y",
        "y": y,
        "yanchor": "bottom",
    }


def _log_batch_axis(batches) -> dict:
    """A log batch axis labelled at the batch sizes themselves (powers of two where there
    are many), instead of plotly's 1 2 5 10 2 5 minor labels."""
    values = sorted({int(b) for b in np.asarray(batches, dtype=float) if b > 0})
    if len(values) > 10:
        values = [v for v in values if v & (v - 1) == 0] or values
    return {"type": "log", "tickvals": values, "ticktext": [f"{v:,}" for v in values]}


def _log_value_axis(values) -> dict:
    """A log y axis labelled 1-2-5 across the data (0.2, 0.5, 1, 2, 5, ...)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v) & (v > 0)]
    if not v.size:
        return {}
    # The axis shows this range exactly: ticks outside plotly's own autorange were dropped.
    lo, hi = v.min() / 1.1, v.max() * 1.1
    decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    # Denser mantissas where the data spans less than a decade: 1-2-5 alone left one tick.
    for mantissas in ((1, 2, 5), (1, 1.5, 2, 3, 5, 7), tuple(range(1, 10))):
        ticks = [m * 10.0**e for e in decades for m in mantissas]
        ticks = [t for t in ticks if lo <= t <= hi]
        if len(ticks) >= 3:
            break
    return {
        "type": "log",
        "range": [math.log10(lo), math.log10(hi)],
        "tickvals": ticks,
        "ticktext": [f"{t:g}" for t in ticks],
    }


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
    traces = []
    for curve, rows in df.groupby("curve", sort=False):
        rows = rows.sort_values("k")
        strong = curve == highlight
        traces.append(
            {
                "type": "scatter",
                "x": rows["k"].to_numpy(),
                "y": rows["speedup"].to_numpy(),
                "name": str(curve),
                "mode": "lines+markers",
                "line": {"width": 4 if strong else 1.5},
                "marker": {"size": 8 if strong else 5},
            }
        )
    return go.Figure(
        data=traces,
        layout=frame(
            "Speedup against K",
            "K (speculative tokens per step)",
            "speedup (x)",
            xaxis={"dtick": 1},
            shapes=[hline(1.0, color=BASELINE_COLOR, dash="dash")],
        ),
    )


def speedup_vs_batch(
    df: pd.DataFrame, *, crossover: float | None = None, band: pd.DataFrame | None = None
) -> go.Figure:
    """Speedup against batch size (log axis), one line per curve, the crossover marked.

    `df` columns: curve, batch_size, speedup, k. The first curve is the main one, whose
    `crossover` (see `crossover_batch`) gets a vertical line and a label. `band` (columns
    batch_size, low, high) shades the typical error around it.
    """
    traces = []
    if band is not None and len(band):
        band = band.sort_values("batch_size")
        traces.append(
            {
                "type": "scatter",
                "x": np.concatenate([band["batch_size"], band["batch_size"][::-1]]),
                "y": np.concatenate([band["high"], band["low"][::-1]]),
                "fill": "toself",
                "fillcolor": "rgba(99, 110, 250, 0.15)",
                "line": {"width": 0},
                "name": "typical error",
                "hoverinfo": "skip",
            }
        )
    for i, (curve, rows) in enumerate(df.groupby("curve", sort=False)):
        rows = rows.sort_values("batch_size")
        traces.append(
            {
                "type": "scatter",
                "x": rows["batch_size"].to_numpy(),
                "y": rows["speedup"].to_numpy(),
                "name": str(curve),
                "mode": "lines+markers",
                "line": {"width": 3 if i == 0 else 1.5, "dash": "solid" if i == 0 else "dot"},
                "customdata": rows["k"].to_numpy(),
                "hovertemplate": "batch %{x}: %{y:.2f}x at K=%{customdata}<extra></extra>",
            }
        )
    shapes = [hline(1.0, color=BASELINE_COLOR, dash="dash")]
    if crossover is not None:
        shapes.append(vline(crossover, color=BAD, width=2))
        note = {
            "x": math.log10(crossover),
            "yref": "paper",
            "y": 0.98,
            "text": f"crossover ≈ batch {crossover:,.0f}: beyond it speculation is slower ",
            "showarrow": False,
            "xanchor": "right",
            "font": {"color": BAD},
        }
    else:
        note = {
            "xref": "paper",
            "yref": "paper",
            "x": 0.98,
            "y": 0.95,
            "showarrow": False,
            "text": "speculation pays over the whole range",
            "font": {"color": GOOD},
            "xanchor": "right",
        }
    return go.Figure(
        data=traces,
        layout=frame(
            "Speedup against batch size",
            "batch size (concurrent sequences)",
            "speedup (x)",
            xaxis=_log_batch_axis(df["batch_size"]),
            shapes=shapes,
            annotations=[note],
        ),
    )


def _centre_note(text: str) -> dict:
    """A note in the middle of a figure with nothing to plot, saying why."""
    return {"text": text, "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5, "showarrow": False}


def cost_before_after(df: pd.DataFrame) -> go.Figure:
    """$ per 1M tokens and monthly cost, baseline against speculative.

    `df` columns: case, cost_per_mtok, monthly_cost_usd (one row per case).
    """
    colors = [BASELINE_COLOR if c == "baseline" else SPEC_COLOR for c in df["case"]]
    traces = [
        {
            "type": "bar",
            "x": df["case"].to_numpy(),
            "y": df[name].to_numpy(dtype=float),
            "marker": {"color": colors},
            "texttemplate": fmt,
            "textposition": "auto",
            "showlegend": False,
            "name": name,
            "xaxis": axis,
            "yaxis": axis.replace("x", "y"),
        }
        for name, fmt, axis in (
            ("cost_per_mtok", "$%{y:.3f}", "x"),
            ("monthly_cost_usd", "$%{y:,.0f}", "x2"),
        )
    ]
    # Each plot's quantity is its x axis title, under its own half: two titles centred over
    # the halves ran into each other at 1024 px with the sidebar open, and a second y axis
    # title ran into the first plot.
    annotations = []
    if not np.isfinite(df["cost_per_mtok"].to_numpy(dtype=float)).any():
        annotations.append(_centre_note("no cost: no $ per GPU-hour for this GPU"))
    # The grid `make_subplots(rows=1, cols=2)` lays out, written out: it took ~10 ms.
    return go.Figure(
        data=traces,
        layout={
            "xaxis": {"anchor": "y", "domain": [0.0, 0.44], "title": {"text": "$ per 1M tokens"}},
            "yaxis": {"anchor": "x", "domain": [0.0, 1.0]},
            "xaxis2": {"anchor": "y2", "domain": [0.56, 1.0], "title": {"text": "$ per month"}},
            "yaxis2": {"anchor": "x2", "domain": [0.0, 1.0]},
            "annotations": annotations,
            "title": {"text": "Cost before and after", "font": {"size": 15}},
            "height": 380,
            "margin": {"l": 10, "r": 10, "t": 50, "b": 10},
        },
    )


def memory_breakdown(df: pd.DataFrame, *, total_gb: float | None = None) -> go.Figure:
    """Stacked memory of one replica: one bar per configuration, one trace per component.

    `df`: index = configuration ('baseline', 'with speculation'), columns = components
    in GiB (see `MEMORY_COLORS`).
    """
    traces = [
        {
            "type": "bar",
            "x": df.index.to_numpy(),
            "y": df[comp].to_numpy(dtype=float),
            "name": str(comp),
            "marker": {"color": MEMORY_COLORS.get(comp)},
            "texttemplate": "%{y:.1f}",
            "textposition": "inside",
            "hovertemplate": f"{comp}: %{{y:.2f}} GiB<extra></extra>",
        }
        for comp in df.columns
    ]
    lines = {}
    if total_gb is not None:
        lines = {
            "shapes": [hline(total_gb, color=BASELINE_COLOR, dash="dash")],
            "annotations": [hline_label(total_gb, f"VRAM {total_gb:,.0f} GiB", left=True)],
        }
    return go.Figure(
        data=traces,
        layout=frame(
            "Memory per replica",
            "",
            "GiB",
            height=420,
            hovermode="closest",
            barmode="stack",
            **lines,
        ),
    )


def tpot_by_batch(grid: pd.DataFrame, *, slo_tpot_ms: float | None = None) -> go.Figure:
    """TPOT against batch for every K of the sizer's grid, the SLO as a horizontal line.

    `grid` columns: k, batch_size, spec_tpot_ms (K = 0 is speculation off).
    """
    traces = []
    for k, rows in grid.groupby("k"):
        rows = rows.sort_values("batch_size")
        off = int(k) == 0
        line = {"width": 3 if off else 1.5}
        if off:
            line["color"] = BASELINE_COLOR
        traces.append(
            {
                "type": "scatter",
                "x": rows["batch_size"].to_numpy(),
                "y": rows["spec_tpot_ms"].to_numpy(),
                "name": "off (K=0)" if off else f"K={int(k)}",
                "mode": "lines+markers",
                "line": line,
                "marker": {"size": 5},
            }
        )
    lines = {}
    if slo_tpot_ms is not None:
        lines = {
            "shapes": [hline(slo_tpot_ms, color=BAD, dash="dash")],
            "annotations": [hline_label(slo_tpot_ms, f"SLO {slo_tpot_ms:g} ms", left=True)],
        }
    return go.Figure(
        data=traces,
        layout=frame(
            "Time per output token by K",
            "batch size",
            "TPOT (ms)",
            height=420,
            xaxis=_log_batch_axis(grid["batch_size"]),
            **lines,
        ),
    )


def best_k_by_batch(best: pd.DataFrame) -> go.Figure:
    """Best K at each batch size, green where it meets the SLO and fits, red otherwise.

    `best` columns: batch_size, best_k, speedup, meets_slo, fits, and spec_tok_s (NaN
    where nothing runs at that batch: no bar).
    """
    ok = best["meets_slo"].to_numpy(dtype=bool) & best["fits"].to_numpy(dtype=bool)
    labels = [str(int(b)) for b in best["batch_size"]]
    runs = np.isfinite(best["spec_tok_s"].to_numpy(dtype=float))
    bar = {
        "type": "bar",
        "x": labels,
        "y": np.where(runs, best["best_k"].to_numpy(dtype=float), np.nan),
        "marker": {"color": [GOOD if o else BAD for o in ok]},
        "customdata": np.stack([best["speedup"].to_numpy(dtype=float)], axis=-1),
        # A K of 0 draws no bar: no "0" floating over the axis either.
        "text": [
            f"{k:.0f}" if r and k > 0 else "" for k, r in zip(best["best_k"], runs, strict=True)
        ],
        "textposition": "outside",
        "hovertemplate": "batch %{x}: K=%{y}, %{customdata[0]:.2f}x<extra></extra>",
        "name": "best K",
    }
    layout = frame(
        # The key on a second line: on one, half a page at 1024 px cut it off.
        "Best K per batch<br><sup>green: meets the SLO and fits; red: does not</sup>",
        "batch size",
        "best K",
        height=420,
        hovermode="closest",
        xaxis={"type": "category"},
        showlegend=False,
    )
    layout["yaxis"] = {**layout.get("yaxis", {}), "dtick": 1, "rangemode": "tozero"}
    layout["margin"] = {**layout["margin"], "t": 70}
    if not runs.any():
        layout["annotations"] = [_centre_note("nothing runs at any batch")]
    return go.Figure(data=[bar], layout=layout)


PALETTE = ["#1f6feb", "#cf222e", "#2da44e", "#8250df", "#bf8700", "#0a7ea4", "#d63384"]
"""Colours of the series of one figure (query lengths, batches), in order."""


def _median_with_bars(rows: pd.DataFrame, x: str, color: str, *, mode="markers", **kw) -> dict:
    """Medians as points with asymmetric p10-p90 error bars (columns median_ms, p10_ms,
    p90_ms) against column `x`."""
    return {
        "type": "scatter",
        "x": rows[x].to_numpy(),
        "y": rows["median_ms"].to_numpy(dtype=float),
        "error_y": {
            "type": "data",
            "symmetric": False,
            "array": (rows["p90_ms"] - rows["median_ms"]).to_numpy(dtype=float),
            "arrayminus": (rows["median_ms"] - rows["p10_ms"]).to_numpy(dtype=float),
        },
        "mode": mode,
        "marker": {"color": color, "size": 9},
        "line": {"color": color},
        **kw,
    }


def profile_latency(measured: pd.DataFrame, predicted: pd.DataFrame) -> go.Figure:
    """Measured step latency against batch, one colour per query length, with the
    prediction drawn as lines of the same colour.

    `measured` columns: query_len, batch, median_ms, p10_ms, p90_ms.
    `predicted` columns: query_len, batch, ms, curve ('fitted roofline', ...).
    """
    traces = []
    dashes = {"fitted roofline": "solid", "catalog roofline": "dot"}
    for i, (q, rows) in enumerate(measured.groupby("query_len")):
        color = PALETTE[i % len(PALETTE)]
        rows = rows.sort_values("batch")
        traces.append(
            _median_with_bars(
                rows, "batch", color, name=f"measured q={int(q)}", legendgroup=f"q{q}"
            )
        )
        pred = predicted[predicted["query_len"] == q]
        for curve, prow in pred.groupby("curve", sort=False):
            prow = prow.sort_values("batch")
            traces.append(
                {
                    "type": "scatter",
                    "x": prow["batch"].to_numpy(),
                    "y": prow["ms"].to_numpy(dtype=float),
                    "mode": "lines",
                    "line": {"color": color, "dash": dashes.get(str(curve), "dash")},
                    "name": f"{curve} q={int(q)}",
                    "legendgroup": f"q{q}",
                }
            )
    values = np.concatenate([measured["p10_ms"], measured["p90_ms"], predicted["ms"]])
    return go.Figure(
        data=traces,
        layout=frame(
            "Step latency against batch: measured (points, p10-p90 bars) vs roofline (lines)",
            "batch size",
            "ms per forward",
            height=460,
            hovermode="closest",
            xaxis=_log_batch_axis(measured["batch"]),
            yaxis=_log_value_axis(values),
        ),
    )


def draft_in_loop(loop: pd.DataFrame, isolated: pd.DataFrame) -> go.Figure:
    """The draft's forward time at each position of a speculative round (points with
    p10-p90 bars), one colour per batch, against its isolated decode step (dotted line).

    `loop` columns: batch, position, median_ms, p10_ms, p90_ms.
    `isolated` columns: batch, median_ms (the profile's q = 1 step of the draft).
    """
    traces = []
    alone = isolated.set_index("batch")["median_ms"]
    for i, (batch, rows) in enumerate(loop.groupby("batch")):
        color = PALETTE[i % len(PALETTE)]
        rows = rows.sort_values("position")
        traces.append(
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
            traces.append(
                {
                    "type": "scatter",
                    "x": [rows["position"].min(), rows["position"].max()],
                    "y": [float(alone[batch])] * 2,
                    "mode": "lines",
                    "line": {"color": color, "dash": "dot"},
                    "name": f"isolated step, B={int(batch)}",
                    "legendgroup": f"b{batch}",
                }
            )
    return go.Figure(
        data=traces,
        layout=frame(
            "Draft forward time inside the loop (after a verify forward) vs on its own",
            "draft position in the round",
            "ms per draft forward",
            height=420,
            hovermode="closest",
            xaxis={"dtick": 1},
        ),
    )


def acceptance_by_position(df: pd.DataFrame) -> go.Figure:
    """Per-position acceptance: measured bars against the i.i.d. model's alpha^i line.

    `df` columns: position (1-based), measured, iid.
    """
    traces = [
        {
            "type": "bar",
            "x": df["position"].to_numpy(),
            "y": df["measured"].to_numpy(dtype=float),
            "name": "measured (accepted_per_pos / drafts)",
            "marker": {"color": SPEC_COLOR},
            "texttemplate": "%{y:.2f}",
            "textposition": "inside",
        },
        {
            "type": "scatter",
            "x": df["position"].to_numpy(),
            "y": df["iid"].to_numpy(dtype=float),
            "name": "i.i.d. model α^i",
            "mode": "lines+markers",
            "line": {"color": BAD},
        },
    ]
    return go.Figure(
        data=traces,
        layout=frame(
            "Acceptance by draft position",
            "draft position i",
            "P(position i accepted)",
            hovermode="closest",
            xaxis={"dtick": 1},
            yaxis={"range": [0, 1.1]},
        ),
    )
