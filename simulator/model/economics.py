"""Money: $ per million tokens, replicas for a demand, monthly cost, saving and payback.

Prices in US dollars, throughputs in tokens per second, demand in requests per day.
"""

from __future__ import annotations

import numpy as np

from simulator.model.defaults import DEFAULTS


def get_cost_per_mtok(hourly_usd_per_gpu, num_gpus, tok_s):
    """Dollars per million generated tokens: hourly * gpus / (tok_s * 3600) * 1e6."""
    tok_s = np.asarray(tok_s, dtype=float)
    hourly = np.asarray(hourly_usd_per_gpu, dtype=float) * np.asarray(num_gpus)
    return np.where(tok_s > 0, hourly / (np.where(tok_s > 0, tok_s, 1.0) * 3600.0) * 1e6, np.inf)


def get_demand_tok_s(requests_per_day, output_len):
    """Average generated tokens per second for a daily request count."""
    return np.asarray(requests_per_day, dtype=float) * np.asarray(output_len) / 86400.0


def get_replicas_needed(demand_tok_s, tok_s_per_replica):
    """Whole replicas needed to serve the demand (at least one)."""
    per = np.asarray(tok_s_per_replica, dtype=float)
    need = np.ceil(np.asarray(demand_tok_s) / np.where(per > 0, per, np.nan))
    return np.maximum(need, 1.0)


def get_monthly_cost(hourly_usd_per_gpu, num_gpus, replicas, hours=DEFAULTS.hours_per_month):
    """Dollars per month for `replicas` replicas of `num_gpus` GPUs running all month."""
    return np.asarray(hourly_usd_per_gpu) * np.asarray(num_gpus) * np.asarray(replicas) * hours


def get_payback_months(one_off_usd, monthly_saving_usd):
    """Months until a one-off migration cost is repaid; inf when nothing is saved, NaN
    when the saving is unknown (no GPU price)."""
    saving = np.asarray(monthly_saving_usd, dtype=float)
    months = np.where(
        saving > 0, np.asarray(one_off_usd) / np.where(saving > 0, saving, 1.0), np.inf
    )
    return np.where(np.isnan(saving), np.nan, months)
