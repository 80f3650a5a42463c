"""Scoring the model against published measurements (`data/validation/published.csv`).

Each row of the published set is a scenario (the simulator's own input columns) plus the
speedup a source measured for it, the source and the citation, and the assumptions made
where the source left something out. Rows the simulator cannot represent stay in the
file with `scored` false and the reason in `excluded_reason`, so the set shows what was
left out and why.

Error = predicted speedup / published speedup - 1 (positive: the model is optimistic).
Rows are bucketed by batch: the `batch_size` of a closed-loop row, the mean concurrency
the model solves for an open-loop (`request_rate`) row.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from simulator.errors import InputError
from simulator.inputs.io import csv_frame
from simulator.inputs.scenarios import INPUT_COLUMNS, K_LIMIT
from simulator.model.defaults import DEFAULTS, ModelDefaults
from simulator.model.predict import predict

REQUIRED = ("case_id", "source_id", "citation", "published_speedup", "scored")
MAX_SPEEDUP = K_LIMIT + 1
"""Largest published speedup taken: a lossless step emits at most K + 1 tokens and costs
at least a plain decode, so no case beats K + 1 at the largest K a scenario may give."""
BATCH_BUCKETS = ((1, 1, "1"), (2, 16, "2-16"), (17, np.inf, ">16"))
"""(low, high, label), inclusive: the buckets the issue of record asks errors by."""


@dataclass(frozen=True)
class Summary:
    """Median absolute and signed errors of one scoring run (fractions, not percent)."""

    cases: int
    median_abs_error: float
    signed_median: float
    by_batch: pd.DataFrame
    by_method: pd.DataFrame
    by_source: pd.DataFrame
    reversals: pd.DataFrame
    """Published speedups below 1 and what the model predicted for them."""


def _check_scenario_names(names: list[str], source: str) -> None:
    """Refuse a column named like a scenario column ('batchsize', 'Prompt_Len', 'alpha'):
    scoring reads only the scenario columns by their exact names, so without the real one
    every case would run at that column's default without a word, and beside it one of
    the two is not what is scored. Other columns (sources, notes) are the file's own."""
    import difflib

    from simulator.inputs.scenarios import _ALIASES

    lower = {c.lower(): c for c in INPUT_COLUMNS}
    for name in names:
        if name in INPUT_COLUMNS:
            continue
        close = difflib.get_close_matches(name.lower(), list(lower), n=1, cutoff=0.8)
        guess = _ALIASES.get(name.lower()) or (lower[close[0]] if close else None)
        if guess and guess not in names:
            raise InputError(
                f"'{name}' is not a scenario column; did you mean '{guess}'? (scored as "
                "written, every case would run at its default)",
                file=source,
                row=1,
                field=name,
            )
        if guess:
            raise InputError(
                f"'{name}' is not a scenario column, and the table has '{guess}' too: only "
                f"'{guess}' would be scored; delete or rename one of them",
                file=source,
                row=1,
                field=name,
            )


def load_published(path) -> pd.DataFrame:
    """Read the published set; refuse a file without the columns scoring needs."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise InputError("file not found", file=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot be read ({exc.strerror})", file=str(path)) from None
    table = csv_frame(data, str(path), dtype=str, keep_default_na=False, na_values=[""])
    _check_scenario_names(list(table.columns), str(path))
    for col in REQUIRED:
        if col not in table.columns:
            raise InputError("missing required column", file=str(path), field=col)
    for col in ("case_id", "source_id", "citation"):
        blank = table[col].fillna("").astype(str).str.strip().eq("").to_numpy()
        if blank.any():
            row = int(np.argmax(blank))
            raise InputError("is blank", file=str(path), row=row + 2, field=col)
    ids = table["case_id"].astype(str).str.strip()
    twice = ids.duplicated().to_numpy()
    if twice.any():
        row = int(np.argmax(twice))
        first = int(np.argmax((ids == ids.iloc[row]).to_numpy()))
        raise InputError(
            f"'{ids.iloc[row]}' is the case_id of row {first + 2} too; give each case its own",
            file=str(path),
            row=row + 2,
            field="case_id",
        )
    speedup = pd.to_numeric(table["published_speedup"], errors="coerce")
    scored = table["scored"].astype(str).str.strip().str.lower()
    bad_flag = ~scored.isin(["true", "false"])
    if bad_flag.any():
        row = int(np.argmax(bad_flag.to_numpy()))
        raise InputError("must be true or false", file=str(path), row=row + 2, field="scored")
    table["scored"] = scored.eq("true")
    bad = table["scored"] & ~((speedup > 0) & (speedup <= MAX_SPEEDUP))
    if bad.any():
        row = int(np.argmax(bad.to_numpy()))
        raise InputError(
            f"a scored row needs a published speedup above 0 and at most {MAX_SPEEDUP} "
            "(K + 1 at the largest K)",
            file=str(path),
            row=row + 2,
            field="published_speedup",
        )
    table["published_speedup"] = speedup
    return table


def score(
    published: pd.DataFrame,
    *,
    gpus=None,
    models=None,
    defaults: ModelDefaults = DEFAULTS,
    source: str = "published",
) -> pd.DataFrame:
    """One row per scored case: prediction, publication and error."""
    scored = np.flatnonzero(published["scored"].to_numpy(dtype=bool))
    rows = published.iloc[scored].reset_index(drop=True)
    scenario = rows[[c for c in INPUT_COLUMNS if c in rows.columns]]
    try:
        pred = predict(scenario, gpus=gpus, models=models, defaults=defaults, source=source)
    except InputError as exc:
        if exc.row is None:
            raise
        # The row of the file, as `load_published` numbers it (header = row 1), not of the
        # scored rows alone.
        row = int(scored[exc.row - 1]) + 2
        raise InputError(exc.bare_message, file=exc.file, row=row, field=exc.field) from None
    open_loop = pred["request_rate"].notna().to_numpy()
    batch = np.where(
        open_loop, pred["effective_batch_baseline"].to_numpy(), pred["batch_size"].to_numpy()
    )
    out = pd.DataFrame(
        {
            "case_id": rows["case_id"],
            "source_id": rows["source_id"],
            "engine": rows.get("engine", pd.Series([""] * len(rows))),
            "method": pred["method"].astype(str),
            "target": pred["target"].astype(str),
            "gpu": pred["gpu"].astype(str),
            "num_gpus": pred["num_gpus"],
            "batch_size": batch,
            "request_rate": pred["request_rate"],
            "serving": pred["serving"].astype(str),
            "k": pred["k"],
            "tau": pred["tau"],
            "predicted_speedup": pred["speedup"],
            "published_speedup": rows["published_speedup"].astype(float),
            "status": pred["status"].astype(str),
        }
    )
    out["batch_bucket"] = _bucket(out["batch_size"].to_numpy())
    out["error"] = out["predicted_speedup"] / out["published_speedup"] - 1.0
    out["abs_error"] = out["error"].abs()
    out["citation"] = rows["citation"]
    return out


def _bucket(batch: np.ndarray) -> np.ndarray:
    labels = np.full(batch.shape, "", dtype=object)
    rounded = np.round(batch)
    for lo, hi, label in BATCH_BUCKETS:
        labels[(rounded >= lo) & (rounded <= hi)] = label
    labels[rounded < 1] = "1"
    return labels


def _group(errors: pd.DataFrame, key: str) -> pd.DataFrame:
    g = errors.groupby(key, sort=True)
    return pd.DataFrame(
        {
            "cases": g.size(),
            "median_abs_error": g["abs_error"].median(),
            "signed_median": g["error"].median(),
            "max_abs_error": g["abs_error"].max(),
        }
    )


def summarise(errors: pd.DataFrame) -> Summary:
    """Median errors overall and by batch bucket, method and source; the reversals."""
    ok = errors[errors["predicted_speedup"].notna()]
    reversals = errors.loc[
        errors["published_speedup"] < 1.0,
        ["case_id", "batch_size", "published_speedup", "predicted_speedup"],
    ]
    buckets = _group(ok, "batch_bucket").reindex([b[2] for b in BATCH_BUCKETS]).dropna(how="all")
    return Summary(
        cases=len(ok),
        median_abs_error=float(ok["abs_error"].median()),
        signed_median=float(ok["error"].median()),
        by_batch=buckets,
        by_method=_group(ok, "method"),
        by_source=_group(ok, "source_id"),
        reversals=reversals.reset_index(drop=True),
    )


def format_summary(s: Summary) -> str:
    """The summary as plain text tables, percentages to one decimal."""

    def table(df: pd.DataFrame, name: str) -> str:
        show = df.copy()
        for col in ("median_abs_error", "max_abs_error"):
            show[col] = [f"{100 * v:.1f}%" for v in show[col]]
        show["signed_median"] = [f"{100 * v:+.1f}%" for v in show["signed_median"]]
        show["cases"] = show["cases"].astype(int)
        return f"by {name}:\n" + show.to_string() + "\n"

    lines = [
        f"cases scored: {s.cases}",
        f"median |error| of predicted speedup: {100 * s.median_abs_error:.1f}%",
        f"signed median (bias; + is optimistic): {100 * s.signed_median:+.1f}%",
        "",
        table(s.by_batch, "batch"),
        table(s.by_method, "method"),
        table(s.by_source, "source"),
    ]
    if len(s.reversals):
        below = (s.reversals["predicted_speedup"] < 1.0).sum()
        lines.append(
            f"published reversals (speedup < 1): {len(s.reversals)}, predicted as slowdowns "
            f"(sign right): {below}, as speed-ups (sign wrong): {len(s.reversals) - below}"
        )
        lines.append(s.reversals.to_string(index=False))
    return "\n".join(lines)


ABLATIONS: dict[str, dict] = {
    "the model as fitted": {},
    "no steady-state prefill (every row decode_only)": {"serving": "decode_only"},
    "no engine host costs": {"defaults": "without_engine"},
    "max() roofline (sharpness inf)": {"roofline_sharpness": float("inf")},
    "draft and head forwards at 0.25 ms": {
        "draft_forward_overhead_ms": 0.25,
        "head_forward_overhead_ms": 0.25,
    },
    "efficiencies 0.8 / 0.6 (before the fit)": {
        "bandwidth_efficiency": 0.8,
        "compute_efficiency": 0.6,
    },
}
"""Each term of the serving model switched off (or back to its value before the fit), one
at a time: which term moves which source."""


def ablation(published: pd.DataFrame, defaults: ModelDefaults = DEFAULTS) -> pd.DataFrame:
    """Median |error| per source and overall, one row per entry of `ABLATIONS`."""
    rows = {}
    for name, change in ABLATIONS.items():
        table, d = published, defaults
        change = dict(change)
        if change.pop("serving", None):
            table = published.assign(serving="decode_only")
        if change.pop("defaults", None):
            d = d.without_engine()
        if change:
            d = d.replace(**change)
        errors = score(table, defaults=d)
        ok = errors[errors["predicted_speedup"].notna()]
        by = ok.groupby("source_id")["abs_error"].median()
        rows[name] = {"all": ok["abs_error"].median(), "signed": ok["error"].median(), **by}
    return pd.DataFrame(rows).T
