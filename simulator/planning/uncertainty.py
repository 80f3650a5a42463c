"""The model's validated error carried to the figures a user acts on: replicas, $ per
month, $ per 1M tokens, the monthly saving and the payback, each as a (low, high) range.

The error is the median |relative error| of the predicted speedup against the published
measurements (`simulator.validation.published.score`) in the batch's bucket (1, 2-16, >16): the
figure the Validation page shows by batch. The baseline's throughput is taken as known and
the speculative throughput as spec_tok_s x (1 -/+ error), the way the speedup's error
moves it. Money in US dollars, throughput in tokens per second.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from simulator.model import economics
from simulator.model.defaults import DEFAULTS
from simulator.validation.published import BATCH_BUCKETS


def get_speedup_error_by_batch(batches, scored: pd.DataFrame) -> np.ndarray:
    """Relative error (a fraction) of the predicted speedup at each batch: the median
    |error| of `scored`'s cases (`published.score` output) in the batch's bucket, the
    median over all of them where the bucket has none; NaN where nothing is scored."""
    b = np.asarray(batches, dtype=float)
    ok = scored[scored["predicted_speedup"].notna()]
    if not len(ok):
        return np.full(b.shape, np.nan)
    by_bucket = ok.groupby("batch_bucket")["abs_error"].median().to_dict()
    width = np.full(b.shape, float(ok["abs_error"].median()))
    for lo, hi, label in BATCH_BUCKETS:
        if label in by_bucket:
            width[(b >= lo) & (b <= hi)] = by_bucket[label]
    return width


@dataclass(frozen=True)
class MoneyRange:
    """Each figure at the low and the high end of the speculative throughput's range
    (arrays, one value per row). `low`/`high` name the end of the throughput, so the cost
    columns run the other way: `monthly_cost_spec_usd[0]` is the cost at the low
    throughput, the higher cost."""

    spec_tok_s: tuple[np.ndarray, np.ndarray]
    replicas_spec: tuple[np.ndarray, np.ndarray]
    monthly_cost_spec_usd: tuple[np.ndarray, np.ndarray]
    monthly_saving_usd: tuple[np.ndarray, np.ndarray]
    cost_per_mtok_spec: tuple[np.ndarray, np.ndarray]
    fractional_saving_usd: tuple[np.ndarray, np.ndarray]
    """$ per month saved at fractional capacity: the $/1M saving times the tokens a month."""


def get_money_range(
    *,
    demand_tok_s,
    baseline_tok_s,
    spec_tok_s,
    hourly_usd_per_gpu,
    num_gpus,
    error,
    hours=DEFAULTS.hours_per_month,
    acceptance_ends=None,
) -> MoneyRange:
    """The money figures with the speculative throughput at spec_tok_s x (1 - error) and
    x (1 + error); the baseline's as predicted. `acceptance_ends`, the speculative
    throughput at the low and high end of the acceptance's own band, widens the range:
    low end x (1 - error), high end x (1 + error). Whole replicas as `economics` counts
    them."""
    err = np.clip(np.asarray(error, dtype=float), 0.0, 0.99)
    spec = np.asarray(spec_tok_s, dtype=float)
    lo, hi = (spec, spec) if acceptance_ends is None else map(np.asarray, acceptance_ends)
    ends = (np.minimum(lo, spec) * (1 - err), np.maximum(hi, spec) * (1 + err))
    base_rep = economics.get_replicas_needed(demand_tok_s, baseline_tok_s)
    base_cost = economics.get_monthly_cost(hourly_usd_per_gpu, num_gpus, base_rep, hours)
    base_mtok = economics.get_cost_per_mtok(hourly_usd_per_gpu, num_gpus, baseline_tok_s)
    mtok_month = np.asarray(demand_tok_s, dtype=float) * 3600.0 * hours / 1e6
    reps, costs, savings, per_mtok, fractional = [], [], [], [], []
    for tok_s in ends:
        rep = economics.get_replicas_needed(demand_tok_s, tok_s)
        cost = economics.get_monthly_cost(hourly_usd_per_gpu, num_gpus, rep, hours)
        mtok = economics.get_cost_per_mtok(hourly_usd_per_gpu, num_gpus, tok_s)
        reps.append(rep)
        costs.append(cost)
        per_mtok.append(mtok)
        with np.errstate(invalid="ignore"):  # inf - inf where neither arm runs: NaN
            savings.append(base_cost - cost)
            fractional.append((base_mtok - mtok) * mtok_month)
    return MoneyRange(
        spec_tok_s=ends,
        replicas_spec=tuple(reps),
        monthly_cost_spec_usd=tuple(costs),
        monthly_saving_usd=tuple(savings),
        cost_per_mtok_spec=tuple(per_mtok),
        fractional_saving_usd=tuple(fractional),
    )


def get_payback_range(one_off_usd, saving: tuple[np.ndarray, np.ndarray]):
    """(shortest, longest) payback in months for a (low-end, high-end) monthly saving;
    inf where that end saves nothing."""
    months = [economics.get_payback_months(one_off_usd, s) for s in saving]
    return np.minimum(*months), np.maximum(*months)


def get_paying_batches(batches, speedup, error) -> np.ndarray:
    """Where speculation pays even at the model's low end: speedup x (1 - error) > 1."""
    s = np.asarray(speedup, dtype=float) * (1 - np.asarray(error, dtype=float))
    return np.asarray(batches)[np.isfinite(s) & (s > 1.0)]
