"""`python -m profiler run|info|check-extrapolation|train-pair|validate|serve-bench|import`.

`run` measures step latency on this machine and writes a `specplan.profile/v1` JSON file and
the same measurements as CSV next to it (same stem). `train-pair` trains the byte-level
draft/target pair (`profiler.groundtruth.train_pair`); `validate` runs real speculative
decoding with it against the simulator's prediction (`profiler.groundtruth.validate`);
`serve-bench` serves Poisson arrivals with it in a continuous-batching loop against the
request-level simulation (`profiler.groundtruth.serve_bench`). `import` reads an engine's own
benchmark results into a profile (`profiler.imports`).

The measuring commands (`run`, `info`, `check-extrapolation`) live in `profiler.measure`,
which every other command may import; this module only builds the parser and dispatches,
and nothing imports it but `python -m profiler`.
"""

from __future__ import annotations

import argparse
import sys

from profiler import measure

# Commands whose modules import torch at the top: their flags are added only when the command
# line names them, so `--help` and the other commands start without torch.
GROUNDTRUTH = {
    "train-pair": (
        "train_pair",
        "train the byte-level draft/target pair on the stdlib's sources",
    ),
    "validate": ("validate", "real speculative decoding with the pair against the simulator"),
    "serve-bench": (
        "serve_bench",
        "serve Poisson arrivals with the pair in a continuous-batching loop against the "
        "request-level simulation",
    ),
}


def _command_of(argv: list[str]) -> str | None:
    """The subcommand a command line names (the first word that is not an option)."""
    return next((a for a in argv if not a.startswith("-")), None)


def make_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The CLI's parser. The ground-truth commands' flags are added only for `command`, the
    one the command line names: their modules import torch."""
    parser = argparse.ArgumentParser(prog="python -m profiler", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    measure.add_parsers(sub)
    for name, (module_name, text) in GROUNDTRUTH.items():
        p = sub.add_parser(name, help=text)
        p.set_defaults(parser=p)
        if name == command:
            import importlib

            importlib.import_module(f"profiler.groundtruth.{module_name}").add_arguments(p)
    from profiler.imports import cli as import_cli

    import_cli.add_parser(sub)
    return parser


def _dispatch(args: argparse.Namespace, argv: list[str]) -> int:
    if args.command == "run":
        return measure.cmd_run(args, argv)
    if args.command == "info":
        return measure.cmd_info(args)
    if args.command == "import":
        from profiler.imports.cli import run_from_args

        return run_from_args(args, argv)
    if args.command == "train-pair":
        from profiler.groundtruth import train_pair

        return train_pair.run_from_args(args, argv[1:])
    if args.command == "validate":
        from profiler.groundtruth import validate

        return validate.run_from_args(args)
    if args.command == "serve-bench":
        from profiler.groundtruth import serve_bench

        return serve_bench.run_from_args(args)
    return measure.cmd_check(args)


def main(argv: list[str] | None = None) -> int:
    measure.start_clock()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = make_parser(_command_of(argv)).parse_args(argv)
    return measure.guarded(args, lambda: _dispatch(args, argv))
