"""Sizing reports: the prediction table with economics and the pre-flight verdict added,
written as CSV with units in the headers (`speedup [x]`, `spec_tpot_ms [ms]`), and read
back; plus the launch configuration as plain text. Pure pandas.

Money in US dollars, throughput in tokens per second, memory in GiB (2**30 bytes).
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Mapping

import numpy as np
import pandas as pd

from simulator.errors import InputError
from simulator.inputs.specs import ModelSpec
from simulator.model import economics
from simulator.planning.preflight import checklist

ECONOMICS_COLUMNS = (
    "requests_per_day",
    "demand_tok_s",
    "replicas_baseline",
    "replicas_spec",
    "monthly_cost_baseline_usd",
    "monthly_cost_spec_usd",
    "monthly_saving_usd",
)
"""Columns `add_economics` appends: demand from requests per day, whole replicas to serve
it before and after speculation, and what they cost per month."""

MAX_REQUESTS_PER_DAY = 1e12
"""Most requests per day a report prices: a bound far above any deployment that keeps the
demand (requests/day x output tokens / 86,400) and the costs finite; 1e308 gave an
infinite demand and a NaN saving."""


def requests_per_day_ok(values) -> np.ndarray:
    """Where a requests-per-day figure is one a report prices: finite, 0 to
    `MAX_REQUESTS_PER_DAY`."""
    values = np.asarray(values, dtype=float)
    return np.isfinite(values) & (values >= 0) & (values <= MAX_REQUESTS_PER_DAY)


UNITS: dict[str, str] = {
    "num_gpus": "GPUs",
    "tp_size": "GPUs",
    "attention_dp_size": "ranks",
    "moe_tp_size": "GPUs",
    "moe_ep_size": "GPUs",
    "k": "tokens",
    "acceptance_rate": "0-1",
    "mean_accepted_tokens": "tokens/step",
    "acceptance_per_position": "0-1 per position",
    "verify_tokens": "tokens",
    "batch_size": "seqs",
    "prompt_len": "tokens",
    "output_len": "tokens",
    "gpu_hourly_usd": "$/GPU-hour",
    "gpu_memory_utilization": "0-1",
    "alpha": "0-1",
    "tau": "tokens/step",
    "vllm_draft_acceptance_rate": "0-1",
    "context_len": "tokens",
    "target_step_ms": "ms",
    "draft_step_ms": "ms",
    "verify_step_ms": "ms",
    "spec_step_ms": "ms",
    "baseline_tpot_ms": "ms",
    "spec_tpot_ms": "ms",
    "speedup": "x",
    "break_even_alpha": "0-1",
    "baseline_tok_s": "tok/s per replica",
    "spec_tok_s": "tok/s per replica",
    "baseline_tok_s_per_user": "tok/s",
    "spec_tok_s_per_user": "tok/s",
    "tokens_per_step_p10": "tokens",
    "tokens_per_step_p50": "tokens",
    "tokens_per_step_p90": "tokens",
    "weights_gb": "GiB",
    "draft_weights_gb": "GiB",
    "reserved_gb": "GiB",
    "kv_cache_gb_baseline": "GiB",
    "kv_cache_gb_spec": "GiB",
    "kv_bytes_per_token": "bytes/token",
    "draft_kv_bytes_per_token": "bytes/token",
    "kv_capacity_tokens_baseline": "tokens",
    "kv_capacity_tokens_spec": "tokens",
    "max_concurrency_baseline": "seqs",
    "max_concurrency_spec": "seqs",
    "cost_per_mtok_baseline": "$/1M tokens",
    "cost_per_mtok_spec": "$/1M tokens",
    "fits": "bool",
    "requests_per_day": "requests/day",
    "demand_tok_s": "tok/s",
    "replicas_baseline": "replicas",
    "replicas_spec": "replicas",
    "monthly_cost_baseline_usd": "$/month",
    "monthly_cost_spec_usd": "$/month",
    "monthly_saving_usd": "$/month",
    "medusa_heads": "heads",
    "mtp_depth": "tokens",
    "draft_context_len": "tokens",
    "max_num_seqs": "requests",
    "request_rate": "requests/s",
    "temperature": "sampling temperature",
    "effective_batch_baseline": "seqs",
    "effective_batch_spec": "seqs",
    "prefill_tokens_per_step_baseline": "tokens/step",
    "prefill_tokens_per_step_spec": "tokens/step",
    "prefill_ms_baseline": "ms",
    "prefill_ms_spec": "ms",
    "engine_ms_baseline": "ms",
    "engine_ms_spec": "ms",
    "baseline_step_ms": "ms",
    "speedup_error": "0-1",
    "speedup_low": "x",
    "speedup_high": "x",
    "alpha_low": "0-1",
    "alpha_high": "0-1",
    "spec_tok_s_at_alpha_low": "tok/s per replica",
    "spec_tok_s_at_alpha_high": "tok/s per replica",
    "replicas_spec_low": "replicas",
    "replicas_spec_high": "replicas",
    "monthly_cost_spec_low_usd": "$/month",
    "monthly_cost_spec_high_usd": "$/month",
    "monthly_saving_low_usd": "$/month",
    "monthly_saving_high_usd": "$/month",
}
"""Unit of every numeric report column; text columns (ids, warnings) carry none."""

_UNIT_SUFFIX = re.compile(r"\s*\[[^\]]*\]\s*$")


def add_economics(predictions: pd.DataFrame, requests_per_day) -> pd.DataFrame:
    """Append `ECONOMICS_COLUMNS` to a `predict` output.

    `requests_per_day` is a scalar or one value per row; the demand in tokens per second
    is requests/day x output_len / 86400, served by whole replicas of `num_gpus` GPUs.
    """
    out = predictions.copy()
    rpd = np.broadcast_to(np.asarray(requests_per_day, dtype=float), (len(out),))
    bad = ~requests_per_day_ok(rpd)
    if bad.any():
        i = int(bad.argmax())
        raise InputError(
            f"{rpd[i]:g} is outside 0..{MAX_REQUESTS_PER_DAY:g} requests per day",
            row=i + 1 if np.ndim(requests_per_day) else None,
            field="requests_per_day",
        )
    demand = economics.get_demand_tok_s(rpd, out["output_len"].to_numpy(dtype=float))
    price = out["gpu_hourly_usd"].to_numpy(dtype=float)
    gpus = out["num_gpus"].to_numpy(dtype=float)
    rep_base = economics.get_replicas_needed(demand, out["baseline_tok_s"].to_numpy(dtype=float))
    rep_spec = economics.get_replicas_needed(demand, out["spec_tok_s"].to_numpy(dtype=float))
    cost_base = economics.get_monthly_cost(price, gpus, rep_base)
    cost_spec = economics.get_monthly_cost(price, gpus, rep_spec)
    out["requests_per_day"] = rpd
    out["demand_tok_s"] = demand
    out["replicas_baseline"] = rep_base
    out["replicas_spec"] = rep_spec
    out["monthly_cost_baseline_usd"] = cost_base
    out["monthly_cost_spec_usd"] = cost_spec
    out["monthly_saving_usd"] = cost_base - cost_spec
    return out


ERROR_RANGE_COLUMNS = (
    "speedup_error",
    "speedup_low",
    "speedup_high",
    "replicas_spec_low",
    "replicas_spec_high",
    "monthly_cost_spec_low_usd",
    "monthly_cost_spec_high_usd",
    "monthly_saving_low_usd",
    "monthly_saving_high_usd",
)
"""Columns `add_error_ranges` appends: the model's validated relative error of the speedup
at the row's batch, and the speedup, speculative replicas, cost and saving at either end
of it and of the acceptance's band (`low`/`high`: the smaller and the larger figure)."""
ACCEPTANCE_END_COLUMNS = (
    "alpha_low",
    "alpha_high",
    "acceptance_band",
    "spec_tok_s_at_alpha_low",
    "spec_tok_s_at_alpha_high",
)
"""Columns `add_error_ranges` copies from its `acceptance` frame: the band's two ends
(fractions), where it comes from, and the speculative tokens/s priced at each end."""


def add_error_ranges(report: pd.DataFrame, error, acceptance=None) -> pd.DataFrame:
    """Append `ERROR_RANGE_COLUMNS` to an `add_economics` output; `error` is the relative
    error of the speedup per row (`uncertainty.get_speedup_error_by_batch`). `acceptance`,
    a frame on the same index with `ACCEPTANCE_END_COLUMNS` and `speedup_at_alpha_low/high`
    (the row priced at the band's ends; NaN where the band is a point), widens each range by the acceptance's own band. Rows without speculation get
    NaN: the error is the speedup's."""
    from simulator.planning.uncertainty import get_money_range

    out = report.copy()
    err = np.broadcast_to(np.asarray(error, dtype=float), (len(out),)).copy()
    err[out["method"].astype(str).eq("none").to_numpy()] = np.nan
    speedup = out["speedup"].to_numpy(dtype=float)
    spec = out["spec_tok_s"].to_numpy(dtype=float)

    def at(column: str, own: np.ndarray) -> np.ndarray:
        if acceptance is None or column not in acceptance:
            return own
        got = acceptance[column].reindex(out.index).to_numpy(dtype=float)
        return np.where(np.isfinite(got), got, own)

    ends = (at("spec_tok_s_at_alpha_low", spec), at("spec_tok_s_at_alpha_high", spec))
    r = get_money_range(
        demand_tok_s=out["demand_tok_s"].to_numpy(dtype=float),
        baseline_tok_s=out["baseline_tok_s"].to_numpy(dtype=float),
        spec_tok_s=spec,
        hourly_usd_per_gpu=out["gpu_hourly_usd"].to_numpy(dtype=float),
        num_gpus=out["num_gpus"].to_numpy(dtype=float),
        error=np.nan_to_num(err),
        acceptance_ends=ends,
    )
    keep = np.isfinite(err)
    out["speedup_error"] = err
    low = np.fmin(speedup, at("speedup_at_alpha_low", speedup)) * (1 - np.nan_to_num(err))
    high = np.fmax(speedup, at("speedup_at_alpha_high", speedup)) * (1 + np.nan_to_num(err))
    out["speedup_low"] = np.where(keep, low, np.nan)
    out["speedup_high"] = np.where(keep, high, np.nan)
    for name, (at_low, at_high) in (
        ("replicas_spec", r.replicas_spec),
        ("monthly_cost_spec", r.monthly_cost_spec_usd),
        ("monthly_saving", r.monthly_saving_usd),
    ):
        unit = "" if name == "replicas_spec" else "_usd"
        out[f"{name}_low{unit}"] = np.where(keep, np.fmin(at_low, at_high), np.nan)
        out[f"{name}_high{unit}"] = np.where(keep, np.fmax(at_low, at_high), np.nan)
    if acceptance is not None:
        for column in ACCEPTANCE_END_COLUMNS:
            if column in acceptance:
                out[column] = acceptance[column].reindex(out.index)
    return out


def preflight_summary(row: Mapping, models: dict[str, ModelSpec]) -> str:
    """One cell for a report: the worst status, then every amber or red item with its why."""
    items = checklist(row, models)
    order = {"green": 0, "amber": 1, "red": 2}
    worst = max(items, key=lambda c: order[c.status]).status
    notes = [f"{c.status}: {c.name} ({c.why})" for c in items if c.status != "green"]
    return worst if not notes else f"{worst} | " + " | ".join(notes)


def add_preflight(predictions: pd.DataFrame, models: dict[str, ModelSpec]) -> pd.DataFrame:
    """Append a `preflight` text column (see `preflight_summary`)."""
    out = predictions.copy()
    out["preflight"] = [preflight_summary(r, models) for r in out.to_dict("records")]
    return out


def header(column: str) -> str:
    """`speedup` -> `speedup [x]`; text columns keep their bare name."""
    unit = UNITS.get(column)
    return f"{column} [{unit}]" if unit else column


def strip_unit(header_text: str) -> str:
    """`speedup [x]` -> `speedup`."""
    return _UNIT_SUFFIX.sub("", str(header_text)).strip()


def report_csv(table: pd.DataFrame) -> str:
    """The report as CSV text: every column, units in the headers, full float precision
    (pandas writes the shortest repr that reads back to the same float)."""
    out = table.copy()
    for col in out.columns:
        if isinstance(out[col].dtype, pd.CategoricalDtype):
            out[col] = out[col].astype(str)
    out.columns = [header(c) for c in out.columns]
    buf = io.StringIO()
    out.to_csv(buf, index=False, lineterminator="\n")
    return buf.getvalue()


def read_report_csv(text: str) -> pd.DataFrame:
    """Read a report written by `report_csv`; headers lose their units again."""
    df = pd.read_csv(io.StringIO(text), keep_default_na=True)
    df.columns = [strip_unit(c) for c in df.columns]
    return df


ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM", "other": "other"}
"""Each engine's name as its project writes it."""
ENGINE_LABELS = {
    **ENGINE_NAMES,
    "other": "vLLM (the reference form: engine 'other' has no launch flags of its own)",
}
"""Section heading of each `engine` column value's launch command."""


def launch_config_text(
    *,
    title: str,
    vllm: str = "",
    sglang: str = "",
    engine: str = "",
    command: str = "",
    vllm_schedule: list[list[int]] | None = None,
    trtllm_schedule: dict[int, int] | None = None,
    cannot_run: str | None = None,
) -> str:
    """A launch configuration file: a comment line per section, then the command or the
    JSON value to paste, so that each section can be copied as it stands. With `engine`
    and `command` (`simulator.planning.launch.engine_command`'s) it holds that engine's
    command alone, the one the row was priced for; otherwise the `vllm` and `sglang` pair.
    `cannot_run`, the status of a row that cannot run, replaces the commands with that
    reason: an engine would refuse them or fail at start-up."""
    if cannot_run:
        return "\n".join(
            [f"# SpecPlan launch configuration: {title}", f"# No command: {cannot_run}.", ""]
        )
    parts = [f"# SpecPlan launch configuration: {title}", ""]
    if engine:
        parts += [f"# {ENGINE_LABELS.get(engine, engine)}", command, ""]
    else:
        parts += ["# vLLM", vllm, "", "# SGLang", sglang, ""]
    if vllm_schedule:
        parts += [
            "# vLLM speculative_config.num_speculative_tokens_per_batch_size "
            "([[batch_lo, batch_hi, K], ...]; K = 0 turns speculation off)",
            json.dumps(vllm_schedule),
            "",
        ]
    if trtllm_schedule:
        parts += [
            "# TensorRT-LLM draft_len_schedule ({batch size upper bound: draft length})",
            json.dumps({str(k): v for k, v in trtllm_schedule.items()}),
            "",
        ]
    return "\n".join(parts)
