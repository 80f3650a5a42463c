"""Grids of scenarios: the cartesian product of ranges, as one scenario table."""

from __future__ import annotations

import math

from simulator.errors import InputError

SWEEP_LIMIT = 2_000_000
"""Most rows a sweep builds without --force: about 1.5 GB of CSV and seconds of writing."""
SWEEP_HARD_LIMIT = 100_000_000
"""Most rows a sweep builds even with --force: a grid's inputs and outputs cost about 600
bytes a row while they are predicted, so this is what a large machine holds."""


def _number(text: str, name: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(
            f"'{text}' is not a number: use 1-8, 0.5:0.9:0.1 or 1,2,4", field=name
        ) from None
    if not math.isfinite(value):
        raise InputError(f"'{text}' is not a finite number", field=name)
    return value


def _dash(text: str) -> int:
    """Where the '-' of an 'a-b' range is, or -1: a '-' after the first character that is
    not an exponent's sign (the one in '1e-3' or '7E-1')."""
    if "," in text:
        return -1
    for i in range(1, len(text)):
        if text[i] == "-" and text[i - 1] not in "eE":
            return i
    return -1


def _count(text: str, name: str) -> int:
    """Values a range holds, without listing them. Where the float quotient overflows (a
    step of 1e-320, a span of 2e308) it is counted in decimals: a huge count, said as
    such, instead of an OverflowError."""
    from decimal import Decimal

    if ":" in text:
        parts = text.split(":")
        if len(parts) != 3:
            raise InputError(f"'{text}' is not start:stop:step", field=name)
        start, stop, step = (_number(x, name) for x in parts)
        if step <= 0:
            raise InputError(f"'{text}' needs a step above 0", field=name)
        if stop < start:
            raise InputError(f"'{text}' stops before it starts", field=name)
        steps = (stop - start) / step
        if math.isfinite(steps):
            return round(steps) + 1
        return int(((Decimal(stop) - Decimal(start)) / Decimal(step)).to_integral_value()) + 1
    dash = _dash(text)
    if dash > 0:
        lo, hi = _number(text[:dash], name), _number(text[dash + 1 :], name)
        if hi < lo:
            return 0
        if math.isfinite(hi - lo):
            return math.floor(hi - lo) + 1
        return int((Decimal(hi) - Decimal(lo)).to_integral_value("ROUND_FLOOR")) + 1
    return len([x for x in text.split(",") if x.strip()])


def _shown(count: int) -> str:
    """A count as text: with thousands separators, or as 1.00e+320 past 15 digits."""
    from decimal import Decimal

    return f"{count:,}" if count < 10**15 else f"{Decimal(count):.2e}"


def _values(text: str, count: int, name: str) -> list[float]:
    if ":" in text:
        start, _, step = (_number(x, name) for x in text.split(":"))
        return [start + i * step for i in range(count)]
    dash = _dash(text)
    if dash > 0:
        lo = _number(text[:dash], name)
        return [lo + i for i in range(count)]
    return [_number(x, name) for x in text.split(",") if x.strip()]


def parse_range(
    text: str,
    *,
    name: str,
    kind=float,
    most: int | None = None,
    low: float | None = None,
    high: float | None = None,
) -> list:
    """'1-8' (integers), '0.5:0.9:0.1' (start:stop:step, inclusive) or '1,2,4' to a list.

    Every value must be finite, whole when `kind` is int, and within [low, high] where
    given. A range of more than `most` values (`SWEEP_HARD_LIMIT` when None) is refused
    before it is listed.
    """
    text = str(text).strip()
    if not text:
        raise InputError("is empty: use 1-8, 0.5:0.9:0.1 or 1,2,4", field=name)
    cap = SWEEP_HARD_LIMIT if most is None else most
    count = _count(text, name)
    if count > cap:
        more = "unless given --force" if most is not None and most < SWEEP_HARD_LIMIT else "at all"
        raise InputError(
            f"'{text}' holds {_shown(count)} values; a sweep builds at most {cap:,} scenarios {more}",
            field=name,
        )
    values = _values(text, count, name)
    if not values:
        raise InputError(f"'{text}' is empty", field=name)
    for v in values:
        if kind is int and v != round(v):
            raise InputError(f"{v:g} is not a whole number", field=name)
        if (low is not None and v < low) or (high is not None and v > high):
            raise InputError(f"{v:g} is outside {low:g}..{high:g}", field=name)
    return [kind(round(v, 10)) if kind is float else kind(round(v)) for v in values]


def grid_size(**axes: list) -> int:
    """Rows of the grid the axes span: the product of their lengths."""
    return math.prod(len(values) for values in axes.values())


def build_grid(base: dict, **axes: list):
    """One row per combination of the axis values (the last axis varies fastest), other
    columns from `base`: a DataFrame built from numpy arrays, text as Categoricals."""
    import numpy as np
    import pandas as pd

    shape = tuple(len(values) for values in axes.values())
    n = math.prod(shape)
    columns = {}
    for name, value in base.items():
        if name in axes:
            continue
        if isinstance(value, str):
            columns[name] = pd.Categorical.from_codes(np.zeros(n, np.int8), categories=[value])
        else:
            columns[name] = np.full(n, value)
    for i, (name, values) in enumerate(axes.items()):
        inner = math.prod(shape[i + 1 :])
        outer = math.prod(shape[:i])
        column = np.repeat(np.asarray(values), inner)
        columns[name] = np.tile(column, outer)
    return pd.DataFrame(columns, copy=False)
