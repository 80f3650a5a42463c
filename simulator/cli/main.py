"""Command line: `python -m simulator predict|sweep|validate|serve|columns|models|search|library`,
one module per subcommand beside this one (the search's in `simulator.search.cli`, the
library's in `library.cli`).

Exit status 2 means bad input; the message names the row and the column, or the flag.
SIGTERM exits with status 143 and leaves no partial output file. Tables are CSV or
Parquet, by suffix. numpy, pandas and pyarrow are imported by the commands that use them,
so `--help` answers at once.
"""

from __future__ import annotations

import argparse
import sys

from simulator.cli import columns, common, models, predict, serve, sweep, validate
from simulator.errors import InputError
from simulator.inputs.io import table_format


def make_parser() -> argparse.ArgumentParser:
    """The command line's parser: each subcommand module's `add_parser`."""
    parser = argparse.ArgumentParser(
        prog="python -m simulator", description="SpecPlan analytic model of speculative decoding"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for command in (predict, sweep, validate, serve, columns, models):
        command.add_parser(sub)
    from simulator.search.cli import add_parser as add_search

    add_search(sub)
    from library.cli import add_library_parser

    add_library_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    try:
        if getattr(args, "out", None):
            common.check_out(args.out)
            table_format(args.out, "--out")
        if getattr(args, "inp", None):
            table_format(args.inp, "--in")
        if getattr(args, "model_config", None):
            from simulator.inputs.catalog import use_model_configs

            for spec in use_model_configs(args.model_config).values():
                print(f"model '{spec.id}' from {spec.source}", file=sys.stderr)
        with common.sigterm_exits():
            return args.func(args)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
