"""Command line: `python -m simulator predict|sweep|validate|columns`.

Exit status 2 means bad input; the message names the row and the column.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import pandas as pd

from simulator.catalog import GPUS_CSV, MODELS_CSV, load_gpus, load_models
from simulator.errors import InputError
from simulator.predict import predict
from simulator.scenarios import COLUMNS
from simulator.sweep import build_grid, parse_range


def _write_atomically(df: pd.DataFrame, out: str) -> None:
    """Write CSV to a temporary file beside `out`, then rename: never a half-written file."""
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w", newline="") as fh:
            df.to_csv(fh, index=False)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read_scenarios(path: str) -> pd.DataFrame:
    try:
        return pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
    except FileNotFoundError:
        raise InputError("file not found", file=path) from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InputError(f"not a readable CSV file ({exc})", file=path) from None


def _calibration(args):
    if not getattr(args, "profile", None):
        return None
    from simulator.calibration import Calibration
    from simulator.profile import load_profile

    return Calibration.from_profiles(
        [load_profile(p) for p in args.profile], gpu_id=args.profile_gpu
    )


def cmd_predict(args) -> int:
    gpus, models = load_gpus(args.gpus), load_models(args.models)
    table = _read_scenarios(args.inp)
    result = predict(
        table, gpus=gpus, models=models, calibration=_calibration(args), source=args.inp
    )
    _write_atomically(result, args.out)
    print(f"wrote {len(result)} predictions to {args.out}", file=sys.stderr)
    return 0


def cmd_sweep(args) -> int:
    gpus, models = load_gpus(args.gpus), load_models(args.models)
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
    axes = {"batch_size": parse_range(args.batch, name="--batch", kind=int)}
    if args.method != "none":
        axes["k"] = parse_range(args.k, name="--k", kind=int)
        axes["acceptance_rate"] = parse_range(args.alpha, name="--alpha")
    result = predict(
        build_grid(base, **axes),
        gpus=gpus,
        models=models,
        calibration=_calibration(args),
        source="sweep",
    )
    _write_atomically(result, args.out)
    print(f"wrote {len(result)} scenarios to {args.out}", file=sys.stderr)
    return 0


def cmd_validate(args) -> int:
    from simulator.published import format_summary, load_published, score, summarise

    gpus, models = load_gpus(args.gpus), load_models(args.models)
    errors = score(load_published(args.published), gpus=gpus, models=models, source=args.published)
    _write_atomically(errors, args.out)
    print(format_summary(summarise(errors)))
    if args.ablation:
        from simulator.published import ablation

        table = ablation(load_published(args.published))
        print("\nmedian |error| with one term switched off (rows) by source (columns):")
        print((100 * table).round(1).to_string())
    print(f"wrote {len(errors)} scored cases to {args.out}", file=sys.stderr)
    return 0


def cmd_columns(args) -> int:
    for c in COLUMNS:
        default = "" if c.default is None else f" (default {c.default!r})"
        print(f"{c.name:26s} {c.help}{default}")
    return 0


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gpus", default=str(GPUS_CSV), help="GPU catalog CSV")
    p.add_argument("--models", default=str(MODELS_CSV), help="model catalog CSV")
    p.add_argument(
        "--profile", action="append", help="profile JSON/CSV to calibrate with (repeatable)"
    )
    p.add_argument(
        "--profile-gpu",
        default=None,
        help="GPU id the profile was measured on (default: matched from its device)",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m simulator", description="SpecPlan analytic model of speculative decoding"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("predict", help="scenario CSV in, predictions CSV out")
    p.add_argument("--in", dest="inp", required=True, help="scenario table (CSV)")
    p.add_argument("--out", required=True, help="predictions (CSV)")
    _common(p)
    p.set_defaults(func=cmd_predict)
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
    s.add_argument("--k", default="1-8", help="e.g. 1-8 or 2,4,6")
    s.add_argument("--alpha", default="0.5:0.9:0.1", help="start:stop:step or list")
    s.add_argument("--batch", default="1,2,4,8,16,32,64,128,256")
    s.add_argument("--out", required=True)
    _common(s)
    s.set_defaults(func=cmd_sweep)
    v = sub.add_parser(
        "validate", help="score the model against published measurements, one row per case"
    )
    v.add_argument(
        "--published", required=True, help="published set, e.g. data/validation/published.csv"
    )
    v.add_argument("--out", required=True, help="errors per case (CSV)")
    v.add_argument(
        "--ablation",
        action="store_true",
        help="also score with each term of the serving model switched off, one at a time",
    )
    v.add_argument("--gpus", default=str(GPUS_CSV), help="GPU catalog CSV")
    v.add_argument("--models", default=str(MODELS_CSV), help="model catalog CSV")
    v.set_defaults(func=cmd_validate)
    c = sub.add_parser("columns", help="list the scenario columns and their defaults")
    c.set_defaults(func=cmd_columns)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
