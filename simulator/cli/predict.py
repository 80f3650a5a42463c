"""`python -m simulator predict`: a scenario table in, predictions out (or, with --report,
the dashboard's sizing report)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterator

from simulator.cli import common
from simulator.errors import InputError
from simulator.inputs.catalog import catalog_models
from simulator.inputs.io import read_blocks, table_columns, table_format

REQUESTS_PER_DAY = 2_000_000
"""Demand the --report economics price when neither the flag nor a row gives one: the
dashboard's default (`app.widgets.DEFAULT_REQUESTS_PER_DAY`)."""


def _requests_per_day(column, default: float, source: str, row_offset: int = 0):
    """A `requests_per_day` column as requests per day per row; blank cells get `default`.
    `row_offset`: rows of the file above this block (for the row an error names)."""
    import numpy as np
    import pandas as pd

    from simulator.planning.reports import MAX_REQUESTS_PER_DAY, requests_per_day_ok

    text = column.fillna("").astype(str).str.strip()
    values = pd.to_numeric(text.where(text != ""), errors="coerce").to_numpy(dtype=float)
    bad = text.ne("").to_numpy() & ~requests_per_day_ok(values)
    if bad.any():
        i = int(bad.argmax())
        raise InputError(
            f"'{text.iloc[i]}' is not a number of requests per day (0..{MAX_REQUESTS_PER_DAY:g})",
            file=source,
            row=row_offset + i + 1,
            field="requests_per_day",
        )
    return np.where(text.eq("").to_numpy(), default, values)


def _write_report(result, demand, args) -> None:
    """The dashboard's sizing report: economics and pre-flight added, units in the headers."""
    from simulator.planning.reports import add_economics, add_preflight, report_csv

    text = report_csv(add_preflight(add_economics(result, demand), catalog_models(args.models)))
    common.write_atomically(args.out, lambda fh: fh.write(text))


def cmd_predict(args) -> int:
    import numpy as np
    import pandas as pd

    from simulator.inputs.scenarios import check_columns
    from simulator.model.predict import OUTPUT_COLUMNS
    from simulator.planning.reports import ECONOMICS_COLUMNS

    if args.report and table_format(args.out, "--out") != "csv":
        raise InputError("--report writes CSV; give a file ending in .csv", field="--out")
    if args.report and args.columns is not None:
        raise InputError(
            "--report writes the dashboard's report, whose columns are fixed; drop --columns "
            "or --report",
            field="--columns",
        )
    columns = common.selected_columns(args.columns)
    names = table_columns(args.inp)
    demand_given = "requests_per_day" in names
    if demand_given and not args.report:
        raise InputError(
            "is read only with --report, which prices that demand",
            file=args.inp,
            field="requests_per_day",
        )
    if args.requests_per_day is not None and not args.report:
        raise InputError(
            "is read only with --report, which prices that demand", field="--requests-per-day"
        )
    extra = ("requests_per_day",) if args.report else ()
    outputs = (*OUTPUT_COLUMNS, *ECONOMICS_COLUMNS, "preflight")
    check_columns([n for n in names if n], args.inp, outputs=outputs, extra=extra)
    demands = []

    def tables() -> Iterator:
        for table in read_blocks(args.inp, common.WRITE_BLOCK_ROWS):
            if args.report:
                column = (
                    table.pop("requests_per_day")
                    if demand_given
                    else pd.Series("", index=table.index)
                )
                default = (
                    REQUESTS_PER_DAY if args.requests_per_day is None else args.requests_per_day
                )
                done = common.first_row(args.inp) + sum(len(d) for d in demands)
                demands.append(_requests_per_day(column, default, args.inp, done))
            yield table

    results = common.predict_blocks(tables(), args, args.inp, row_offset=common.first_row(args.inp))
    if args.report:
        result = pd.concat(list(results), ignore_index=True)
        _write_report(result, np.concatenate(demands), args)
        rows = len(result)
    else:
        rows = common.write_blocks(results, args.out, columns=columns)
    common.log(f"wrote {rows} predictions to {args.out}")
    return 0


def _demand(text: str) -> float:
    """Requests per day, a finite number >= 0 (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    from simulator.planning.reports import MAX_REQUESTS_PER_DAY, requests_per_day_ok

    if not requests_per_day_ok(value):
        raise argparse.ArgumentTypeError(
            f"'{text}' is not a number of requests per day (0..{MAX_REQUESTS_PER_DAY:g})"
        )
    return value


def add_parser(sub) -> None:
    """The `predict` command's flags."""
    p = sub.add_parser("predict", help="scenario table in, predictions out (CSV or Parquet)")
    p.add_argument("--in", dest="inp", required=True, help="scenario table (.csv or .parquet)")
    p.add_argument("--out", required=True, help="predictions (.csv or .parquet)")
    p.add_argument(
        "--report",
        action="store_true",
        help="write the dashboard's sizing report instead (simulator.planning.reports, the one place "
        "for its format): units in the headers, e.g. 'speedup [x]', and economics and "
        "pre-flight columns after the predictions (demand, replicas, monthly cost and saving "
        "in $); a requests_per_day column may then give each row's demand",
    )
    p.add_argument(
        "--requests-per-day",
        type=_demand,
        help=f"requests per day the --report economics price (default {REQUESTS_PER_DAY:,}, "
        "the dashboard's)",
    )
    p.add_argument("--columns", help=f"{common.COLUMNS_HELP}; not with --report")
    common.add_common_flags(p)
    p.set_defaults(func=cmd_predict)
