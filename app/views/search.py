"""Deployment search: which GPUs, how many, which speculation method, K and batch cap meet
the P99 SLOs at the lowest cost per 1M tokens (`simulator.search`).

The page edits a YAML specification (an example to start from), runs the search in this
process with a progress bar, and shows the confirmed configurations, the two Pareto
fronts (a click on a point opens that configuration in the ROI calculator or the Sizer)
and the table as CSV. Cancel stops the run at its next result and keeps what finished:
each result is stored in the session as it arrives, so the rerun Cancel causes finds them.
"""

from __future__ import annotations

import math
from pathlib import Path

import streamlit as st

from app import acceptance_band, figures_search, sim, widgets
from simulator.errors import InputError
from simulator.inputs.scenarios import ACCEPTANCE_COLUMNS
from simulator.search import parse_spec, run_search
from simulator.search.table import finish

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE_FILES = ("search-small.yaml", "search-70b.yaml")
MAX_SPEC_CHARS = 20_000
# Session key of the run: {'rows', 'done', 'total', 'plan', 'message', 'cancelled'}.
STATE = "search_result"


def _parse(text: str):
    import yaml

    if len(text) > MAX_SPEC_CHARS:
        raise InputError(f"is longer than {MAX_SPEC_CHARS:,} characters", field="specification")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"is not valid YAML: {str(exc)[:200]}", field="specification") from None
    return parse_spec(data, source="specification")


def _run(spec, max_configs: int) -> None:
    state = {"rows": [], "done": 0, "total": 0, "plan": "", "message": "", "cancelled": True}
    st.session_state[STATE] = state
    bar = st.progress(0.0, text="Stage one: pricing every candidate")

    def on_plan(plan) -> None:
        state["plan"] = plan.describe()
        state["total"] = plan.to_confirm
        bar.progress(0.0, text=state["plan"])

    def on_result(row: dict, done: int, total: int) -> None:
        state["rows"].append(row)
        state["done"] = done
        bar.progress(done / max(total, 1), text=f"Confirmed {done} of {total}")

    result = run_search(spec, max_configs=max_configs, on_plan=on_plan, on_result=on_result)
    state["cancelled"] = result.cancelled
    state["message"] = result.message
    bar.progress(1.0, text=f"Done in {result.seconds:.1f} s")


def _k_at(b) -> int | None:
    """The K the answer runs at its concurrency: its K, or its schedule's tier there."""
    if str(b["k"]).isdigit():
        return int(b["k"])
    at = float(b["concurrency_at_max_rate"])
    for tier in str(b.get("k_schedule") or "").split(";"):
        span_text, _, k = tier.partition(":")
        lo, _, hi = span_text.partition("-")
        if lo.isdigit() and hi.isdigit() and k.isdigit() and int(lo) <= round(at) <= int(hi):
            return int(k)
    return None


def _acceptance_ratios(b, spec):
    """(band, (low, high) tokens/s at the acceptance band's ends over the answer's own), for
    an answer whose acceptance is a published prior's (`acceptance_band.row_band`), priced
    at its concurrency; (band or None, None) where the band is a point or cannot be priced."""
    column, _, value = str(b["acceptance"]).partition("=")
    k = _k_at(b)
    if column not in ACCEPTANCE_COLUMNS or k is None:
        return None, None
    row = {
        "target": b["target"],
        "method": b["method"],
        "draft": b["draft"] if b["method"] == "draft_model" else "",
        "gpu": b["gpu"],
        "num_gpus": int(b["tp"]),
        "engine": b["engine"],
        "kv_dtype": b["kv_dtype"],
        "k": k,
        "batch_size": max(round(float(b["concurrency_at_max_rate"])), 1),
        "prompt_len": round(spec.traffic.prompt.mean),
        "output_len": round(spec.traffic.output.mean),
        column: float(value) if column == "acceptance_rate" else value,
    }
    if b["weight_dtype"] != "default":
        row["weight_dtype"] = b["weight_dtype"]
    found = acceptance_band.row_band(row)
    if found is None or not found[0].wide:
        return (found[0] if found else None), None
    band, centre = found
    return band, acceptance_band.tok_s_ratios(row, band, centre)


def _answer_range(b, demand: float, spec) -> str:
    """The answer's range: the speculative max rate +/- the model's validated speedup error
    at the answer's concurrency (the published cases' median in its batch bucket), widened
    by the acceptance band where the specification's acceptance is a published prior's,
    and the replicas and $/1M at demand that follow. '' where the error is unknown."""
    if b["method"] == "none":
        return ""
    width = sim.speedup_error([max(float(b["concurrency_at_max_rate"]), 1.0)])
    if width is None or not math.isfinite(float(width[0])):
        return ""
    w, rate = float(width[0]), float(b["max_rate_rps"])
    band, ratios = _acceptance_ratios(b, spec)
    low_at, high_at = ratios if ratios else (1.0, 1.0)
    slow, fast = rate * min(low_at, 1.0) * (1 - w), rate * max(high_at, 1.0) * (1 + w)
    fewest, most = math.ceil(demand / fast), math.ceil(demand / slow)
    per_replica = float(b["cost_per_mtok_usd"]) / int(b["replicas"])
    replicas = f"{fewest}" if fewest == most else f"{fewest}-{most}"
    cost = f"${fewest * per_replica:.3f}"
    cost += "" if fewest == most else f"-${most * per_replica:.3f}"
    if ratios:
        why = f" and the acceptance α {band.low:.3f}-{band.high:.3f} ({band.why})"
    elif band is not None and math.isfinite(band.low):
        why = f"; the acceptance: {band.why}"
    else:
        why = "; the acceptance is the specification's, typed: taken as given"
    return (
        f"Range: {slow:.2f}-{fast:.2f} requests/s per replica (+/-{w:.0%}, the model's "
        f"median speedup error on published cases near "
        f"{float(b['concurrency_at_max_rate']):.0f} requests in flight{why}), so {replicas} "
        f"replica(s) and {cost} per 1M tokens."
    )


def _show(state: dict, spec) -> None:
    table = finish(state["rows"])
    if state["plan"]:
        st.caption(widgets.plain(state["plan"]))
    if state["cancelled"]:
        st.warning(f"Cancelled: {state['done']} of {state['total']} configurations kept.")
    if state["message"]:
        st.error(widgets.plain(state["message"]))
    if not len(table):
        return
    best = table[table["optimum"]]
    if len(best):
        b = best.iloc[0]
        demand = spec.traffic.rate_max
        st.success(
            widgets.plain(
                f"Cheapest within the SLO: #{b['id']} {b['tp']}x {b['gpu']}, {b['engine']}, "
                f"{b['method']} K={b['k']}: ${b['cost_per_mtok_usd']:.3f} per 1M tokens at "
                f"the demand of {demand:g} requests/s; {int(b['replicas'])} replica(s) of "
                f"{b['max_rate_rps']:.2f} requests/s each at most, {int(b['gpus'])} GPUs"
            )
        )
        ranged = _answer_range(b, demand, spec)
        if ranged:
            st.caption(widgets.plain(ranged))
        st.code(b["launch_command"], language="bash", wrap_lines=True)
    picked = None
    for which, column in zip(("cost", "throughput"), st.columns(2), strict=True):
        event = column.plotly_chart(
            figures_search.front_figure(table, which),
            key=f"search_front_{which}",
            on_select="rerun",
            selection_mode="points",
        )
        picked = figures_search.selected_id(event) if picked is None else picked
    if picked is not None and picked in set(table["id"]):
        row = table[table["id"] == picked].iloc[0]
        traffic = spec.traffic
        links = figures_search.page_links(
            row, traffic.prompt.mean, traffic.output.mean, traffic.rate_max
        )
        st.markdown(
            f"#{picked}: " + " · ".join(f"[Open in {name}]({url})" for name, url in links.items())
        )
        st.code(row["launch_command"], language="bash")
    else:
        st.caption("Click a point to open that configuration in the ROI calculator or the Sizer.")
    shown = table.drop(columns=["launch_command"])
    st.dataframe(shown, hide_index=True)
    st.download_button(
        "Download the table (CSV)",
        table.to_csv(index=False).encode(),
        file_name="specplan-search.csv",
        mime="text/csv",
    )


st.title("Deployment search")
st.caption(
    "The cheapest deployments meeting P99 TTFT and TPOT SLOs: every candidate priced by the "
    "model, the survivors confirmed by the request-level simulation (highest rate within the "
    "SLOs, by bisection), with and without speculation. `python -m simulator search` runs the "
    "same search on Ray."
)


def _load_example() -> None:
    name = st.session_state["search_example"]
    st.session_state["search_spec"] = (EXAMPLES / name).read_text(encoding="utf-8")


example = st.selectbox(
    "Start from",
    EXAMPLE_FILES,
    key="search_example",
    on_change=_load_example,
    persist_state="session",
)
if "search_spec" not in st.session_state:
    _load_example()
text = st.text_area("Specification (YAML)", height=320, key="search_spec", persist_state="session")
max_configs = st.number_input(
    "Confirm at most (configurations)",
    min_value=1,
    max_value=5000,
    value=200,
    step=10,
    key="search_max_configs",
    persist_state="session",
)
go_col, cancel_col = st.columns([1, 1])
run = go_col.button("Run search", type="primary", key="search_run")
cancel_col.button("Cancel", key="search_cancel")
try:
    spec = _parse(text)
except InputError as exc:
    st.error(widgets.plain(str(exc)))
    st.stop()
if run:
    _run(spec, int(max_configs))
if STATE in st.session_state:
    _show(st.session_state[STATE], spec)
