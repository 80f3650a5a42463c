"""`python -m simulator models`: the models scenarios may name, one line each, with what
prices them."""

from __future__ import annotations

import sys

from simulator.inputs.specs import ModelSpec

FAMILIES = ("dense", "moe", "mla")


def family(spec: ModelSpec) -> str:
    """'mla' (MLA attention, with or without experts), 'moe' or 'dense'."""
    if spec.is_mla:
        return "mla"
    return "moe" if spec.is_moe else "dense"


def priced_by(spec: ModelSpec) -> str:
    """What prices the model's steps where a GPU and engine have tables (docs/model.md
    sections 9-10): aiconfigurator-core's model of it, the dense op-by-op tables, or the
    roofline alone."""
    if family(spec) == "dense":
        return "dense tables"
    return "engine model" if spec.aic_model else "roofline"


def rows(models: dict[str, ModelSpec], only: str = "") -> list[dict]:
    """One dict per model, sorted by id; parameters in billions."""
    out = []
    for ident in sorted(models):
        m = models[ident]
        if only and family(m) != only:
            continue
        out.append(
            {
                "id": ident,
                "hf_repo": m.hf_repo,
                "family": family(m),
                "total_params_b": round(m.total_params / 1e9, 2),
                "active_params_b": round(m.active_params / 1e9, 2),
                "checkpoint_dtype": m.checkpoint_dtype,
                "mtp_layers": m.num_nextn_predict_layers,
                "priced_by": priced_by(m),
            }
        )
    return out


def cmd_models(args) -> int:
    import pandas as pd

    from simulator.cli.common import write_table
    from simulator.inputs.catalog import catalog_models
    from simulator.inputs.io import check_file

    check_file(args.models, "--models")
    table = pd.DataFrame(rows(catalog_models(args.models), args.family))
    if args.out:
        write_table(table, args.out)
        print(f"wrote {len(table)} models to {args.out}", file=sys.stderr)
    else:
        print(table.to_string(index=False))
    return 0


def add_parser(sub) -> None:
    """The `models` command."""
    from simulator.cli.common import add_model_config_flag
    from simulator.inputs.catalog import MODELS_CSV

    p = sub.add_parser(
        "models", help="list the models a scenario may name (catalog, bundled configs, yours)"
    )
    p.add_argument("--models", default=str(MODELS_CSV), help="model catalog CSV")
    add_model_config_flag(p)
    p.add_argument("--family", choices=FAMILIES, default="", help="only this family")
    p.add_argument("--out", default="", help="write the list as CSV or Parquet")
    p.set_defaults(func=cmd_models)
