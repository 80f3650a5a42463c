"""The one prediction path: a scenario table in, the same table with outputs added.

Every step is a numpy expression over all rows at once, so a sweep of a million
scenarios costs what one costs in Python overhead.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd

from simulator import acceptance, drafts, economics, memory
from simulator.catalog import default_gpus, default_models
from simulator.defaults import DEFAULTS, ModelDefaults
from simulator.errors import InputError
from simulator.latency import Hardware, ModelArrays, get_model_step_ms
from simulator.scenarios import INPUT_COLUMNS, normalise_scenarios
from simulator.specs import DTYPE_BYTES, METHODS, GPUSpec, ModelSpec

OUTPUT_COLUMNS = (
    "alpha",
    "tau",
    "vllm_draft_acceptance_rate",
    "context_len",
    "target_step_ms",
    "draft_step_ms",
    "verify_step_ms",
    "spec_step_ms",
    "baseline_tpot_ms",
    "spec_tpot_ms",
    "speedup",
    "break_even_alpha",
    "baseline_tok_s",
    "spec_tok_s",
    "baseline_tok_s_per_user",
    "spec_tok_s_per_user",
    "tokens_per_step_p10",
    "tokens_per_step_p50",
    "tokens_per_step_p90",
    "weights_gb",
    "draft_weights_gb",
    "reserved_gb",
    "kv_cache_gb_baseline",
    "kv_cache_gb_spec",
    "kv_bytes_per_token",
    "draft_kv_bytes_per_token",
    "kv_capacity_tokens_baseline",
    "kv_capacity_tokens_spec",
    "max_concurrency_baseline",
    "max_concurrency_spec",
    "cost_per_mtok_baseline",
    "cost_per_mtok_spec",
    "latency_source",
    "fits",
    "warnings",
)
"""Outputs; units: ms, tokens/s (aggregate per replica unless per_user), GB = 2**30 bytes,
bytes per token, $ per 1M generated tokens."""

BLOCK_ROWS = 131_072
"""Rows per block of a large table. A block's float64 columns (1 MiB each) stay in cache
across the hundred-odd numpy passes, and blocks run on every core, since numpy releases
the GIL inside its loops: 1.8x faster than one block on two cores (bench/sweep.py)."""

SLOWDOWN_WARN = 1.0
LOW_ACCEPTANCE_WARN = 0.55
"""Below this per-token acceptance a draft rarely pays (the issue's rule of thumb)."""
HIGH_K_WARN = 8


def _strings(column: pd.Series) -> np.ndarray:
    """A Categorical text column as a fixed-width numpy string array (fast comparisons)."""
    cats = np.asarray(column.cat.categories, dtype=str)
    return cats[column.cat.codes.to_numpy()]


def _masks(column: pd.Series, names) -> dict[str, np.ndarray]:
    """Boolean mask per name for a Categorical column, compared once per category."""
    codes = column.cat.codes.to_numpy()
    cats = list(column.cat.categories)
    return {
        name: codes == cats.index(name) if name in cats else np.zeros(codes.size, bool)
        for name in names
    }


def _per_category(column: pd.Series, mapping: dict) -> np.ndarray:
    """Map a Categorical column through `mapping`, once per category."""
    values = np.array([mapping[c] for c in column.cat.categories], dtype=float)
    return values[column.cat.codes.to_numpy()]


def _index(ids: pd.Series, catalog: dict) -> tuple[list, np.ndarray]:
    keys = list(catalog)
    return keys, pd.Index(keys).get_indexer(ids)


def predict(
    scenarios: pd.DataFrame,
    *,
    gpus: dict[str, GPUSpec] | None = None,
    models: dict[str, ModelSpec] | None = None,
    defaults: ModelDefaults = DEFAULTS,
    calibration=None,
    source: str = "scenarios",
) -> pd.DataFrame:
    """Predict latency, throughput, memory and cost for every scenario row.

    `calibration` (a `simulator.calibration.Calibration`) replaces roofline step times by
    measured ones where a profile covers the point. Raises `InputError` on bad input.
    """
    gpus = default_gpus() if gpus is None else gpus
    models = default_models() if models is None else models
    if calibration is not None:
        gpus = {**gpus, **calibration.gpus}
    if not isinstance(scenarios, pd.DataFrame) or len(scenarios) <= BLOCK_ROWS:
        return _predict_block(scenarios, gpus, models, defaults, calibration, source, 0)
    starts = range(0, len(scenarios), BLOCK_ROWS)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        futures = [
            pool.submit(
                _predict_block,
                scenarios.iloc[i : i + BLOCK_ROWS],
                gpus,
                models,
                defaults,
                calibration,
                source,
                i,
            )
            for i in starts
        ]
        results, errors = [], []
        for f in futures:
            try:
                results.append(f.result())
            except InputError as exc:
                errors.append(exc)
    if errors:
        raise min(errors, key=lambda e: e.row or 0)
    return pd.concat(results, ignore_index=True)


def _predict_block(scenarios, gpus, models, defaults, calibration, source, row_offset):
    sc, positions = normalise_scenarios(
        scenarios, gpus, models, source=source, row_offset=row_offset
    )
    n = len(sc)

    model_keys, t_idx = _index(sc["target"], models)
    catalog_arrays = ModelArrays.from_specs([models[key] for key in model_keys] + [None])
    t = catalog_arrays.take(t_idx)
    d_codes = pd.Index(model_keys).get_indexer(sc["draft"])
    d = catalog_arrays.take(np.where(d_codes < 0, len(model_keys), d_codes))
    gpu_keys, g_idx = _index(sc["gpu"], gpus)
    g_specs = [gpus[key] for key in gpu_keys]

    method = _masks(sc["method"], METHODS)
    spec_on = ~method["none"]
    is_fp8 = _masks(sc["weight_dtype"], ("fp8",))["fp8"]
    wbytes = _per_category(sc["weight_dtype"], DTYPE_BYTES)
    kvbytes = _per_category(sc["kv_dtype"], DTYPE_BYTES)
    fp8_tflops = np.array([g.tflops_for("fp8") for g in g_specs])[g_idx]
    bf16_tflops = np.array([g.bf16_tflops for g in g_specs])[g_idx]
    hw = Hardware(
        bw_gbps=np.array([g.hbm_bandwidth_gbps for g in g_specs])[g_idx],
        tflops=np.where(is_fp8, fp8_tflops, bf16_tflops),
        link_gbps=np.array([g.interconnect_gbps for g in g_specs])[g_idx],
        num_gpus=sc["num_gpus"].to_numpy(dtype=float),
    )
    memory_gb = np.array([g.memory_gb for g in g_specs])[g_idx]

    k = sc["k"].to_numpy(dtype=float)
    batch = sc["batch_size"].to_numpy(dtype=float)
    prompt = sc["prompt_len"].to_numpy(dtype=float)
    output = sc["output_len"].to_numpy(dtype=float)
    verify = sc["verify_tokens"].to_numpy(dtype=float)
    context = prompt + output / 2.0

    # Acceptance: i.i.d. rows in closed form; rows with measured per-position rates on
    # their own (n, K) matrix.
    alpha_in = sc["acceptance_rate"].to_numpy(dtype=float)
    tau_in = sc["mean_accepted_tokens"].to_numpy(dtype=float)
    has_pos = spec_on & ~np.isnan(positions[:, 0])
    alpha = np.where(spec_on, alpha_in, np.nan)
    from_tau = spec_on & ~np.isnan(tau_in)
    alpha[from_tau] = acceptance.alpha_from_tau(tau_in[from_tau], k[from_tau])
    tau = np.where(spec_on, acceptance.tau_iid(np.nan_to_num(alpha), k), 1.0)
    tau[from_tau] = tau_in[from_tau]
    quantiles = {
        q: acceptance.tokens_per_step_quantile_iid(np.nan_to_num(alpha), k, q)
        for q in (0.1, 0.5, 0.9)
    }
    if has_pos.any():
        rows = np.flatnonzero(has_pos)
        pos = acceptance.extend_positions(
            np.nan_to_num(positions[rows], nan=0.0), int(k[rows].max())
        )
        tau[rows] = acceptance.tau_from_positions(pos, k[rows])
        alpha[rows] = acceptance.alpha_from_tau(tau[rows], k[rows])
        for q in quantiles:
            quantiles[q][rows] = acceptance.tokens_per_step_quantile(pos, k[rows], q)

    # Step times: roofline, or the profile's fit and measurements on a profiled device.
    over_t = defaults.forward_overhead_ms
    over_d = over_head = defaults.draft_forward_overhead_ms
    hw_d = hw
    if calibration is not None:
        target_ids, draft_ids, gpu_ids = (_strings(sc[c]) for c in ("target", "draft", "gpu"))
        wdtype = _strings(sc["weight_dtype"])
        hw_d = calibration.effective_hardware(gpu_ids, hw, defaults, draft_ids)
        hw = calibration.effective_hardware(gpu_ids, hw, defaults, target_ids)
        over_t = calibration.overhead_ms(gpu_ids, t.num_layers, over_t, target_ids)
        over_d = calibration.overhead_ms(gpu_ids, d.num_layers, over_d, draft_ids)
        over_head = calibration.overhead_ms(gpu_ids, 1.0, over_head, target_ids)
    t_step = get_model_step_ms(t, hw, batch, 1.0, context, wbytes, kvbytes, over_t, defaults)
    v_step = get_model_step_ms(t, hw, batch, verify, context, wbytes, kvbytes, over_t, defaults)
    d_model_step = get_model_step_ms(
        d, hw_d, batch, 1.0, context, wbytes, kvbytes, over_d, defaults
    )
    source_col = pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=["roofline"])
    d_round = None
    if calibration is not None:
        fitted = np.isin(gpu_ids, list(calibration.fits))
        tp_ids = hw.num_gpus

        def measured(ids, q, roof):
            ms, how = calibration.measured_ms(gpu_ids, ids, wdtype, tp_ids, batch, q, context)
            return np.where(np.isnan(ms), roof, ms), np.where(
                how != "", how, np.where(fitted, "fitted", "")
            )

        t_step, src_t = measured(target_ids, 1.0, t_step)
        v_step, src_v = measured(target_ids, verify, v_step)
        d_model_step, src_d = measured(draft_ids, 1.0, d_model_step)
        d_round = calibration.draft_round_ms(
            gpu_ids, target_ids, draft_ids, wdtype, tp_ids, batch, k, context
        )
        src_d = np.where(np.isnan(d_round), src_d, "in-loop")
        labels = calibration.describe(
            src_t, np.where(spec_on, src_v, ""), np.where(method["draft_model"], src_d, "")
        )
        source_col = pd.Categorical(np.where(labels == "", "roofline", labels))
    d_step = drafts.get_draft_step_ms(
        method,
        t,
        d,
        hw,
        batch,
        context,
        wbytes,
        kvbytes,
        k,
        defaults,
        draft_model_step_ms=d_model_step,
        head_overhead_ms=over_head,
        draft_model_round_ms=d_round,
    )
    spec_step = np.where(spec_on, d_step + v_step + defaults.verify_overhead_ms, t_step)
    speedup = tau * t_step / spec_step
    baseline_tpot = t_step
    spec_tpot = spec_step / tau
    baseline_tok_s = batch * 1e3 / baseline_tpot
    spec_tok_s = batch * 1e3 / spec_tpot

    # Memory.
    tp = hw.num_gpus
    weights = t.total_params * wbytes
    draft_weights = drafts.get_draft_params(method, t, d, k) * wbytes
    kv_t = memory.get_kv_bytes_per_token_arrays(t, kvbytes)
    kv_d = drafts.get_draft_kv_bytes_per_token(method, t, d, kvbytes)
    act = memory.get_activation_reserve_bytes(t, tp, defaults)
    reserved = tp * (
        act
        + (defaults.non_torch_reserve_gb + defaults.cuda_graph_reserve_gb)
        * defaults.hbm_bytes_per_gb
    )
    util = sc["gpu_memory_utilization"].to_numpy(dtype=float)
    usable_base = memory.get_usable_kv_bytes(memory_gb, tp, weights, act, util, defaults)
    usable_spec = memory.get_usable_kv_bytes(
        memory_gb, tp, weights + draft_weights, act, util, defaults
    )
    kv_rep_t = memory.get_replica_kv_bytes_per_token(t, kv_t, tp)
    kv_rep_d = np.where(
        method["draft_model"],
        memory.get_replica_kv_bytes_per_token(d, kv_d, tp),
        memory.get_replica_kv_bytes_per_token(t, kv_d, tp),
    )
    cap_base = memory.get_token_capacity(usable_base, kv_rep_t)
    cap_spec = memory.get_token_capacity(usable_spec, kv_rep_t + kv_rep_d)
    conc_base = memory.get_max_concurrency(cap_base, prompt, output, 0)
    conc_spec = memory.get_max_concurrency(cap_spec, prompt, output, k)
    conc_spec = np.where(spec_on, conc_spec, conc_base)
    fits = np.where(spec_on, batch <= conc_spec, batch <= conc_base)

    price = sc["gpu_hourly_usd"].to_numpy(dtype=float)
    cost_base = economics.get_cost_per_mtok(price, tp, baseline_tok_s)
    cost_spec = economics.get_cost_per_mtok(price, tp, spec_tok_s)

    warnings = _warnings(sc, models, spec_on, method, k, alpha, speedup, fits, usable_spec, has_pos)
    gb = defaults.hbm_bytes_per_gb
    out = sc
    extra = {
        "alpha": alpha,
        "tau": tau,
        "vllm_draft_acceptance_rate": acceptance.draft_acceptance_rate(tau, k),
        "context_len": context,
        "target_step_ms": t_step,
        "draft_step_ms": np.where(spec_on, d_step, 0.0),
        "verify_step_ms": np.where(spec_on, v_step, 0.0),
        "spec_step_ms": spec_step,
        "baseline_tpot_ms": baseline_tpot,
        "spec_tpot_ms": spec_tpot,
        "speedup": speedup,
        "break_even_alpha": _break_even_alpha(spec_on, spec_step, t_step, k),
        "baseline_tok_s": baseline_tok_s,
        "spec_tok_s": spec_tok_s,
        "baseline_tok_s_per_user": 1e3 / baseline_tpot,
        "spec_tok_s_per_user": 1e3 / spec_tpot,
        "tokens_per_step_p10": quantiles[0.1],
        "tokens_per_step_p50": quantiles[0.5],
        "tokens_per_step_p90": quantiles[0.9],
        "weights_gb": weights / gb,
        "draft_weights_gb": draft_weights / gb,
        "reserved_gb": reserved / gb,
        "kv_cache_gb_baseline": np.maximum(usable_base, 0.0) / gb,
        "kv_cache_gb_spec": np.maximum(usable_spec, 0.0) / gb,
        "kv_bytes_per_token": kv_t,
        "draft_kv_bytes_per_token": kv_d,
        "kv_capacity_tokens_baseline": cap_base,
        "kv_capacity_tokens_spec": cap_spec,
        "max_concurrency_baseline": conc_base,
        "max_concurrency_spec": conc_spec,
        "cost_per_mtok_baseline": cost_base,
        "cost_per_mtok_spec": cost_spec,
        "latency_source": source_col,
        "fits": fits,
        "warnings": warnings,
    }
    columns = {
        c: out[c].to_numpy() if out[c].dtype.kind in "biuf" else out[c].array for c in INPUT_COLUMNS
    }
    return pd.DataFrame({**columns, **extra}, copy=False)


def _break_even_alpha(spec_on, spec_step, t_step, k):
    """The i.i.d. acceptance at which this row's speculation exactly breaks even.

    Break-even needs tau = spec_step / target_step; beyond K+1 no acceptance suffices
    (reported as inf).
    """
    need = np.where(spec_on, spec_step / t_step, np.nan)
    out = np.full(need.shape, np.nan)
    ok = spec_on & (need <= k + 1)
    # Eight Newton steps: break-even needs 1e-6, not float precision.
    out[ok] = acceptance.alpha_from_tau(np.maximum(need[ok], 1.0), k[ok], iterations=8)
    out[spec_on & ~ok] = np.inf
    return out


def _warnings(sc, models, spec_on, method, k, alpha, speedup, fits, usable_spec, has_pos):
    n = len(sc)
    tok = {mid: m.tokenizer for mid, m in models.items()}
    t_tok = np.array([tok.get(c, "") for c in sc["target"].cat.categories], dtype=object)[
        sc["target"].cat.codes.to_numpy()
    ]
    d_tok = np.array([tok.get(c, "") for c in sc["draft"].cat.categories], dtype=object)[
        sc["draft"].cat.codes.to_numpy()
    ]
    rules = [
        (
            method["draft_model"] & (t_tok != d_tok),
            "draft and target tokenizers differ: speculation impossible",
        ),
        (
            spec_on & (k > HIGH_K_WARN),
            f"K above {HIGH_K_WARN}: acceptance decays with position, deep drafts rarely pay",
        ),
        (
            spec_on & (alpha < LOW_ACCEPTANCE_WARN),
            f"acceptance below {LOW_ACCEPTANCE_WARN}: speculation seldom pays",
        ),
        (usable_spec <= 0, "does not fit in memory: weights and reserves exceed the GPUs"),
        ((usable_spec > 0) & ~fits, "batch does not fit in the KV cache"),
        (
            spec_on & (speedup < SLOWDOWN_WARN),
            "speculation is slower than the baseline at this batch",
        ),
    ]
    # Combine as a bit pattern, then spell each distinct pattern once.
    bits = np.zeros(n, dtype=np.int64)
    for i, (mask, _) in enumerate(rules):
        bits |= np.asarray(mask, dtype=np.int64) << i
    labels = [
        "; ".join(msg for i, (_, msg) in enumerate(rules) if p >> i & 1)
        for p in range(2 ** len(rules))
    ]
    return pd.Categorical.from_codes(bits, categories=labels)
