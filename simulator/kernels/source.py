"""Step times from the kernel surfaces for a block of scenario rows: the one entry point
the prediction path calls (`plan_rows` once per block, `step_times` per batch tried).

Rows whose (GPU, engine, model shape, dtypes, TP) the tables cannot price keep the
roofline: their entries are NaN here and `KernelPlan.labels` says "roofline".
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np

from simulator.kernels import tables
from simulator.kernels.engines import ENGINE_HOST, EngineHost
from simulator.kernels.surface import KernelSurface, NoSurface, Shape, build_surface
from simulator.specs import ModelSpec

NO_HOST = EngineHost(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)

EAGLE3_DRAFT_VOCAB = 32_000
"""Tokens an EAGLE-3 head's LM head scores: the published EAGLE-3 heads map a 32,000-token
draft vocabulary onto the target's (`draft_vocab_size: 32000` in the config.json of
yuhuili/EAGLE3-LLaMA3.1-Instruct-8B and of SpecForge's llama3-8B-eagle3.json); EAGLE-1/2
and MTP heads score the target's whole vocabulary with its LM head."""

HEAD_FUSION = {"eagle": 2.0, "eagle3": 3.0, "mtp": 2.0}
"""Width of the fusion GEMM into a head's layer, in hidden sizes: EAGLE's [embedding;
feature] 2H->H, EAGLE-3's three target layers 3H->H, MTP's eh_proj 2H->H."""


def shape_of(spec: ModelSpec | None) -> Shape | None:
    """The dense decoder shape of a model, None for MoE and MLA models (no tables here)."""
    if spec is None or spec.is_moe or spec.is_mla:
        return None
    return Shape(
        num_layers=spec.num_layers,
        hidden_size=spec.hidden_size,
        num_attention_heads=spec.num_attention_heads,
        num_kv_heads=spec.num_kv_heads,
        head_dim=spec.head_dim,
        intermediate_size=spec.intermediate_size,
        vocab_size=spec.vocab_size,
    )


@functools.lru_cache(maxsize=512)
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
class _Group:
    rows: np.ndarray
    target: KernelSurface
    draft: KernelSurface | None
    host: EngineHost
    vocab_size: float


@dataclass(frozen=True)
class KernelPlan:
    """Which rows of a block each surface prices; `covered` marks rows on kernels."""

    n: int
    groups: tuple[_Group, ...]
    covered: np.ndarray
    labels: np.ndarray


def plan_rows(
    targets: list[ModelSpec],
    drafts: list[ModelSpec | None],
    gpu_ids: np.ndarray,
    engines: np.ndarray,
    versions: np.ndarray,
    weight_dtypes: np.ndarray,
    kv_dtypes: np.ndarray,
    num_gpus: np.ndarray,
    is_draft_model: bool,
) -> KernelPlan:
    """Group a block's rows by what sets their surface. Arguments are per-row arrays
    (`targets`/`drafts` per-row specs as object arrays) of one length."""
    n = len(gpu_ids)
    cols = [np.asarray(c) for c in (gpu_ids, engines, versions, weight_dtypes, kv_dtypes)]
    cols.append(np.asarray(num_gpus, dtype=float))
    tid = np.array([id(t) for t in targets], dtype=np.int64)
    did = np.array([id(d) for d in drafts], dtype=np.int64)
    key_cols = [pd_codes(c) for c in cols] + [pd_codes(tid), pd_codes(did)]
    key = np.zeros(n, dtype=np.int64)
    for c in key_cols:
        key = key * (int(c.max()) + 1) + c
    uniq, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(inverse, minlength=len(uniq)))])
    covered = np.zeros(n, dtype=bool)
    labels = np.full(n, "roofline", dtype=object)
    groups = []
    for g, i in enumerate(first):
        rows = order[bounds[g] : bounds[g + 1]]
        args = (str(cols[0][i]), str(cols[1][i]), str(cols[2][i]), str(cols[3][i]))
        kv, tp = str(cols[4][i]), int(cols[5][i])
        surface = get_surface(shape_of(targets[i]), args[0], args[1], args[2], args[3], kv, tp)
        draft = None
        if surface is not None and is_draft_model:
            draft = get_surface(shape_of(drafts[i]), args[0], args[1], args[2], args[3], kv, tp)
            if draft is None:
                surface = None
        if surface is None:
            continue
        covered[rows] = True
        labels[rows] = surface.label
        host = ENGINE_HOST[args[1]]
        groups.append(_Group(rows, surface, draft, host, float(targets[i].vocab_size)))
    return KernelPlan(n, tuple(groups), covered, labels)


def pd_codes(values: np.ndarray) -> np.ndarray:
    """Integer codes of a column's values (order of first appearance)."""
    import pandas as pd

    return pd.factorize(values)[0].astype(np.int64)


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
    broadcast to the block's rows). `host=False` leaves out the engines' host costs (a
    bare loop of forwards, as `ModelDefaults.without_engine` asks of the roofline)."""
    n = plan.n
    full = {
        name: np.broadcast_to(np.asarray(v, dtype=float), (n,))
        for name, v in dict(
            b_base=b_base,
            b_spec=b_spec,
            verify=verify,
            context=context,
            d_context=d_context,
            k=k,
            heads=medusa_heads,
            prompt=prompt,
            pf_base=pf_base,
            pf_spec=pf_spec,
        ).items()
    }
    out = {f: np.full(n, np.nan) for f in StepTimes.__dataclass_fields__}
    spec_on = method != "none"
    for g in plan.groups:
        v = {name: a[g.rows] for name, a in full.items()}
        if not host:
            g = replace(g, host=NO_HOST)
        s, h = g.target, g.host
        out["target"][g.rows] = s.forward_ms(v["b_base"], 1.0, v["context"])
        out["prefill_base"][g.rows] = s.prefill_ms(v["pf_base"], v["b_base"], v["prompt"])
        out["host_base"][g.rows] = h.step_ms + h.per_seq_ms * v["b_base"]
        if not spec_on:
            continue
        b = v["b_spec"]
        out["verify"][g.rows] = s.forward_ms(b, v["verify"], v["context"], separate_verify_reads)
        pf = s.prefill_ms(v["pf_spec"], b * v["verify"], v["prompt"])
        draft, pf_draft, forwards = _draft(method, g, v)
        out["draft"][g.rows] = draft
        out["prefill_spec"][g.rows] = pf + pf_draft
        out["host_spec"][g.rows] = (
            h.step_ms + h.per_seq_ms * b + h.round_ms + h.draft_forward_ms * forwards
        )
    return StepTimes(**out)


def _draft(method: str, g: _Group, v: dict):
    """(all K proposals' time, the draft's prefill per step, separate draft forwards)."""
    s, h, b, k = g.target, g.host, v["b_spec"], v["k"]
    if method == "draft_model":
        one = g.draft.forward_ms(b, 1.0, v["d_context"])
        pf = g.draft.prefill_ms(v["pf_spec"], b, v["prompt"])
        return k * one, pf, k
    if method in HEAD_FUSION:
        share = 1.0
        if method == "eagle3":
            share = min(1.0, EAGLE3_DRAFT_VOCAB / g.vocab_size)
        one = s.head_ms(b, v["d_context"], HEAD_FUSION[method], share)
        one = one + h.head_forward_ms + h.head_per_seq_ms * b
        pf = s.prefill_ms(v["pf_spec"], b, v["prompt"]) / s.layers
        return k * one, pf, 0.0
    if method == "medusa":
        return s.medusa_ms(b, v["heads"]) + h.head_forward_ms, 0.0, 0.0
    return np.zeros_like(b), 0.0, 0.0
