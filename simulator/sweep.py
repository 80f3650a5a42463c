"""Grids of scenarios: the cartesian product of ranges, as one scenario table."""

from __future__ import annotations

import math

import pandas as pd

from simulator.errors import InputError

SWEEP_LIMIT = 2_000_000
"""Most rows a sweep builds without --force: about 1.5 GB of CSV and minutes of writing."""


def _count(text: str) -> int:
    """Values a range holds, without listing them; ValueError (OverflowError for an infinite
    bound) when it is not a range."""
    if ":" in text:
        start, stop, step = (float(x) for x in text.split(":"))
        if step <= 0:
            raise ValueError
        return round((stop - start) / step) + 1
    if "-" in text[1:] and "," not in text:
        lo, hi = (int(x) for x in text.split("-"))
        return hi - lo + 1
    return len([x for x in text.split(",") if x.strip()])


def _values(text: str, count: int) -> list:
    if ":" in text:
        start, _, step = (float(x) for x in text.split(":"))
        return [start + i * step for i in range(count)]
    if "-" in text[1:] and "," not in text:
        lo = int(text.split("-")[0])
        return list(range(lo, lo + count))
    return [float(x) for x in text.split(",") if x.strip()]


def parse_range(text: str, *, name: str, kind=float, most: int | None = None) -> list:
    """'1-8' (integers), '0.5:0.9:0.1' (start:stop:step, inclusive) or '1,2,4' to a list.

    A range of more than `most` values is refused before it is listed.
    """
    text = str(text).strip()
    try:
        count = _count(text)
        values = _values(text, count) if most is None or count <= most else []
    except (ValueError, OverflowError):
        raise InputError(
            f"'{text}' is not a range: use 1-8, 0.5:0.9:0.1 or 1,2,4", field=name
        ) from None
    if most is not None and count > most:
        raise InputError(
            f"'{text}' holds {count:,} values; a sweep builds at most {most:,} scenarios "
            "unless given --force",
            field=name,
        )
    if not values:
        raise InputError(f"'{text}' is empty", field=name)
    return [kind(round(v, 10)) if kind is float else kind(v) for v in values]


def grid_size(**axes: list) -> int:
    """Rows of the grid the axes span: the product of their lengths."""
    return math.prod(len(values) for values in axes.values())


def build_grid(base: dict, **axes: list) -> pd.DataFrame:
    """One row per combination of the axis values (the last axis varies fastest), other
    columns from `base`."""
    grid = pd.MultiIndex.from_product(list(axes.values()), names=list(axes)).to_frame(index=False)
    fixed = {name: value for name, value in base.items() if name not in axes}
    return pd.concat([pd.DataFrame(fixed, index=grid.index), grid], axis=1)
