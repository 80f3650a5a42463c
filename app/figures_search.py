"""Figures and links of the Deployment search page, from the search's table
(`simulator.search.table.COLUMNS`): the Pareto fronts as scatter plots whose points carry
the configuration's id, and the ROI and Sizer links that open a configuration. Plain
functions, so tests can read `fig.data[i].x / .y` and the links."""

from __future__ import annotations

from urllib.parse import urlencode

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from app.figures import BASELINE_COLOR, SPEC_COLOR, frame

METHOD_COLORS = {"none": BASELINE_COLOR, "eagle3": SPEC_COLOR, "draft_model": "#8250df"}
FRONTS = {
    "cost": (
        "on_cost_front",
        "cost_per_mtok_usd",
        "tpot_p99_ms",
        "$ per 1M output tokens",
        "P99 TPOT (ms)",
    ),
    "throughput": (
        "on_throughput_front",
        "tok_s_per_user",
        "tok_s_per_gpu",
        "tokens/s per user (1000 / P50 TPOT)",
        "tokens/s per GPU",
    ),
}


def front_figure(table: pd.DataFrame, which: str = "cost") -> go.Figure:
    """Every feasible configuration as a point, one trace per method, the front as a line;
    each point's customdata is its id (what a click selects)."""
    flag, x, y, x_title, y_title = FRONTS[which]
    ok = table[(table["max_rate_rps"] > 0) & (table["status"] == "ok")]
    data = []
    for method, rows in ok.groupby("method", sort=True):
        data.append(
            go.Scatter(
                x=rows[x],
                y=rows[y],
                mode="markers",
                name=str(method),
                customdata=rows["id"].to_numpy(),
                marker={"color": METHOD_COLORS.get(str(method), "#bf8700"), "size": 9},
                text=[
                    f"#{r.id} {r.tp}x {r.gpu}, {r.method} K={r.k}, {r.weight_dtype} weights"
                    for r in rows.itertuples()
                ],
                hovertemplate="%{text}<br>%{x:.3g}, %{y:.3g}<extra></extra>",
            )
        )
    front = ok[ok[flag]].sort_values(x)
    data.append(
        go.Scatter(
            x=front[x],
            y=front[y],
            mode="lines",
            name="Pareto front",
            line={"color": "#111", "dash": "dot"},
            hoverinfo="skip",
        )
    )
    title = "Cost against P99 TPOT" if which == "cost" else "Throughput per GPU against per user"
    return go.Figure(data=data, layout=frame(title, x_title, y_title, hovermode="closest"))


def selected_id(event) -> int | None:
    """The id of the point a plotly selection event picked (None: nothing picked)."""
    try:
        points = event["selection"]["points"]
    except (KeyError, TypeError):
        return None
    for point in points or []:
        value = point.get("customdata")
        if isinstance(value, (list, tuple)):
            value = value[0] if value else None
        if value is not None:
            return int(value)
    return None


def link_params(
    row: pd.Series, prompt_mean: float, output_mean: float, demand_rps: float
) -> dict[str, str]:
    """The dashboard's link parameters for one configuration (`app.widgets.LINK_PARAMS`):
    target, method, draft, GPU and count, dtypes, price, lengths, the acceptance, K (the
    ROI page's 1..10, or `best` for a K per batch), the batch as the concurrency at the
    max rate (Little's law) and the demand per day, within the pages' input ranges."""
    params = {
        "target": row["target"],
        "method": row["method"],
        "gpu": row["gpu"],
        "num_gpus": str(int(row["tp"])),
        "kv_dtype": row["kv_dtype"],
        "prompt_len": str(round(prompt_mean)),
        "output_len": str(round(output_mean)),
    }
    if row["weight_dtype"] != "default":
        params["weight_dtype"] = row["weight_dtype"]
    if row["method"] == "draft_model":
        params["draft"] = row["draft"]
    if row["method"] != "none":
        k = str(row["k"])
        params["k"] = k if k.isdigit() and 1 <= int(k) <= 10 else "best"
        column, _, value = str(row["acceptance"]).partition("=")
        if column == "acceptance_rate":
            params["acceptance_rate"] = value
        elif column == "acceptance_per_position":
            params["pos"] = value
    batch = row.get("concurrency_at_max_rate", np.nan)
    if np.isfinite(batch):
        params["batch_size"] = str(int(min(max(round(batch), 1), 4096)))
    params["requests_per_s"] = f"{demand_rps:.6g}"
    return params


def page_links(
    row: pd.Series, prompt_mean: float, output_mean: float, demand_rps: float
) -> dict[str, str]:
    """Relative URLs of the ROI calculator and the Sizer opened on this configuration."""
    query = urlencode(link_params(row, prompt_mean, output_mean, demand_rps))
    return {"ROI calculator": f"./?{query}", "Concurrency sizer": f"./sizer?{query}"}
