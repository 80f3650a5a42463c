"""Step times from the kernel surfaces for a block of scenario rows: the one entry point
the prediction path calls (`plan_rows` once per block, `step_times` per batch tried).

Rows whose (GPU, engine, model shape, dtypes, TP) the tables cannot price keep the
roofline: their entries are NaN here and `KernelPlan.labels` says "roofline".
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from simulator.inputs.specs import ModelSpec
from simulator.kernels import tables
from simulator.kernels.axes import Axis
from simulator.kernels.composite import Layout, get_composite
from simulator.kernels.engines import EngineHost, host_for
from simulator.kernels.surface import (
    B_GRID,
    M_GRID,
    P_GRID,
    Q_MAX,
    S_GRID,
    KernelSurface,
    NoSurface,
    Shape,
    build_surface,
)

EAGLE3_DRAFT_VOCAB = 32_000
"""Tokens an EAGLE-3 head's LM head scores: the published EAGLE-3 heads map a 32,000-token
draft vocabulary onto the target's (`draft_vocab_size: 32000` in the config.json of
yuhuili/EAGLE3-LLaMA3.1-Instruct-8B and of SpecForge's llama3-8B-eagle3.json); EAGLE-1/2
and MTP heads score the target's whole vocabulary with its LM head."""

HEAD_FUSION = {"eagle": 2.0, "eagle3": 3.0, "mtp": 2.0}
"""Width of the fusion GEMM into a head's layer, in hidden sizes: EAGLE's [embedding;
feature] 2H->H, EAGLE-3's three target layers 3H->H, MTP's eh_proj 2H->H."""


def shape_of(spec: ModelSpec | None) -> Shape | None:
    """The dense decoder shape of a model, None for MoE and MLA models (no tables here):
    the spec's fields that `Shape` declares, read by name."""
    if spec is None or spec.is_moe or spec.is_mla:
        return None
    return Shape(**{f.name: getattr(spec, f.name) for f in dataclasses.fields(Shape)})


@functools.lru_cache(maxsize=4096)  # about 34 kB a surface
def get_surface(
    shape: Shape | None,
    gpu_id: str,
    engine: str,
    version: str,
    weight_dtype: str,
    kv_dtype: str,
    tp: int,
) -> KernelSurface | None:
    """The cached surface of a model shape on a catalog GPU with an engine (`version`
    "" = the newest bundled), or None where the tables cannot price it."""
    system = tables.SYSTEMS.get(gpu_id)
    if shape is None or system is None or engine not in tables.ENGINES:
        return None
    resolved = tables.resolve_version(system, engine, version or None)
    if resolved is None:
        return None
    try:
        return build_surface(shape, system, engine, resolved, weight_dtype, kv_dtype, tp)
    except (NoSurface, tables.KernelTableError):
        return None


@dataclass(frozen=True)
class Resolved:
    """What prices one combination of (target, draft, GPU, engine, version, dtypes, TP)."""

    target: KernelSurface
    draft: KernelSurface | None
    host: EngineHost
    vocab_size: float


@dataclass(frozen=True)
class _Stack:
    """The surfaces of a block stacked along a first axis (one entry per combination), so
    that every row reads its own surface's grids in one numpy pass."""

    layers: np.ndarray
    layer: np.ndarray
    lm_head: np.ndarray
    fusion2: np.ndarray
    fusion3: np.ndarray
    resblock: np.ndarray
    attn: np.ndarray
    prefill_attn: np.ndarray
    chunk_per_token: np.ndarray

    @classmethod
    def of(cls, surfaces: list[KernelSurface]) -> _Stack:
        return _stack_of(tuple(surfaces))

    @classmethod
    def build(cls, surfaces: tuple[KernelSurface, ...]) -> _Stack:
        def stack(name):
            return np.stack([getattr(x, name) for x in surfaces])

        return cls(
            layers=np.array([x.layers for x in surfaces]),
            layer=stack("layer_ms"),
            lm_head=stack("lm_head_ms"),
            fusion2=stack("fusion2_ms"),
            fusion3=stack("fusion3_ms"),
            resblock=stack("resblock_ms"),
            attn=stack("attn_ms"),
            prefill_attn=stack("prefill_attn_per_token_ms"),
            chunk_per_token=np.array([x.chunk_per_token_ms for x in surfaces]),
        )


@functools.lru_cache(maxsize=256)
def _stack_of(surfaces: tuple[KernelSurface, ...]) -> _Stack:
    """Stacks are built once per combination of surfaces (the surfaces are cached, so
    the same objects come back for the same rows)."""
    return _Stack.build(surfaces)


@dataclass(frozen=True)
class KernelPlan:
    """The surfaces of a block of rows: `group[i]` indexes the stacks for row i (-1: not
    on kernels); `covered` marks rows on kernels; `labels` is (codes per row, names):
    each row's latency source."""

    n: int
    group: np.ndarray
    covered: np.ndarray
    labels: tuple
    target: _Stack | None
    draft: _Stack | None
    host: dict
    vocab_share: np.ndarray

    @property
    def rows(self):
        """The covered rows as an index: every row (a slice: no copies) or the mask."""
        return slice(None) if self.covered.all() else self.covered


def plan_rows(key_codes: list[np.ndarray], resolve: Callable[[int], Resolved | None]) -> KernelPlan:
    """Group a block's rows by the integer codes that set their surface (`key_codes`,
    each of the block's length) and resolve each combination once, through a
    representative row (`resolve(row) -> Resolved | None`, None: the roofline)."""
    n = len(key_codes[0])
    key = np.zeros(n, dtype=np.int64)
    span = 1
    for c in key_codes:
        c = np.asarray(c, dtype=np.int64)
        size = int(c.max()) + 1
        key = key * size + c
        span *= size
    if span <= 4 * n + 4096:  # count instead of sort
        present = np.bincount(key, minlength=span) > 0
        slot_of = np.cumsum(present) - 1
        inverse = slot_of[key]
        first = np.empty(int(present.sum()), dtype=np.intp)
        first[inverse] = np.arange(n)  # some row of each combination
    else:
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    found = [resolve(int(i)) for i in first]
    on = [r for r in found if r is not None]
    slot = np.cumsum([r is not None for r in found]) - 1
    slot = np.where([r is not None for r in found], slot, -1)
    group = slot[inverse]
    covered = group >= 0
    names = [r.target.label if r else "roofline" for r in found]
    labels = (inverse, names)
    if not on:
        return KernelPlan(n, group, covered, labels, None, None, {}, np.ones(0))
    draft = None
    if all(r.draft is not None for r in on):
        draft = _Stack.of([r.draft for r in on])
    host = {f: np.array([getattr(r.host, f) for r in on]) for f in EngineHost.__dataclass_fields__}
    share = np.array([min(1.0, EAGLE3_DRAFT_VOCAB / r.vocab_size) for r in on])
    return KernelPlan(
        n, group, covered, labels, _Stack.of([r.target for r in on]), draft, host, share
    )


def target_surface(
    target: ModelSpec,
    gpu_id: str,
    engine: str,
    version: str,
    weight_dtype: str,
    kv_dtype: str,
    layout: Layout,
) -> KernelSurface | None:
    """The surface of a target: a dense decoder's from the GEMM and attention tables
    (tensor parallelism only), an MoE, MLA or hybrid-attention model's from
    aiconfigurator-core's engine over its MoE, MLA and comm tables (`composite`)."""
    if shape_of(target) is not None and not target.kv_layers:
        if layout.attention_dp_size != 1:
            return None
        return get_surface(
            shape_of(target), gpu_id, engine, version, weight_dtype, kv_dtype, layout.tp_size
        )
    return get_composite(
        target.aic_model,
        target.num_layers,
        target.hidden_size,
        gpu_id,
        engine,
        version,
        weight_dtype,
        target.checkpoint_dtype,
        kv_dtype,
        layout,
    )


def resolve(
    target: ModelSpec,
    draft: ModelSpec | None,
    gpu_id: str,
    engine: str,
    version: str,
    weight_dtype: str,
    kv_dtype: str,
    layout: Layout,
    is_draft_model: bool,
) -> Resolved | None:
    """The surfaces of one combination, or None where a table is missing (a draft-model
    row needs the draft's too, a dense draft on the replica's attention TP group)."""
    surface = target_surface(target, gpu_id, engine, version, weight_dtype, kv_dtype, layout)
    if surface is None:
        return None
    args = (gpu_id, engine, version, weight_dtype, kv_dtype, layout.tp_size)
    d = get_surface(shape_of(draft), *args) if is_draft_model else None
    if is_draft_model and d is None:
        return None
    return Resolved(surface, d, host_for(engine, version), float(target.vocab_size))


M_AXIS = Axis(M_GRID)
B_AXIS = Axis(B_GRID)
S_AXIS = Axis(S_GRID)
P_AXIS = Axis(P_GRID, measure=np.log2(P_GRID))
"""Prefill attention is linear in log2 of the prompt between the grid's lengths."""


def _at(grid: np.ndarray, g: np.ndarray, where: tuple) -> np.ndarray:
    """grid[g] (one row of a stack per entry) at the points `where` (`Axis.where`) locates,
    never negative."""
    i, w = where
    lo = grid[g, i]
    return np.maximum(lo + w * (grid[g, i + 1] - lo), 0.0)


def _attention(st: _Stack, g, batch, kv_len, q) -> np.ndarray:
    """One layer's decode attention per row: B sequences, KV length L, q queries each."""
    qi = np.clip(np.rint(q).astype(np.int64), 1, Q_MAX) - 1
    i, tx = B_AXIS.where(batch)
    j, ty = S_AXIS.where(kv_len)
    a = st.attn.reshape(-1)
    ns = len(S_GRID)
    flat = ((g * Q_MAX + qi) * len(B_GRID) + i) * ns + j
    z00, z01 = a[flat], a[flat + 1]
    z10, z11 = a[flat + ns], a[flat + ns + 1]
    out = (1 - tx) * ((1 - ty) * z00 + ty * z01) + tx * ((1 - ty) * z10 + ty * z11)
    return np.maximum(out, 0.0)


def _forward(st: _Stack, g, batch, q, kv_len, separate: bool = False) -> np.ndarray:
    m = batch * q
    attn = _attention(st, g, m, kv_len, 1.0) if separate else _attention(st, g, batch, kv_len, q)
    at_m = M_AXIS.where(m)
    return st.layers[g] * (_at(st.layer, g, at_m) + attn) + _at(st.lm_head, g, at_m)


def _prefill(st: _Stack, g, tokens, prompt) -> np.ndarray:
    """Prompt tokens riding in a step, at a full chunk's cost per token (linear in the
    tokens, so the break-even solve stays exact)."""
    if not np.any(tokens):
        return np.zeros(np.shape(g))
    attn = _at(st.prefill_attn, g, P_AXIS.where(prompt, at=np.log2(np.maximum(prompt, 1.0))))
    return st.layers[g] * tokens * (st.chunk_per_token[g] + attn)


@dataclass(frozen=True)
class StepTimes:
    """Per-row times in ms (NaN where the row is not on kernels)."""

    target: np.ndarray
    """Target decode forward at the baseline batch, q = 1."""
    verify: np.ndarray
    """Target verify forward at the speculative batch, q = K+1 (verify_tokens)."""
    draft: np.ndarray
    """All K proposals of a speculative step (draft model or heads), host costs included."""
    prefill_base: np.ndarray
    prefill_spec: np.ndarray
    """Target's and draft's prefill of a step's prompt tokens, riding in its forward."""
    host_base: np.ndarray
    host_spec: np.ndarray
    """The engine's host costs per step (speculative: plus its round and draft forwards)."""


def step_times(
    plan: KernelPlan,
    method: str,
    *,
    b_base,
    b_spec,
    verify,
    context,
    d_context,
    k,
    medusa_heads,
    prompt,
    pf_base,
    pf_spec,
    separate_verify_reads: bool = False,
    host: bool = True,
) -> StepTimes:
    """Every kernel-priced time of the plan's rows at these batches (arrays or scalars
    broadcast to the block's rows; NaN where a row is not on kernels). `host=False`
    leaves out the engines' host costs (a bare loop of forwards, as
    `ModelDefaults.without_engine` asks of the roofline)."""
    n = plan.n
    on = plan.rows
    g = plan.group[on]

    def take(v):
        return np.broadcast_to(np.asarray(v, dtype=float), (n,))[on]

    st, hc = plan.target, plan.host
    zero = np.zeros(len(g))

    def h(name):
        return hc[name][g] if host else zero

    b = take(b_base)
    ctx, pr = take(context), take(prompt)
    times = {
        "target": _forward(st, g, b, 1.0, ctx),
        "prefill_base": _prefill(st, g, take(pf_base), pr),
        "host_base": h("step_ms") + h("per_seq_ms") * b,
    }
    if method != "none":
        bs, q, kk = take(b_spec), take(verify), take(k)
        times["verify"] = _forward(st, g, bs, q, ctx, separate_verify_reads)
        pf = take(pf_spec)
        draft, pf_draft, forwards = _draft(method, plan, g, h, bs, kk, take(d_context), pf, pr)
        if method == "medusa":
            draft = _medusa(st, g, bs, take(medusa_heads)) + h("head_forward_ms")
        times["draft"] = draft
        times["prefill_spec"] = _prefill(st, g, pf, pr) + pf_draft
        times["host_spec"] = (
            h("step_ms") + h("per_seq_ms") * bs + h("round_ms") + h("draft_forward_ms") * forwards
        )
    return StepTimes(**{f: _spread(n, on, times.get(f)) for f in StepTimes.__dataclass_fields__})


def _spread(n: int, on, values) -> np.ndarray:
    """The covered rows' `values` (None: none) as a column of the block's n rows, NaN
    where a row is not covered."""
    if isinstance(on, slice) and isinstance(values, np.ndarray) and values.shape == (n,):
        return values
    col = np.full(n, np.nan)
    if values is not None:
        col[on] = values
    return col


def _medusa(st: _Stack, g, b, heads) -> np.ndarray:
    """`heads` Medusa heads: an H x H residual block and an LM head each."""
    at_b = M_AXIS.where(b)
    return heads * (_at(st.resblock, g, at_b) + _at(st.lm_head, g, at_b))


def _draft(method: str, plan: KernelPlan, g, h, b, k, d_context, pf, prompt):
    """(all K proposals' time, the draft's prefill per step, separate draft forwards)."""
    st = plan.target
    if method == "draft_model":
        one = _forward(plan.draft, g, b, 1.0, d_context)
        return k * one, _prefill(plan.draft, g, pf, prompt), k
    if method in HEAD_FUSION:
        fusion = st.fusion3 if method == "eagle3" else st.fusion2
        share = plan.vocab_share[g] if method == "eagle3" else 1.0
        at_b = M_AXIS.where(b)
        one = (
            _at(fusion, g, at_b)
            + _at(st.layer, g, at_b)
            + _attention(st, g, b, d_context, 1.0)
            + share * _at(st.lm_head, g, at_b)
        )
        one = one + h("head_forward_ms") + h("head_per_seq_ms") * b
        pf_head = _prefill(st, g, pf, prompt) / st.layers[g]
        return k * one, pf_head, 0.0
    return np.zeros_like(b), 0.0, 0.0


def forward_ms(plan: KernelPlan, model: str, batch, query, context) -> np.ndarray:
    """ms of one forward of the target (`model` "target") or the separate draft model
    ("draft") at these points, NaN on rows the plan does not cover: the shape of a
    `StepTimes.forward_ms` seam (simulator/model/predict.py's pieces price through
    `step_times`, which also prices prefill, heads and host costs)."""
    st = plan.target if model == "target" else plan.draft
    if st is None:
        return np.full(plan.n, np.nan)
    on = plan.rows

    def take(v):
        return np.broadcast_to(np.asarray(v, dtype=float), (plan.n,))[on]

    return _spread(
        plan.n, on, _forward(st, plan.group[on], take(batch), take(query), take(context))
    )


def spec_prefill_ms(plan: KernelPlan, method: str, tokens, prompt) -> np.ndarray:
    """ms the target and the draft spend prefilling `tokens` prompt tokens in a
    speculative step (linear in the tokens), NaN on rows the plan does not cover."""
    on = plan.rows
    g = plan.group[on]
    n_tok = np.broadcast_to(np.asarray(tokens, dtype=float), (plan.n,))[on]
    pr = np.broadcast_to(np.asarray(prompt, dtype=float), (plan.n,))[on]
    ms = _prefill(plan.target, g, n_tok, pr)
    if method == "draft_model":
        ms = ms + _prefill(plan.draft, g, n_tok, pr)
    elif method in HEAD_FUSION:
        ms = ms + _prefill(plan.target, g, n_tok, pr) / plan.target.layers[g]
    return _spread(plan.n, on, ms)
