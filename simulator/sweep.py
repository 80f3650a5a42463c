"""Grids of scenarios: the cartesian product of ranges, as one scenario table."""

from __future__ import annotations

import itertools

import pandas as pd

from simulator.errors import InputError


def parse_range(text: str, *, name: str, kind=float) -> list:
    """'1-8' (integers), '0.5:0.9:0.1' (start:stop:step, inclusive) or '1,2,4' to a list."""
    text = str(text).strip()
    try:
        if ":" in text:
            start, stop, step = (float(x) for x in text.split(":"))
            if step <= 0:
                raise ValueError
            count = round((stop - start) / step) + 1
            values = [start + i * step for i in range(count)]
        elif "-" in text[1:] and "," not in text:
            lo, hi = (int(x) for x in text.split("-"))
            values = list(range(lo, hi + 1))
        else:
            values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(
            f"'{text}' is not a range: use 1-8, 0.5:0.9:0.1 or 1,2,4", field=name
        ) from None
    if not values:
        raise InputError(f"'{text}' is empty", field=name)
    return [kind(round(v, 10)) if kind is float else kind(v) for v in values]


def build_grid(base: dict, **axes: list) -> pd.DataFrame:
    """One row per combination of the axis values, other columns from `base`."""
    names = list(axes)
    rows = [
        dict(base, **dict(zip(names, combo, strict=True)))
        for combo in itertools.product(*(axes[n] for n in names))
    ]
    return pd.DataFrame(rows)
