"""`python -m simulator library list|show|export|import|delete`, `--profile library:NAME`
and `python -m profiler run ... --save`: the library from the shell.

The database is `SPECPLAN_DB_URL`, else the SQLite file under the user's data directory
(`--db` overrides both). Errors are `InputError`s: the command prints them and exits 2.
SQLAlchemy is imported only when a command runs, so `--help` answers at once.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from simulator.errors import InputError

PREFIX = "library:"
"""`--profile library:NAME` names a profile kept in the library instead of a file."""
KIND_CHOICES = ("profile", "benchmark", "scrape", "scenario", "report", "validation", "model")


def _open(args):
    from library.store import open_library

    return open_library(getattr(args, "db", None))


def _kind_of(lib, name: str, kind: str | None) -> str:
    if kind:
        return kind
    kinds = lib.kinds_named(name)
    if not kinds:
        raise InputError(f"nothing named '{name}' is kept", field="name")
    if len(kinds) > 1:
        raise InputError(f"'{name}' names a {' and a '.join(kinds)}; give --kind", field="name")
    return kinds[0]


def cmd_list(args) -> int:
    from library.export import csv_text, listing

    lib = _open(args)
    table = listing(lib.entries(args.kind, args.search or ""))
    if args.format == "json":
        print(table.to_json(orient="records", indent=1))
    elif args.format == "csv":
        sys.stdout.write(csv_text(table))
    elif table.empty:
        print(f"nothing kept in {lib.where}" + (" matches" if args.search else ""))
    else:
        print(table.drop(columns="notes").to_string(index=False))
    return 0


def cmd_show(args) -> int:
    from library.export import entry_json

    lib = _open(args)
    entry = lib.get(_kind_of(lib, args.name, args.kind), args.name)
    value = entry_json(lib, entry)
    shown = value.pop("content")
    print(json.dumps(value, indent=1, ensure_ascii=False))
    if args.content:
        print(shown)
    return 0


def check_export_out(out: str) -> None:
    """`library export --out`: '-' (stdout), or a file `predict --out` could write."""
    from simulator.cli.common import check_out

    if not out.strip():
        raise InputError("is empty; give a file name, or - for stdout", field="--out")
    if out.endswith(("/", os.sep)):
        raise InputError(f"'{out}' names a folder; give a file name", field="--out")
    check_out(out)


def cmd_export(args) -> int:
    from library.export import entry_json, entry_table
    from simulator.cli.common import write_atomically

    if args.to != "-":
        check_export_out(args.to)
    lib = _open(args)
    entry = lib.get(_kind_of(lib, args.name, args.kind), args.name)
    as_json = args.format == "json" or (args.format is None and args.to.endswith(".json"))
    if as_json:
        text = json.dumps(entry_json(lib, entry), indent=1, ensure_ascii=False)
    else:
        text = entry_table(lib, entry)
    if args.to == "-":
        sys.stdout.write(text)
        return 0
    try:
        write_atomically(args.to, lambda fh: fh.write(text))
    except OSError as exc:
        raise InputError(
            f"cannot write '{args.to}' ({exc.strerror or exc})", field="--out"
        ) from None
    print(f"wrote {entry.kind} '{entry.name}' to {args.to}", file=sys.stderr)
    return 0


def _read(path: str) -> bytes:
    from library.entries import MAX_CONTENT_BYTES

    file = Path(path)
    if not file.is_file():
        raise InputError(f"'{path}' is not a file", field="file")
    if file.stat().st_size > MAX_CONTENT_BYTES:
        raise InputError(
            f"{file.stat().st_size:,} bytes is over the library's {MAX_CONTENT_BYTES:,}-byte limit",
            file=path,
        )
    return file.read_bytes()


def cmd_import(args) -> int:
    from library import kinds
    from library.export import EXPORT_SCHEMA, read_export, restore

    data = _read(args.file)
    lib = _open(args)
    name = args.name or Path(args.file).stem
    if args.kind == "model" and not args.name and name == "config":
        # A checkpoint's folder holds config.json: the folder names the model.
        name = Path(args.file).resolve().parent.name or name
    if args.kind is None and EXPORT_SCHEMA.encode() in data[:4096]:
        saved = restore(lib, read_export(data, args.file))
    elif args.quant and args.kind != "model":
        raise InputError("--quant goes with --kind model", field="--quant")
    elif args.kind in (None, "profile"):
        saved = kinds.save_profile(lib, name, data, notes=args.notes)
    elif args.kind == "scrape":
        saved = kinds.save_scrape(lib, name, data, notes=args.notes)
    elif args.kind == "model":
        quant = _read(args.quant) if args.quant else None
        saved = kinds.save_model(lib, name, data, quant, notes=args.notes)
    elif args.kind == "benchmark":
        saved = kinds.save_benchmark(
            lib,
            name,
            data,
            device=args.device or "",
            engine=args.engine or "",
            engine_version=args.engine_version or "",
            model=args.model or "",
            notes=args.notes,
        )
    else:
        raise InputError(
            f"a {args.kind} is imported from a JSON export (`library export --format json`)",
            field="--kind",
        )
    e = saved.entry
    if saved.existed:
        print(f"already kept as {e.kind} '{e.name}' (same content): nothing added")
    else:
        print(f"kept {e.kind} '{e.name}' in {lib.where}")
    return 0


def cmd_delete(args) -> int:
    lib = _open(args)
    kind = _kind_of(lib, args.name, args.kind)
    if not args.yes:
        raise InputError(
            f"deleting {kind} '{args.name}' cannot be undone; add --yes to confirm",
            field="--yes",
        )
    lib.delete(kind, args.name)
    print(f"deleted {kind} '{args.name}'")
    return 0


def cmd_history(args) -> int:
    import pandas as pd

    lib = _open(args)
    rows = lib.figures(args.metric)
    if not rows:
        print("no validation run kept" + (f" with figure '{args.metric}'" if args.metric else ""))
        return 0
    versions = {e.name: e.model_version for e in lib.entries("validation")}
    table = pd.DataFrame(rows, columns=["run", "saved_at", "figure", "value"])
    table["model_version"] = table["run"].map(versions)
    table["saved_at"] = table["saved_at"].dt.strftime("%Y-%m-%d %H:%M UTC")
    print(table.to_string(index=False))
    return 0


def save_validation_run(name: str, errors, summary, *, source: str) -> None:
    """`validate --save NAME`: the run's per-case errors and its headline figures
    (fractions): median |error|, signed median, cases, and median |error| per method."""
    from library.kinds import save_validation

    figures = {
        "median_abs_error": summary.median_abs_error,
        "signed_median": summary.signed_median,
        "cases": float(summary.cases),
    }
    for method, row in summary.by_method.iterrows():
        figures[f"median_abs_error/{method}"] = float(row["median_abs_error"])
    figures = {k: v for k, v in figures.items() if v == v}  # a method without cases: NaN
    saved = save_validation(
        _open(None), name, errors, figures, notes=f"validate --published {source}"
    )
    said = "already kept as" if saved.existed else "kept as"
    print(f"{said} validation run '{saved.entry.name}'", file=sys.stderr)


def add_library_parser(sub) -> None:
    """Register `library` and its subcommands on a parent's subparsers."""
    p = sub.add_parser("library", help="the team's library: list, show, export, import, delete")
    verbs = p.add_subparsers(dest="library_command", required=True)

    def verb(name: str, text: str, func) -> argparse.ArgumentParser:
        v = verbs.add_parser(name, help=text)
        v.add_argument("--db", help="database URL (default: $SPECPLAN_DB_URL, else the file)")
        v.set_defaults(func=func)
        return v

    v = verb("list", "entries, newest first", cmd_list)
    v.add_argument("--kind", choices=KIND_CHOICES)
    v.add_argument("--search", help="text in the name, device, model, engine or notes")
    v.add_argument("--format", choices=("table", "csv", "json"), default="table")
    v = verb("show", "one entry's who, when, notes and figures", cmd_show)
    v.add_argument("name")
    v.add_argument("--kind", choices=KIND_CHOICES)
    v.add_argument("--content", action="store_true", help="print the content too")
    v = verb("export", "one entry as JSON (all of it) or CSV (its table)", cmd_export)
    v.add_argument("name")
    v.add_argument("--kind", choices=KIND_CHOICES)
    v.add_argument("--out", dest="to", required=True, help="file (.json or .csv), or - for stdout")
    v.add_argument("--format", choices=("json", "csv"), help="default: by the file's suffix")
    v = verb(
        "import",
        "keep a profile, scrape, engine result, model config.json or JSON export",
        cmd_import,
    )
    v.add_argument("file")
    v.add_argument("--kind", choices=KIND_CHOICES, help="default: an export, else a profile")
    v.add_argument("--name", help="default: the file's name without its suffix")
    v.add_argument("--notes", default="")
    v.add_argument("--device", help="engine result: the GPU it ran on")
    v.add_argument("--engine", help="engine result: vllm, sglang, trtllm")
    v.add_argument("--engine-version", help="engine result: the engine's version")
    v.add_argument("--model", help="engine result: the model served")
    v.add_argument("--quant", help="model: its hf_quant_config.json (with --kind model)")
    v = verb("history", "validation figures over time, oldest first", cmd_history)
    v.add_argument("--metric", help="one figure, e.g. median_abs_error")
    v = verb("delete", "remove one entry (asks for --yes)", cmd_delete)
    v.add_argument("name")
    v.add_argument("--kind", choices=KIND_CHOICES)
    v.add_argument("--yes", action="store_true", help="confirm")


def profile_source(flag_value: str) -> bytes | None:
    """The bytes of `--profile library:NAME` (None for a plain file path)."""
    if not flag_value.startswith(PREFIX):
        return None
    from library.store import open_library

    name = flag_value.removeprefix(PREFIX)
    return open_library().content("profile", name)


def save_after_run(path: Path, name: str) -> int:
    """`profiler run --save`: keep the profile just written; 0, or 1 with the reason."""
    from library.kinds import save_profile
    from library.store import open_library

    try:
        lib = open_library()
        saved = save_profile(lib, name, Path(path).read_bytes())
    except (InputError, OSError) as exc:
        print(f"profiler: wrote {path} but did not keep it in the library: {exc}", file=sys.stderr)
        return 1
    said = "already kept as" if saved.existed else "kept in the library as"
    print(f"profiler: {said} profile '{saved.entry.name}' ({lib.where})", file=sys.stderr)
    return 0
