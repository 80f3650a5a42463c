"""`python -m simulator columns`: the scenario columns, their defaults, and the outputs."""

from __future__ import annotations


def cmd_columns(args) -> int:
    import textwrap

    from simulator.inputs.scenarios import COLUMNS
    from simulator.model.predict import OUTPUT_COLUMNS

    for c in COLUMNS:
        default = "" if c.default is None else f" (default {c.default!r})"
        print(f"{c.name:26s} {c.help}{default}")
    from simulator.kernels.tables import engine_versions

    print(
        f"{'':26s} engine versions (kernel tables or host costs of their own): {', '.join(engine_versions())}"
    )
    print()
    print("predict and sweep write these columns, then the outputs (any of them by name with")
    print("--columns; units: ms, tokens/s, GB = 2**30 bytes, $ per 1M generated tokens):")
    print(textwrap.fill(", ".join(OUTPUT_COLUMNS), width=88))
    return 0


def add_parser(sub) -> None:
    """The `columns` command."""
    c = sub.add_parser("columns", help="list the scenario columns and their defaults")
    c.set_defaults(func=cmd_columns)
