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
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from simulator.errors import InputError
from simulator.inputs.catalog import default_gpus, default_models
from simulator.inputs.scenarios import (
    IGNORED_MESSAGES,
    ScenarioArrays,
    categorical,
    validate_scenarios,
)
from simulator.inputs.specs import DTYPE_BYTES, METHODS, GPUSpec, ModelSpec
from simulator.model import acceptance, admission, kernel_steps, stages
from simulator.model.defaults import DEFAULTS, ModelDefaults
from simulator.model.drafts import method_masks
from simulator.model.latency import Hardware, ModelArrays
from simulator.model.steady import SERVING_MODES
from simulator.model.step_times import ROOFLINE, Forwards, step_times_for

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
_LAYOUT_INPUTS = ("tp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")
_ROW_INPUTS = (
    "num_gpus",
    *_LAYOUT_INPUTS,
    "k",
    "batch_size",
    "prompt_len",
    "output_len",
    "verify_tokens",
    "medusa_heads",
    "mtp_depth",
    "draft_context_len",
    "max_num_seqs",
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

    `calibration` (a `simulator.model.calibration.Calibration`) replaces roofline step times by
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
    label_names = {ROOFLINE: 0}
    model_specs = tuple(models.values())
    gpu_specs = tuple(gpus[key] for key in sc.categories["gpu"])
    try:
        catalog = _catalog(model_specs, gpu_specs)
    except TypeError:  # a catalog of unhashable specs: build it each time
        catalog = _catalog.__wrapped__(model_specs, gpu_specs)

    # One thread: a piece's passes are too short for numpy's released GIL to pay for the
    # contention of a second (on two cores, bench/sweep.py's table ran 10-15% slower).
    for method, uniform, rows in pieces:
        res, source = _evaluate(
            sc, rows, method, uniform, catalog, defaults, calibration, break_even, kernels
        )
        for c in _FLOAT_OUTPUTS:
            out[c][rows] = res[c]
        out["fits"][rows] = res["fits"]
        status_bits[rows] = res["status"]
        warning_bits[rows] = res["warnings"]
        if source is not None:
            label_codes[rows] = _label_codes(source, label_names)
    if order is not None:
        inv = np.empty(n, dtype=np.intp)
        inv[order] = np.arange(n)
        for c in list(out):
            out[c] = out[c].take(inv)
        status_bits = status_bits.take(inv)
        warning_bits = warning_bits.take(inv)
        label_codes = label_codes.take(inv)
    columns = {c: out[c] for c in _FLOAT_OUTPUTS}
    columns["latency_source"] = categorical(label_codes, list(label_names))
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


def _piece(sc, rows, method_name, uniform, catalog, defaults) -> tuple[stages.Piece, dict]:
    """The inputs of the rows `rows` of `sc`, which share `method_name` (and, when
    `uniform`, the `_GROUP_COLUMNS` ids: target, draft and dtypes, then scalars; the GPU
    stays per row); and the piece's scenario codes."""
    n = rows.stop - rows.start if isinstance(rows, slice) else len(rows)
    val = {c: sc.values[c][rows] for c in _ROW_INPUTS}
    codes = {c: sc.codes[c][rows] for c in _CODE_COLUMNS}
    if uniform:
        codes.update({c: int(codes[c][0]) for c in _GROUP_COLUMNS})
    g_code, g_specs = codes["gpu"], catalog.gpus
    wd_names = np.array(sc.categories["weight_dtype"])
    kv_names = np.array(sc.categories["kv_dtype"])
    is_fp8 = wd_names[codes["weight_dtype"]] == "fp8"
    fp8_tflops = np.array([g.tflops_for("fp8") for g in g_specs])[g_code]
    bf16_tflops = np.array([g.bf16_tflops for g in g_specs])[g_code]
    hw = Hardware(
        bw_gbps=np.array([g.hbm_bandwidth_gbps for g in g_specs])[g_code],
        tflops=np.where(is_fp8, fp8_tflops, bf16_tflops),
        link_gbps=np.array([g.interconnect_gbps for g in g_specs])[g_code],
        num_gpus=val["num_gpus"],
        sharpness=defaults.roofline_sharpness,
    )
    piece = stages.Piece(
        n=n,
        method_name=method_name,
        method=method_masks(method_name),
        target=catalog.models.take(codes["target"]),
        draft=catalog.drafts.take(codes["draft"]),
        target_code=codes["target"],
        draft_code=codes["draft"],
        hardware=hw,
        memory_gb=np.array([g.memory_gb for g in g_specs])[g_code],
        weight_bytes=np.array([DTYPE_BYTES[w] for w in wd_names])[codes["weight_dtype"]],
        kv_bytes=np.array([DTYPE_BYTES[v] for v in kv_names])[codes["kv_dtype"]],
        k=val["k"],
        batch=val["batch_size"],
        prompt=val["prompt_len"],
        output=val["output_len"],
        verify=val["verify_tokens"],
        medusa_heads=val["medusa_heads"],
        mtp_depth=val["mtp_depth"],
        draft_window=val["draft_context_len"],
        max_num_seqs=val["max_num_seqs"],
        acceptance_rate=val["acceptance_rate"],
        mean_accepted_tokens=val["mean_accepted_tokens"],
        positions=None if sc.positions is None else sc.positions[rows],
        gpu_memory_utilization=val["gpu_memory_utilization"],
        request_rate=val["request_rate"],
        in_steady=stages.mask(codes["serving"] == SERVING_MODES.index("steady")),
        sampled=stages.mask(val["temperature"] > 0),
        gpu_hourly_usd=val["gpu_hourly_usd"],
        attention_dp=val["attention_dp_size"],
    )
    return piece, codes


def _forwards(sc, p: stages.Piece, codes: dict) -> Forwards:
    """What a step-time source reads of the piece `p` of `sc`; `codes` the piece's
    scenario codes, spelled as ids only when a source asks (`Forwards.names`)."""

    def names(column):
        ids = np.array(sc.categories[column], dtype=object)[codes[column]]
        return np.broadcast_to(ids, (p.n,)).astype(str)

    return Forwards(
        target=p.target,
        draft=p.draft,
        hardware=p.hardware,
        weight_bytes=p.weight_bytes,
        kv_bytes=p.kv_bytes,
        n=p.n,
        names=names,
    )


def _kernel_plan(sc, rows, p: stages.Piece, codes: dict, catalog, fw: Forwards, calibration):
    """The kernel tables' plan of the piece `p` (`kernel_steps.get_plan`), or None."""
    layout = {c: sc.values[c][rows] for c in _LAYOUT_INPUTS}
    plan = kernel_steps.get_plan(sc, codes, catalog, p.n, layout, p.is_draft)
    if plan is not None and calibration is not None:
        # A profiled device keeps its profile; the kernel tables price the others.
        plan = kernel_steps.without_profiled(plan, fw.names("gpu"), calibration)
    return plan


def _admission_caps(sc, p: stages.Piece, codes: dict, catalog) -> tuple:
    """Per row, the engine's default cap on running requests without and with speculation
    (`simulator.model.admission`)."""
    engines = sc.categories["engine"]
    gpus = catalog.gpus
    args = (codes["engine"], codes["gpu"], np.broadcast_to(p.attention_dp, (p.n,)), engines, gpus)
    launched = np.broadcast_to(p.max_num_seqs, (p.n,))
    given = ~np.isnan(launched)
    return (
        np.where(given, launched, admission.caps(*args, speculative=False)),
        np.where(given, launched, admission.caps(*args, speculative=p.spec_on)),
    )


def _evaluate(sc, rows, method_name, uniform, catalog, defaults, calibration, break_even, kernels):
    """Every output of the rows `rows` of `sc`, which share `method_name`: the stages of
    `simulator.model.stages` composed, and the rows' `latency_source` labels (None: roofline).
    Arrays of len(rows), or scalars where uniform."""
    p, codes = _piece(sc, rows, method_name, uniform, catalog, defaults)
    fw = _forwards(sc, p, codes)
    plan = _kernel_plan(sc, rows, p, codes, catalog, fw, calibration) if kernels else None
    times = step_times_for(fw, defaults, calibration, plan)
    acc = stages.get_acceptance(p)
    mem = stages.get_memory(p, defaults)
    batch = stages.get_batch(p, mem, defaults, _admission_caps(sc, p, codes, catalog))
    loop = stages.get_open_loop(p, acc.tau, times, batch)
    open_loop = p.open_loop
    run_base = stages.where(open_loop, loop.base, batch.base)
    run_spec = stages.where(open_loop, loop.spec, batch.spec)
    b_base = np.maximum(loop.base, 1.0)
    b_spec = np.maximum(loop.spec, 1.0) if p.spec_on else b_base
    steps = stages.get_steps(p, acc.tau, times, b_base, b_spec)
    serving = stages.get_serving(p, acc.tau, steps, b_base, b_spec)
    status_bits, cannot_base, cannot_spec = _status(p, catalog, mem, batch, loop)
    serving = stages.blank_cannot_run(serving, cannot_base, cannot_spec)
    money = stages.get_economics(p, serving, cannot_base, cannot_spec)
    if open_loop is True:
        capped = False
    else:
        closed = open_loop is False or ~np.asarray(open_loop)
        capped = closed & (p.spec_on & (run_spec < batch.asked) | (run_base < batch.asked))
    warning_bits = _warnings(p, acc.alpha, serving.speedup, mem, capped, batch.capped_by_engine)
    be = np.nan
    if break_even:
        be = stages.get_break_even(p, times, steps, acc.tau, b_base, b_spec)
    gb = defaults.hbm_bytes_per_gb
    res = {
        "alpha": acc.alpha,
        "tau": acc.tau,
        "vllm_draft_acceptance_rate": acceptance.draft_acceptance_rate(acc.tau, p.k),
        "context_len": p.context,
        "effective_batch_baseline": run_base,
        "effective_batch_spec": run_spec,
        "prefill_tokens_per_step_baseline": steps.prefill_tokens_base,
        "prefill_tokens_per_step_spec": steps.prefill_tokens_spec,
        "target_step_ms": steps.target,
        "draft_step_ms": steps.draft,
        "verify_step_ms": steps.verify,
        "prefill_ms_baseline": steps.prefill_base,
        "prefill_ms_spec": steps.prefill_spec,
        "engine_ms_baseline": steps.engine_base,
        "engine_ms_spec": steps.engine_spec,
        "baseline_step_ms": steps.base,
        "spec_step_ms": steps.spec,
        "baseline_tpot_ms": serving.baseline_tpot,
        "spec_tpot_ms": serving.spec_tpot,
        "speedup": serving.speedup,
        "break_even_alpha": be,
        "baseline_tok_s": serving.baseline_tok_s,
        "spec_tok_s": serving.spec_tok_s,
        "baseline_tok_s_per_user": 1e3 / serving.baseline_tpot,
        "spec_tok_s_per_user": 1e3 / serving.spec_tpot,
        **{f"tokens_per_step_p{round(q * 100)}": v for q, v in acc.quantiles.items()},
        "weights_gb": mem.weights / gb,
        "draft_weights_gb": mem.draft_weights / gb,
        "reserved_gb": mem.reserved / gb,
        "kv_cache_gb_baseline": np.maximum(mem.usable_base, 0.0) / gb,
        "kv_cache_gb_spec": np.maximum(mem.usable_spec, 0.0) / gb,
        "kv_bytes_per_token": mem.kv_per_token,
        "draft_kv_bytes_per_token": mem.draft_kv_per_token,
        "kv_capacity_tokens_baseline": mem.capacity_base,
        "kv_capacity_tokens_spec": mem.capacity_spec,
        "max_concurrency_baseline": mem.concurrency_base,
        "max_concurrency_spec": mem.concurrency_spec,
        "cost_per_mtok_baseline": money.cost_base,
        "cost_per_mtok_spec": money.cost_spec,
        "fits": mem.fits,
        "status": status_bits,
        "warnings": warning_bits,
    }
    return res, steps.source


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
    "the cap on running requests (max_num_seqs: as launched, else the engine's default, "
    "SGLang's 48 with speculation), not the KV cache, bounds the batch: vLLM "
    "--max-num-seqs, SGLang --max-running-requests, TensorRT-LLM --max_batch_size",
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


def _status(p: stages.Piece, catalog, mem: stages.Memory, batch: stages.Batch, loop):
    """Setups that cannot run: they get no numbers, only the reason. Returns the status
    bits per row (`_STATUS_LABELS` spells them) and which arm of each row cannot run.
    `loop` (a `stages.OpenLoop`) says which arm a request rate overloads."""
    usable_base, usable_spec = mem.usable_base, mem.usable_spec
    fits_one_base, fits_one_spec = batch.base >= 1, batch.spec >= 1
    # A decode_only row describes one step at context prompt + output / 2: its lengths set
    # that context, they are not a request that must fit the model's window.
    length = stages.where(p.in_steady, p.prompt + p.output, 0.0)
    t_code, d_code, is_draft = p.target_code, p.draft_code, p.is_draft
    t_win = catalog.window[t_code]
    base = (
        usable_base <= 0,
        (t_win > 0) & (length > t_win),
        (usable_base > 0) & ~fits_one_base,
        loop.overloaded_base,
    )
    spec = (False,) * len(_SPEC_REASONS)
    if p.spec_on:
        d_win = catalog.window[d_code - 1] if is_draft else 0.0
        spec = (
            is_draft and catalog.tokenizer[t_code] != catalog.tokenizer[d_code - 1],
            (usable_base > 0) & (usable_spec <= 0),
            is_draft and (d_win > 0) & (length > d_win),
            (usable_spec > 0) & fits_one_base & ~fits_one_spec,
            loop.overloaded_spec,
            p.method_name == "medusa" and p.k > p.medusa_heads,
        )
    bits = _bits((*base, *spec), p.n)
    codes_base = (bits & ((1 << len(base)) - 1)) != 0
    return bits, codes_base, codes_base | (bits != 0)


def _warnings(p: stages.Piece, alpha, speedup, mem: stages.Memory, capped, engine_capped):
    """Warnings per row as bits (`_WARNING_LABELS` spells them)."""
    spec_on, k, fits, usable_spec = p.spec_on, p.k, mem.fits, mem.usable_spec
    masks = (
        spec_on and k > HIGH_K_WARN,
        spec_on and alpha < LOW_ACCEPTANCE_WARN,
        (usable_spec > 0) & ~fits,
        (usable_spec > 0) & fits & capped,
        spec_on and speedup < SLOWDOWN_WARN,
        (usable_spec > 0) & fits & capped & engine_capped,
    )
    return _bits(masks, p.n)
