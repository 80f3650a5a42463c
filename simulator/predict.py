"""The one prediction path: a scenario table in, the same table with outputs added.

Every step is a numpy expression over all rows at once, so a sweep of a million
scenarios costs what one costs in Python overhead.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from simulator import acceptance, drafts, economics, memory, steady
from simulator.catalog import default_gpus, default_models, method_decays
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
    "effective_batch_baseline",
    "effective_batch_spec",
    "prefill_tokens_per_step_baseline",
    "prefill_tokens_per_step_spec",
    "target_step_ms",
    "draft_step_ms",
    "verify_step_ms",
    "prefill_ms_baseline",
    "prefill_ms_spec",
    "engine_ms_baseline",
    "engine_ms_spec",
    "baseline_step_ms",
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
    "status",
    "warnings",
)
"""Outputs; units: ms, tokens/s (aggregate per replica unless per_user), GB = 2**30 bytes,
bytes per token, $ per 1M generated tokens. `status` is "ok" or why the setup cannot run;
a row that cannot run has NaN speedup, throughput, TPOT and cost for the arm that cannot."""

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
        sharpness=defaults.roofline_sharpness,
    )
    memory_gb = np.array([g.memory_gb for g in g_specs])[g_idx]

    k = sc["k"].to_numpy(dtype=float)
    batch = sc["batch_size"].to_numpy(dtype=float)
    prompt = sc["prompt_len"].to_numpy(dtype=float)
    output = sc["output_len"].to_numpy(dtype=float)
    verify = sc["verify_tokens"].to_numpy(dtype=float)
    context = prompt + output / 2.0
    heads = sc["medusa_heads"].to_numpy(dtype=float)
    mtp_depth = sc["mtp_depth"].to_numpy(dtype=float)
    draft_window = sc["draft_context_len"].to_numpy(dtype=float)
    d_context = np.where(np.isnan(draft_window), context, np.minimum(context, draft_window))

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
        pos = _extend_measured(
            positions[rows], k[rows], _strings(sc["method"])[rows], mtp_depth[rows]
        )
        tau[rows] = acceptance.tau_from_positions(pos, k[rows])
        alpha[rows] = acceptance.alpha_from_tau(tau[rows], k[rows])
        for q in quantiles:
            quantiles[q][rows] = acceptance.tokens_per_step_quantile(pos, k[rows], q)

    # Memory, and the batch that actually runs: KV capacity caps it, the rest queue.
    tp = hw.num_gpus
    weights = t.total_params * wbytes
    # A draft model that is the target itself (self-speculation with a compressed cache,
    # as MagicDec runs it) shares the target's weights.
    self_draft = method["draft_model"] & (d_codes == t_idx)
    draft_weights = np.where(
        self_draft, 0.0, drafts.get_draft_params(method, t, d, k, heads, mtp_depth) * wbytes
    )
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
    ) * (d_context / context)
    cap_base = memory.get_token_capacity(usable_base, kv_rep_t)
    cap_spec = memory.get_token_capacity(usable_spec, kv_rep_t + kv_rep_d)
    lookahead = np.where(
        method["draft_model"] | method["eagle"] | method["eagle3"] | method["mtp"], k, 0.0
    )
    conc_base = memory.get_max_concurrency(cap_base, prompt, output, 0)
    conc_spec = memory.get_max_concurrency(cap_spec, prompt, output, lookahead)
    conc_spec = np.where(spec_on, conc_spec, conc_base)
    fits = np.where(spec_on, batch <= conc_spec, batch <= conc_base)
    seqs = defaults.max_num_seqs
    rate = sc["request_rate"].to_numpy(dtype=float)
    open_loop = ~np.isnan(rate)
    batch = np.where(open_loop, np.inf, batch)
    run_base = steady.get_effective_batch(
        batch, steady.get_sustained_batch(cap_base, prompt, output, 0.0), seqs
    )
    run_spec = steady.get_effective_batch(
        batch, steady.get_sustained_batch(cap_spec, prompt, output, lookahead), seqs
    )
    run_spec = np.where(spec_on, run_spec, run_base)
    b_base = np.maximum(run_base, 1.0)
    b_spec = np.maximum(run_spec, 1.0)

    # Step times: roofline, or the profile's fit and measurements on a profiled device.
    over_t = defaults.forward_overhead_ms
    over_d = defaults.draft_forward_overhead_ms
    over_head = defaults.head_forward_overhead_ms
    hw_d = hw
    if calibration is not None:
        target_ids, draft_ids, gpu_ids = (_strings(sc[c]) for c in ("target", "draft", "gpu"))
        wdtype = _strings(sc["weight_dtype"])
        hw_d = calibration.effective_hardware(gpu_ids, hw, defaults, draft_ids)
        hw = calibration.effective_hardware(gpu_ids, hw, defaults, target_ids)
        over_t = calibration.overhead_ms(gpu_ids, t.num_layers, over_t, target_ids)
        over_d = calibration.overhead_ms(gpu_ids, d.num_layers, over_d, draft_ids)
        over_head = calibration.overhead_ms(gpu_ids, 1.0, over_head, target_ids)
    in_steady = _masks(sc["serving"], ("steady",))["steady"]
    sampled = sc["temperature"].to_numpy(dtype=float) > 0
    draft_forwards = np.where(method["draft_model"], k, 0.0)

    def spec_prefill_ms(tokens):
        """Prefill time per speculative step: the target's and the draft's."""
        return steady.get_prefill_ms(
            t,
            tokens,
            prompt,
            hw.tflops,
            hw.link_gbps,
            tp,
            defaults,
            efficiency=hw.prefill_efficiency,
        ) + drafts.get_draft_prefill_ms(method, t, d, hw_d, tokens, prompt, defaults)

    def price(b_base, b_spec):
        """Every per-step time at the batches that run (ms), and the latency sources."""
        t_step = get_model_step_ms(t, hw, b_base, 1.0, context, wbytes, kvbytes, over_t, defaults)
        v_step = get_model_step_ms(
            t, hw, b_spec, verify, context, wbytes, kvbytes, over_t, defaults
        )
        d_model_step = get_model_step_ms(
            d, hw_d, b_spec, 1.0, d_context, wbytes, kvbytes, over_d, defaults
        )
        source_col = pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=["roofline"])
        d_round = None
        if calibration is not None:
            fitted = np.isin(gpu_ids, list(calibration.fits))
            tp_ids = hw.num_gpus

            def measured(ids, b, q, roof, ctx=context):
                ms, how = calibration.measured_ms(gpu_ids, ids, wdtype, tp_ids, b, q, ctx)
                return np.where(np.isnan(ms), roof, ms), np.where(
                    how != "", how, np.where(fitted, "fitted", "")
                )

            t_step, src_t = measured(target_ids, b_base, 1.0, t_step)
            v_step, src_v = measured(target_ids, b_spec, verify, v_step)
            d_model_step, src_d = measured(draft_ids, b_spec, 1.0, d_model_step, d_context)
            d_round = calibration.draft_round_ms(
                gpu_ids, target_ids, draft_ids, wdtype, tp_ids, b_spec, k, d_context
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
            b_spec,
            d_context,
            wbytes,
            kvbytes,
            k,
            defaults,
            draft_model_step_ms=d_model_step,
            head_overhead_ms=over_head,
            draft_model_round_ms=d_round,
            medusa_heads=heads,
        )

        # Steady state: the prompts of the requests that replace finished ones ride in each
        # step, tau times as many under speculation; the engine's host costs on top.
        pf_base = np.where(
            in_steady, steady.get_prefill_tokens_per_step(b_base, 1.0, prompt, output), 0.0
        )
        pf_spec = np.where(
            in_steady & spec_on,
            steady.get_prefill_tokens_per_step(b_spec, tau, prompt, output),
            0.0,
        )
        pf_base_ms = steady.get_prefill_ms(
            t,
            pf_base,
            prompt,
            hw.tflops,
            hw.link_gbps,
            tp,
            defaults,
            efficiency=hw.prefill_efficiency,
        )
        pf_spec_ms = spec_prefill_ms(pf_spec)
        host_base = steady.get_engine_step_ms(b_base, defaults)
        host_spec = steady.get_engine_step_ms(b_spec, defaults) + steady.get_engine_round_ms(
            spec_on, sampled, draft_forwards, b_spec, k, t.vocab_size, hw.bw_gbps, tp, defaults
        )
        base_step = t_step + pf_base_ms + host_base
        spec_step = np.where(
            spec_on,
            d_step + v_step + defaults.verify_overhead_ms + pf_spec_ms + host_spec,
            base_step,
        )
        return _Priced(
            t_step=t_step,
            v_step=v_step,
            d_step=d_step,
            pf_base=pf_base,
            pf_spec=pf_spec,
            pf_base_ms=pf_base_ms,
            pf_spec_ms=pf_spec_ms,
            host_base=host_base,
            host_spec=host_spec,
            base_step=base_step,
            spec_step=spec_step,
            source=source_col,
        )

    # Open loop (a request rate): the mean number of requests in the engine solves
    # Little's law, B = rate * (TTFT + output_len * TPOT(B)), in each arm on its own.
    over_base = over_spec = np.zeros(n, dtype=bool)
    if open_loop.any():
        ttft_base = steady.get_prefill_ms(
            t,
            prompt,
            prompt,
            hw.tflops,
            hw.link_gbps,
            tp,
            defaults,
            efficiency=hw.prefill_efficiency,
        )
        ttft_spec = ttft_base + drafts.get_draft_prefill_ms(
            method, t, d, hw_d, prompt, prompt, defaults
        )

        def latency_s(b_b, b_s):
            p = price(np.maximum(b_b, 1.0), np.maximum(b_s, 1.0))
            return (
                (ttft_base + output * p.base_step) / 1e3,
                (ttft_spec + output * p.spec_step / tau) / 1e3,
            )

        b_base, b_spec, over_base, over_spec = steady.solve_littles_law(
            latency_s, rate, np.maximum(run_base, 1.0), np.maximum(run_spec, 1.0), open_loop
        )
        over_spec = over_spec & spec_on
        b_spec = np.where(spec_on, b_spec, b_base)
    fits_one_base, fits_one_spec = run_base >= 1, run_spec >= 1
    run_base = np.where(open_loop, b_base, run_base)
    run_spec = np.where(open_loop, b_spec, run_spec)
    b_base, b_spec = np.maximum(b_base, 1.0), np.maximum(b_spec, 1.0)
    priced = price(b_base, b_spec)
    t_step, v_step, d_step = priced.t_step, priced.v_step, priced.d_step
    pf_base, pf_spec = priced.pf_base, priced.pf_spec
    pf_base_ms, pf_spec_ms = priced.pf_base_ms, priced.pf_spec_ms
    host_base, host_spec = priced.host_base, priced.host_spec
    base_step, spec_step, source_col = priced.base_step, priced.spec_step, priced.source

    # The prefill a speculative step carries is affine in tau: A + per_tau * tau.
    one = np.where(
        in_steady & spec_on, steady.get_prefill_tokens_per_step(b_spec, 1.0, prompt, output), 0.0
    )
    per_tau = spec_prefill_ms(2.0 * one) - spec_prefill_ms(one)
    offered = rate * output
    baseline_tok_s = np.where(open_loop, offered, b_base * 1e3 / base_step)
    spec_tok_s = np.where(open_loop, offered, b_spec * tau * 1e3 / spec_step)
    # Closed loop: throughput at the batches that run. Open loop: both arms serve the
    # same rate, so the gain is in each request's time per token.
    speedup = np.where(open_loop, base_step * tau / spec_step, spec_tok_s / baseline_tok_s)
    baseline_tpot = base_step
    spec_tpot = spec_step / tau

    # A decode_only row describes one step at context prompt + output / 2: its lengths set
    # that context, they are not a request that must fit the model's window.
    length = np.where(in_steady, prompt + output, 0.0)
    status = _status(
        k > np.where(method["medusa"], heads, np.inf),
        sc,
        models,
        method,
        spec_on,
        usable_base,
        usable_spec,
        fits_one_base,
        fits_one_spec,
        length,
        over_base,
        over_spec,
    )
    cannot_base = status.codes_base
    cannot_spec = status.codes_spec
    nan = np.nan
    baseline_tok_s = np.where(cannot_base, nan, baseline_tok_s)
    baseline_tpot = np.where(cannot_base, nan, baseline_tpot)
    spec_tok_s = np.where(cannot_spec, nan, spec_tok_s)
    spec_tpot = np.where(cannot_spec, nan, spec_tpot)
    speedup = np.where(cannot_base | cannot_spec, nan, speedup)

    price = sc["gpu_hourly_usd"].to_numpy(dtype=float)
    cost_base = economics.get_cost_per_mtok(price, tp, baseline_tok_s)
    cost_spec = economics.get_cost_per_mtok(price, tp, spec_tok_s)
    cost_base = np.where(cannot_base, nan, cost_base)
    cost_spec = np.where(cannot_spec, nan, cost_spec)
    capped = ~open_loop & (spec_on & (run_spec < batch) | (run_base < batch))

    warnings = _warnings(spec_on, k, alpha, speedup, fits, usable_spec, capped)
    gb = defaults.hbm_bytes_per_gb
    out = sc
    extra = {
        "alpha": alpha,
        "tau": tau,
        "vllm_draft_acceptance_rate": acceptance.draft_acceptance_rate(tau, k),
        "context_len": context,
        "effective_batch_baseline": run_base,
        "effective_batch_spec": run_spec,
        "prefill_tokens_per_step_baseline": pf_base,
        "prefill_tokens_per_step_spec": np.where(spec_on, pf_spec, pf_base),
        "target_step_ms": t_step,
        "draft_step_ms": np.where(spec_on, d_step, 0.0),
        "verify_step_ms": np.where(spec_on, v_step, 0.0),
        "prefill_ms_baseline": pf_base_ms,
        "prefill_ms_spec": np.where(spec_on, pf_spec_ms, pf_base_ms),
        "engine_ms_baseline": host_base,
        "engine_ms_spec": np.where(spec_on, host_spec, host_base),
        "baseline_step_ms": base_step,
        "spec_step_ms": spec_step,
        "baseline_tpot_ms": baseline_tpot,
        "spec_tpot_ms": spec_tpot,
        "speedup": speedup,
        "break_even_alpha": _break_even_alpha(
            spec_on, spec_step, tau, per_tau, base_step, b_base, b_spec, k, open_loop
        ),
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
        "status": status.text,
        "warnings": warnings,
    }
    columns = {
        c: out[c].to_numpy() if out[c].dtype.kind in "biuf" else out[c].array for c in INPUT_COLUMNS
    }
    return pd.DataFrame({**columns, **extra}, copy=False)


def _break_even_alpha(spec_on, spec_step, tau, per_tau, base_step, b_base, b_spec, k, open_loop):
    """The i.i.d. acceptance at which this row's speculation exactly breaks even.

    Closed loop, throughput parity: b_spec * tau / spec_step(tau) = b_base / base_step,
    where the steady-state prefill makes the speculative step affine in tau,
    spec_step = S0 + c * tau (c = `per_tau`, the prefill ms per unit of tau). So
    tau* = b_base * S0 / (b_spec * base_step - b_base * c). Open loop, time per token
    parity: the same with b_spec = b_base. Beyond K+1 (or with a non-positive
    denominator) no acceptance suffices (reported as inf).
    """
    b_spec = np.where(open_loop, b_base, b_spec)
    s0 = spec_step - per_tau * tau
    denom = b_spec * base_step - b_base * per_tau
    with np.errstate(divide="ignore", invalid="ignore"):
        need = np.where(spec_on & (denom > 0), b_base * s0 / denom, np.inf)
    need = np.where(spec_on, need, np.nan)
    out = np.full(need.shape, np.nan)
    ok = spec_on & (need <= k + 1)
    # Eight Newton steps: break-even needs 1e-6, not float precision.
    out[ok] = acceptance.alpha_from_tau(np.maximum(need[ok], 1.0), k[ok], iterations=8)
    out[spec_on & ~ok] = np.inf
    return out


def _extend_measured(positions, k, methods, mtp_depth) -> np.ndarray:
    """Measured per-position rates (NaN past the measured ones) extended to the largest K:
    along the measured conditionals, or, from a single measured position, along the
    method's decay fitted on public curves (`catalog.method_decays`)."""
    k_max = int(k.max())
    single = (np.sum(~np.isnan(positions), axis=-1) == 1) & (k > 1)
    out = np.zeros((len(positions), k_max))
    for name, depth in sorted(set(zip(methods, mtp_depth, strict=True))):
        sel = (methods == name) & (mtp_depth == depth)
        decay = acceptance.IID
        if single[sel].any():
            decay = method_decays().get(name, acceptance.IID)
            if name == "mtp":
                decay = replace(decay, depth=float(depth))
        out[sel] = acceptance.extend_measured(positions[sel], k_max, decay)
    return out


@dataclass(frozen=True)
class _Priced:
    """Per-step times in ms at the batches that run, one entry per scenario."""

    t_step: np.ndarray
    v_step: np.ndarray
    d_step: np.ndarray
    pf_base: np.ndarray
    pf_spec: np.ndarray
    pf_base_ms: np.ndarray
    pf_spec_ms: np.ndarray
    host_base: np.ndarray
    host_spec: np.ndarray
    base_step: np.ndarray
    spec_step: np.ndarray
    source: pd.Categorical


@dataclass(frozen=True)
class _Status:
    """Which arm of each row cannot run, and why, spelled once per distinct reason set."""

    codes_base: np.ndarray
    codes_spec: np.ndarray
    text: pd.Categorical


def _status(
    too_many_heads,
    sc,
    models,
    method,
    spec_on,
    usable_base,
    usable_spec,
    fits_one_base,
    fits_one_spec,
    length,
    over_base,
    over_spec,
):
    """Setups that cannot run: they get no numbers, only the reason."""
    tok = {mid: m.tokenizer for mid, m in models.items()}
    window = {mid: m.max_position_embeddings for mid, m in models.items()}
    t_codes, d_codes = sc["target"].cat.codes.to_numpy(), sc["draft"].cat.codes.to_numpy()
    t_cats, d_cats = list(sc["target"].cat.categories), list(sc["draft"].cat.categories)
    t_tok = np.array([tok.get(c, "") for c in t_cats], dtype=object)[t_codes]
    d_tok = np.array([tok.get(c, "") for c in d_cats], dtype=object)[d_codes]
    t_win = np.array([window.get(c, 0) for c in t_cats], dtype=float)[t_codes]
    d_win = np.array([window.get(c, 0) for c in d_cats], dtype=float)[d_codes]
    is_draft = method["draft_model"]
    base_rules = [
        (usable_base <= 0, "cannot run: the target's weights and reserves exceed the GPUs' memory"),
        (
            (t_win > 0) & (length > t_win),
            "cannot run: prompt_len + output_len exceed the target's context window",
        ),
        ((usable_base > 0) & ~fits_one_base, "cannot run: the KV cache cannot hold one request"),
        (
            over_base,
            "overloaded: the request rate exceeds what the replica serves; queues grow "
            "without bound",
        ),
    ]
    spec_rules = [
        (
            is_draft & (t_tok != d_tok),
            "cannot run: draft and target tokenizers differ, speculation is impossible",
        ),
        (
            spec_on & (usable_base > 0) & (usable_spec <= 0),
            "cannot run with speculation: the draft's weights do not fit beside the target's",
        ),
        (
            is_draft & (d_win > 0) & (length > d_win),
            "cannot run with speculation: prompt_len + output_len exceed the draft's "
            "context window",
        ),
        (
            spec_on & (usable_spec > 0) & fits_one_base & ~fits_one_spec,
            "cannot run with speculation: the KV cache cannot hold one request beside the draft's",
        ),
        (
            over_spec,
            "overloaded with speculation: the request rate exceeds what the replica serves",
        ),
        (
            too_many_heads,
            "cannot run with speculation: K exceeds the Medusa checkpoint's heads "
            "(medusa_heads); engines refuse it",
        ),
    ]
    rules = base_rules + [(spec_on & mask, msg) for mask, msg in spec_rules]
    bits, text = _spell(rules, len(sc), none="ok")
    codes_base = (bits & ((1 << len(base_rules)) - 1)) != 0
    return _Status(codes_base, codes_base | (bits != 0), text)


def _warnings(spec_on, k, alpha, speedup, fits, usable_spec, capped):
    n = len(k)
    rules = [
        (
            spec_on & (k > HIGH_K_WARN),
            f"K above {HIGH_K_WARN}: acceptance decays with position, deep drafts rarely pay",
        ),
        (
            spec_on & (alpha < LOW_ACCEPTANCE_WARN),
            f"acceptance below {LOW_ACCEPTANCE_WARN}: speculation seldom pays",
        ),
        (
            (usable_spec > 0) & ~fits,
            "batch does not fit in the KV cache: the engine runs effective_batch_*, the rest queue",
        ),
        (
            (usable_spec > 0) & fits & capped,
            "batch capped by the KV cache or max_num_seqs in steady state: see effective_batch_*",
        ),
        (
            spec_on & (speedup < SLOWDOWN_WARN),
            "speculation is slower than the baseline at this batch",
        ),
    ]
    return _spell(rules, n)[1]


def _spell(rules, n: int, none: str = "") -> tuple[np.ndarray, pd.Categorical]:
    """(mask, message) rules combined as a bit pattern per row, each pattern spelled once as
    its messages joined by '; ' (`none` where no rule holds). The categories are every
    pattern, so blocks of a large table concatenate as categoricals."""
    bits = np.zeros(n, dtype=np.int64)
    for i, (mask, _) in enumerate(rules):
        bits |= np.asarray(mask, dtype=np.int64) << i
    labels = [
        "; ".join(msg for i, (_, msg) in enumerate(rules) if p >> i & 1) or none
        for p in range(2 ** len(rules))
    ]
    return bits, pd.Categorical.from_codes(bits, categories=labels)
