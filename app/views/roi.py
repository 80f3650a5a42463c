"""ROI calculator: what speculative decoding does to speed, memory and money for one
scenario, with the speedup against K and against batch, and the cost before and after."""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from app import acceptance_band, engine_notes, figures, library_saves, sim, widgets
from app.formatting import delta, money, signed_money, span
from app.operating_point import row_command
from app.presets import MEASURED
from app.summary import decision_summary
from simulator.errors import InputError
from simulator.model.defaults import DEFAULTS
from simulator.model.economics import get_payback_months
from simulator.model.predict import CANNOT_RUN_REASONS, MEMORY_REASONS, status_reasons
from simulator.planning.k_schedule import RELATIVE_TOLERANCE
from simulator.planning.preflight import K_MAX_SENSIBLE, checklist
from simulator.planning.reports import ENGINE_LABELS, add_economics
from simulator.planning.sizer import DEFAULT_BATCHES, schedule_ranges
from simulator.planning.uncertainty import get_money_range, get_payback_range

K_OPTIONS = ["best", *(str(k) for k in range(1, 11))]
# The chart runs K over 1..10; 'best K' searches only up to the checklist's sensible
# limit, since real acceptance decays with position faster than an i.i.d. alpha says.
K_CHART = tuple(range(1, 11))
K_SEARCH = tuple(range(1, K_MAX_SENSIBLE + 1))
CURVE_ALPHAS = (0.5, 0.6, 0.7, 0.8, 0.9)
DEFAULT_BATCH = 16
DEFAULT_MIGRATION_USD = 20_000


def _money_range(row, batch: int, acceptance=None):
    """(error, `uncertainty.MoneyRange`, acceptance band and ends) for this row at the
    model's validated error at its batch and the acceptance's own band, or None where the
    error or the speedup is unknown."""
    err = sim.speedup_error([batch])
    if err is None or not math.isfinite(float(row["speedup"])):
        return None
    ends = acceptance[1] if acceptance else None
    return (
        float(err[0]),
        get_money_range(
            demand_tok_s=row["demand_tok_s"],
            baseline_tok_s=row["baseline_tok_s"],
            spec_tok_s=row["spec_tok_s"],
            hourly_usd_per_gpu=row["gpu_hourly_usd"],
            num_gpus=row["num_gpus"],
            error=err[0],
            acceptance_ends=None if ends is None else (ends[0][1], ends[1][1]),
        ),
        acceptance,
    )


def _months(values) -> str:
    """A payback range in months, 'never' where no end pays back."""
    lo, hi = sorted(float(v) for v in values)
    if math.isinf(lo):
        return "never"
    if not math.isfinite(hi):
        return f"{lo:.1f} months to never"
    return f"{span([lo, hi], lambda v: f'{v:.1f}')} months"


def _fractional_saving(row, migration_usd: float, ranged=None) -> str | None:
    """Where whole replicas do not fall but $ per 1M tokens does: the saving and payback at
    the fractional capacity (replicas shared with other traffic, or a smaller pool), with
    their range at the model's error where `ranged` (`_money_range`) is given."""
    per_mtok = float(row["cost_per_mtok_baseline"]) - float(row["cost_per_mtok_spec"])
    if not (math.isfinite(per_mtok) and per_mtok > 0) or row["monthly_saving_usd"] > 0:
        return None
    mtok_month = float(row["demand_tok_s"]) * 3600 * DEFAULTS.hours_per_month / 1e6
    saving = per_mtok * mtok_month
    months = float(get_payback_months(migration_usd, saving))
    share = per_mtok / float(row["cost_per_mtok_baseline"])
    text = (
        f"The whole replica count does not fall, but $ per 1M tokens does, by {share:.0%} "
        f"({money(per_mtok, 3)}). At fractional capacity (the freed share of a replica "
        f"used for other traffic) that saves {money(saving)} a month: payback "
        f"{months:.1f} months."
    )
    if ranged is not None:
        err, r, _ = ranged
        text += (
            f" With the model's error (±{err:.0%}): {span(r.fractional_saving_usd, money)} "
            f"a month, payback {_months(get_payback_range(migration_usd, r.fractional_saving_usd))}."
        )
    return text


def _with_error(row, batch: int, migration_usd: float, ranged) -> str:
    """The speedup, replicas, $ per month and payback with the model's validated error at
    this batch (the median |error| against published measurements in the batch's range),
    and the verdict that survives it."""
    if ranged is None:
        return ""
    err, r, acceptance = ranged
    low = high = float(row["speedup"])
    why = ""
    if acceptance is not None:
        band, ends = acceptance
        if ends is not None and all(math.isfinite(e[0]) for e in ends):
            low, high = min(low, ends[0][0]), max(high, ends[1][0])
            why = f" and acceptance α {band.low:.3f}-{band.high:.3f} ({widgets.plain(band.why)})"
        elif band.why:
            why = f" ({widgets.plain(band.why)})"
    low, high = low * (1 - err), high * (1 + err)
    if low > 1:
        verdict = "speculation pays at this batch even at the low end"
    elif high < 1:
        verdict = "speculation is slower at this batch even at the high end"
    else:
        verdict = "within the model's error speculation may or may not pay at this batch"
    payback = get_payback_range(migration_usd, r.monthly_saving_usd)
    return (
        f"With the model's typical error at batch {batch} (±{err:.0%}, Validation page)"
        f"{why}: speedup {low:.2f}-{high:.2f}x, {span(r.replicas_spec, lambda v: f'{v:.0f}')} "
        f"replicas with speculation, {span(r.monthly_cost_spec_usd, money)} a month "
        f"(saving {span(r.monthly_saving_usd, money)}), payback {_months(payback)}; "
        f"{verdict}."
    )


st.title("ROI calculator")
st.caption(
    "Should speculative decoding be on for this deployment? Pick the scenario in the "
    "sidebar; every number below comes from the simulator."
)
scenario = widgets.scenario_inputs()
with st.sidebar:
    library_saves.scenario_bar("roi")
c1, c2, c3 = st.columns(3)
k_choice = c1.selectbox(
    "K (speculative tokens per step)",
    K_OPTIONS,
    key="k",
    disabled=not scenario.speculative,
    help=f"'best' picks the K in 1..{K_MAX_SENSIBLE} with the highest speedup at this batch.",
    **widgets.BIND,
)
batch = int(
    c2.number_input(
        "Batch size (concurrent sequences per replica)",
        1,
        4096,
        DEFAULT_BATCH,
        key="batch_size",
        **widgets.BIND,
    )
)
migration_usd = float(
    c3.number_input(
        "One-off migration cost ($)",
        0,
        100_000_000,
        DEFAULT_MIGRATION_USD,
        1_000,
        key="migration_usd",
        help="Engineering and validation time to turn speculation on; the payback divides "
        "it by the monthly saving.",
        **widgets.BIND,
    )
)


def _curve_rows(k_values, batches) -> tuple[pd.DataFrame, list[str]]:
    """Scenario rows for the user's acceptance and for the reference alphas."""
    rows, labels = [], []
    user = f"your scenario (α {scenario.alpha:.2f})"
    if "acceptance_per_position" in scenario.acceptance:
        user = (
            "your scenario (measured per position)"
            if scenario.workload == MEASURED
            else "your scenario (prior, by position)"
        )
    for b in batches:
        for k in k_values:
            rows.append(scenario.row(k, b))
            labels.append(user)
    if batches == [batch]:
        base = {
            c: v
            for c, v in scenario.base().items()
            if c not in ("acceptance_rate", "acceptance_per_position")
        }
        for a in CURVE_ALPHAS:
            if abs(a - scenario.alpha) < 1e-9 and "acceptance_rate" in scenario.acceptance:
                continue
            for k in k_values:
                rows.append({**base, "acceptance_rate": a, "k": k, "batch_size": batch})
                labels.append(f"α {a:.1f}")
    return pd.DataFrame(rows), labels


# The pre-flight checks that judge the K itself (the others judge the setup).
K_CHECKS = ("K in a sensible range", "Acceptance above break-even")


def _best_k_note(row: dict, curve: pd.DataFrame) -> str:
    """Why the best K does not pass its own pre-flight check, where it does not, and what
    to run instead: the smallest K within 1% of its speedup (vLLM's tuner's tie rule), or
    no speculation where no K pays. `curve` is the scenario's K curve at this batch."""
    flagged = [
        c for c in checklist(row, sim.models()) if c.name in K_CHECKS and c.status != "green"
    ]
    if not flagged:
        return ""
    why = "; ".join(f"{c.name}: {c.why}" for c in flagged)
    k, speedup = int(row["k"]), float(row["speedup"])
    if not speedup > 1:
        advice = "no K pays at this batch: the best is the least slow, so run without speculation"
    else:
        near = curve[curve["speedup"] >= speedup * (1 - RELATIVE_TOLERANCE)].sort_values("k")
        smaller = int(near["k"].iloc[0]) if len(near) else k
        advice = (
            f"K = {smaller} gives {float(near['speedup'].iloc[0]):.2f}x, within 1% of it; "
            "choose it with the K selector"
            if smaller < k
            else "no smaller K comes within 1% of it, so it stays the choice; the flag says "
            "what to watch"
            if k > int(curve["k"].min())
            else "it is the smallest K; the flag says what to watch"
        )
    return (
        f"Best K = {k} ({speedup:.2f}x) does not pass its own pre-flight check ({why}): {advice}."
    )


def _schedule_text(best: pd.DataFrame) -> str:
    """The best K at each sampled batch as ranges ('1-16: 3, 17-64: 2, 65-256: 0'), K = 0
    where no K pays."""
    pays = best["speedup"].fillna(0.0) > 1.0
    frame = pd.DataFrame(
        {"batch_size": best["batch_size"], "best_k": best["k"].where(pays, 0).astype(int)}
    ).sort_values("batch_size")
    return ", ".join(f"{lo}-{hi}: {k}" for lo, hi, k in schedule_ranges(frame))


def _command_or_reason(row: dict) -> str:
    """The row's launch command on its engine, or why there is none (it cannot run)."""
    reasons = [r for r in status_reasons(str(row["status"])) if r in CANNOT_RUN_REASONS]
    if reasons:
        return "# No command: " + "; ".join(reasons)
    return row_command(row, sim.models())


def _alpha_text(alpha: float) -> str:
    """The break-even acceptance as a sentence's end: NaN without speculation, inf where
    no acceptance pays at this batch."""
    if math.isnan(alpha):
        return "none (speculation off)"
    return "none: no acceptance pays at this batch" if math.isinf(alpha) else f"{alpha:.2f}"


try:
    if scenario.speculative:
        k_frame, labels = _curve_rows(list(K_CHART), [batch])
        b_frame, _ = _curve_rows(list(K_SEARCH), sorted({*DEFAULT_BATCHES, batch}))
        # One predict call for both grids: a call costs far more than its rows do.
        grid = sim.run_predict(pd.concat([k_frame, b_frame], ignore_index=True))
        k_grid = grid.iloc[: len(k_frame)].assign(curve=labels)
        b_grid = grid.iloc[len(k_frame) :].reset_index(drop=True)
        mine = k_grid[(k_grid["curve"] == labels[0]) & k_grid["k"].isin(K_SEARCH)]
        runs = mine["speedup"].notna()
        best_here = int(mine.loc[mine["speedup"].idxmax(), "k"]) if runs.any() else K_SEARCH[0]
        k = best_here if k_choice == "best" else int(k_choice)
        # The scenario's own row at K is in the K grid (rows are predicted independently).
        at_k = (k_grid["curve"] == labels[0]) & (k_grid["k"] == k)
        main = grid.iloc[: len(k_frame)][at_k.to_numpy()].reset_index(drop=True)
        if not len(main):  # a K past the chart's range
            main = sim.run_predict(pd.DataFrame([scenario.row(k, batch)]))
    else:
        k = 0
        main = sim.run_predict(pd.DataFrame([scenario.row(0, batch)]))
        k_grid = b_grid = None
    report = add_economics(main, scenario.requests_per_day)
except InputError as exc:
    widgets.show_error(exc, "Scenario")
    st.stop()

row = report.iloc[0].to_dict()
if scenario.speculative and k_choice == "best" and best_here == max(K_SEARCH):
    st.warning(
        f"Best K sits on the search ceiling (K = {best_here}): the speedup still rises "
        f"there. Raise K up to {max(K_CHART)} with the K selector, or search further in "
        "the Concurrency sizer."
    )
payback = float(get_payback_months(migration_usd, row["monthly_saving_usd"]))
st.session_state["roi_row"] = {**row, "payback_months": payback}

if not scenario.speculative:
    st.info("Method 'none' is the baseline: choose a method in the sidebar to see the gain.")
if row["status"] != "ok":
    # A setup that cannot run gets no numbers: the reason in place of the metrics, and
    # what would make it fit where memory is the reason.
    why = str(row["status"])
    if any(r in MEMORY_REASONS for r in status_reasons(why)):
        fix = sim.memory_fix(scenario.row(k, batch), widgets.GPU_COUNTS)
        why = f"{why}. {fix}" if fix else why
    st.error(widgets.plain(why), icon=":material/block:")
    widgets.checklist_panel(row, horizontal=True)
    st.stop()
if not bool(row["fits"]):
    st.warning(f"Does not fit: {widgets.plain(row['warnings'] or 'batch exceeds the KV cache')}.")

# The checklist goes under the metrics, three to a row: as a narrow column beside them it
# left a large empty block under the metrics and squeezed their labels at 1024 px.
left = st.container()
with left:
    st.subheader(
        f"K = {k}"
        + (" (best at this batch)" if k_choice == "best" and k else "")
        + f", batch {batch}"
    )
    m = st.columns(4)
    m[0].metric(
        "Speedup",
        f"{row['speedup']:.2f}x",
        help="Tokens per second with speculation over without, at this batch.",
    )
    m[1].metric(
        "Tokens/s per user",
        f"{row['spec_tok_s_per_user']:,.1f}",
        delta(row["spec_tok_s_per_user"] - row["baseline_tok_s_per_user"], "+,.1f"),
    )
    m[2].metric(
        "Tokens/s per replica",
        f"{row['spec_tok_s']:,.0f}",
        delta(row["spec_tok_s"] - row["baseline_tok_s"], "+,.0f"),
    )
    m[3].metric(
        "$ per 1M tokens",
        money(row["cost_per_mtok_spec"], 3),
        delta(row["cost_per_mtok_spec"] - row["cost_per_mtok_baseline"], "+.3f"),
        delta_color="inverse",
        help=f"Before: {money(row['cost_per_mtok_baseline'], 3)}",
    )
    m = st.columns(4)
    cap_base, cap_spec = row["kv_capacity_tokens_baseline"], row["kv_capacity_tokens_spec"]
    kv_delta = delta((cap_spec - cap_base) / cap_base, "+.1%") if cap_base > 0 else None
    m[0].metric(
        "Max concurrency",
        f"{row['max_concurrency_spec']:,.0f}",
        delta(row["max_concurrency_spec"] - row["max_concurrency_baseline"], "+,.0f"),
        help=f"Sequences of {scenario.prompt_len}+{scenario.output_len} tokens that fit "
        f"in the KV cache; {row['max_concurrency_baseline']:,.0f} without speculation.",
    )
    m[1].metric(
        "VRAM for speculation",
        f"{row['draft_weights_gb']:.2f} GiB",
        f"{kv_delta} KV tokens" if kv_delta else None,
        delta_color="off",
        help="Draft weights per replica, and the share of KV-cache token capacity the "
        "draft's weights and cache take away.",
    )
    m[2].metric(
        "Monthly cost",
        money(row["monthly_cost_spec_usd"]),
        signed_money(-row["monthly_saving_usd"]),
        delta_color="inverse",
        help=f"{row['replicas_spec']:.0f} replicas of {scenario.num_gpus} GPUs instead of "
        f"{row['replicas_baseline']:.0f} for {row['demand_tok_s']:,.0f} tok/s of demand; "
        f"before: {money(row['monthly_cost_baseline_usd'])}.",
    )
    m[3].metric(
        "Payback",
        # "mo": "2.0 months" does not fit the metric's column and shows as "2.0 mo…".
        "n/a" if math.isnan(payback) else "never" if math.isinf(payback) else f"{payback:.1f} mo",
        help=f"Months until the ${migration_usd:,.0f} one-off is paid back by a monthly "
        f"saving of {money(row['monthly_saving_usd'])}.",
    )
    st.caption(
        f"Demand {row['demand_tok_s']:,.0f} tok/s ({scenario.requests_per_day / 86400:,.2f} "
        f"requests/s x {scenario.output_len} tokens): {row['replicas_baseline']:.0f} → "
        f"{row['replicas_spec']:.0f} replicas. τ = {row['tau']:.2f} tokens per step, "
        f"TPOT {row['baseline_tpot_ms']:.1f} → {row['spec_tpot_ms']:.1f} ms, latency from "
        f"{widgets.plain(row['latency_source'])}. {widgets.acceptance_basis(scenario)}"
    )
    ranged = _money_range(row, batch, acceptance_band.ends(scenario, k, batch))
    uncertain = _with_error(row, batch, migration_usd, ranged)
    if uncertain:
        st.caption(uncertain)
    fractional = _fractional_saving(row, migration_usd, ranged)
    if fractional is not None:
        st.caption(fractional)
widgets.checklist_panel(row, horizontal=True, per_row=3)
if scenario.speculative and k_choice == "best":
    note = _best_k_note(row, mine)
    if note:
        st.caption(note)

c1, c2 = st.columns(2)
if k_grid is not None:
    k_fig = figures.speedup_vs_k(
        k_grid[["curve", "k", "speedup"]], highlight=str(k_grid["curve"].iloc[0])
    )
    c1.plotly_chart(k_fig, key="roi_speedup_k")
    known = widgets.known_positions(scenario)
    if known and known < max(K_CHART):
        c1.caption(
            f"Positions past K={known} are extrapolated (the acceptance figure covers "
            f"K ≤ {known}; deeper rates follow the method's fitted decay): read K > {known} "
            "as a projection."
        )
    ranked = b_grid["speedup"].fillna(-math.inf)
    best = b_grid.loc[ranked.groupby(b_grid["batch_size"]).idxmax()]
    curves = [best.assign(curve="best K per batch")]
    if k_choice != "best":
        curves.insert(0, b_grid[b_grid["k"] == k].assign(curve=f"K={k}"))
    b_df = pd.concat(curves)[["curve", "batch_size", "speedup", "k"]]
    main_curve = b_df[b_df["curve"] == b_df["curve"].iloc[0]]
    cross = figures.crossover_batch(main_curve["batch_size"], main_curve["speedup"])
    band = sim.published_error_band(main_curve["batch_size"], main_curve["speedup"])
    c2.plotly_chart(
        figures.speedup_vs_batch(b_df, crossover=cross, band=band), key="roi_speedup_batch"
    )
    c2.caption(
        "Shaded: the model's typical error at each batch, the median |error| against "
        "published measurements in that batch range (the Validation page has the table)."
    )
    first = main_curve.sort_values("batch_size")["speedup"].to_numpy(dtype=float)
    summary_md = decision_summary(
        title=f"{scenario.target}, {scenario.method}, {scenario.num_gpus} x {scenario.gpu}",
        method_label=widgets.METHOD_LABELS[scenario.method],
        k=int(k),
        batch=batch,
        row=row,
        crossover=cross,
        pays_from_start=bool(len(first)) and first[0] > 1.0,
        basis=widgets.acceptance_basis(scenario),
        engine=ENGINE_LABELS.get(scenario.engine, scenario.engine),
        uncertainty=uncertain,
        schedule=_schedule_text(best),
        command=_command_or_reason(row),
        link=library_saves.scenario_link("roi", library_saves.scenario_params()),
    )
    st.session_state["roi_summary"] = summary_md
    c2.download_button(
        "Decision summary (Markdown)",
        summary_md,
        file_name="specplan-decision.md",
        mime="text/markdown",
        on_click="ignore",
        key="roi_summary_download",
    )
cost = pd.DataFrame(
    {
        "case": ["baseline", "speculative"],
        "cost_per_mtok": [row["cost_per_mtok_baseline"], row["cost_per_mtok_spec"]],
        "monthly_cost_usd": [row["monthly_cost_baseline_usd"], row["monthly_cost_spec_usd"]],
    }
)
c1.plotly_chart(figures.cost_before_after(cost), key="roi_cost")
with c2:
    st.markdown("**The prediction behind these numbers**")
    details = pd.DataFrame(
        {
            "baseline": [
                row["baseline_tpot_ms"],
                row["baseline_tok_s_per_user"],
                row["baseline_tok_s"],
                row["max_concurrency_baseline"],
                row["kv_capacity_tokens_baseline"],
                row["cost_per_mtok_baseline"],
            ],
            "speculative": [
                row["spec_tpot_ms"],
                row["spec_tok_s_per_user"],
                row["spec_tok_s"],
                row["max_concurrency_spec"],
                row["kv_capacity_tokens_spec"],
                row["cost_per_mtok_spec"],
            ],
        },
        # Short labels and narrow columns: in half a page at 1024 px the speculative column
        # was cut off (issue 27, Layout).
        index=[
            "TPOT [ms]",
            "tok/s per user",
            "tok/s per replica",
            "max seqs",
            "KV [tokens]",
            "$ per 1M tok",
        ],
    )
    narrow = st.column_config.NumberColumn(width="small", format="%.6g")
    st.dataframe(
        details.round(2),
        key="roi_details",
        width="stretch",
        column_config={"baseline": narrow, "speculative": narrow},
    )
    st.caption(
        f"Steps: target {row['target_step_ms']:.2f} ms, draft {row['draft_step_ms']:.2f} ms, "
        f"verify {row['verify_step_ms']:.2f} ms; per engine step, prefill "
        f"{row['prefill_ms_baseline']:.2f} → {row['prefill_ms_spec']:.2f} ms and host "
        f"{row['engine_ms_baseline']:.2f} → {row['engine_ms_spec']:.2f} ms "
        f"({row['serving']}); batch running {row['effective_batch_baseline']:.0f} → "
        f"{row['effective_batch_spec']:.0f}. Break-even α at this batch: "
        f"{_alpha_text(row['break_even_alpha'])}. Tokens per step p10/p50/p90: "
        f"{row['tokens_per_step_p10']:.0f}/{row['tokens_per_step_p50']:.0f}/"
        f"{row['tokens_per_step_p90']:.0f}."
    )
    engine_notes.engine_assumptions(
        scenario.engine, scenario.method, row["latency_source"], key="roi_engine_costs"
    )
