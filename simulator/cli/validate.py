"""`python -m simulator validate`: the model scored against published speed-ups
(`--published`) or measured serving runs (`--serving`), one row per case."""

from __future__ import annotations

import sys

from simulator.cli import common
from simulator.errors import InputError
from simulator.inputs.catalog import GPUS_CSV, MODELS_CSV
from simulator.inputs.io import check_file


def cmd_validate(args) -> int:
    from simulator.validation.published import format_summary, load_published, score, summarise

    if (args.published is None) == (args.serving is None):
        raise InputError("give one of --published or --serving", field="--published")
    if args.serving is not None:
        return _validate_serving(args)
    check_file(args.published, "--published")
    gpus, models = common.catalogs(args)
    errors = score(load_published(args.published), gpus=gpus, models=models, source=args.published)
    common.write_table(errors, args.out)
    print(format_summary(summarise(errors)))
    if args.cross_validate:
        from simulator.validation.refit import cross_validate, format_cross_validation

        cv = cross_validate(load_published(args.published))
        errors = cv.errors
        common.write_table(errors, args.out)
        print("\n" + format_cross_validation(cv))
    if args.ablation:
        from simulator.validation.published import ablation

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
    from simulator.validation import serving_runs

    path = serving_runs.bundled_runs_path() if args.serving == "bundled" else args.serving
    check_file(str(path), "--serving")
    gpus, models = common.catalogs(args)
    runs = serving_runs.load_runs(path, models)
    if runs.empty:
        raise InputError("holds no run this model can price", file=str(path))
    errors = serving_runs.score(runs, gpus=gpus, models=models, kernels=not args.roofline)
    common.write_table(errors, args.out)
    print(serving_runs.format_summary(serving_runs.summarise(errors), errors))
    print(f"wrote {len(errors)} scored runs to {args.out}", file=sys.stderr)
    return 0


def add_parser(sub) -> None:
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
    v.add_argument(
        "--cross-validate",
        action="store_true",
        help="with --published: also score each source with the constants fitted on the "
        "development set refitted without it (leave one source out; about a minute)",
    )
    v.add_argument("--gpus", default=str(GPUS_CSV), help="GPU catalog CSV")
    v.add_argument("--models", default=str(MODELS_CSV), help="model catalog CSV")
    v.add_argument(
        "--save",
        metavar="NAME",
        help="also keep this run's figures in the library (`library history` follows them)",
    )
    v.set_defaults(func=cmd_validate)
