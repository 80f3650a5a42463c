"""`python -m profiler run|info|check-extrapolation`: the commands that measure on this
machine, their flags, the device and thread setup, and the atomic profile writers.

`run` measures step latency and writes a `specplan.profile/v1` JSON file and the same
measurements as CSV next to it (same stem). Every flag is checked against its limit
(`profiler.options`) before torch is imported; a bad one exits with status 2 and a message
naming the flag. `run` writes its files atomically (a temporary file in the same folder,
then a rename). A finished run replaces `--out`. A run cut short, by Ctrl-C (exit 130) or by
an error (exit 1), writes the points measured so far to `--out` unless the profile already
there holds more points: then it is kept as it was and the points go next to it, to
`<out stem>.partial.json` and `.csv`. A run cut short before its first point writes nothing.

The ground-truth commands profile their pair in-process through `run_main`; this module
imports neither them nor the dispatcher (`profiler.cli`).
"""

from __future__ import annotations

import argparse
import os
import secrets
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import fields, replace
from pathlib import Path
from typing import TYPE_CHECKING

from profiler import device as devinfo
from profiler import options as lim
from profiler.flags import UsageError, parse_ints
from profiler.options import DTYPES, RunOptions

if TYPE_CHECKING:
    import torch

    from simulator.inputs.profile import DeviceInfo, Profile
    from simulator.inputs.specs import ModelSpec

# Serving-relevant grid: decode batches up to 64, K up to 8 (q = K + 1), contexts from a chat
# turn to a long document.
DEFAULT_BATCH = "1,2,4,8,16,32,64"
DEFAULT_K = "1-8"
DEFAULT_CONTEXT = "512,2048,8192"
MAX_K = lim.MAX_K
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
_DEFAULTS = {f.name: f.default for f in fields(RunOptions)}


def _whole(low: int, high: int, why: str = "") -> Callable[[str], int]:
    """An argparse type: a whole number in low..high; the error names the limit."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"'{text}' is not a whole number; give one in {low}..{high}"
            ) from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} must be >= {low}")
        if value > high:
            raise argparse.ArgumentTypeError(
                f"{value} is above the limit {high}" + (f" ({why})" if why else "")
            )
        return value

    return parse


def _seconds(low: float, high: float) -> Callable[[str], float]:
    """An argparse type: a finite number of seconds in low..high."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a number of seconds") from None
        if not low <= value <= high:  # also refuses nan
            raise argparse.ArgumentTypeError(
                f"{value} is outside {low:g}..{high:g} seconds (the limit is {high:g})"
            )
        return value

    return parse


def _add_grid_flags(p: argparse.ArgumentParser) -> None:
    cpus, cores = lim.max_threads(), devinfo.physical_cores()
    p.add_argument("--target", required=True, help="model id from the catalog (data/models.csv)")
    p.add_argument("--models-csv", type=Path, help="a model catalog to use instead of data/")
    p.add_argument("--dtype", choices=sorted(DTYPES), default=_DEFAULTS["dtype"])
    p.add_argument(
        "--batch",
        default=DEFAULT_BATCH,
        help=f"batch sizes, 1..{lim.MAX_BATCH} (default {DEFAULT_BATCH})",
    )
    p.add_argument(
        "--k",
        default=DEFAULT_K,
        help=f"speculative lengths K, 1..{MAX_K}; verification runs q = K+1, decode q = 1 "
        f"(default {DEFAULT_K})",
    )
    p.add_argument(
        "--context",
        default=DEFAULT_CONTEXT,
        help=f"context lengths, 0..{lim.MAX_CONTEXT} and at most the model's window "
        f"(default {DEFAULT_CONTEXT}); the grid may hold {lim.MAX_GRID_POINTS:,} points per "
        "model",
    )
    p.add_argument(
        "--repeats",
        type=_whole(1, lim.MAX_REPEATS, "the timer stops every point there"),
        default=_DEFAULTS["repeats"],
        help=f"timed steps per point, at least; 1..{lim.MAX_REPEATS} "
        f"(default {_DEFAULTS['repeats']})",
    )
    p.add_argument(
        "--warmup",
        type=_whole(0, lim.MAX_WARMUP),
        default=_DEFAULTS["warmup"],
        help=f"untimed steps first, 0..{lim.MAX_WARMUP} (default {_DEFAULTS['warmup']})",
    )
    p.add_argument(
        "--min-time",
        type=_seconds(0.0, lim.MAX_MIN_TIME_S),
        default=_DEFAULTS["min_time_s"],
        help=f"seconds of timed steps per point, at least; 0..{lim.MAX_MIN_TIME_S:g} "
        f"(default {_DEFAULTS['min_time_s']})",
    )
    p.add_argument(
        "--threads",
        type=_whole(1, cpus, "the CPUs this process may use"),
        help=f"CPU threads for torch, 1..{cpus} (default: the {cores} physical cores; "
        "recorded in the profile)",
    )
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument(
        "--no-cuda-graphs",
        action="store_true",
        help="time eager steps instead of CUDA graph replays",
    )
    p.add_argument(
        "--seed", type=_whole(0, lim.MAX_SEED), default=_DEFAULTS["seed"], help="0..2^32-1"
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def add_parsers(sub) -> None:
    """The `run`, `info` and `check-extrapolation` subcommands, on `sub`."""
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
        "(default profiles/<device>/<target>[+<draft>].json). Written atomically; a run cut "
        "short (Ctrl-C, an error) never replaces a profile holding more points: it writes "
        "<stem>.partial.json beside it instead",
    )
    run.add_argument(
        "--save",
        nargs="?",
        const="",
        metavar="NAME",
        help="also keep the profile in the library (SPECPLAN_DB_URL, else the file under the "
        "user's data directory), under NAME (default <device>/<target>[+<draft>])",
    )
    run.add_argument("--depths", help="run only these depths and extrapolate, e.g. 1,2,4")
    run.add_argument(
        "--max-layers",
        type=_whole(1, lim.MAX_DEPTH),
        help=f"extrapolate models deeper than this, 1..{lim.MAX_DEPTH}",
    )
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


# Why this process's OpenMP threads wait as they do (`_prepare_torch`), for `omp_note`.
_omp_reason = ""
# CPU time of the machine and of this process when `main` started (`devinfo.cpu_sample`).
_cpu_start: devinfo.CpuSample | None = None
# Seconds of start-up over which other processes' CPU use is averaged, at least.
MIN_SAMPLE_S = 0.25


def choose_omp_policy(
    given: str,
    torch_loaded: bool,
    others: float | None,
    load: float | None,
    cpus: int,
    threads: int,
) -> tuple[str | None, str]:
    """(OMP_WAIT_POLICY to set or None, why) for a run of `threads` torch threads, given the
    CPUs other processes kept busy while the profiler started (`others`) and the 1-minute
    load average.

    Idle OpenMP threads keep libgomp's default (spin, then sleep) on an idle machine: that is
    what engines get, and sleeping made the tiny model's 1-10 ms steps 30-70% slower on the
    2-core VM. They sleep (PASSIVE) when other work shares the CPUs the threads use
    (`devinfo.other_work`), or the load average is above the CPUs: a spinning thread then
    holds its core while its partner queues behind that work, and steps came out 1.1-2.4x
    slower with one other busy process, 6-100x at load 2-3 (136 ms for a 1 ms step). The load
    average alone would not do: it trails by a minute, so a run right after another run
    would sleep. A policy in the environment is kept; so is whatever torch loaded with, if it
    is already loaded.
    """
    if given.strip():
        return None, "from the environment"
    if torch_loaded:
        return None, "torch was loaded before the profiler could choose"
    seen = [f"1-minute load average {load:.2f}" if load is not None else "no load average"]
    if others is not None:
        seen.insert(0, f"other processes kept {others:.2f} CPUs busy as it started")
    why = ", ".join(seen)
    if devinfo.other_work(others, cpus, threads) or (load is not None and load > cpus):
        return "PASSIVE", f"set by the profiler: {why}"
    return None, f"idle threads spin, then sleep, libgomp's default: {why}"


def _prepare_torch(threads: int) -> None:
    """Before torch loads OpenMP, which reads its environment once: the wait policy of
    `choose_omp_policy`, from the CPU use of other processes since `main` started (at least
    MIN_SAMPLE_S)."""
    global _omp_reason
    given, loaded = os.environ.get("OMP_WAIT_POLICY", ""), "torch" in sys.modules
    others = None
    if not given.strip() and not loaded:
        start = _cpu_start or devinfo.cpu_sample()
        if start is not None:
            time.sleep(max(0.0, MIN_SAMPLE_S - (time.monotonic() - start[0])))
        others = devinfo.other_cpus(start, devinfo.cpu_sample())
    policy, _omp_reason = choose_omp_policy(
        given, loaded, others, devinfo.load_average(), lim.cpu_count(), threads
    )
    if policy:
        os.environ["OMP_WAIT_POLICY"] = policy


def omp_spins() -> bool:
    """Whether idle OpenMP threads of this process spin (any policy but PASSIVE)."""
    return os.environ.get("OMP_WAIT_POLICY", "").strip().upper() != "PASSIVE"


def omp_note() -> str:
    """The OpenMP wait policy torch's CPU threads run with and why, for a CPU profile."""
    policy = os.environ.get("OMP_WAIT_POLICY", "").strip() or "unset"
    return f"OMP_WAIT_POLICY={policy} ({_omp_reason or 'from the environment'})"


def spin_note(load: float | None, cpus: int, threads: int) -> str:
    """A warning when other work arrived while spinning OpenMP threads ran: `load` is the
    1-minute load average at the end, this run's `threads` included."""
    if threads < 2 or load is None or not omp_spins():
        return ""
    if not devinfo.other_work(load - threads, cpus, threads):
        return ""
    return (
        f"other work during the run while idle OpenMP threads spin (1-minute load average "
        f"{load:.2f} at the end, {threads} of it this run's): steps may be several times too "
        "slow; rerun on a quiet machine or with OMP_WAIT_POLICY=PASSIVE"
    )


def default_threads() -> int:
    """Torch threads when --threads is not given: the physical cores this process may use."""
    return devinfo.physical_cores()


def resolve_device(choice: str, threads: int | None = None) -> tuple[torch.device, DeviceInfo]:
    """The torch device and its description, with torch's CPU threads pinned to `threads`
    (default: the physical cores); UsageError names --device when cuda is missing."""
    threads = threads or default_threads()
    _prepare_torch(threads)
    import torch

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
    from simulator.errors import InputError
    from simulator.inputs.catalog import catalog_models, default_models

    try:
        return catalog_models(path) if path else default_models()
    except InputError as exc:
        raise UsageError(f"--models-csv: {exc}") from None


def _lookup(catalog: dict[str, ModelSpec], ident: str, flag: str) -> ModelSpec:
    if ident not in catalog:
        known = ", ".join(sorted(catalog))
        raise UsageError(f"{flag}: unknown model id '{ident}' (known: {known})")
    return catalog[ident]


def _contexts(text: str) -> list[int]:
    return parse_ints(text, "--context", minimum=0, maximum=lim.MAX_CONTEXT)


def check_contexts(text: str, specs: list[ModelSpec]) -> None:
    """Refuse a --context (tokens) above a model's max_position_embeddings; a catalog row
    without one (0) is not checked."""
    longest = max(_contexts(text))
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
    permission, a folder that takes no new file (probed with one)."""
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
    from simulator.inputs.io import probe_folder

    why = probe_folder(folder)
    if why:
        raise UsageError(f"--out: no file can be made in '{folder}' ({why})")


def grid_values(args: argparse.Namespace) -> tuple[list[int], list[int], list[int]]:
    """(batches, ks, contexts) of the grid flags, checked against their limits and the grid
    against MAX_GRID_POINTS (and MAX_LOOP_ROWS with --draft); no torch, no catalog."""
    batches = parse_ints(args.batch, "--batch", minimum=1, maximum=lim.MAX_BATCH)
    ks = parse_ints(args.k, "--k", minimum=1, maximum=MAX_K)
    contexts = _contexts(args.context)
    points = len(batches) * (len(ks) + 1) * len(contexts)
    if points > lim.MAX_GRID_POINTS:
        raise UsageError(
            f"--batch, --k, --context: {len(batches)} batches x {len(ks) + 1} query lengths x "
            f"{len(contexts)} contexts = {points:,} points per model; the limit is "
            f"{lim.MAX_GRID_POINTS:,}"
        )
    rows = len(batches) * len(contexts) * max(ks)
    if getattr(args, "draft", None) and rows > lim.MAX_LOOP_ROWS:
        raise UsageError(
            f"--draft: {len(batches)} batches x {len(contexts)} contexts x K up to {max(ks)} "
            f"= {rows:,} draft-in-loop rows; the limit is {lim.MAX_LOOP_ROWS:,}"
        )
    return batches, ks, contexts


def _depths(args: argparse.Namespace) -> tuple[int, ...] | None:
    text = getattr(args, "depths", None)
    if not text:
        return None
    return tuple(parse_ints(text, "--depths", minimum=1, maximum=lim.MAX_DEPTH))


def _setup(args: argparse.Namespace) -> tuple:
    """(Grid, RunOptions, DeviceInfo) of checked flags; imports torch, pins its threads."""
    batches, ks, contexts = grid_values(args)
    device, info = resolve_device(args.device, args.threads)
    from profiler.runner import Grid

    grid = Grid(tuple(batches), tuple([1] + [k + 1 for k in ks]), tuple(contexts))
    opts = RunOptions(
        device=device,
        dtype=args.dtype,
        warmup=args.warmup,
        repeats=args.repeats,
        min_time_s=args.min_time,
        cuda_graphs=not args.no_cuda_graphs and device.type == "cuda",
        depths=_depths(args),
        max_layers=getattr(args, "max_layers", None),
        seed=args.seed,
    )
    return grid, opts, info


def _command_line(argv: list[str]) -> str:
    return "python -m profiler " + shlex.join(argv)


# ------------------------------------------------------------------------------- writing


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to a temporary file in `path`'s folder, then rename it over `path`: a
    reader sees the old file or the new one, never half of one. The file gets the
    permissions a plain write would (0o666 less the umask)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def profile_points(profile: Profile) -> int:
    """Points of a profile: measurement rows (out-of-memory ones too) and draft-in-loop rows."""
    return len(profile.measurements) + len(profile.draft_in_loop)


def existing_points(out: Path) -> int:
    """Points of the profile at `out`; 0 when there is none or it cannot be read as one."""
    if not out.is_file():
        return 0
    from simulator.errors import InputError
    from simulator.inputs.profile import load_profile

    try:
        return profile_points(load_profile(out))
    except (InputError, OSError, ValueError):
        return 0


def partial_path(out: Path) -> Path:
    return out.with_name(f"{out.stem}.partial.json")


def destination(out: Path, points: int, *, complete: bool) -> tuple[Path, str]:
    """Where a profile of `points` points goes, and why when not to `out`: a finished run
    replaces `out`; a run cut short replaces it only when it holds no more points."""
    if complete:
        return out, ""
    held = existing_points(out)
    if held > points:
        return partial_path(out), f"kept {out} as it was ({held} points, more than this run's)"
    return out, ""


def write_profile(profile: Profile, out: Path) -> Path:
    """The JSON at `out` and the CSV next to it, each written atomically; the CSV path."""
    from simulator.inputs.profile import profile_to_csv, profile_to_json

    csv_path = out.with_suffix(".csv")
    write_atomic(csv_path, profile_to_csv(profile))
    write_atomic(out, profile_to_json(profile))
    return csv_path


def _where(exc: BaseException) -> str:
    """'file.py:123' of the innermost frame of `exc`'s traceback, or ''."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return ""
    return f"{Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}"


# ------------------------------------------------------------------------------ commands


def cmd_run(args: argparse.Namespace, argv: list[str]) -> int:
    # Every flag first, cheapest first: no catalog (pandas) and no torch until all pass.
    grid_values(args)
    depths = _depths(args)
    if args.out is not None and args.out.suffix.lower() != ".json":
        raise UsageError(f"--out: '{args.out}' must end in .json (the CSV is written next to it)")
    if args.out is not None:
        check_out(args.out)
    catalog = _catalog(args.models_csv)
    specs = [_lookup(catalog, args.target, "--target")]
    if args.draft:
        if args.draft == args.target:
            raise UsageError(f"--draft: '{args.draft}' is the target itself")
        specs.append(_lookup(catalog, args.draft, "--draft"))
    check_contexts(args.context, specs)
    for spec in specs:
        try:
            lim.requested_depths(spec.id, spec.num_layers, depths, args.max_layers)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    return _measure_and_write(args, argv, specs)


def _with_rates(info: DeviceInfo, device) -> DeviceInfo:
    """`info` with the copy and matmul rates measured now (`profiler.hardware`)."""
    from profiler.hardware import measure_rates

    copy, matmul = measure_rates(device)
    rates = f"copy {copy:,.0f} GB/s (read + write)"
    if matmul is not None:
        rates += f", bf16 matmul {matmul:,.0f} TFLOP/s"
    print(f"profiler: {info.name}: {rates}", file=sys.stderr)
    return replace(info, copy_gbps=round(copy, 3), matmul_tflops=matmul and round(matmul, 3))


def _name(args: argparse.Namespace) -> str:
    return args.target + (f"+{args.draft}" if args.draft else "")


def _stop_code(stop: BaseException | None) -> tuple[int, str]:
    """The exit code of a run that `stop` ended (None: it finished) and why, in words."""
    if isinstance(stop, KeyboardInterrupt):
        return EXIT_INTERRUPTED, "interrupted"
    if stop is not None:
        where = _where(stop)
        why = f"stopped by {type(stop).__name__}: {stop}" + (f" (at {where})" if where else "")
        return EXIT_FAILED, why
    return 0, ""


def _measure_and_write(args: argparse.Namespace, argv: list[str], specs: list) -> int:
    """Measure, then write what was measured by the rule in the module docstring."""
    load_start = devinfo.load_average()
    t0 = time.monotonic()
    runs: list = []
    loop_rows: list[dict] = []
    stop: BaseException | None = None
    bar = out = info = opts = None
    try:
        grid, opts, info = _setup(args)
        info = _with_rates(info, opts.device)
        busy_start = devinfo.busy_note(load_start, lim.cpu_count(), when="at the start")
        if busy_start:
            print(f"profiler: {busy_start}", file=sys.stderr)
        from profiler.inloop import profile_draft_in_loop
        from profiler.progress import Bar
        from profiler.runner import ModelRun, loop_rows_planned, plan_depths, profile_model

        try:
            plans = [plan_depths(spec, opts) for spec in specs]
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        out = args.out or Path("profiles") / devinfo.device_slug(info) / f"{_name(args)}.json"
        if args.out is None:
            check_out(out)
        for spec, depths in zip(specs, plans, strict=True):
            if max(depths) < spec.num_layers:
                print(
                    f"profiler: {spec.id}: running depths {','.join(map(str, depths))} of "
                    f"{spec.num_layers} layers and extrapolating",
                    file=sys.stderr,
                )
        bar = Bar(enabled=not args.quiet)
        bar.start(len(grid) * len(specs), loop_rows=loop_rows_planned(grid) if args.draft else 0)
        for spec, depths in zip(specs, plans, strict=True):
            run = ModelRun(spec, {})
            runs.append(run)
            profile_model(spec, grid, opts, progress=bar, depths=depths, run=run)
        if args.draft:
            _, note = profile_draft_in_loop(
                specs[0],
                specs[1],
                grid,
                opts,
                target_depth=max(plans[0]),
                progress=bar,
                rows=loop_rows,
            )
            if note:
                entry = runs[1].entry
                entry["notes"] = "; ".join(n for n in (entry["notes"], note) if n)
    except UsageError:
        raise
    except (KeyboardInterrupt, Exception) as exc:
        stop = exc
    finally:
        if bar is not None:
            bar.finish()
    runs = [r for r in runs if r.entry]
    points = sum(len(r.rows) for r in runs) + len(loop_rows)
    code, why = _stop_code(stop)
    if points == 0:
        # Also a run whose grid measured nothing; there is no profile to write.
        target = out or args.out
        kept = f"; {target} left as it was" if target is not None and target.exists() else ""
        print(
            f"profiler: {why or 'no points measured'}"
            f"{' before the first point' if why else ''}: nothing written{kept}",
            file=sys.stderr,
        )
        return code or EXIT_FAILED
    threads = _note_host(runs, info, load_start)
    profile = _profile(runs, info, opts, argv, loop_rows)
    path, kept = destination(out, profile_points(profile), complete=stop is None)
    csv_path = write_profile(profile, path)
    _report_kv(profile)
    n_oom = int((profile.measurements["status"] == "oom").sum())
    batches, ks, contexts = grid_values(args)
    planned = len(batches) * (len(ks) + 1) * len(contexts) * len(specs)
    done = f"{len(profile.measurements)} of {planned} points"
    if args.draft:
        done += f", {len(loop_rows)} draft-in-loop rows"
    print(
        f"profiler: {why + ': ' if why else ''}wrote {path} and {csv_path} ({done}, {n_oom} "
        f"out of memory, {threads} threads) in {time.monotonic() - t0:.1f} s"
        + (f"; {kept}" if kept else ""),
        file=sys.stderr,
    )
    if args.save is not None and stop is None:
        from library.cli import save_after_run

        name = args.save or f"{devinfo.device_slug(info)}/{_name(args)}"
        return save_after_run(path, name) or code
    return code


def _note_host(runs: list, info: DeviceInfo, load_start) -> int:
    """Note in each run's entry what else kept the machine busy and how OpenMP waited (on
    a CPU), printing what matters; returns the threads the run used."""
    threads = info.cpu_threads or 1
    cpus = lim.cpu_count()
    load_end = devinfo.load_average()
    busy = devinfo.busy_note(load_start, cpus, when="at the start")
    if not busy:
        busy = devinfo.busy_note(load_end, cpus, own_threads=threads, when="at the end")
        if busy:
            print(f"profiler: {busy}", file=sys.stderr)
    host = [omp_note(), spin_note(load_end, cpus, threads)] if info.kind == "cpu" else []
    if host and host[1]:
        print(f"profiler: {host[1]}", file=sys.stderr)
    for r in runs:
        r.entry["notes"] = "; ".join(n for n in (r.entry["notes"], busy, *host) if n)
    return threads


def _profile(runs: list, info: DeviceInfo, opts: RunOptions, argv: list[str], loop_rows):
    """The profile of what was measured, with the end-of-run NVML snapshot on a GPU."""
    from profiler.runner import build_profile

    if info.kind == "cuda":
        nvml = devinfo.finish_snapshot(info.nvml, opts.device.index or 0) or {}
        nvml["per_model"] = {r.spec.id: r.device_memory() for r in runs}
        info = replace(info, nvml=nvml)
    return build_profile(
        runs,
        info,
        opts,
        _command_line(argv),
        cuda_graphs_used=opts.cuda_graphs,
        draft_in_loop=loop_rows,
    )


def _report_kv(profile: Profile) -> None:
    for entry in profile.models:
        if entry.kv_bytes_per_token != entry.kv_bytes_per_token_formula:
            print(
                f"profiler: {entry.id}: KV bytes per token measured {entry.kv_bytes_per_token},"
                f" formula {entry.kv_bytes_per_token_formula}"
                + (f" ({entry.notes})" if entry.notes else ""),
                file=sys.stderr,
            )


def cmd_info(args: argparse.Namespace) -> int:
    _, info = resolve_device(args.device)
    print("\n".join([*devinfo.info_lines(info), f"openmp: {omp_note()}"]))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    grid_values(args)
    depths = _depths(args)
    catalog = _catalog(args.models_csv)
    spec = _lookup(catalog, args.target, "--target")
    check_contexts(args.context, [spec])
    shallow = tuple(d for d in depths or () if d < spec.num_layers)
    if len(shallow) < 2:
        raise UsageError(f"--depths: give at least two depths below {spec.num_layers}")
    grid, opts, _ = _setup(args)
    from profiler.check import extrapolation_errors, summary_lines
    from profiler.progress import Bar
    from profiler.runner import profile_model

    bar = Bar(enabled=not args.quiet)
    bar.start(len(grid))
    run = profile_model(
        spec, grid, opts, progress=bar, depths=shallow, extra_depths=(spec.num_layers,)
    )
    bar.finish()
    table = extrapolation_errors(run)
    print(table.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    print("\n".join(summary_lines(table, spec, shallow)))
    return 0


def start_clock() -> None:
    """Note this process's and the machine's CPU time now: the load the thread choice
    reads is averaged from here (`_prepare_torch`)."""
    global _cpu_start
    _cpu_start = devinfo.cpu_sample()


def run_main(argv: list[str]) -> int:
    """`python -m profiler run ...` in this process (`argv` starts with "run"): the
    ground-truth commands profile their pair with it."""
    start_clock()
    parser = argparse.ArgumentParser(prog="python -m profiler")
    sub = parser.add_subparsers(dest="command", required=True)
    add_parsers(sub)
    args = parser.parse_args(argv)
    return guarded(args, lambda: cmd_run(args, argv))


def guarded(args: argparse.Namespace, command: Callable[[], int]) -> int:
    """Run `command`; a bad flag exits 2 through the subcommand's parser, Ctrl-C 130."""
    try:
        return command()
    except UsageError as exc:
        args.parser.error(str(exc))
        return EXIT_USAGE
    except KeyboardInterrupt:
        # While flags are checked (a run catches its own Ctrl-C and writes what it has) or
        # while a run writes: each file is then the old one or the new one, never half.
        print("profiler: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
