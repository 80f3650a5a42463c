"""Command line: `python -m simulator predict|sweep|validate|serve|columns|search`.

Exit status 2 means bad input; the message names the row and the column, or the flag.
SIGTERM exits with status 143 and leaves no partial output file. Tables are CSV or
Parquet, by suffix. numpy, pandas and pyarrow are imported by the commands that use them,
so `--help` answers at once.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from simulator.catalog import GPUS_CSV, MODELS_CSV, load_gpus, load_models
from simulator.errors import InputError
from simulator.io import (
    TableWriter,
    atomic_path,
    check_file,
    probe_folder,
    read_blocks,
    table_columns,
    table_format,
)
from simulator.sweep import SWEEP_LIMIT, build_grid, grid_size, parse_range

PROGRESS_ROWS = 100_000
"""Tables larger than this report each stage, and each block written, on stderr."""
WRITE_BLOCK_ROWS = 65_536
"""Rows read, predicted and written at a time (two blocks in flight: one written while the
next is predicted): a block's inputs, outputs and their pyarrow copies take about 100 MB,
whatever the size of the table."""
REQUESTS_PER_DAY = 2_000_000
"""Demand the --report economics price when neither the flag nor a row gives one: the
dashboard's default (`app.widgets.DEFAULT_REQUESTS_PER_DAY`)."""
COLUMNS_HELP = (
    "write only these columns, in this order, e.g. target,k,batch_size,speedup "
    "(inputs and outputs by name; `columns` lists them)"
)
EXIT_TERMINATED = 128 + signal.SIGTERM
"""Exit status after SIGTERM, as a shell reports a process it terminated."""


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def check_out(out: str, flag: str = "--out") -> None:
    """Refuse an --out that cannot be written before any work starts: a folder, a device
    or other non-file, a path below a file, or a folder without write permission."""
    target = Path(out)
    if target.is_dir():
        raise InputError(f"'{out}' is a folder; give a file name", field=flag)
    if target.exists() and not target.is_file():
        raise InputError(f"'{out}' is not a regular file", field=flag)
    folder = target.parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise InputError(f"'{folder}' is a file, so '{out}' cannot be created", field=flag)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"no permission to write in '{folder}'", field=flag)
    why = probe_folder(folder)
    if why:
        raise InputError(f"no file can be made in '{folder}' ({why})", field=flag)


def _write_atomically(out: str, write: Callable[[TextIO], None]) -> None:
    """Write text to a temporary file beside `out`, then rename: never a half-written file."""
    with atomic_path(out) as tmp, open(tmp, "w", newline="") as fh:
        write(fh)


def _write_table(df, out: str) -> None:
    """Write a whole DataFrame to `out` (CSV or Parquet by suffix), in blocks."""
    _write_blocks(iter([df]), out, total=len(df))


def selected_columns(text: str | None) -> list[str] | None:
    """The columns `--columns` names, in its order (None without the flag): each an input
    column or one of predict's outputs, each once. A million-row table's 68 columns cost
    more to write than to predict; a few columns cost a fraction of it."""
    if text is None:
        return None
    import difflib

    from simulator.predict import OUTPUT_COLUMNS
    from simulator.scenarios import INPUT_COLUMNS

    known = (*INPUT_COLUMNS, *OUTPUT_COLUMNS)
    names = [name.strip() for name in str(text).split(",")]
    for i, name in enumerate(names):
        if not name:
            raise InputError(
                "holds an empty name: give column names separated by single commas",
                field="--columns",
            )
        if name not in known:
            close = difflib.get_close_matches(name, known, n=3)
            hint = f"did you mean {' or '.join(close)}? " if close else ""
            raise InputError(
                f"'{name}' is not a column predict writes; {hint}"
                "`python -m simulator columns` lists them",
                field="--columns",
            )
        if name in names[:i]:
            raise InputError(f"names '{name}' twice", field="--columns")
    return names


def _write_blocks(
    blocks: Iterator, out: str, total: int | None = None, columns: list[str] | None = None
) -> int:
    """Write DataFrames to `out` as they come (only `columns`, in that order, when given),
    reporting each block of a large table. The writer formats and writes on threads of its
    own while the next block is predicted."""
    fmt = table_format(out, "--out")

    def written(rows: int) -> None:
        if (total or rows) > PROGRESS_ROWS:
            of = f" of {total}" if total is not None else ""
            _log(f"writing {out}: {rows}{of} rows")

    with atomic_path(out) as tmp:
        writer = TableWriter(tmp, fmt, on_written=written)
        try:
            for df in blocks:
                if columns is not None:
                    df = df[columns]
                for start in range(0, max(len(df), 1), WRITE_BLOCK_ROWS):
                    writer.write(df.iloc[start : start + WRITE_BLOCK_ROWS])
        finally:
            writer.close()
    return writer.rows


def _terminate(signum, frame) -> None:
    raise SystemExit(EXIT_TERMINATED)


@contextmanager
def _sigterm_exits() -> Iterator[None]:
    """While inside, SIGTERM raises SystemExit, so a half-written output is removed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _calibration(args):
    """The calibration of the --profile files, and each file's device id."""
    if not getattr(args, "profile", None):
        if getattr(args, "profile_gpu", None):
            raise InputError(
                "names the GPU of a --profile, and none was given", field="--profile-gpu"
            )
        return None, {}
    from library.cli import profile_source
    from simulator.calibration import Calibration, match_gpu_id
    from simulator.profile import load_profile

    profiles = {}
    for path in args.profile:
        kept = profile_source(path)  # `library:NAME`: a profile kept in the library
        if kept is None:
            check_file(path, "--profile")
        profiles[path] = load_profile(path if kept is None else kept, name=path)
    devices = {
        path: args.profile_gpu or match_gpu_id(p.device.name, p.device.kind)
        for path, p in profiles.items()
    }
    _warn_slow_profiles(profiles, devices)
    return Calibration.from_profiles(list(profiles.values()), gpu_id=args.profile_gpu), devices


def _warn_slow_profiles(profiles: dict, devices: dict[str, str]) -> None:
    """Say so when a profile's decode step is far slower than engines reach on its GPU, or
    its verify/decode ratio far from the engine's."""
    from simulator.step_gap import flattery_warnings, verify_warnings

    for path, profile in profiles.items():
        for line in flattery_warnings(profile, devices[path]):
            _log(f"warning: profile {path}: {line}")
        for line in verify_warnings(profile, devices[path]):
            _log(f"warning: profile {path}: {line}")


def _warn_unused_profiles(used: bool, asked: set[str], devices: dict[str, str], args) -> None:
    """Say so when --profile was given but every row was priced by the roofline."""
    if not devices or used:
        return
    rows = ", ".join(sorted(asked))
    for path, device in devices.items():
        if device in asked:  # a GPU with kernel tables: they price the models it did not time
            _log(
                f"warning: profile {path} (device '{device}') times none of these rows' "
                "models or setups (one GPU, its weight dtype); they keep the engine's kernel "
                "tables"
            )
            continue
        fix = "" if args.profile_gpu else "pass --profile-gpu or "
        _log(
            f"warning: profile {path} (device '{device}') matches no row; rows use gpu "
            f"{rows}; {fix}set gpu to '{device}'"
        )


def _catalogs(args):
    for flag, path in (("--gpus", args.gpus), ("--models", args.models)):
        check_file(path, flag)
    return load_gpus(args.gpus), load_models(args.models)


def _first_row(path: str) -> int:
    """Rows above a table's first data row, for the row an error names: a CSV's header is
    row 1, as a spreadsheet numbers it; a Parquet file's first row is row 1."""
    return 1 if table_format(path, "--in") == "csv" else 0


def _predict(
    tables: Iterator, args, source: str, total: int | None = None, row_offset: int = 0
) -> Iterator:
    """`predict` block by block with the CLI's catalogs and profiles, reporting a large
    table's progress; warns at the end when a profile priced no row. `row_offset`: rows
    above the first block's first row."""
    from simulator.predict import predict

    gpus, models = _catalogs(args)
    calibration, devices = _calibration(args)
    if total is not None and total > PROGRESS_ROWS:
        _log(f"predicting {total} scenarios...")
    offset, used, asked = row_offset, False, set()
    for table in tables:
        result = predict(
            table,
            gpus=gpus,
            models=models,
            calibration=calibration,
            source=source,
            row_offset=offset,
        )
        offset += len(table)
        if devices:
            src = result["latency_source"].astype(str)
            used = used or not (src.eq("roofline") | src.str.startswith("kernels:")).all()
            asked |= set(result["gpu"].astype(str))
        yield result
    _warn_unused_profiles(used, asked, devices, args)


def _requests_per_day(column, default: float, source: str, row_offset: int = 0):
    """A `requests_per_day` column as requests per day per row; blank cells get `default`.
    `row_offset`: rows of the file above this block (for the row an error names)."""
    import numpy as np
    import pandas as pd

    from simulator.reports import MAX_REQUESTS_PER_DAY, requests_per_day_ok

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
    from simulator.reports import add_economics, add_preflight, report_csv

    text = report_csv(add_preflight(add_economics(result, demand), load_models(args.models)))
    _write_atomically(args.out, lambda fh: fh.write(text))


def cmd_predict(args) -> int:
    import numpy as np
    import pandas as pd

    from simulator.predict import OUTPUT_COLUMNS
    from simulator.reports import ECONOMICS_COLUMNS
    from simulator.scenarios import check_columns

    if args.report and table_format(args.out, "--out") != "csv":
        raise InputError("--report writes CSV; give a file ending in .csv", field="--out")
    if args.report and args.columns is not None:
        raise InputError(
            "--report writes the dashboard's report, whose columns are fixed; drop --columns "
            "or --report",
            field="--columns",
        )
    columns = selected_columns(args.columns)
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
        for table in read_blocks(args.inp, WRITE_BLOCK_ROWS):
            if args.report:
                column = (
                    table.pop("requests_per_day")
                    if demand_given
                    else pd.Series("", index=table.index)
                )
                default = (
                    REQUESTS_PER_DAY if args.requests_per_day is None else args.requests_per_day
                )
                done = _first_row(args.inp) + sum(len(d) for d in demands)
                demands.append(_requests_per_day(column, default, args.inp, done))
            yield table

    results = _predict(tables(), args, args.inp, row_offset=_first_row(args.inp))
    if args.report:
        result = pd.concat(list(results), ignore_index=True)
        _write_report(result, np.concatenate(demands), args)
        rows = len(result)
    else:
        rows = _write_blocks(results, args.out, columns=columns)
    _log(f"wrote {rows} predictions to {args.out}")
    return 0


def cmd_sweep(args) -> int:
    from simulator.scenarios import K_LIMIT, LIMITS

    table_format(args.out, "--out")
    columns = selected_columns(args.columns)
    method = str(args.method).strip().lower() or "none"  # blank: the column's default
    if method == "none":
        for flag, value in (("--k", args.k), ("--alpha", args.alpha)):
            if value is not None:
                raise InputError(
                    "method none drafts nothing, so it takes no K or acceptance: drop the "
                    "flag or choose a speculative --method",
                    field=flag,
                )
    if args.draft and method != "draft_model":
        raise InputError(
            f"names a draft model, which only --method draft_model uses (not '{args.method}')",
            field="--draft",
        )
    base = {
        "target": args.target,
        "method": args.method,
        "draft": args.draft or "",
        "gpu": args.gpu,
        "num_gpus": args.num_gpus,
        "weight_dtype": args.weight_dtype,
        "kv_dtype": args.kv_dtype,
        "prompt_len": args.prompt_len,
        "output_len": args.output_len,
    }
    most = None if args.force else SWEEP_LIMIT
    batch_most = LIMITS["batch_size"][0]
    axes = {
        "batch_size": parse_range(
            args.batch, name="--batch", kind=int, most=most, low=1, high=batch_most
        )
    }
    if method != "none":
        k = SWEEP_K if args.k is None else args.k
        alpha = SWEEP_ALPHA if args.alpha is None else args.alpha
        axes["k"] = parse_range(k, name="--k", kind=int, most=most, low=1, high=K_LIMIT)
        axes["acceptance_rate"] = parse_range(alpha, name="--alpha", most=most, low=0, high=1)
    size = grid_size(**axes)
    if size > SWEEP_LIMIT and not args.force:
        raise InputError(
            f"the grid holds {size:,} scenarios, more than {SWEEP_LIMIT:,}; narrow "
            "--batch, --k or --alpha, or pass --force"
        )
    grid = build_grid(base, **axes)
    blocks = (grid.iloc[i : i + WRITE_BLOCK_ROWS] for i in range(0, len(grid), WRITE_BLOCK_ROWS))
    results = _predict(blocks, args, "sweep", total=len(grid))
    rows = _write_blocks(results, args.out, len(grid), columns)
    _log(f"wrote {rows} scenarios to {args.out}")
    return 0


def cmd_validate(args) -> int:
    from simulator.published import format_summary, load_published, score, summarise

    if (args.published is None) == (args.serving is None):
        raise InputError("give one of --published or --serving", field="--published")
    if args.serving is not None:
        return _validate_serving(args)
    check_file(args.published, "--published")
    gpus, models = _catalogs(args)
    errors = score(load_published(args.published), gpus=gpus, models=models, source=args.published)
    _write_table(errors, args.out)
    print(format_summary(summarise(errors)))
    if args.ablation:
        from simulator.published import ablation

        table = ablation(load_published(args.published))
        print("\nmedian |error| with one term switched off (rows) by source (columns):")
        print((100 * table).round(1).to_string())
    print(f"wrote {len(errors)} scored cases to {args.out}", file=sys.stderr)
    if args.save:
        from library.cli import save_validation_run

        save_validation_run(args.save, errors, summarise(errors), source=args.published)
    return 0


def _validate_serving(args) -> int:
    """`validate --serving`: absolute TPOT and TTFT against measured serving runs."""
    from simulator import serving_runs

    path = serving_runs.bundled_runs_path() if args.serving == "bundled" else args.serving
    check_file(str(path), "--serving")
    gpus, models = _catalogs(args)
    runs = serving_runs.load_runs(path, models)
    if runs.empty:
        raise InputError("holds no run this model can price", file=str(path))
    errors = serving_runs.score(runs, gpus=gpus, models=models, kernels=not args.roofline)
    _write_table(errors, args.out)
    print(serving_runs.format_summary(serving_runs.summarise(errors), errors))
    print(f"wrote {len(errors)} scored runs to {args.out}", file=sys.stderr)
    return 0


SWEEP_K = "1-8"
SWEEP_ALPHA = "0.5:0.9:0.1"
"""The K and acceptance axes of a sweep of a speculative method when not given."""

SERVE_LIMIT = 200
"""Most (scenario x load) simulations one `serve` call runs."""


def _check_decode_rounds(table, requests: int, source: str, **priced) -> None:
    """Refuse `--requests` that a scenario's speculative arm could not simulate, before
    any run: its decode rounds are drawn ahead and bounded (`serving.MAX_DECODE_ROUNDS`);
    a request of L output tokens at tau tokens a round draws at least (L - 1) / tau x 1.3
    + 8 of them (`serving._Paths`; a spread of acceptance draws more), so the bound
    depends on the lengths, not the count alone. `table`: the validated scenarios, load
    columns set aside. What this estimate lets through and the draw still finds too
    large is refused by the run, naming `--requests` too."""
    import numpy as np

    from simulator.predict import predict
    from simulator.serving import MAX_DECODE_ROUNDS

    pred = predict(table, source=source, row_offset=_first_row(source), **priced)
    spec = pred["method"].astype(str).ne("none").to_numpy()
    out_len = pred["output_len"].to_numpy(float)
    tau = np.maximum(pred["tau"].to_numpy(float), 1.0)
    per_request = np.where(spec, np.maximum(out_len - 1, 1) / tau * 1.3 + 8, 0.0)
    over = per_request * requests > MAX_DECODE_ROUNDS
    if over.any():
        i = int(np.argmax(over))
        fit = int(MAX_DECODE_ROUNDS // per_request[i])
        raise InputError(
            f"{requests:,} requests of scenario {i + 1} (output_len {out_len[i]:g}, "
            f"{tau[i]:.2f} tokens a round) need at least {per_request[i] * requests:,.0f} "
            f"decode rounds drawn ahead, above the limit of {MAX_DECODE_ROUNDS:,}: give "
            f"fewer requests (at most {fit:,} at the mean acceptance) or shorter outputs",
            field="--requests",
        )


def cmd_serve(args) -> int:
    import pandas as pd

    from simulator.scenarios import check_columns, validate_scenarios
    from simulator.serving import Load

    gpus, models = _catalogs(args)
    table = pd.concat(list(read_blocks(args.inp, WRITE_BLOCK_ROWS)), ignore_index=True)
    check_columns(table.columns, args.inp)
    loads = _serve_loads(args, len(table))
    calibration, _ = _calibration(args)
    # The load comes from the flags, so a row's own load columns are set aside. Every row
    # is checked before the first simulation: a bad cell in the last row must not cost the
    # simulations of the rows above it.
    load_columns = ("batch_size", "request_rate", "serving")
    validate_scenarios(
        table[[c for c in table.columns if str(c).strip() not in load_columns]],
        gpus if calibration is None else {**gpus, **calibration.gpus},
        models,
        source=args.inp,
        row_offset=_first_row(args.inp),
    )
    try:
        loads = [Load(requests=args.requests, seed=args.seed, **load) for load in loads]
    except InputError as exc:
        flags = {"rate": "--rate", "concurrency": "--concurrency", "seed": "--seed"}
        raise InputError(exc.bare_message, field=flags.get(exc.field, "--requests")) from None
    _check_serve_flags(args)
    set_aside = [
        str(c).strip()
        for c in table.columns
        if str(c).strip() in load_columns
        and (table[c].notna() & (table[c].astype(str).str.strip() != "")).any()
    ]
    if set_aside:
        _log(
            f"warning: {args.inp}: column(s) {', '.join(set_aside)} set aside: serve takes "
            "the load from --rate or --concurrency and simulates continuous batching"
        )
    # Set aside before any cell is read: a load cell may hold anything (a list, in Parquet).
    table = table[[c for c in table.columns if str(c).strip() not in load_columns]]
    priced = dict(calibration=calibration, gpus=gpus, models=models)
    _check_decode_rounds(table, args.requests, args.inp, **priced)
    slos = dict(slo_ttft_ms=args.slo_ttft_ms, slo_tpot_ms=args.slo_tpot_ms)
    # The baseline's summary per (scenario as the baseline reads it, load, lengths): rows
    # that differ only in what speculation reads (K, method, acceptance) share one run.
    baselines: dict = {}
    rows = []
    for i, raw in table.iterrows():
        scenario = {c: v for c, v in raw.items() if pd.notna(v) and str(v).strip() != ""}
        for col in load_columns:
            scenario.pop(col, None)
        rows.extend(_serve_row(args, int(i), scenario, loads, priced, slos, baselines))
    _write_table(pd.concat(rows, ignore_index=True), args.out)
    _log(f"wrote {sum(len(r) for r in rows)} rows to {args.out}")
    return 0


def _serve_loads(args, scenarios: int) -> list[dict]:
    """The loads `--rate` or `--concurrency` ask for, as `Load` keywords."""
    if (args.rate is None) == (args.concurrency is None):
        raise InputError("give --rate or --concurrency (one of them)", field="--rate")
    loads = (
        [{"rate": r} for r in parse_range(args.rate, name="--rate", most=SERVE_LIMIT)]
        if args.rate is not None
        else [
            {"concurrency": int(c)}
            for c in parse_range(args.concurrency, name="--concurrency", kind=int, most=SERVE_LIMIT)
        ]
    )
    if len(loads) * scenarios > SERVE_LIMIT:
        raise InputError(
            f"{scenarios} scenarios x {len(loads)} loads is more than {SERVE_LIMIT} runs",
            field="--rate",
        )
    return loads


def _check_serve_flags(args) -> None:
    """`serve`'s acceptance spread, SLOs and length distribution, each in range; a spread
    not given takes the default the dashboard uses (`simulator.serve_defaults`)."""
    import numpy as np

    from simulator.serve_defaults import LENGTH_SPREAD
    from simulator.serving import MAX_ACCEPTANCE_SPREAD, MAX_LOG_SPREAD

    spread = args.acceptance_spread
    if spread is not None and not (np.isfinite(spread) and 0 <= spread <= MAX_ACCEPTANCE_SPREAD):
        raise InputError(
            f"{spread} is outside 0..{MAX_ACCEPTANCE_SPREAD:g}", field="--acceptance-spread"
        )
    for flag, value in (("--slo-ttft-ms", args.slo_ttft_ms), ("--slo-tpot-ms", args.slo_tpot_ms)):
        if not (np.isfinite(value) and value > 0):
            raise InputError(f"{value} must be a positive number of ms", field=flag)
    if args.length_spread is None:
        args.length_spread = LENGTH_SPREAD[args.lengths]
    if args.lengths == "fixed" and args.length_spread != 0:
        raise InputError(
            "fixed lengths have no spread: give --lengths uniform or lognormal with it",
            field="--length-spread",
        )
    most = 1.0 if args.lengths == "uniform" else MAX_LOG_SPREAD
    if not (np.isfinite(args.length_spread) and 0 <= args.length_spread <= most):
        what = "a share of the mean" if args.lengths == "uniform" else "the log's s.d."
        raise InputError(
            f"{args.length_spread} is outside 0..{most:g} ({what})", field="--length-spread"
        )


def _serve_row(args, i: int, scenario: dict, loads, priced, slos, baselines) -> list:
    """Both arms of scenario row `i` under every load: a summary frame per load. The
    baseline's runs are shared through `baselines` (keyed by the scenario as the baseline
    reads it, the load and the lengths)."""
    import pandas as pd

    from simulator.serve_defaults import acceptance_spread, default_lengths
    from simulator.serving import (
        arm_key,
        arm_scenario,
        price_arms,
        run_arms,
        summarise_arms,
    )

    rows = []
    prompt_mean = float(scenario.get("prompt_len", 1024))
    output_mean = float(scenario.get("output_len", 256))
    lengths = [
        default_lengths(mean, args.lengths, args.length_spread)
        for mean in (prompt_mean, output_mean)
    ]
    spread = acceptance_spread(str(scenario.get("method", "none")), args.acceptance_spread)
    arm_models = None  # the step models, priced once for every load of this row
    for load in loads:
        where = f"rate {load.rate}/s" if load.rate else f"concurrency {load.concurrency}"
        _log(f"scenario {i + 1}, {where}: {args.requests} requests per arm")
        try:
            if arm_models is None:
                arm_models = price_arms(scenario, prompt_mean, output_mean, **priced)
            parts = []
            for arm, model in arm_models:
                key = None
                if arm == "baseline":
                    key = (arm_key(arm_scenario(scenario, False)), load, *lengths)
                part = baselines.get(key)
                if part is None:
                    ran = run_arms(
                        scenario,
                        load,
                        *lengths,
                        acceptance_spread=spread,
                        arm_models=[(arm, model)],
                    )
                    part = summarise_arms(ran, load, **slos)
                    if key is not None:
                        baselines[key] = part
                parts.append(part)
            out = pd.concat(parts, ignore_index=True)
            out["status"] = "ok"
            for arm, refused in zip(out["arm"], out["refused"], strict=True):
                if refused:
                    _log(
                        f"warning: scenario {i + 1}, {where}, {arm}: {refused} of "
                        f"{load.requests} requests are longer than the KV cache holds "
                        "and were refused (no latencies)"
                    )
        except InputError as exc:
            if exc.field == "requests":  # the bound the check above estimates
                raise InputError(
                    f"scenario {i + 1}: {exc.bare_message}", field="--requests"
                ) from None
            if exc.field != "scenario":
                raise InputError(
                    exc.bare_message, file=args.inp, row=int(i) + 1, field=exc.field
                ) from None
            # Valid input whose setup cannot run: the reason, no numbers, as predict does.
            out = pd.DataFrame(
                [
                    {
                        "arm": "spec" if "with speculation" in exc.bare_message else "baseline",
                        "rate": load.rate,
                        "concurrency": load.concurrency,
                        "requests": load.requests,
                        "status": exc.bare_message,
                    }
                ]
            )
        out.insert(0, "scenario", int(i) + 1)
        for col in ("gpu", "method", "target"):
            out.insert(1, col, scenario.get(col, ""))
        rows.append(out)
    return rows


def cmd_columns(args) -> int:
    import textwrap

    from simulator.predict import OUTPUT_COLUMNS
    from simulator.scenarios import COLUMNS

    for c in COLUMNS:
        default = "" if c.default is None else f" (default {c.default!r})"
        print(f"{c.name:26s} {c.help}{default}")
    from simulator.kernels.tables import engine_versions

    print(f"{'':26s} engine versions with kernel tables: {', '.join(engine_versions())}")
    print()
    print("predict and sweep write these columns, then the outputs (any of them by name with")
    print("--columns; units: ms, tokens/s, GB = 2**30 bytes, $ per 1M generated tokens):")
    print(textwrap.fill(", ".join(OUTPUT_COLUMNS), width=88))
    return 0


def _demand(text: str) -> float:
    """Requests per day, a finite number >= 0 (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    from simulator.reports import MAX_REQUESTS_PER_DAY, requests_per_day_ok

    if not requests_per_day_ok(value):
        raise argparse.ArgumentTypeError(
            f"'{text}' is not a number of requests per day (0..{MAX_REQUESTS_PER_DAY:g})"
        )
    return value


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gpus", default=str(GPUS_CSV), help="GPU catalog CSV")
    p.add_argument("--models", default=str(MODELS_CSV), help="model catalog CSV")
    p.add_argument(
        "--profile",
        action="append",
        help="profile JSON/CSV to calibrate with, or library:NAME for one kept in the library "
        "(repeatable)",
    )
    p.add_argument(
        "--profile-gpu",
        default=None,
        help="GPU id the profile was measured on (default: matched from its device)",
    )


def _add_predict(sub) -> None:
    """The `predict` command's flags."""
    p = sub.add_parser("predict", help="scenario table in, predictions out (CSV or Parquet)")
    p.add_argument("--in", dest="inp", required=True, help="scenario table (.csv or .parquet)")
    p.add_argument("--out", required=True, help="predictions (.csv or .parquet)")
    p.add_argument(
        "--report",
        action="store_true",
        help="write the dashboard's sizing report instead (simulator.reports, the one place "
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
    p.add_argument("--columns", help=f"{COLUMNS_HELP}; not with --report")
    _common(p)
    p.set_defaults(func=cmd_predict)


def _add_sweep(sub) -> None:
    """The `sweep` command's flags."""
    s = sub.add_parser("sweep", help="predict a grid of K, acceptance and batch")
    s.add_argument("--target", required=True)
    s.add_argument("--method", default="draft_model")
    s.add_argument("--draft", default="")
    s.add_argument("--gpu", required=True)
    s.add_argument("--num-gpus", type=int, default=1)
    s.add_argument("--weight-dtype", default="bf16")
    s.add_argument("--kv-dtype", default="bf16")
    s.add_argument("--prompt-len", type=int, default=1024)
    s.add_argument("--output-len", type=int, default=256)
    s.add_argument("--k", help=f"e.g. 1-8 or 2,4,6 (default {SWEEP_K})")
    s.add_argument("--alpha", help=f"start:stop:step or list (default {SWEEP_ALPHA})")
    s.add_argument("--batch", default="1,2,4,8,16,32,64,128,256")
    s.add_argument("--out", required=True, help="predictions (.csv or .parquet)")
    s.add_argument(
        "--force",
        action="store_true",
        help=f"build a grid larger than {SWEEP_LIMIT:,} scenarios (about 750 bytes of CSV each)",
    )
    s.add_argument("--columns", help=COLUMNS_HELP)
    _common(s)
    s.set_defaults(func=cmd_sweep)


def _add_validate(sub) -> None:
    """The `validate` command's flags."""
    v = sub.add_parser(
        "validate", help="score the model against published measurements, one row per case"
    )
    v.add_argument("--published", help="published set, e.g. data/validation/published.csv")
    v.add_argument(
        "--serving",
        help="measured serving runs in aiconfigurator-core's silicon_sample.csv layout "
        "('bundled': the copy the installed package ships); scores absolute TPOT and TTFT",
    )
    v.add_argument(
        "--roofline",
        action="store_true",
        help="with --serving: price every run on the roofline (the model before kernel tables)",
    )
    v.add_argument("--out", required=True, help="errors per case (.csv or .parquet)")
    v.add_argument(
        "--ablation",
        action="store_true",
        help="also score with each term of the serving model switched off, one at a time",
    )
    v.add_argument("--gpus", default=str(GPUS_CSV), help="GPU catalog CSV")
    v.add_argument("--models", default=str(MODELS_CSV), help="model catalog CSV")
    v.add_argument(
        "--save",
        metavar="NAME",
        help="also keep this run's figures in the library (`library history` follows them)",
    )
    v.set_defaults(func=cmd_validate)


def _add_serve(sub) -> None:
    """The `serve` command's flags."""
    r = sub.add_parser(
        "serve",
        help="request-level simulation of each scenario under a request rate or concurrency",
    )
    r.add_argument("--in", dest="inp", required=True, help="scenario table, as for predict")
    r.add_argument(
        "--out", required=True, help="one row per (scenario, load, arm) (.csv or .parquet)"
    )
    r.add_argument("--rate", help="requests/s, Poisson: 0.5:8:0.5 or 1,2,4")
    r.add_argument("--concurrency", help="requests in flight (closed loop): 1,4,16")
    from simulator import serve_defaults as sd

    r.add_argument(
        "--requests",
        type=int,
        default=sd.REQUESTS,
        help=f"requests per arm and load, 1..100,000 (default {sd.REQUESTS}, as the dashboard)",
    )
    r.add_argument(
        "--lengths",
        choices=("fixed", "uniform", "lognormal"),
        default=sd.LENGTH_KIND,
        help="distribution of prompt and output lengths around the scenario's "
        f"(default {sd.LENGTH_KIND}, as the dashboard)",
    )
    r.add_argument(
        "--length-spread",
        type=float,
        default=None,
        help="uniform: +- this fraction of the mean; lognormal: sigma of the log (default: "
        + ", ".join(f"{k} {v:g}" for k, v in sd.LENGTH_SPREAD.items())
        + ")",
    )
    r.add_argument(
        "--acceptance-spread",
        type=float,
        default=None,
        help="standard deviation of each request's first-position acceptance (default: the "
        "method's, data/acceptance_spread.csv, as the dashboard)",
    )
    r.add_argument("--slo-ttft-ms", type=float, default=2000.0, help="TTFT SLO for goodput")
    r.add_argument("--slo-tpot-ms", type=float, default=100.0, help="TPOT SLO for goodput")
    r.add_argument("--seed", type=int, default=0)
    _common(r)
    r.set_defaults(func=cmd_serve)


def make_parser() -> argparse.ArgumentParser:
    """The command line's parser: one subcommand per `_add_*`."""
    parser = argparse.ArgumentParser(
        prog="python -m simulator", description="SpecPlan analytic model of speculative decoding"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_add_predict, _add_sweep, _add_validate, _add_serve):
        add(sub)
    c = sub.add_parser("columns", help="list the scenario columns and their defaults")
    c.set_defaults(func=cmd_columns)
    from simulator.search.cli import add_parser as add_search

    add_search(sub)
    from library.cli import add_library_parser

    add_library_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    try:
        if getattr(args, "out", None):
            check_out(args.out)
            table_format(args.out, "--out")
        if getattr(args, "inp", None):
            table_format(args.inp, "--in")
        with _sigterm_exits():
            return args.func(args)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
