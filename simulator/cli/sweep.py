"""`python -m simulator sweep`: predict a grid of K, acceptance and batch."""

from __future__ import annotations

from simulator.cli import common
from simulator.errors import InputError
from simulator.inputs.io import table_format
from simulator.inputs.sweep import SWEEP_LIMIT, build_grid, grid_size, parse_range

SWEEP_K = "1-8"
SWEEP_ALPHA = "0.5:0.9:0.1"
"""The K and acceptance axes of a sweep of a speculative method when not given."""


def cmd_sweep(args) -> int:
    from simulator.inputs.scenarios import K_LIMIT, LIMITS

    table_format(args.out, "--out")
    columns = common.selected_columns(args.columns)
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
    blocks = (
        grid.iloc[i : i + common.WRITE_BLOCK_ROWS]
        for i in range(0, len(grid), common.WRITE_BLOCK_ROWS)
    )
    results = common.predict_blocks(blocks, args, "sweep", total=len(grid))
    rows = common.write_blocks(results, args.out, len(grid), columns)
    common.log(f"wrote {rows} scenarios to {args.out}")
    return 0


def add_parser(sub) -> None:
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
    s.add_argument("--columns", help=common.COLUMNS_HELP)
    common.add_common_flags(s)
    s.set_defaults(func=cmd_sweep)
