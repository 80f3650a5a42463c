"""The one prediction path: a scenario table in, the same table with outputs added.

Every step is a numpy expression over many rows at once, so a sweep of a million
scenarios costs what one costs in Python overhead. The table is validated as numpy arrays
(`scenarios.validate_scenarios`), reordered so that rows sharing method, target, draft
and dtypes sit together, priced in pieces of at most `BLOCK_ROWS` rows with the model
figures as scalars (so no row pays for a method's branches it does not take; the few GPU
figures per row, so GPUs share a piece; rows of rare combinations per method, catalog
figures per row), and put back in the table's order. The break-even acceptance (a Newton
solve) is computed only where asked (`break_even`).

Where the time goes (bench/sweep.py's million random rows, 150 combinations, on the
2-core development machine of 2026-12, about 0.5 s in all under a line profiler):
validation 0.13 s, half of it factorising the text columns; pricing 0.30 s, some 600
numpy passes per piece, the break-even solve a fifth to a quarter of it; reordering the
given columns 0.03 s, copying each piece's outputs out 0.07 s and restoring the table's
order 0.08 s. A second thread made it slower (the passes are too short for numpy's
released GIL to pay for the contention: 1.6-1.8M rows/s on two threads against 2.0-2.1M
on one, in one session), and a second process would hand its outputs back through shared
memory, which this machine pages in 4 KiB at a time (352 MB of outputs: 0.35 s against
0.02 s for private huge pages), so the pieces run on one.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from simulator import acceptance, drafts, economics, memory, steady
from simulator.catalog import default_gpus, default_models, method_decays
from simulator.defaults import DEFAULTS, ModelDefaults
from simulator.drafts import method_masks
from simulator.errors import InputError
from simulator.latency import Hardware, ModelArrays, get_kv_share_per_gpu, get_model_step_ms
from simulator.scenarios import (
    IGNORED_MESSAGES,
    ScenarioArrays,
    categorical,
    validate_scenarios,
)
from simulator.specs import DTYPE_BYTES, METHODS, GPUSpec, ModelSpec
from simulator.steady import SERVING_MODES

if TYPE_CHECKING:
    import pandas as pd

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

BLOCK_ROWS = 32_768
"""Rows per piece of work at most. A piece's float64 columns (256 KiB each) stay in cache
across the hundred-odd numpy passes."""

GROUP_ROWS = 1_024
"""Rows that share method, target, draft and dtypes are priced together with the model's
figures as scalars once the group is this large (each model figure then costs nothing per
row); smaller groups are priced together per method, figures per row. The GPU is not part
of the group: its five figures per row cost less than the call overhead of a piece per
GPU (bench/sweep.py's five GPUs: 5-8% faster, in one process against pieces per GPU)."""

SLOWDOWN_WARN = 1.0
LOW_ACCEPTANCE_WARN = 0.55
"""Below this per-token acceptance a draft rarely pays (the issue's rule of thumb)."""
HIGH_K_WARN = 8

_KEY_COLUMNS = ("target", "draft", "gpu", "weight_dtype", "kv_dtype")
_CODE_COLUMNS = (*_KEY_COLUMNS, "serving", "engine", "engine_version")
_GROUP_COLUMNS = ("target", "draft", "weight_dtype", "kv_dtype")
_ROW_INPUTS = (
    "num_gpus",
    "k",
    "batch_size",
    "prompt_len",
    "output_len",
    "verify_tokens",
    "medusa_heads",
    "mtp_depth",
    "draft_context_len",
    "acceptance_rate",
    "mean_accepted_tokens",
    "gpu_memory_utilization",
    "request_rate",
    "temperature",
    "gpu_hourly_usd",
)
_FLOAT_OUTPUTS = tuple(
    c for c in OUTPUT_COLUMNS if c not in ("latency_source", "fits", "status", "warnings")
)


def _if(cond, a, b):
    """np.where(cond, a, b), without a pass over the rows when `cond` is a Python bool."""
    if cond is True:
        return a
    if cond is False:
        return b
    return np.where(cond, a, b)


def _mask(values: np.ndarray):
    """A boolean array, or a Python bool when every entry agrees (the common case)."""
    if values.all():
        return True
    if not values.any():
        return False
    return values


def predict(
    scenarios: pd.DataFrame,
    *,
    gpus: dict[str, GPUSpec] | None = None,
    models: dict[str, ModelSpec] | None = None,
    defaults: ModelDefaults = DEFAULTS,
    calibration=None,
    source: str = "scenarios",
    break_even: bool = True,
    row_offset: int = 0,
    kernels: bool = True,
) -> pd.DataFrame:
    """Predict latency, throughput, memory and cost for every scenario row.

    `calibration` (a `simulator.calibration.Calibration`) replaces roofline step times by
    measured ones where a profile covers the point. `break_even=False` skips the
    break-even acceptance (a Newton solve per row, a fifth of the time; the column is then
    NaN). `row_offset` shifts the row numbers errors report when `scenarios` is a block
    of a larger table. `kernels=False` prices every row on the roofline, as before the
    kernel tables (`simulator.kernels`) priced the GPUs and engines they cover. Raises
    `InputError` on bad input.
    """
    import pandas as pd

    gpus = default_gpus() if gpus is None else gpus
    models = default_models() if models is None else models
    if calibration is not None:
        gpus = {**gpus, **calibration.gpus}
    try:
        sc = validate_scenarios(scenarios, gpus, models, source=source, row_offset=row_offset)
    except InputError as exc:
        raise _first_error(exc, scenarios, gpus, models, source, row_offset) from None
    outputs = _evaluate_table(sc, gpus, models, defaults, calibration, break_even, kernels)
    return pd.DataFrame({**sc.columns(), **outputs}, copy=False)


def _first_error(exc, scenarios, gpus, models, source, row_offset) -> InputError:
    """The error of the earliest block of `BLOCK_ROWS` rows that has one: validation
    checks one rule over every row before the next, so the first error it meets may sit
    below a row that breaks a later rule."""
    if exc.row is None:
        return exc
    failing = (exc.row - row_offset - 1) // BLOCK_ROWS * BLOCK_ROWS
    for lo in range(0, failing, BLOCK_ROWS):
        try:
            validate_scenarios(
                scenarios.iloc[lo : lo + BLOCK_ROWS],
                gpus,
                models,
                source=source,
                row_offset=row_offset + lo,
            )
        except InputError as earlier:
            return earlier
    return exc


def _plan(sc: ScenarioArrays, calibration) -> tuple[np.ndarray | None, list]:
    """The order rows are priced in, and the pieces of work over that order.

    Returns `(order, pieces)`: `order` a permutation of the rows (None when they are in
    it already) and pieces `(method, uniform, rows)`, `rows` a slice of the reordered
    rows. Rows of a combination of method, target, draft and dtypes (`_GROUP_COLUMNS`)
    that holds at least `GROUP_ROWS` rows form `uniform` pieces, those figures scalars;
    the other rows one piece per method, figures per row. A piece holds at most
    `BLOCK_ROWS` rows, so its hundred-odd passes stay in cache. Reordering whole columns
    once (a gather that reads one column at a time) costs less than gathering each
    piece's rows from all over the table and scattering its outputs back. Without a key
    small enough to count, or with a calibration (its figures are per row anyway), rows
    group by method.
    """
    n = sc.n
    method = sc.codes["method"].astype(np.int64)
    n_methods = len(METHODS)
    ids, n_ids, combo_method, n_combos = method, n_methods, None, 0
    if calibration is None and n >= GROUP_ROWS:
        key = np.zeros(n, dtype=np.int64)
        span = 1
        for c in _GROUP_COLUMNS:
            codes = sc.codes[c]
            size = int(codes.max()) + 1
            key = key * size + codes
            span *= size
        key = key * n_methods + method  # the method is the last digit
        span *= n_methods
        if span <= 4 * n + 1_000_000:
            big = np.bincount(key, minlength=span) >= GROUP_ROWS
            if big.any():
                n_combos = int(big.sum())
                combo_method = (np.flatnonzero(big) % n_methods).astype(int)
                ids = np.where(big[key], (np.cumsum(big) - 1)[key], n_combos + method)
                n_ids = n_combos + n_methods
    counts = np.bincount(ids, minlength=n_ids)
    order = None
    if n > 1 and (ids[1:] < ids[:-1]).any():
        order = np.argsort(ids.astype(np.uint16) if n_ids < 2**16 else ids, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(counts)])
    pieces = []
    for gid in np.flatnonzero(counts):
        uniform = gid < n_combos
        name = METHODS[combo_method[gid]] if uniform else METHODS[gid - n_combos]
        end = int(bounds[gid + 1])
        for lo in range(int(bounds[gid]), end, BLOCK_ROWS):
            pieces.append((name, uniform, slice(lo, min(lo + BLOCK_ROWS, end))))
    return order, pieces


def _evaluate_table(sc, gpus, models, defaults, calibration, break_even, kernels=True) -> dict:
    """Every output column for the validated table `sc`, priced piece by piece in the
    order `_plan` gives and returned in the table's own order."""

    n = sc.n
    ignored = sc.ignored
    order, pieces = _plan(sc, calibration)
    if order is not None:

        def ordered(v, name):
            return v if name in sc.constant else v.take(order)

        sc = ScenarioArrays(
            n=n,
            codes={c: ordered(sc.codes[c], c) for c in _CODE_COLUMNS},
            categories=sc.categories,
            values={c: ordered(sc.values[c], c) for c in _ROW_INPUTS},
            positions=None if sc.positions is None else sc.positions.take(order, axis=0),
            positions_column=None,
            constant=sc.constant,
        )
    out = {c: np.empty(n) for c in _FLOAT_OUTPUTS}
    out["fits"] = np.empty(n, dtype=bool)
    status_bits = np.empty(n, dtype=np.int64)
    warning_bits = np.empty(n, dtype=np.int64)
    label_codes = np.zeros(n, dtype=np.int16)
    label_names = {"roofline": 0}
    model_specs = tuple(models.values())
    gpu_specs = tuple(gpus[key] for key in sc.categories["gpu"])
    try:
        catalog = _catalog(model_specs, gpu_specs)
    except TypeError:  # a catalog of unhashable specs: build it each time
        catalog = _catalog.__wrapped__(model_specs, gpu_specs)

    # One thread: a piece's passes are too short for numpy's released GIL to pay for the
    # contention of a second (on two cores, bench/sweep.py's table ran 10-15% slower).
    for method, uniform, rows in pieces:
        res = _evaluate(
            sc, rows, method, uniform, catalog, defaults, calibration, break_even, kernels
        )
        for c in _FLOAT_OUTPUTS:
            out[c][rows] = res[c]
        out["fits"][rows] = res["fits"]
        status_bits[rows] = res["status"]
        warning_bits[rows] = res["warnings"]
        if res.get("latency_source") is not None:
            label_codes[rows] = _label_codes(res["latency_source"], label_names)
    if order is not None:
        inv = np.empty(n, dtype=np.intp)
        inv[order] = np.arange(n)
        for c in list(out):
            out[c] = out[c].take(inv)
        status_bits = status_bits.take(inv)
        warning_bits = warning_bits.take(inv)
        label_codes = label_codes.take(inv)
    source_col = categorical(label_codes, list(label_names))
    columns = {c: out[c] for c in _FLOAT_OUTPUTS}
    columns["latency_source"] = source_col
    columns["fits"] = out["fits"]
    columns["status"] = categorical(status_bits, _STATUS_LABELS)
    if ignored is not None:
        warning_bits |= ignored << len(_WARNING_MESSAGES)
    columns["warnings"] = categorical(warning_bits, _WARNING_LABELS)
    return {c: columns[c] for c in OUTPUT_COLUMNS}


def _label_codes(labels, names: dict) -> np.ndarray:
    """A piece's `latency_source` labels (an array of names, or (codes, names)) as codes
    into `names` (extended in place)."""
    if isinstance(labels, tuple):
        codes, uniques = labels
    else:
        codes, uniques = pd_factorize(np.asarray(labels, dtype=object))
    lookup = np.array([names.setdefault(str(u), len(names)) for u in uniques], dtype=np.int16)
    return lookup[codes]


def pd_factorize(values):
    import pandas as pd

    return pd.factorize(values)


@functools.lru_cache(maxsize=8)
def _catalog(model_specs: tuple, gpu_specs: tuple) -> _Catalog:
    """The catalogs as arrays, built once per catalog (specs are frozen, so hashable)."""
    return _Catalog(
        model_specs=model_specs,
        models=ModelArrays.from_specs(list(model_specs)),
        drafts=ModelArrays.from_specs([None, *model_specs]),
        gpus=list(gpu_specs),
        tokenizer=np.array([m.tokenizer for m in model_specs], dtype=object),
        window=np.array([m.max_position_embeddings for m in model_specs], float),
    )


@dataclass(frozen=True)
class _Catalog:
    """The catalogs as arrays: `models` indexed by target code, `drafts` by draft code
    (0 = no draft model), `gpus` by GPU code."""

    model_specs: tuple
    models: ModelArrays
    drafts: ModelArrays
    gpus: list
    tokenizer: np.ndarray
    window: np.ndarray


def _evaluate(sc, rows, method_name, uniform, catalog, defaults, calibration, break_even, kernels):
    """Every output of the rows `rows` of `sc`, which share `method_name` (and, when
    `uniform`, the `_GROUP_COLUMNS` ids: target, draft and dtypes; the GPU stays per row):
    arrays of len(rows), or scalars where uniform."""
    n = rows.stop - rows.start if isinstance(rows, slice) else len(rows)
    val = {c: sc.values[c][rows] for c in _ROW_INPUTS}
    codes = {c: sc.codes[c][rows] for c in _CODE_COLUMNS}
    if uniform:
        codes.update({c: int(codes[c][0]) for c in _GROUP_COLUMNS})
    t_code, d_code, g_code = codes["target"], codes["draft"], codes["gpu"]
    t = catalog.models.take(t_code)
    d = catalog.drafts.take(d_code)
    g_specs = catalog.gpus
    wd_names = np.array(sc.categories["weight_dtype"])
    kv_names = np.array(sc.categories["kv_dtype"])

    method = method_masks(method_name)
    spec_on = method_name != "none"
    is_draft = method["draft_model"]
    wd = wd_names[codes["weight_dtype"]]
    is_fp8 = wd == "fp8"
    wbytes = np.array([DTYPE_BYTES[w] for w in wd_names])[codes["weight_dtype"]]
    kvbytes = np.array([DTYPE_BYTES[v] for v in kv_names])[codes["kv_dtype"]]
    fp8_tflops = np.array([g.tflops_for("fp8") for g in g_specs])[g_code]
    bf16_tflops = np.array([g.bf16_tflops for g in g_specs])[g_code]
    hw = Hardware(
        bw_gbps=np.array([g.hbm_bandwidth_gbps for g in g_specs])[g_code],
        tflops=np.where(is_fp8, fp8_tflops, bf16_tflops),
        link_gbps=np.array([g.interconnect_gbps for g in g_specs])[g_code],
        num_gpus=val["num_gpus"],
        sharpness=defaults.roofline_sharpness,
    )
    memory_gb = np.array([g.memory_gb for g in g_specs])[g_code]

    k = val["k"]
    batch = val["batch_size"]
    prompt = val["prompt_len"]
    output = val["output_len"]
    verify = val["verify_tokens"]
    context = prompt + output / 2.0
    heads = val["medusa_heads"]
    mtp_depth = val["mtp_depth"]
    draft_window = val["draft_context_len"]
    windowed = _mask(~np.isnan(draft_window))
    d_context = _if(windowed, np.minimum(context, draft_window), context)

    # Acceptance: i.i.d. rows in closed form; rows with measured per-position rates on
    # their own (n, K) matrix.
    alpha_in = val["acceptance_rate"]
    tau_in = val["mean_accepted_tokens"]
    positions = None if sc.positions is None else sc.positions[rows]
    has_pos = np.zeros(n, bool) if positions is None or not spec_on else ~np.isnan(positions[:, 0])
    if spec_on:
        alpha = alpha_in.copy()
        from_tau = ~np.isnan(tau_in)
        if from_tau.any():
            alpha[from_tau] = acceptance.alpha_from_tau(tau_in[from_tau], k[from_tau])
        a0 = np.nan_to_num(alpha) if np.isnan(alpha).any() else alpha
        tau = acceptance.tau_iid(a0, k)
        tau[from_tau] = tau_in[from_tau]
        qs = (0.1, 0.5, 0.9)
        quantiles = dict(zip(qs, acceptance.tokens_per_step_quantiles_iid(a0, k, qs), strict=True))
    else:
        alpha = np.full(n, np.nan)
        tau = np.ones(n)
        quantiles = {q: np.ones(n) for q in (0.1, 0.5, 0.9)}
    if has_pos.any():
        pos_rows = np.flatnonzero(has_pos)
        pos = _extend_measured(
            positions[pos_rows],
            k[pos_rows],
            np.full(pos_rows.size, method_name),
            mtp_depth[pos_rows],
        )
        tau[pos_rows] = acceptance.tau_from_positions(pos, k[pos_rows])
        alpha[pos_rows] = acceptance.alpha_from_tau(tau[pos_rows], k[pos_rows])
        for q in quantiles:
            quantiles[q][pos_rows] = acceptance.tokens_per_step_quantile(pos, k[pos_rows], q)

    # Memory, and the batch that actually runs: KV capacity caps it, the rest queue.
    tp = hw.num_gpus
    weights = t.total_params * wbytes
    # A draft model that is the target itself (self-speculation with a compressed cache,
    # as MagicDec runs it) shares the target's weights.
    self_draft = is_draft and np.equal(d_code - 1, t_code)
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
    util = val["gpu_memory_utilization"]
    usable_base = memory.get_usable_kv_bytes(memory_gb, tp, weights, act, util, defaults)
    usable_spec = (
        memory.get_usable_kv_bytes(memory_gb, tp, weights + draft_weights, act, util, defaults)
        if spec_on
        else usable_base
    )
    share_t = get_kv_share_per_gpu(t, tp)
    kv_rep_t = kv_t * share_t * tp
    if spec_on:
        share_d = get_kv_share_per_gpu(d, tp) if is_draft else share_t
        kv_rep_d = kv_d * share_d * tp * (d_context / context)
        cap_spec = memory.get_token_capacity(usable_spec, kv_rep_t + kv_rep_d)
    cap_base = memory.get_token_capacity(usable_base, kv_rep_t)
    if not spec_on:
        cap_spec = cap_base
    lookahead = k if method_name in ("draft_model", "eagle", "eagle3", "mtp") else 0.0
    conc_base = memory.get_max_concurrency(cap_base, prompt, output, 0)
    if spec_on:
        conc_spec = memory.get_max_concurrency(cap_spec, prompt, output, lookahead)
        fits = batch <= conc_spec
    else:
        conc_spec = conc_base
        fits = batch <= conc_base
    seqs = defaults.max_num_seqs
    rate = val["request_rate"]
    open_loop = _mask(~np.isnan(rate))
    batch = _if(open_loop, np.inf, batch)
    run_base = steady.get_effective_batch(
        batch, steady.get_sustained_batch(cap_base, prompt, output, 0.0), seqs
    )
    if spec_on:
        run_spec = steady.get_effective_batch(
            batch, steady.get_sustained_batch(cap_spec, prompt, output, lookahead), seqs
        )
    else:
        run_spec = run_base
    b_base = np.maximum(run_base, 1.0)
    b_spec = np.maximum(run_spec, 1.0) if spec_on else b_base

    # Step times: roofline, or the profile's fit and measurements on a profiled device.
    over_t = defaults.forward_overhead_ms
    over_d = defaults.draft_forward_overhead_ms
    over_head = defaults.head_forward_overhead_ms
    # What a profile does not measure keeps the datasheet hardware: a head's steps, the
    # host and sampler costs (calibration touches only the models the profile timed).
    hw_raw = hw_d = hw
    host_shift = 0.0  # the engine's fitted host cost per step, less the default
    if calibration is not None:
        target_ids = np.array(sc.categories["target"], dtype=object)[t_code].astype(str)
        draft_ids = np.array(sc.categories["draft"], dtype=object)[d_code].astype(str)
        gpu_ids = np.array(sc.categories["gpu"], dtype=object)[g_code].astype(str)
        wdtype = np.asarray(wd).astype(str)
        full = (n,)
        hw = Hardware(
            bw_gbps=np.broadcast_to(hw.bw_gbps, full).astype(float),
            tflops=np.broadcast_to(hw.tflops, full).astype(float),
            link_gbps=np.broadcast_to(hw.link_gbps, full).astype(float),
            num_gpus=hw.num_gpus,
            sharpness=hw.sharpness,
        )
        hw_d = calibration.effective_hardware(gpu_ids, hw, defaults, draft_ids)
        hw = calibration.effective_hardware(gpu_ids, hw, defaults, target_ids)
        over_t = calibration.overhead_ms(gpu_ids, t.num_layers, over_t, target_ids)
        over_d = calibration.overhead_ms(gpu_ids, d.num_layers, over_d, draft_ids)
        step = defaults.engine_step_ms
        host_shift = calibration.engine_step_ms(gpu_ids, step) - step
    in_steady = _mask(codes["serving"] == SERVING_MODES.index("steady"))
    sampled = _mask(val["temperature"] > 0)
    draft_forwards = k if is_draft else 0.0
    kplan = None
    if kernels:
        kplan = _kernel_plan(sc, codes, catalog, n, val["num_gpus"], is_draft)
    if kplan is not None and calibration is not None:
        # A profiled device keeps its profile (an imported engine's host cost was fitted on
        # the roofline's prices: profiler.imports.fit); the kernel tables price the others.
        profiled = np.isin(
            gpu_ids, [*calibration.gpus, *calibration.fits, *calibration.engine_steps]
        )
        kplan = replace(kplan, covered=kplan.covered & ~profiled)
        kplan = replace(kplan, group=np.where(kplan.covered, kplan.group, -1))

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
        ) + drafts.get_draft_prefill_ms(
            method, t, d, hw_d if is_draft else hw_raw, tokens, prompt, defaults
        )

    def price(b_base, b_spec):
        """Every per-step time at the batches that run (ms), and the latency sources."""
        t_step = get_model_step_ms(t, hw, b_base, 1.0, context, wbytes, kvbytes, over_t, defaults)
        v_step = d_model_step = d_step = 0.0
        if spec_on:
            v_step = get_model_step_ms(
                t, hw, b_spec, verify, context, wbytes, kvbytes, over_t, defaults
            )
        if is_draft:
            d_model_step = get_model_step_ms(
                d, hw_d, b_spec, 1.0, d_context, wbytes, kvbytes, over_d, defaults
            )
        labels = None
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
            src_v = src_d = np.full(n, "", dtype=object)
            if spec_on:
                v_step, src_v = measured(target_ids, b_spec, verify, v_step)
            if is_draft:
                d_model_step, src_d = measured(draft_ids, b_spec, 1.0, d_model_step, d_context)
                d_round = calibration.draft_round_ms(
                    gpu_ids, target_ids, draft_ids, wdtype, tp_ids, b_spec, k, d_context
                )
                src_d = np.where(np.isnan(d_round), src_d, "in-loop")
            head = spec_on and not is_draft
            src_h = np.where(fitted & head, "uncalibrated", "").astype(object)
            described = calibration.describe(src_t, src_v, src_d, src_h)
            if np.any(host_shift != 0):  # an engine's fitted host cost (profiler import)
                host = np.broadcast_to(host_shift != 0, (n,))
                pairs = zip(described, host, strict=True)
                described = np.array(
                    [f"{d} host:fitted".lstrip() if h else d for d, h in pairs], dtype=object
                )
            labels = np.where(described == "", "roofline", described)
        if spec_on:
            d_step = drafts.get_draft_step_ms(
                method,
                t,
                d,
                hw_raw,
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
        pf_base = _if(
            in_steady, steady.get_prefill_tokens_per_step(b_base, 1.0, prompt, output), 0.0
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
        host_base = steady.get_engine_step_ms(b_base, defaults) + host_shift
        base_step = t_step + pf_base_ms + host_base
        if spec_on:
            pf_spec = _if(
                in_steady, steady.get_prefill_tokens_per_step(b_spec, tau, prompt, output), 0.0
            )
            pf_spec_ms = spec_prefill_ms(pf_spec)
            host_spec = host_shift + steady.get_engine_step_ms(b_spec, defaults)
            host_spec = host_spec + steady.get_engine_round_ms(
                True, sampled, draft_forwards, b_spec, k, t.vocab_size, hw_raw.bw_gbps, tp, defaults
            )
            spec_step = d_step + v_step + defaults.verify_overhead_ms + pf_spec_ms + host_spec
        else:
            pf_spec, pf_spec_ms, host_spec, spec_step = 0.0, 0.0, 0.0, base_step
        if kplan is not None:
            return _kernel_priced(
                kplan,
                method_name,
                locals(),
                dict(context=context, d_context=d_context, k=k, verify=verify),
                dict(prompt=prompt, heads=heads, sampled=sampled, t=t, hw=hw, tp=tp),
                defaults,
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
            source=labels,
        )

    # Open loop (a request rate): the mean number of requests in the engine solves
    # Little's law, B = rate * (TTFT + output_len * TPOT(B)), in each arm on its own.
    over_base = over_spec = False
    if open_loop is not False:
        loop_rows = np.broadcast_to(open_loop, (n,))
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
            latency_s,
            rate,
            np.maximum(run_base, 1.0),
            np.maximum(np.broadcast_to(run_spec, (n,)), 1.0),
            loop_rows,
        )
        over_spec = over_spec & spec_on
        b_spec = b_spec if spec_on else b_base
    fits_one_base, fits_one_spec = run_base >= 1, run_spec >= 1
    run_base = _if(open_loop, b_base, run_base)
    run_spec = _if(open_loop, b_spec, run_spec)
    b_base = np.maximum(b_base, 1.0)
    b_spec = np.maximum(b_spec, 1.0) if spec_on else b_base
    priced = price(b_base, b_spec)
    t_step, v_step, d_step = priced.t_step, priced.v_step, priced.d_step
    pf_base, pf_spec = priced.pf_base, priced.pf_spec
    pf_base_ms, pf_spec_ms = priced.pf_base_ms, priced.pf_spec_ms
    host_base, host_spec = priced.host_base, priced.host_spec
    base_step, spec_step = priced.base_step, priced.spec_step

    offered = rate * output
    baseline_tok_s = _if(open_loop, offered, b_base * 1e3 / base_step)
    if spec_on:
        spec_tok_s = _if(open_loop, offered, b_spec * tau * 1e3 / spec_step)
        # Closed loop: throughput at the batches that run. Open loop: both arms serve the
        # same rate, so the gain is in each request's time per token.
        speedup = _if(open_loop, base_step * tau / spec_step, spec_tok_s / baseline_tok_s)
        spec_tpot = spec_step / tau
    else:
        spec_tok_s = baseline_tok_s
        speedup = _if(open_loop, base_step * tau / spec_step, spec_tok_s / baseline_tok_s)
        spec_tpot = spec_step / tau
    baseline_tpot = base_step

    # A decode_only row describes one step at context prompt + output / 2: its lengths set
    # that context, they are not a request that must fit the model's window.
    length = _if(in_steady, prompt + output, 0.0)
    status_bits, cannot_base, cannot_spec = _status(
        method_name == "medusa" and k > heads,
        catalog,
        t_code,
        d_code,
        method,
        spec_on,
        usable_base,
        usable_spec,
        fits_one_base,
        fits_one_spec,
        length,
        over_base,
        over_spec,
        n,
    )
    nan = np.nan
    baseline_tok_s = np.where(cannot_base, nan, baseline_tok_s)
    baseline_tpot = np.where(cannot_base, nan, baseline_tpot)
    spec_tok_s = np.where(cannot_spec, nan, spec_tok_s)
    spec_tpot = np.where(cannot_spec, nan, spec_tpot)
    speedup = np.where(cannot_base | cannot_spec, nan, speedup)

    hourly = val["gpu_hourly_usd"]
    cost_base = np.where(cannot_base, nan, economics.get_cost_per_mtok(hourly, tp, baseline_tok_s))
    cost_spec = np.where(cannot_spec, nan, economics.get_cost_per_mtok(hourly, tp, spec_tok_s))
    closed = open_loop is False or ~np.asarray(open_loop)
    if open_loop is True:
        capped = False
    else:
        capped = closed & (spec_on & (run_spec < batch) | (run_base < batch))

    warning_bits = _warnings(spec_on, k, alpha, speedup, fits, usable_spec, capped, n)
    if spec_on and break_even:
        one = _if(in_steady, steady.get_prefill_tokens_per_step(b_spec, 1.0, prompt, output), 0.0)
        # The prefill a speculative step carries is affine in tau: A + per_tau * tau. Both
        # points in one call, as two rows of a (2, n) array.
        one = np.broadcast_to(one, (n,))
        at_two, at_one = spec_prefill_ms(np.stack((2.0 * one, one)))
        per_tau = at_two - at_one
        if kplan is not None:  # the kernel tables' prefill is linear in the tokens
            from simulator.kernels import source as kernel_source

            kernel = kernel_source.spec_prefill_ms(kplan, method_name, one, prompt)
            per_tau = np.where(kplan.covered, kernel, per_tau)
        be = _break_even_alpha(
            True, spec_step, tau, per_tau, base_step, b_base, b_spec, k, open_loop
        )
    else:
        be = nan
    gb = defaults.hbm_bytes_per_gb
    res = {
        "alpha": alpha,
        "tau": tau,
        "vllm_draft_acceptance_rate": acceptance.draft_acceptance_rate(tau, k),
        "context_len": context,
        "effective_batch_baseline": run_base,
        "effective_batch_spec": run_spec,
        "prefill_tokens_per_step_baseline": pf_base,
        "prefill_tokens_per_step_spec": pf_spec if spec_on else pf_base,
        "target_step_ms": t_step,
        "draft_step_ms": d_step,
        "verify_step_ms": v_step,
        "prefill_ms_baseline": pf_base_ms,
        "prefill_ms_spec": pf_spec_ms if spec_on else pf_base_ms,
        "engine_ms_baseline": host_base,
        "engine_ms_spec": host_spec if spec_on else host_base,
        "baseline_step_ms": base_step,
        "spec_step_ms": spec_step,
        "baseline_tpot_ms": baseline_tpot,
        "spec_tpot_ms": spec_tpot,
        "speedup": speedup,
        "break_even_alpha": be,
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
        "fits": fits,
        "status": status_bits,
        "warnings": warning_bits,
    }
    res["latency_source"] = priced.source
    return res


def _break_even_alpha(spec_on, spec_step, tau, per_tau, base_step, b_base, b_spec, k, open_loop):
    """The i.i.d. acceptance at which this row's speculation exactly breaks even.

    Closed loop, throughput parity: b_spec * tau / spec_step(tau) = b_base / base_step,
    where the steady-state prefill makes the speculative step affine in tau,
    spec_step = S0 + c * tau (c = `per_tau`, the prefill ms per unit of tau). So
    tau* = b_base * S0 / (b_spec * base_step - b_base * c). Open loop, time per token
    parity: the same with b_spec = b_base. Beyond K+1 (or with a non-positive
    denominator) no acceptance suffices (reported as inf).
    """
    b_spec = _if(open_loop, b_base, b_spec)
    s0 = spec_step - per_tau * tau
    denom = b_spec * base_step - b_base * per_tau
    with np.errstate(divide="ignore", invalid="ignore"):
        need = np.where(spec_on & (denom > 0), b_base * s0 / denom, np.inf)
    need = np.where(spec_on, need, np.nan)
    out = np.full(need.shape, np.nan)
    ok = spec_on & (need <= k + 1)
    # Four Newton steps: break-even needs 1e-6, not float precision. Measured over K 1-16
    # and alpha 0-1 (with the ends 0-0.01 and 0.999-1 drawn apart), four land within 1e-9
    # of the root and three within 6e-6; later steps only move rows near alpha = 1 by
    # rounding.
    out[ok] = acceptance.alpha_from_tau(np.maximum(need[ok], 1.0), k[ok], iterations=4)
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


def _kernel_plan(sc, codes, catalog, n, num_gpus, is_draft):
    """The kernel-table plan of a piece's rows (`simulator.kernels.source`), or None when
    no row of it has tables (its GPUs or dtypes have none)."""
    from simulator.kernels import source as kernel_source

    names = {c: sc.categories[c] for c in ("gpu", "engine", "engine_version")}
    names.update(weight_dtype=sc.categories["weight_dtype"], kv_dtype=sc.categories["kv_dtype"])
    if not any(g in kernel_source.tables.SYSTEMS for g in names["gpu"]):
        return None
    cols = ("target", "draft", "gpu", "engine", "engine_version", "weight_dtype", "kv_dtype")
    row_codes = {c: np.broadcast_to(codes[c], (n,)) for c in cols}
    tp = np.broadcast_to(num_gpus, (n,))
    tp_codes = np.unique(tp, return_inverse=True)[1]
    draft_model = is_draft is True or bool(np.any(is_draft))

    def resolve(i):
        c = {col: int(row_codes[col][i]) for col in cols}
        draft = catalog.model_specs[c["draft"] - 1] if c["draft"] > 0 else None
        return kernel_source.resolve(
            catalog.model_specs[c["target"]],
            draft,
            names["gpu"][c["gpu"]],
            names["engine"][c["engine"]],
            names["engine_version"][c["engine_version"]],
            names["weight_dtype"][c["weight_dtype"]],
            names["kv_dtype"][c["kv_dtype"]],
            int(tp[i]),
            draft_model,
        )

    plan = kernel_source.plan_rows([*row_codes.values(), tp_codes], resolve)
    return plan if plan.target is not None else None


def _merged_labels(kplan, labels):
    """The kernel plan's labels, or with a profile's labels where the plan does not cover
    a row (a profiled device)."""
    if labels is None:
        return kplan.labels
    codes, names = kplan.labels
    kernel = np.asarray(names, dtype=object)[codes]
    return np.where(kplan.covered, kernel, labels)


def _has_engine_costs(defaults) -> bool:
    """False for `ModelDefaults.without_engine()` (every engine_* term zero): the kernel
    path then leaves out the engines' host costs as the roofline does."""
    return any(
        getattr(defaults, f) != 0.0
        for f in defaults.__dataclass_fields__
        if f.startswith("engine_")
    )


def _kernel_priced(kplan, method_name, p, lengths, extra, defaults) -> _Priced:
    """The roofline's per-step times `p` (price()'s locals) with the kernel tables' where
    the plan covers a row: device times from the tables, host costs the engine's."""
    from simulator.kernels import source as kernel_source

    spec_on = method_name != "none"
    b_base, b_spec = p["b_base"], p["b_spec"]
    kt = kernel_source.step_times(
        kplan,
        method_name,
        b_base=b_base,
        b_spec=b_spec,
        verify=lengths["verify"],
        context=lengths["context"],
        d_context=lengths["d_context"],
        k=lengths["k"],
        medusa_heads=extra["heads"],
        prompt=extra["prompt"],
        pf_base=p["pf_base"],
        pf_spec=p["pf_spec"] if spec_on else 0.0,
        host=_has_engine_costs(defaults),
    )
    on = kplan.covered

    def pick(kernel, roof):
        return np.where(on, kernel, roof)

    t_step = pick(kt.target, p["t_step"])
    pf_base_ms = pick(kt.prefill_base, p["pf_base_ms"])
    host_base = pick(kt.host_base, p["host_base"])
    base_step = t_step + pf_base_ms + host_base
    v_step, d_step = p["v_step"], p["d_step"]
    pf_spec_ms, host_spec, spec_step = p["pf_spec_ms"], p["host_spec"], base_step
    if spec_on:
        hw, t = extra["hw"], extra["t"]
        sampled_extra = (
            steady.get_engine_round_ms(
                True,
                extra["sampled"],
                0.0,
                b_spec,
                lengths["k"],
                t.vocab_size,
                hw.bw_gbps,
                extra["tp"],
                defaults,
            )
            - defaults.engine_round_ms
        )
        v_step = pick(kt.verify, v_step)
        d_step = pick(kt.draft, d_step)
        pf_spec_ms = pick(kt.prefill_spec, pf_spec_ms)
        host_spec = pick(kt.host_spec + sampled_extra, host_spec)
        spec_step = pick(
            d_step + v_step + pf_spec_ms + host_spec,
            p["spec_step"],
        )
    return _Priced(
        t_step=t_step,
        v_step=v_step,
        d_step=d_step,
        pf_base=p["pf_base"],
        pf_spec=p["pf_spec"],
        pf_base_ms=pf_base_ms,
        pf_spec_ms=pf_spec_ms,
        host_base=host_base,
        host_spec=host_spec,
        base_step=base_step,
        spec_step=spec_step,
        source=_merged_labels(kplan, p["labels"]),
    )


@dataclass(frozen=True)
class _Priced:
    """Per-step times in ms at the batches that run, one entry per scenario (a scalar
    where every row of a piece shares it)."""

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
    source: np.ndarray | None


_BASE_REASONS = (
    "cannot run: the target's weights and reserves exceed the GPUs' memory",
    "cannot run: prompt_len + output_len exceed the target's context window",
    "cannot run: the KV cache cannot hold one request",
    "overloaded: the request rate exceeds what the replica serves; queues grow without bound",
)
_SPEC_REASONS = (
    "cannot run: draft and target tokenizers differ, speculation is impossible",
    "cannot run with speculation: the draft's weights do not fit beside the target's",
    "cannot run with speculation: prompt_len + output_len exceed the draft's context window",
    "cannot run with speculation: the KV cache cannot hold one request beside the draft's",
    "overloaded with speculation: the request rate exceeds what the replica serves",
    "cannot run with speculation: K exceeds the Medusa checkpoint's heads "
    "(medusa_heads); engines refuse it",
)
_WARNING_MESSAGES = (
    f"K above {HIGH_K_WARN}: acceptance decays with position, deep drafts rarely pay",
    f"acceptance below {LOW_ACCEPTANCE_WARN}: speculation seldom pays",
    "batch does not fit in the KV cache: the engine runs effective_batch_*, the rest queue",
    "batch capped by the KV cache or max_num_seqs in steady state: see effective_batch_*",
    "speculation is slower than the baseline at this batch",
)


def _labels(messages, none: str = "") -> list[str]:
    """Every combination of `messages` (bit i = message i) spelled as its messages joined
    by '; ' (`none` where no bit is set): the categories of a status or warnings column,
    the same for every table, so tables concatenate as categoricals."""
    return [
        "; ".join(msg for i, msg in enumerate(messages) if p >> i & 1) or none
        for p in range(2 ** len(messages))
    ]


_STATUS_LABELS = _labels((*_BASE_REASONS, *_SPEC_REASONS), none="ok")
WINDOW_REASONS = (_BASE_REASONS[1], _SPEC_REASONS[2])
"""The statuses of a request longer than the target's or the draft's context window: a
`steady` or `open_loop` row reports them; a `decode_only` row prices one step and does not."""
MEMORY_REASONS = (_BASE_REASONS[0], _BASE_REASONS[2], _SPEC_REASONS[1], _SPEC_REASONS[3])
"""The statuses of a setup that does not fit in memory: weights, or a KV cache too small for
one request, with or without the draft."""
CANNOT_RUN_REASONS = (*_BASE_REASONS[:3], *_SPEC_REASONS[:4], _SPEC_REASONS[5])
"""The statuses of a deployment an engine refuses or fails to start (every reason but the
two that say a request rate overloads a replica, which runs)."""


def status_reasons(status: str) -> list[str]:
    """The reasons a `status` value joins ('ok' has none)."""
    return [] if status == "ok" else str(status).split("; ")


_WARNING_LABELS = _labels((*_WARNING_MESSAGES, *IGNORED_MESSAGES))


def _bits(masks, n: int) -> np.ndarray:
    """Rule masks (arrays or Python bools) combined as a bit pattern per row."""
    bits = np.zeros(n, dtype=np.int64)
    for i, mask in enumerate(masks):
        if mask is False:
            continue
        bits |= np.asarray(mask, dtype=np.int64) << i
    return bits


def _status(
    too_many_heads,
    catalog,
    t_code,
    d_code,
    method,
    spec_on,
    usable_base,
    usable_spec,
    fits_one_base,
    fits_one_spec,
    length,
    over_base,
    over_spec,
    n,
):
    """Setups that cannot run: they get no numbers, only the reason. Returns the status
    bits per row (`_STATUS_LABELS` spells them) and which arm of each row cannot run."""
    is_draft = method["draft_model"]
    t_win = catalog.window[t_code]
    base = (
        usable_base <= 0,
        (t_win > 0) & (length > t_win),
        (usable_base > 0) & ~fits_one_base,
        over_base,
    )
    spec = (False,) * len(_SPEC_REASONS)
    if spec_on:
        d_win = catalog.window[d_code - 1] if is_draft else 0.0
        spec = (
            is_draft and catalog.tokenizer[t_code] != catalog.tokenizer[d_code - 1],
            (usable_base > 0) & (usable_spec <= 0),
            is_draft and (d_win > 0) & (length > d_win),
            (usable_spec > 0) & fits_one_base & ~fits_one_spec,
            over_spec,
            too_many_heads,
        )
    bits = _bits((*base, *spec), n)
    codes_base = (bits & ((1 << len(base)) - 1)) != 0
    return bits, codes_base, codes_base | (bits != 0)


def _warnings(spec_on, k, alpha, speedup, fits, usable_spec, capped, n):
    """Warnings per row as bits (`_WARNING_LABELS` spells them)."""
    masks = (
        spec_on and k > HIGH_K_WARN,
        spec_on and alpha < LOW_ACCEPTANCE_WARN,
        (usable_spec > 0) & ~fits,
        (usable_spec > 0) & fits & capped,
        spec_on and speedup < SLOWDOWN_WARN,
    )
    return _bits(masks, n)
