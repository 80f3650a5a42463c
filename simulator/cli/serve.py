"""`python -m simulator serve`: the request-level simulation of each scenario, both arms,
under a request rate or a concurrency."""

from __future__ import annotations

from simulator.cli import common
from simulator.errors import InputError
from simulator.inputs.io import read_blocks
from simulator.inputs.sweep import parse_range

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

    from simulator.model.predict import predict
    from simulator.serving.engine import MAX_DECODE_ROUNDS

    pred = predict(table, source=source, row_offset=common.first_row(source), **priced)
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

    from simulator.inputs.scenarios import check_columns, validate_scenarios
    from simulator.serving.engine import Load

    gpus, models = common.catalogs(args)
    table = pd.concat(list(read_blocks(args.inp, common.WRITE_BLOCK_ROWS)), ignore_index=True)
    check_columns(table.columns, args.inp)
    loads = _serve_loads(args, len(table))
    calibration, _ = common.profile_calibration(args)
    # The load comes from the flags, so a row's own load columns are set aside. Every row
    # is checked before the first simulation: a bad cell in the last row must not cost the
    # simulations of the rows above it.
    load_columns = ("batch_size", "request_rate", "serving")
    validate_scenarios(
        table[[c for c in table.columns if str(c).strip() not in load_columns]],
        gpus if calibration is None else {**gpus, **calibration.gpus},
        models,
        source=args.inp,
        row_offset=common.first_row(args.inp),
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
        common.log(
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
    common.write_table(pd.concat(rows, ignore_index=True), args.out)
    common.log(f"wrote {sum(len(r) for r in rows)} rows to {args.out}")
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
    not given takes the default the dashboard uses (`simulator.serving.defaults`)."""
    import numpy as np

    from simulator.serving.defaults import LENGTH_SPREAD
    from simulator.serving.engine import MAX_ACCEPTANCE_SPREAD, MAX_LOG_SPREAD

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

    from simulator.serving.defaults import acceptance_spread, default_lengths
    from simulator.serving.engine import (
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
        common.log(f"scenario {i + 1}, {where}: {args.requests} requests per arm")
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
                    common.log(
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


def add_parser(sub) -> None:
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
    from simulator.serving import defaults as sd

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
    common.add_common_flags(r)
    r.set_defaults(func=cmd_serve)
