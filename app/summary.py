"""The one-page decision summary (Markdown) the ROI page offers for download: whether to
turn speculation on, below which batch, what it saves, and what the figures rest on."""

from __future__ import annotations

from collections.abc import Mapping


def decision_summary(
    *,
    title: str,
    method_label: str,
    k: int,
    batch: int,
    row: Mapping,
    crossover: float | None,
    pays_from_start: bool,
    basis: str,
    engine: str = "",
    uncertainty: str = "",
    schedule: str = "",
    command: str = "",
    link: str = "",
) -> str:
    """Markdown: the verdict at the planned batch, the batch range where speculation pays
    (`crossover`: the batch where the best-K speedup falls to 1, None where it does not in
    the range; `pays_from_start`: whether it pays at the smallest batch), the money, what
    the acceptance figure is, and where given: the engine, the figures' range
    (`uncertainty`, a sentence), the K schedule, the launch command and the link that
    reopens the page."""
    speedup = float(row["speedup"])
    saving = float(row["monthly_saving_usd"])
    if not pays_from_start:
        where = f"Keep {method_label} off: it pays at no batch sampled."
    elif crossover is None:
        where = f"Turn on {method_label}: it pays at every batch sampled."
    else:
        at = round(crossover)
        where = (
            f"Turn on {method_label} below batch {at} (a K schedule that falls to 0 there); "
            f"keep it off above batch {at}."
        )
    money = (
        f"saves ${saving:,.0f} a month"
        if saving > 0
        else f"costs ${-saving:,.0f} a month more"
        if saving < 0
        else "changes nothing a month"
    )
    lines = [
        f"# {title}",
        "",
        f"**{where}**",
        "",
        f"- At batch {batch} with K = {k}: {speedup:.2f}x tokens/s; it {money} "
        f"({row['replicas_baseline']:.0f} -> {row['replicas_spec']:.0f} replicas).",
        f"- $ per 1M tokens: {row['cost_per_mtok_baseline']:.3f} -> "
        f"{row['cost_per_mtok_spec']:.3f}.",
        f"- TPOT {row['baseline_tpot_ms']:.1f} -> {row['spec_tpot_ms']:.1f} ms.",
        f"- {basis}" if basis else "",
        f"- Engine: {engine}." if engine else "",
        f"- {uncertainty}" if uncertainty else "",
        f"- K schedule (batch range: K): {schedule}." if schedule else "",
        "",
        *(["Launch command:", "", "```bash", command, "```", ""] if command else []),
        f"Reopen these figures: {link}" if link else "",
        "",
        "Made by SpecPlan's ROI calculator.",
    ]
    return "\n".join(line for line in lines if line is not None) + "\n"
