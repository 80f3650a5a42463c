"""`python -m simulator search --spec search.yaml --out results.parquet`.

Prints the plan and its time estimate first, then one line per confirmed configuration as
it finishes, then the optimum and the fronts. The table is written whole or not at all
(a temporary file renamed into place). Exit status: 0 done; 1 no configuration meets the
SLO (the table of what was tried is still written, and the message names the closest);
2 bad input (the message names the spec's field); 130 interrupted (Ctrl-C), with the
configurations finished so far written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_INFEASIBLE = 1
EXIT_INTERRUPTED = 130


def add_parser(sub) -> None:
    """Register `search` on the simulator's subcommand parser."""
    p = sub.add_parser(
        "search",
        help="SLO-constrained deployment search (GPUs, TP, method, K, batch cap) on Ray",
    )
    p.add_argument("--spec", required=True, help="search specification (YAML)")
    p.add_argument("--out", required=True, help="confirmed configurations (.csv or .parquet)")
    from simulator.inputs.catalog import MODEL_CONFIG_HELP

    p.add_argument(
        "--model-config", action="append", default=[], metavar="PATH", help=MODEL_CONFIG_HELP
    )
    p.add_argument(
        "--ray-address",
        default=None,
        help="Ray cluster to run on (default: RAY_ADDRESS, else a local Ray sized to the cores)",
    )
    p.add_argument(
        "--workers", type=int, default=None, help="CPUs of the local Ray (default: all cores)"
    )
    p.add_argument(
        "--max-configs",
        type=int,
        default=None,
        help="confirm at most N configurations, cheapest cost bound first",
    )
    p.set_defaults(func=cmd_search)


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def write_table(df, out: str) -> None:
    """`df` to `out` (CSV or Parquet by suffix), through a temporary file and a rename."""
    from simulator.inputs.io import atomic_path

    with atomic_path(out) as tmp:
        if Path(out).suffix.lower() == ".parquet":
            df.to_parquet(tmp, index=False)
        else:
            df.to_csv(tmp, index=False)


def _line(row: dict, done: int, total: int) -> str:
    if row["max_rate_rps"] > 0 and row["status"] == "ok":
        what = (
            f"{row['max_rate_rps']:.2f} req/s, ${row['cost_per_mtok_usd']:.3f}/1M tok at demand, "
            f"P99 TPOT {row['tpot_p99_ms']:.1f} ms"
        )
    else:
        what = row["status"]
    k = f" K={row['k']}" if row["method"] != "none" else ""
    return (
        f"[{done}/{total}] #{row['id']} {row['tp']}x {row['gpu']} {row['layout']} "
        f"{row['method']}{k} seqs {row['max_num_seqs']}: {what}"
    )


def cmd_search(args) -> int:
    from simulator.errors import InputError
    from simulator.search.driver import run_search
    from simulator.search.runners import RayRunner
    from simulator.search.spec import load_spec

    if args.max_configs is not None and args.max_configs < 1:
        raise InputError(f"{args.max_configs} must be at least 1", field="--max-configs")
    if args.workers is not None and args.workers < 1:
        raise InputError(f"{args.workers} must be at least 1", field="--workers")
    spec = load_spec(args.spec)
    try:
        runner = RayRunner(args.ray_address, num_cpus=args.workers)
        try:
            result = run_search(
                spec,
                runner=runner,
                max_configs=args.max_configs,
                on_plan=lambda plan: _log(plan.describe()),
                on_result=lambda row, done, total: _log(_line(row, done, total)),
            )
        finally:
            runner.close()
    except KeyboardInterrupt:
        # Ray's start or stage one, before any configuration finished.
        _log("interrupted before any configuration finished: nothing written")
        return EXIT_INTERRUPTED
    write_table(result.table, args.out)
    _log(f"{len(result.table)} configurations written to {args.out} in {result.seconds:.1f} s")
    if result.cancelled:
        _log("interrupted: the configurations finished before Ctrl-C are written")
        return EXIT_INTERRUPTED
    if result.message:
        _log(result.message)
        return EXIT_INFEASIBLE
    best = result.optimum
    _log(
        f"optimum: #{best['id']} {best['tp']}x {best['gpu']} {best['layout']} "
        f"{best['method']} K={best['k']}: "
        f"${best['cost_per_mtok_usd']:.3f} per 1M tokens at the demand of "
        f"{spec.traffic.rate_max:g} req/s: {int(best['replicas'])} replica(s) of at most "
        f"{best['max_rate_rps']:.2f} req/s each"
    )
    _log(f"launch: {best['launch_command']}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simulator")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)
