"""How the pages write figures: money in whole dollars, and metric changes that show no
arrow where they read as zero (no change is neither a gain nor a loss)."""

from __future__ import annotations

import math


def money(x: float, places: int = 0) -> str:
    """Dollars: '$1,234' or '-$14' (`places` decimals), or 'n/a' where not finite (no
    price)."""
    if not math.isfinite(x):
        return "n/a"
    text = f"${abs(x):,.{places}f}"
    return f"-{text}" if x < 0 and any(c in "123456789" for c in text) else text


def signed_money(x: float) -> str | None:
    """A change in dollars for a metric's delta: '+$1,234' / '-$56'; None (no arrow)
    where it rounds to zero or is not finite."""
    if not math.isfinite(x):
        return None
    return None if round(x) == 0 else f"{'-' if x < 0 else '+'}${abs(x):,.0f}"


def delta(x: float, spec: str) -> str | None:
    """A metric's change as shown (`spec`, e.g. '+,.1f'), or None (no arrow, no colour)
    where it shows as zero or is not finite (the metric's value says n/a)."""
    if not math.isfinite(x):
        return None
    text = format(x, spec)
    return None if float(text.replace(",", "").rstrip("%")) == 0 else text


def span(values, fmt=lambda v: f"{v:g}") -> str:
    """A range of two figures in order: 'a-b', 'a to b' where an end is negative, 'a' where
    they read the same in `fmt`, '' where an end is not a number."""
    lo, hi = sorted(float(v) for v in values)
    if math.isnan(lo) or math.isnan(hi):
        return ""
    if fmt(lo) == fmt(hi):
        return fmt(lo)
    return f"{fmt(lo)} to {fmt(hi)}" if lo < 0 else f"{fmt(lo)}-{fmt(hi)}"
