"""`python -m profiler run|info|check-extrapolation|train-pair|validate|serve-bench`.

`run` measures step latency on this machine and writes a `specplan.profile/v1` JSON file and
the same measurements as CSV next to it (same stem). `train-pair` trains the byte-level
draft/target pair (`profiler.groundtruth.train_pair`); `validate` runs real speculative
decoding with it against the simulator's prediction (`profiler.groundtruth.validate`);
`serve-bench` serves Poisson arrivals with it in a continuous-batching loop against the
request-level simulation (`profiler.groundtruth.serve_bench`). Bad flags exit with status 2
and a message naming the flag; Ctrl-C during `run` writes what was measured so far and
exits 130.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from dataclasses import fields, replace
from pathlib import Path

import torch

from profiler import device as devinfo
from profiler.inloop import profile_draft_in_loop
from profiler.progress import Bar
from profiler.runner import (
    TORCH_DTYPES,
    Grid,
    ModelRun,
    RunOptions,
    build_profile,
    loop_rows_planned,
    plan_depths,
    profile_model,
)
from simulator.errors import InputError
from simulator.profile import DeviceInfo, profile_to_csv, profile_to_json
from simulator.specs import ModelSpec

# Serving-relevant grid: decode batches up to 64, K up to 8 (q = K + 1), contexts from a chat
# turn to a long document.
DEFAULT_BATCH = "1,2,4,8,16,32,64"
DEFAULT_K = "1-8"
DEFAULT_CONTEXT = "512,2048,8192"
MAX_K = 63  # q = K + 1 <= 64 covers tree verification sizes too
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
_DEFAULTS = {f.name: f.default for f in fields(RunOptions)}


class UsageError(ValueError):
    """A bad flag value; the message starts with the flag's name."""


def parse_ints(text: str, flag: str, *, minimum: int, maximum: int | None = None) -> list[int]:
    """'1,2,4' or '1-8' or '1-3,6' -> sorted unique ints; UsageError names the flag."""
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo_text, dash, hi_text = part.partition("-")
        try:
            lo = int(lo_text)
            hi = int(hi_text) if dash else lo
        except ValueError:
            raise UsageError(
                f"{flag}: '{part}' is not a whole number or a range like 1-8"
            ) from None
        if hi < lo:
            raise UsageError(f"{flag}: range '{part}' runs backwards")
        if lo < minimum or (maximum is not None and hi > maximum):
            bound = f"{minimum}..{maximum}" if maximum is not None else f">= {minimum}"
            raise UsageError(f"{flag}: '{part}' is outside {bound}")
        out.update(range(lo, hi + 1))
    if not out:
        raise UsageError(f"{flag}: no values given")
    return sorted(out)


def _add_grid_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", required=True, help="model id from the catalog (data/models.csv)")
    p.add_argument("--models-csv", type=Path, help="a model catalog to use instead of data/")
    p.add_argument("--dtype", choices=sorted(TORCH_DTYPES), default=_DEFAULTS["dtype"])
    p.add_argument("--batch", default=DEFAULT_BATCH, help=f"batch sizes (default {DEFAULT_BATCH})")
    p.add_argument(
        "--k",
        default=DEFAULT_K,
        help=f"speculative lengths K; verification runs q = K+1, decode q = 1 (default {DEFAULT_K})",
    )
    p.add_argument(
        "--context", default=DEFAULT_CONTEXT, help=f"context lengths (default {DEFAULT_CONTEXT})"
    )
    p.add_argument(
        "--repeats", type=int, default=_DEFAULTS["repeats"], help="timed steps, at least"
    )
    p.add_argument("--warmup", type=int, default=_DEFAULTS["warmup"], help="untimed steps first")
    p.add_argument(
        "--min-time",
        type=float,
        default=_DEFAULTS["min_time_s"],
        help="seconds of timed steps per point, at least",
    )
    p.add_argument("--threads", type=int, help="CPU threads for torch (recorded in the profile)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument(
        "--no-cuda-graphs",
        action="store_true",
        help="time eager steps instead of CUDA graph replays",
    )
    p.add_argument("--seed", type=int, default=_DEFAULTS["seed"])
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m profiler", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="profile models and write a profile file")
    run.set_defaults(parser=run)
    _add_grid_flags(run)
    run.add_argument(
        "--draft",
        help="a second model id to profile with the target; also times it inside the "
        "speculative loop, right after a verify forward (the profile's draft_in_loop)",
    )
    run.add_argument(
        "--out",
        type=Path,
        help="profile file (.json); the CSV goes next to it "
        "(default profiles/<device>/<target>[+<draft>].json)",
    )
    run.add_argument("--depths", help="run only these depths and extrapolate, e.g. 1,2,4")
    run.add_argument("--max-layers", type=int, help="extrapolate models deeper than this")
    info = sub.add_parser("info", help="print the device the profiler would use")
    info.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    info.set_defaults(parser=info)
    check = sub.add_parser(
        "check-extrapolation",
        help="run a model at a few depths and at full depth; print the extrapolation error",
    )
    _add_grid_flags(check)
    check.add_argument("--depths", default="1,2,4", help="depths to fit the line on")
    check.set_defaults(parser=check)
    from profiler.groundtruth import serve_bench, train_pair, validate

    pair = sub.add_parser(
        "train-pair", help="train the byte-level draft/target pair on the stdlib's sources"
    )
    train_pair.add_arguments(pair)
    pair.set_defaults(parser=pair)
    val = sub.add_parser(
        "validate", help="real speculative decoding with the pair against the simulator"
    )
    validate.add_arguments(val)
    val.set_defaults(parser=val)
    bench = sub.add_parser(
        "serve-bench",
        help="serve Poisson arrivals with the pair in a continuous-batching loop against "
        "the request-level simulation",
    )
    serve_bench.add_arguments(bench)
    bench.set_defaults(parser=bench)
    return parser


def resolve_device(choice: str, threads: int | None = None) -> tuple[torch.device, DeviceInfo]:
    """The torch device and its description; UsageError names --device when cuda is missing."""
    if threads:
        torch.set_num_threads(threads)
    reason = devinfo.cuda_reason()
    if choice == "cuda" and reason:
        raise UsageError(f"--device: cuda was asked for but {reason}")
    if choice in ("cuda", "auto") and not reason:
        index = torch.cuda.current_device()
        return torch.device("cuda", index), devinfo.describe("cuda", index, threads=threads)
    info = devinfo.describe("cpu", threads=threads)
    if choice == "auto":
        print(
            f"profiler: no GPU to profile ({info.reason_no_gpu}); profiling the CPU",
            file=sys.stderr,
        )
    return torch.device("cpu"), info


def _catalog(path: Path | None) -> dict[str, ModelSpec]:
    from simulator.catalog import default_models, load_models

    try:
        return load_models(path) if path else default_models()
    except InputError as exc:
        raise UsageError(f"--models-csv: {exc}") from None


def _lookup(catalog: dict[str, ModelSpec], ident: str, flag: str) -> ModelSpec:
    if ident not in catalog:
        known = ", ".join(sorted(catalog))
        raise UsageError(f"{flag}: unknown model id '{ident}' (known: {known})")
    return catalog[ident]


def check_contexts(text: str, specs: list[ModelSpec]) -> None:
    """Refuse a --context (tokens) above a model's max_position_embeddings; a catalog row
    without one (0) is not checked."""
    longest = max(parse_ints(text, "--context", minimum=0))
    for spec in specs:
        limit = spec.max_position_embeddings
        if limit and longest > limit:
            raise UsageError(
                f"--context: {longest} is above {spec.id}'s max_position_embeddings {limit} "
                "(the catalog's; give contexts up to it)"
            )


def check_out(out: Path) -> None:
    """Refuse a profile path that cannot be written, and its CSV beside it, before any
    measurement: a folder, a non-file, a path below a file, a folder or file without write
    permission."""
    for path in (out, out.with_suffix(".csv")):
        if path.is_dir():
            raise UsageError(f"--out: '{path}' is a folder; give a .json file name")
        if path.exists() and not (path.is_file() and os.access(path, os.W_OK)):
            raise UsageError(f"--out: '{path}' is not a writable file")
    folder = out.parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise UsageError(f"--out: '{folder}' is a file, so '{out}' cannot be created")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"--out: no permission to write in '{folder}'")


def _setup(args: argparse.Namespace) -> tuple[Grid, RunOptions, DeviceInfo]:
    batches = parse_ints(args.batch, "--batch", minimum=1)
    ks = parse_ints(args.k, "--k", minimum=1, maximum=MAX_K)
    contexts = parse_ints(args.context, "--context", minimum=0)
    for flag, value, minimum in (
        ("--repeats", args.repeats, 1),
        ("--warmup", args.warmup, 0),
        ("--threads", args.threads, 1),
        ("--max-layers", getattr(args, "max_layers", None), 1),
    ):
        if value is not None and value < minimum:
            raise UsageError(f"{flag}: {value} must be >= {minimum}")
    if not args.min_time >= 0:
        raise UsageError(f"--min-time: {args.min_time} must be >= 0")
    device, info = resolve_device(args.device, args.threads)
    grid = Grid(tuple(batches), tuple([1] + [k + 1 for k in ks]), tuple(contexts))
    depths = getattr(args, "depths", None)
    opts = RunOptions(
        device=device,
        dtype=args.dtype,
        warmup=args.warmup,
        repeats=args.repeats,
        min_time_s=args.min_time,
        cuda_graphs=not args.no_cuda_graphs and device.type == "cuda",
        depths=tuple(parse_ints(depths, "--depths", minimum=1)) if depths else None,
        max_layers=getattr(args, "max_layers", None),
        seed=args.seed,
    )
    return grid, opts, info


def _command_line(argv: list[str]) -> str:
    return "python -m profiler " + shlex.join(argv)


def cmd_run(args: argparse.Namespace, argv: list[str]) -> int:
    catalog = _catalog(args.models_csv)
    specs = [_lookup(catalog, args.target, "--target")]
    if args.draft:
        if args.draft == args.target:
            raise UsageError(f"--draft: '{args.draft}' is the target itself")
        specs.append(_lookup(catalog, args.draft, "--draft"))
    if args.out is not None and args.out.suffix.lower() != ".json":
        raise UsageError(f"--out: '{args.out}' must end in .json (the CSV is written next to it)")
    if args.out is not None:
        check_out(args.out)
    check_contexts(args.context, specs)
    grid, opts, info = _setup(args)
    try:
        plans = [plan_depths(spec, opts) for spec in specs]
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    name = args.target + (f"+{args.draft}" if args.draft else "")
    out = args.out or Path("profiles") / devinfo.device_slug(info) / f"{name}.json"
    if args.out is None:
        check_out(out)
    bar = Bar(enabled=not args.quiet)
    bar.start(len(grid) * len(specs), loop_rows=loop_rows_planned(grid) if args.draft else 0)
    for spec, depths in zip(specs, plans, strict=True):
        if max(depths) < spec.num_layers:
            print(
                f"profiler: {spec.id}: running depths {','.join(map(str, depths))} of "
                f"{spec.num_layers} layers and extrapolating",
                file=sys.stderr,
            )
    t0 = time.monotonic()
    runs: list[ModelRun] = []
    loop_rows: list[dict] = []
    interrupted = False
    try:
        for spec, depths in zip(specs, plans, strict=True):
            run = ModelRun(spec, {})
            runs.append(run)
            profile_model(spec, grid, opts, progress=bar, depths=depths, run=run)
        if args.draft:
            loop_rows, note = profile_draft_in_loop(
                specs[0], specs[1], grid, opts, target_depth=max(plans[0]), progress=bar
            )
            if note:
                entry = runs[1].entry
                entry["notes"] = "; ".join(n for n in (entry["notes"], note) if n)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        bar.finish()
    runs = [r for r in runs if r.entry]
    if info.kind == "cuda":
        nvml = devinfo.finish_snapshot(info.nvml, opts.device.index or 0) or {}
        nvml["per_model"] = {r.spec.id: r.device_memory() for r in runs}
        info = replace(info, nvml=nvml)
    profile = build_profile(
        runs,
        info,
        opts,
        _command_line(argv),
        cuda_graphs_used=opts.cuda_graphs,
        draft_in_loop=loop_rows,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(profile_to_json(profile), encoding="utf-8")
    csv_path = out.with_suffix(".csv")
    csv_path.write_text(profile_to_csv(profile), encoding="utf-8")
    df = profile.measurements
    n_oom = int((df["status"] == "oom").sum())
    for entry in profile.models:
        if entry.kv_bytes_per_token != entry.kv_bytes_per_token_formula:
            print(
                f"profiler: {entry.id}: KV bytes per token measured {entry.kv_bytes_per_token},"
                f" formula {entry.kv_bytes_per_token_formula}"
                + (f" ({entry.notes})" if entry.notes else ""),
                file=sys.stderr,
            )
    done = f"{len(df)} of {len(grid) * len(specs)} points"
    if args.draft:
        done += f", {len(loop_rows)} draft-in-loop rows"
    verb = "interrupted: wrote" if interrupted else "wrote"
    print(
        f"profiler: {verb} {out} and {csv_path} ({done}, {n_oom} out of memory) "
        f"in {time.monotonic() - t0:.1f} s",
        file=sys.stderr,
    )
    return EXIT_INTERRUPTED if interrupted else 0


def cmd_info(args: argparse.Namespace) -> int:
    _, info = resolve_device(args.device)
    print("\n".join(devinfo.info_lines(info)))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from profiler.check import extrapolation_errors, summary_lines

    catalog = _catalog(args.models_csv)
    spec = _lookup(catalog, args.target, "--target")
    check_contexts(args.context, [spec])
    grid, opts, _ = _setup(args)
    depths = tuple(d for d in opts.depths or () if d < spec.num_layers)
    if len(depths) < 2:
        raise UsageError(f"--depths: give at least two depths below {spec.num_layers}")
    bar = Bar(enabled=not args.quiet)
    bar.start(len(grid))
    run = profile_model(
        spec, grid, opts, progress=bar, depths=depths, extra_depths=(spec.num_layers,)
    )
    bar.finish()
    table = extrapolation_errors(run)
    print(table.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    print("\n".join(summary_lines(table, spec, depths)))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = make_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "run":
            return cmd_run(args, argv)
        if args.command == "info":
            return cmd_info(args)
        if args.command == "train-pair":
            from profiler.groundtruth import train_pair

            return train_pair.run_from_args(args, argv[1:])
        if args.command == "validate":
            from profiler.groundtruth import validate

            return validate.run_from_args(args)
        if args.command == "serve-bench":
            from profiler.groundtruth import serve_bench

            return serve_bench.run_from_args(args)
        return cmd_check(args)
    except UsageError as exc:
        args.parser.error(str(exc))
        return EXIT_USAGE
