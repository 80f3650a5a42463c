"""Validation figures: predicted against measured speedup, and per-position acceptance, from
the CSV `python -m profiler validate` writes (`data/validation/<device>_validation.csv`).

`read_validation_csv` checks an uploaded file (data only: CSV text, no eval); the figure
builders take its DataFrame and return plotly figures, so tests can inspect them.
"""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from app.figures import frame
from simulator.errors import InputError
from simulator.inputs.io import csv_frame
from simulator.inputs.scenarios import K_LIMIT, LIMITS, to_floats
from simulator.validation.published import MAX_SPEEDUP

ERROR_BAND = 0.10
"""The issue's target: median |predicted / measured - 1| at or below 10%."""
MAX_POSITIONS = 8
REQUIRED_COLUMNS = ("mode", "workload", "batch", "k", "measured_speedup", "predicted_speedup")
NUMERIC_COLUMNS = ("batch", "k", "measured_speedup", "predicted_speedup")
MAX_CSV_BYTES = 5 * 1024 * 1024
MAX_ROWS = 10_000
"""Points one file may hold: `profiler validate` writes a few hundred."""
MAX_GROUPS = 20
"""(mode, workload) pairs one file may hold: each is a trace of both figures."""
MAX_NAME_CHARS = 80
MAX_BATCH_SIZE = LIMITS["batch_size"][0]
_LIMITS = {
    # column: (least, most, whole number, whether the least is allowed)
    "batch": (1, MAX_BATCH_SIZE, True, True),
    "k": (0, K_LIMIT, True, True),
    "measured_speedup": (0.0, MAX_SPEEDUP, False, False),
    "predicted_speedup": (0.0, MAX_SPEEDUP, False, False),
    "predicted_speedup_isolated_draft": (0.0, MAX_SPEEDUP, False, False),
    "sequence_steps": (1, 1e12, True, True),
    **{f"p{i}": (0.0, 1.0, False, True) for i in range(1, MAX_POSITIONS + 1)},
}
"""What each numeric column the page reads may hold: a speedup is at most K + 1 at the
largest K, as in the published set."""
_ERROR_TOLERANCE = 1e-4
_WORKLOAD_SYMBOLS = {"code": "circle", "prose": "diamond"}
_MODE_COLORS = ["#1f6feb", "#cf222e", "#2da44e", "#8250df", "#bf8700"]


def read_validation_csv(data: bytes, name: str = "upload") -> pd.DataFrame:
    """Parse and check a validation CSV; `InputError` names the file, row and column (the
    header is row 1). `error` is predicted / measured - 1, computed where absent."""
    if len(data) > MAX_CSV_BYTES:
        raise InputError(f"{len(data):,} bytes is over the {MAX_CSV_BYTES:,}-byte limit", file=name)
    df = csv_frame(data, name)
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise InputError(
            f"column is missing (a validation CSV has {', '.join(REQUIRED_COLUMNS)})",
            file=name,
            row=1,
            field=missing[0],
        )
    if df.empty:
        raise InputError("has no rows", file=name)
    if len(df) > MAX_ROWS:
        raise InputError(
            f"{len(df):,} rows is more than the {MAX_ROWS:,} one file may hold", file=name
        )
    for col in ("mode", "workload"):
        cells = df[col].astype("string").str.strip()
        bad = (cells.isna() | cells.eq("") | cells.str.len().gt(MAX_NAME_CHARS)).to_numpy(bool)
        if bad.any():
            i = int(np.argmax(bad))
            raise InputError(
                f"must be a name of 1 to {MAX_NAME_CHARS} characters",
                file=name,
                row=i + 2,
                field=col,
            )
        df[col] = cells.astype(str).to_numpy(object)
    groups = df.groupby(["mode", "workload"], sort=False).ngroups
    if groups > MAX_GROUPS:
        raise InputError(
            f"{groups} (mode, workload) pairs is more than the {MAX_GROUPS} the figures show",
            file=name,
            field="mode",
        )
    for col, (least, most, whole, closed) in _LIMITS.items():
        if col not in df.columns:
            continue
        values = to_floats(df[col])
        must_have = col in NUMERIC_COLUMNS
        given = df[col].notna().to_numpy()
        with np.errstate(invalid="ignore"):
            fine = np.isfinite(values) & (values <= most)
            fine &= values >= least if closed else values > least
            if whole:
                fine &= values == np.floor(values)
        bad = (given | must_have) & ~fine
        if bad.any():
            i = int(np.argmax(bad))
            kind = "a whole number" if whole else "a number"
            low = f"{least:g} <= x" if closed else f"{least:g} < x"
            raise InputError(
                f"'{df[col].iloc[i]}' is not {kind} with {low} <= {most:g}",
                file=name,
                row=i + 2,
                field=col,
            )
        df[col] = values
    error = df["predicted_speedup"] / df["measured_speedup"] - 1.0
    if "error" in df.columns:
        given = pd.Series(to_floats(df["error"]), index=df.index)
        bad = (given - error).abs().gt(_ERROR_TOLERANCE) | (given.isna() & df["error"].notna())
        if bad.any():
            i = int(np.argmax(bad.to_numpy()))
            raise InputError(
                f"'{df['error'].iloc[i]}' is not predicted_speedup / measured_speedup - 1 "
                f"({error.iloc[i]:.6g}); correct it or leave the column out",
                file=name,
                row=i + 2,
                field="error",
            )
    df["error"] = error
    return df


def _label(mode: str, workload: str) -> str:
    """A trace's name from the file's text, shown literally: plotly reads tags in names
    (a link in the legend), so `&`, `<` and `>` go in as entities."""
    return html.escape(f"{mode}, {workload}", quote=False)


def error_summary(df: pd.DataFrame) -> dict[str, float]:
    """Median and 90th percentile of |error|, and the share of points inside the band."""
    err = (df["predicted_speedup"] / df["measured_speedup"] - 1.0).abs()
    return {
        "points": len(df),
        "median_abs_error": float(err.median()),
        "p90_abs_error": float(err.quantile(0.9)),
        "within_band": float((err <= ERROR_BAND).mean()),
    }


def predicted_vs_measured(df: pd.DataFrame, band: float = ERROR_BAND) -> go.Figure:
    """Scatter of predicted against measured speedup with the y = x line and a +-band cone.

    One trace per (mode, workload): color by mode, marker by workload; hover names the
    batch and K of every point.
    """
    lo = float(min(df["measured_speedup"].min(), df["predicted_speedup"].min()))
    hi = float(max(df["measured_speedup"].max(), df["predicted_speedup"].max()))
    lo, hi = lo / 1.1, hi * 1.1
    xs = np.array([lo, hi])
    traces = [
        {
            "type": "scatter",
            "x": np.concatenate([xs, xs[::-1]]),
            "y": np.concatenate([xs * (1 + band), (xs * (1 - band))[::-1]]),
            "fill": "toself",
            "fillcolor": "rgba(127,140,141,0.15)",
            "line": {"width": 0},
            "hoverinfo": "skip",
            "name": f"±{band:.0%} band",
        },
        {
            "type": "scatter",
            "x": xs,
            "y": xs,
            "mode": "lines",
            "line": {"color": "#7f8c8d", "dash": "dash"},
            "name": "y = x",
        },
    ]
    modes = list(dict.fromkeys(df["mode"]))
    for (mode, workload), g in df.groupby(["mode", "workload"], sort=False):
        color = _MODE_COLORS[modes.index(mode) % len(_MODE_COLORS)]
        err = g["predicted_speedup"] / g["measured_speedup"] - 1.0
        traces.append(
            {
                "type": "scatter",
                "x": g["measured_speedup"].to_numpy(),
                "y": g["predicted_speedup"].to_numpy(),
                "mode": "markers",
                "name": _label(mode, workload),
                "marker": {
                    "color": color,
                    "symbol": _WORKLOAD_SYMBOLS.get(workload, "circle"),
                    # Batch 1 to 256 as 5 to 13 px: 6 + 2 log2(B) gave 22 px squares that
                    # covered each other (issue 27, Layout).
                    "size": np.clip(5 + np.log2(g["batch"].to_numpy(float)), 5, 13),
                    "opacity": 0.7,
                    "line": {"width": 0.5, "color": "white"},
                },
                "customdata": np.stack(
                    [g["batch"].to_numpy(), g["k"].to_numpy(), err.to_numpy()], axis=1
                ),
                "hovertemplate": "B=%{customdata[0]}, K=%{customdata[1]}<br>measured %{x:.2f}x, "
                "predicted %{y:.2f}x<br>error %{customdata[2]:+.1%}<extra>%{fullData.name}"
                "</extra>",
            }
        )
    # Equal scales, and the plot narrows to keep them rather than widening the x range.
    return go.Figure(
        data=traces,
        layout=frame(
            "Predicted against measured speedup",
            "measured speedup (speculative / autoregressive tokens/s)",
            "simulator's predicted speedup",
            height=480,
            hovermode="closest",
            xaxis={"range": [lo, hi], "constrain": "domain"},
            yaxis={"range": [lo, hi], "scaleanchor": "x", "scaleratio": 1, "constrain": "domain"},
        ),
    )


def acceptance_positions(df: pd.DataFrame) -> pd.DataFrame:
    """Per-position acceptance pooled over batch sizes, from the rows with the largest K of
    each (mode, workload): columns mode, workload, position, acceptance, iid.

    `iid` is alpha^i with alpha the position-1 rate: what the i.i.d. model assumes.
    """
    # Plain arrays, not a pandas groupby: this runs on every rerun of the Validation page.
    groups: dict[tuple, list[int]] = {}
    for j, key in enumerate(zip(df["mode"], df["workload"], strict=True)):
        groups.setdefault(key, []).append(j)
    ks = df["k"].to_numpy(dtype=float)
    steps = df["sequence_steps"].to_numpy(dtype=float) if "sequence_steps" in df else None
    rates_at = {
        i: df[f"p{i}"].to_numpy(dtype=float) for i in range(1, MAX_POSITIONS + 1) if f"p{i}" in df
    }
    rows = []
    for (mode, workload), at in groups.items():
        at = np.asarray(at)
        top = at[ks[at] == ks[at].max()]
        weights = steps[top] if steps is not None else np.ones(len(top))
        k = int(ks[top].max())
        rates = [
            float(np.average(rates_at[i][top], weights=weights))
            for i in range(1, min(k, MAX_POSITIONS) + 1)
            if i in rates_at
        ]
        for i, rate in enumerate(rates, start=1):
            rows.append(
                {
                    "mode": mode,
                    "workload": workload,
                    "position": i,
                    "acceptance": rate,
                    "iid": rates[0] ** i,
                }
            )
    return pd.DataFrame(rows, columns=["mode", "workload", "position", "acceptance", "iid"])


def acceptance_by_position(df: pd.DataFrame) -> go.Figure:
    """Measured per-position acceptance (solid) against the i.i.d. alpha^i (dotted)."""
    table = acceptance_positions(df)
    traces = []
    modes = list(dict.fromkeys(table["mode"]))
    for (mode, workload), g in table.groupby(["mode", "workload"], sort=False):
        color = _MODE_COLORS[modes.index(mode) % len(_MODE_COLORS)]
        dash = "solid" if workload == "code" else "dashdot"
        x = g["position"].to_numpy()
        traces.append(
            {
                "type": "scatter",
                "x": x,
                "y": g["acceptance"].to_numpy(),
                "mode": "lines+markers",
                "name": _label(mode, workload) + ": measured",
                "line": {"color": color, "dash": dash},
                "marker": {"symbol": _WORKLOAD_SYMBOLS.get(workload, "square")},
            }
        )
        traces.append(
            {
                "type": "scatter",
                "x": x,
                "y": g["iid"].to_numpy(),
                "mode": "lines",
                "name": _label(mode, workload) + ": i.i.d. alpha^i",
                "line": {"color": color, "dash": "dot", "width": 1},
            }
        )
    return go.Figure(
        data=traces,
        layout=frame(
            "Per-position acceptance",
            "draft position i",
            "P(position i accepted)",
            height=420,
            xaxis={"dtick": 1},
            yaxis={"range": [0, 1.02]},
        ),
    )


def engine_tpot(table: pd.DataFrame) -> go.Figure:
    """Your engine: predicted TPOT (ms) against the engine's measured TPOT, with the
    default engine costs (hollow) and with the per-step host cost fitted (filled); one
    point per serving load (`profiler.imports.fit.EngineFit.table`)."""
    priced = table[table["predicted_before_ms"].notna()]
    labels = [
        html.escape(
            f"{s} · {'speculative' if spec else 'plain'} · "
            + (f"concurrency {c:g}" if pd.notna(c) else f"{r:g} req/s")
        )
        for s, spec, c, r in zip(
            priced["source"],
            priced["speculative"],
            priced["concurrency"],
            priced["request_rate"],
            strict=True,
        )
    ]
    measured = priced["measured_tpot_ms"].to_numpy(float)
    top = float(np.nanmax([measured.max(initial=1.0), priced["predicted_before_ms"].max()]))
    traces = [
        go.Scatter(
            x=[0, top * 1.1],
            y=[0, top * 1.1],
            mode="lines",
            line={"dash": "dash", "color": "#888"},
            name="predicted = measured",
            hoverinfo="skip",
        )
    ]
    for column, name, symbol in (
        ("predicted_before_ms", "default engine costs", "circle-open"),
        ("predicted_after_ms", "host cost fitted", "circle"),
    ):
        traces.append(
            go.Scatter(
                x=measured,
                y=priced[column].to_numpy(float),
                mode="markers",
                marker={"symbol": symbol, "size": 10},
                name=name,
                text=labels,
                hovertemplate="%{text}<br>measured %{x:.2f} ms, predicted %{y:.2f} ms",
            )
        )
    layout = frame(
        "Your engine: TPOT predicted against measured",
        "measured TPOT (ms)",
        "predicted TPOT (ms)",
        hovermode="closest",
    )
    return go.Figure(data=traces, layout=layout)
