"""How far the depth extrapolation is from a full-depth measurement of the same model.

`python -m profiler check-extrapolation --target ID --depths 1,2,4` runs the shallow depths
and the full depth at every grid point; the table compares the fitted full-depth median with
the measured one.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from profiler.runner import ModelRun
from simulator.inputs.specs import ModelSpec


def extrapolation_errors(run: ModelRun) -> pd.DataFrame:
    """One row per grid point measured at full depth: measured and extrapolated median (ms),
    the signed error of the extrapolation in percent of the measurement, the same for p10,
    and the measured p90/p10 spread."""
    full = run.spec.num_layers
    fitted = {(r["batch"], r["query_len"], r["context_len"]): r for r in run.rows}
    rows = []
    for key, by_depth in run.by_depth.items():
        measured = by_depth.get(full)
        row = fitted.get(key)
        if measured is None or not measured.ok or row is None or row["status"] != "ok":
            continue
        m, e = measured.stats.median_ms, row["median_ms"]
        m10, e10 = measured.stats.p10_ms, row["p10_ms"]
        rows.append(
            {
                "batch": key[0],
                "query_len": key[1],
                "context_len": key[2],
                "measured_ms": m,
                "extrapolated_ms": e,
                "error_pct": 100.0 * (e - m) / m,
                # Contention on a shared machine only adds time, so the fast tail (p10) is
                # the steadier comparison there.
                "error_p10_pct": 100.0 * (e10 - m10) / m10,
                "spread_p90_p10": measured.stats.p90_ms / m10,
            }
        )
    return pd.DataFrame(rows)


def summary_lines(table: pd.DataFrame, spec: ModelSpec, depths: tuple[int, ...]) -> list[str]:
    if table.empty:
        return ["no point was measured at full depth"]
    err = table["error_pct"].abs()
    return [
        f"{spec.id}: depths {','.join(map(str, depths))} -> {spec.num_layers} layers, "
        f"{len(table)} points",
        f"extrapolation error |median|: median {np.median(err):.1f}%, "
        f"mean {err.mean():.1f}%, max {err.max():.1f}%",
        f"signed error: mean {table['error_pct'].mean():+.1f}%",
        f"extrapolation error |p10|: median {np.median(table['error_p10_pct'].abs()):.1f}%, "
        f"max {table['error_p10_pct'].abs().max():.1f}%",
        f"measured repeat spread p90/p10: median {table['spread_p90_p10'].median():.2f}",
    ]
