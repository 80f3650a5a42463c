"""The model before and after the kernel tables, on both validation sets, in one run.

Before: every row priced on the datasheet roofline (engine "other" for the published
development set, `kernels=False` for the serving runs). After: the defaults (each row's
engine, its kernel tables where they cover the GPU). Printed: median |error| and signed
median by source, by batch bucket and by engine (published speedups), and by engine, by
concurrency bucket and by (model, GPU, engine) (serving-run TPOT, runs below the prefill
floor left out as `validate --serving` leaves them out). Run: python bench/before_after.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simulator.inputs.catalog import default_models  # noqa: E402
from simulator.validation import published, serving_runs  # noqa: E402


def _stats(df: pd.DataFrame, key, err: str) -> pd.DataFrame:
    g = df.groupby(key, sort=True)[err]
    return pd.DataFrame(
        {
            "n": g.size(),
            "|err| %": 100 * g.apply(lambda e: e.abs().median()),
            "signed %": 100 * g.median(),
        }
    )


def _side_by_side(before: pd.DataFrame, after: pd.DataFrame, key, err: str) -> str:
    b, a = _stats(before, key, err), _stats(after, key, err)
    out = b.merge(
        a.drop(columns="n"), left_index=True, right_index=True, suffixes=(" before", " after")
    )
    return out.round(1).to_string()


def published_tables() -> None:
    rows = published.load_published(ROOT / "data/validation/published.csv")
    after = published.score(rows)
    before = published.score(rows.assign(engine="other"))
    before["engine"] = after["engine"].to_numpy()  # group by the engine the source used
    for e in (before, after):
        e["all"] = "all"
    print("published development set: predicted / published speedup - 1")
    for key in ("all", "source_id", "batch_bucket", "engine"):
        print(f"\nby {key}:\n{_side_by_side(before, after, key, 'error')}")


def serving_tables() -> None:
    runs = serving_runs.load_runs(serving_runs.bundled_runs_path(), default_models())
    after = serving_runs.score(runs)
    before = serving_runs.score(runs, kernels=False)
    kept = after["excluded"] == ""
    before, after = before[kept].assign(all="all"), after[kept].assign(all="all")
    for e in (before, after):
        e["concurrency"] = serving_runs._bucket(e["batch_size"])
    print(f"\nserving runs ({int(kept.sum())} of {len(kept)}): predicted / measured TPOT - 1")
    for key in ("all", "engine", "concurrency", ["target", "gpu", "engine"]):
        print(f"\nby {key}:\n{_side_by_side(before, after, key, 'tpot_error')}")


if __name__ == "__main__":
    pd.set_option("display.width", 200)
    published_tables()
    serving_tables()
