"""`python -m profiler import FILE... --out profile.json`: engine benchmarks as a profile.

Registered by `profiler.cli.make_parser`; the work is here. Bad input exits with status 2
and a message naming the file and the field (through the subcommand's `parser.error`).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from profiler.imports.common import MAX_FILE_BYTES
from profiler.imports.detect import FORMATS
from simulator.errors import InputError

NAME = "import"


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        NAME,
        help="read an engine's own benchmark results (SGLang, vLLM, TensorRT-LLM, "
        "speculators) into a profile",
        description="Formats: " + "; ".join(f"{k}: {v}" for k, v in FORMATS.items()),
    )
    p.set_defaults(parser=p)
    p.add_argument("files", nargs="+", type=Path, help="result files of one engine")
    p.add_argument("--out", type=Path, required=True, help="profile (.json); CSV beside it")
    p.add_argument("--format", choices=sorted(FORMATS), help="default: told from the content")
    p.add_argument(
        "--target",
        default="",
        help="model id or Hugging Face id when the files do not record one the catalog holds",
    )
    from simulator.inputs.catalog import MODEL_CONFIG_HELP

    p.add_argument(
        "--model-config", action="append", default=[], metavar="PATH", help=MODEL_CONFIG_HELP
    )
    p.add_argument("--gpu", default="", help="GPU id (data/gpus.csv) when not recorded")
    p.add_argument("--engine-version", default="", help="the engine's version, if not recorded")
    p.add_argument(
        "--num-gpus",
        type=int,
        help="GPUs of one replica (its tensor-parallel size) when the files do not record it; "
        "default: as recorded, else 1",
    )
    p.add_argument(
        "--method",
        default="",
        help="what the speculating server ran (eagle, eagle3, mtp, medusa, ngram, "
        "draft_model) when the file does not say",
    )
    p.add_argument("--draft", default="", help="draft model id, with --method draft_model")
    p.add_argument("--k", type=int, help="speculative tokens K, when the file does not say")
    p.add_argument(
        "--acceptance",
        type=float,
        help="mean acceptance length (tokens per verify step, 1 to K + 1) of the speculating "
        "server, when the file does not record it; without it such points stay unpriced",
    )
    p.add_argument(
        "--latency-shape",
        action="append",
        default=[],
        metavar="NAME=BATCH,INPUT,OUTPUT",
        help="the --batch-size, --input-len and --output-len of a vllm bench latency file "
        "(its JSON does not record them); once per file",
    )
    return p


def parse_shapes(items: list[str]) -> dict[str, tuple[int, int, int]]:
    """{'file name': (batch, input, output)} of --latency-shape values."""
    out = {}
    for item in items:
        name, sep, values = item.rpartition("=")
        try:
            shape = tuple(int(v) for v in values.split(","))
        except ValueError:
            shape = ()
        if not sep or len(shape) != 3 or min(shape) < 1:
            raise InputError(
                f"'{item[:80]}' is not NAME=BATCH,INPUT,OUTPUT with three whole numbers >= 1",
                field="--latency-shape",
            )
        out[Path(name).name] = shape
    return out


def _read(path: Path) -> bytes:
    try:
        if path.is_dir():
            raise InputError("is a folder; give result files", file=str(path))
        if path.stat().st_size > MAX_FILE_BYTES:
            raise InputError(f"is over {MAX_FILE_BYTES:,} bytes", file=str(path))
        return path.read_bytes()
    except FileNotFoundError:
        raise InputError("file not found", file=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot be read ({exc.strerror or exc})", file=str(path)) from None


def report(imported) -> str:
    """What the import found, as plain text: provenance, the fit, per-point TPOT."""
    p = imported.profile
    e = p.engine
    lines = [
        f"engine: {e['name']} {e['version']} ({e['format']})",
        f"model: {p.models[0].id} on {p.device.name}",
        *(f"warning: {w}" for w in imported.warnings),
        f"decode/prefill forwards: {len(p.measurements)}; serving points: {len(p.serving_points)}",
        *imported.fit.lines(),
    ]
    table = imported.fit.table
    if len(table):
        lines += ["", table.to_string(index=False, float_format=lambda x: f"{x:.3f}")]
    if len(imported.speedups):
        lines += ["", "measured speedups (speculative against plain at the same load):"]
        lines.append(imported.speedups.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    lines += [f"note: {n}" for n in imported.notes if n not in imported.warnings]
    return "\n".join(lines)


def run_from_args(args: argparse.Namespace, argv: list[str]) -> int:
    from profiler.imports.build import build
    from profiler.imports.files import parse_each
    from profiler.measure import write_profile

    if args.out.suffix.lower() != ".json":
        args.parser.error(f"--out: '{args.out}' must end in .json (the CSV is written beside it)")
    try:
        if args.model_config:
            from simulator.inputs.catalog import use_model_configs

            use_model_configs(args.model_config)
        shapes = parse_shapes(args.latency_shape)
        files = parse_each(
            [(f.name, lambda f=f: _read(f)) for f in args.files], args.format or "", shapes
        )
        imported = build(
            list(files.parsed),
            target=args.target,
            gpu=args.gpu,
            engine_version=args.engine_version,
            method=args.method,
            draft=args.draft,
            k=args.k,
            acceptance=args.acceptance,
            num_gpus=args.num_gpus,
            command="python -m profiler " + shlex.join(argv),
            refused=files.notes(),
        )
    except InputError as exc:
        args.parser.error(str(exc))
    csv_path = write_profile(imported.profile, args.out)
    print(report(imported))
    print(f"profiler: wrote {args.out} and {csv_path}", file=sys.stderr)
    return 0
