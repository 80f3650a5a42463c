"""What every subcommand of `python -m simulator` shares: `--out` checked before any work,
tables written in blocks and atomically, SIGTERM that leaves no partial file, the catalogs
and `--profile` calibration, `predict` block by block with progress, and the flags
the predicting commands share."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from simulator.errors import InputError
from simulator.inputs.catalog import (
    GPUS_CSV,
    MODEL_CONFIG_HELP,
    MODELS_CSV,
    catalog_models,
    load_gpus,
)
from simulator.inputs.io import TableWriter, atomic_path, check_file, probe_folder, table_format

PROGRESS_ROWS = 100_000
"""Tables larger than this report each stage, and each block written, on stderr."""


WRITE_BLOCK_ROWS = 65_536
"""Rows read, predicted and written at a time (two blocks in flight: one written while the
next is predicted): a block's inputs, outputs and their pyarrow copies take about 100 MB,
whatever the size of the table."""


COLUMNS_HELP = (
    "write only these columns, in this order, e.g. target,k,batch_size,speedup "
    "(inputs and outputs by name; `columns` lists them)"
)


EXIT_TERMINATED = 128 + signal.SIGTERM
"""Exit status after SIGTERM, as a shell reports a process it terminated."""


def log(text: str) -> None:
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


def write_atomically(out: str, write: Callable[[TextIO], None]) -> None:
    """Write text to a temporary file beside `out`, then rename: never a half-written file."""
    with atomic_path(out) as tmp, open(tmp, "w", newline="") as fh:
        write(fh)


def write_table(df, out: str) -> None:
    """Write a whole DataFrame to `out` (CSV or Parquet by suffix), in blocks."""
    write_blocks(iter([df]), out, total=len(df))


def selected_columns(text: str | None) -> list[str] | None:
    """The columns `--columns` names, in its order (None without the flag): each an input
    column or one of predict's outputs, each once. A million-row table's 68 columns cost
    more to write than to predict; a few columns cost a fraction of it."""
    if text is None:
        return None
    import difflib

    from simulator.inputs.scenarios import INPUT_COLUMNS
    from simulator.model.predict import OUTPUT_COLUMNS

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


def write_blocks(
    blocks: Iterator, out: str, total: int | None = None, columns: list[str] | None = None
) -> int:
    """Write DataFrames to `out` as they come (only `columns`, in that order, when given),
    reporting each block of a large table. The writer formats and writes on threads of its
    own while the next block is predicted."""
    fmt = table_format(out, "--out")

    def written(rows: int) -> None:
        if (total or rows) > PROGRESS_ROWS:
            of = f" of {total}" if total is not None else ""
            log(f"writing {out}: {rows}{of} rows")

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
def sigterm_exits() -> Iterator[None]:
    """While inside, SIGTERM raises SystemExit, so a half-written output is removed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def profile_calibration(args):
    """The calibration of the --profile files, and each file's device id."""
    if not getattr(args, "profile", None):
        if getattr(args, "profile_gpu", None):
            raise InputError(
                "names the GPU of a --profile, and none was given", field="--profile-gpu"
            )
        return None, {}
    from library.cli import profile_source
    from simulator.inputs.profile import load_profile
    from simulator.model.calibration import Calibration, match_gpu_id

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
    from simulator.validation.step_gap import flattery_warnings, verify_warnings

    for path, profile in profiles.items():
        for line in flattery_warnings(profile, devices[path]):
            log(f"warning: profile {path}: {line}")
        for line in verify_warnings(profile, devices[path]):
            log(f"warning: profile {path}: {line}")


def _warn_unused_profiles(used: bool, asked: set[str], devices: dict[str, str], args) -> None:
    """Say so when --profile was given but every row was priced by the roofline."""
    if not devices or used:
        return
    rows = ", ".join(sorted(asked))
    for path, device in devices.items():
        if device in asked:  # a GPU with kernel tables: they price the models it did not time
            log(
                f"warning: profile {path} (device '{device}') times none of these rows' "
                "models or setups (one GPU, its weight dtype); they keep the engine's kernel "
                "tables"
            )
            continue
        fix = "" if args.profile_gpu else "pass --profile-gpu or "
        log(
            f"warning: profile {path} (device '{device}') matches no row; rows use gpu "
            f"{rows}; {fix}set gpu to '{device}'"
        )


def catalogs(args):
    for flag, path in (("--gpus", args.gpus), ("--models", args.models)):
        check_file(path, flag)
    return load_gpus(args.gpus), catalog_models(args.models)


def first_row(path: str) -> int:
    """Rows above a table's first data row, for the row an error names: a CSV's header is
    row 1, as a spreadsheet numbers it; a Parquet file's first row is row 1."""
    return 1 if table_format(path, "--in") == "csv" else 0


def predict_blocks(
    tables: Iterator, args, source: str, total: int | None = None, row_offset: int = 0
) -> Iterator:
    """`predict` block by block with the CLI's catalogs and profiles, reporting a large
    table's progress; warns at the end when a profile priced no row. `row_offset`: rows
    above the first block's first row."""
    from simulator.model.predict import predict

    gpus, models = catalogs(args)
    calibration, devices = profile_calibration(args)
    if total is not None and total > PROGRESS_ROWS:
        log(f"predicting {total} scenarios...")
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


def add_common_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gpus", default=str(GPUS_CSV), help="GPU catalog CSV")
    p.add_argument("--models", default=str(MODELS_CSV), help="model catalog CSV")
    add_model_config_flag(p)
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


def add_model_config_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model-config",
        action="append",
        default=[],
        metavar="PATH",
        help=MODEL_CONFIG_HELP,
    )
