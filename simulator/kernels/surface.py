"""A step-time surface per (model shape, GPU, engine, dtypes, TP), built once from the
measured kernel tables and evaluated over numpy arrays by interpolation.

One forward of B sequences with q new tokens each at KV length L, per GPU of a TP group:

    t(B, q, L) = layers * (layer(B*q) + attn_q(B, L)) + lm_head(B*q)
    layer(m)   = QKV + O + gate-up + down GEMMs at m tokens + element-wise ops
                 + 2 all-reduces of m * hidden bf16 values (TP > 1)
    attn_q     = decode attention of B sequences at KV length L with q queries each

GEMMs come from the engine's GEMM table by (m, n, k, dtype), decode attention from its
generation-attention table by (batch, KV length, heads, KV heads, head dim, KV dtype),
prefill attention from its context-attention table, all-reduce from its custom
all-reduce table. Element-wise ops (norms, RoPE, SiLU-and-mul, embedding) have no table
in aiconfigurator either: they are priced as it prices them, bytes / (mem_bw * scaling)
plus a constant per op, with the figures of the system's YAML.

Verification (q = K+1) reads each sequence's KV once for its K+1 queries: its attention
is the decode attention of q * heads query heads over the same KV heads (the GQA fold
FlashAttention does). aiconfigurator charges q separate reads, the decode attention of
B*q sequences (`verify_attention="separate"`); docs/model.md compares the two.

Units: ms, tokens. Every evaluation broadcasts over arrays.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import numpy as np

from simulator.kernels import tables

M_EXTRA = (65536.0, 131072.0)
"""Token counts past the GEMM table's largest m (32768) the surface is extended to, by
linear extrapolation (a GEMM is compute-bound there: linear in m)."""

M_GRID = np.unique(
    np.concatenate(
        [
            np.arange(1.0, 18.0),
            np.arange(32.0, 257.0, 16.0),
            np.arange(33.0, 258.0, 16.0),
            np.arange(512.0, 4353.0, 256.0),
            np.arange(513.0, 4354.0, 256.0),
            [8192.0, 16384.0, 32768.0],
            M_EXTRA,
        ]
    )
)
"""Token counts every surface holds its GEMM times at: the GEMM tables' own m grid (each m
and m+1 at the kernels' tile steps), so surfaces of any engine and GPU stack."""
B_GRID = 2.0 ** np.arange(0, 12)
S_GRID = 2.0 ** np.arange(0, 18)
"""Batch sizes (1-2048) and KV lengths (1-131072) of the decode-attention grids: the
tables' own (KV length = step + 1)."""
P_GRID = np.array(
    [16, 32, 64, 128, 256, 512, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 10240, 12288, 16384],
    float,
)
"""Prompt lengths of the prefill-attention grids (the tables' own)."""

PREFILL_CHUNK = 8192.0
"""Tokens of a prefill chunk: vLLM's default token budget per step on GPUs of 70 GiB or more
(`max_num_batched_tokens`, SERVING-NOTES (b))."""

Q_MAX = 17
"""Largest query length per sequence the verify attention grid holds (K up to 16)."""

ELEMENTWISE_OPS_PER_LAYER = 4
"""Fused add+RMSNorm twice, RoPE, SiLU-and-mul: the element-wise kernels of a Llama
layer under vLLM's fused ops (each pays aiconfigurator's constant per op)."""


class NoSurface(ValueError):
    """The tables cannot price this shape (no matching attention table, a dtype without
    GEMMs): the caller falls back to the roofline."""


@dataclass(frozen=True)
class Shape:
    """The dense decoder shape a surface prices (per model, not per GPU)."""

    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int


@dataclass(frozen=True, eq=False)
class KernelSurface:
    """Grids of per-op times (ms) for one shape on one GPU with one engine."""

    label: str
    layers: float
    m_grid: np.ndarray
    layer_ms: np.ndarray
    lm_head_ms: np.ndarray
    fusion2_ms: np.ndarray
    fusion3_ms: np.ndarray
    resblock_ms: np.ndarray
    b_grid: np.ndarray
    s_grid: np.ndarray
    attn_ms: np.ndarray
    """(Q_MAX, len(b_grid), len(s_grid)): one layer's decode attention, q queries each."""
    p_grid: np.ndarray
    prefill_attn_per_token_ms: np.ndarray
    """One layer's causal attention per prompt token for prompts of p_grid tokens."""

    def at_m(self, grid: np.ndarray, m) -> np.ndarray:
        return tables._interp_extrap(np.asarray(m, dtype=float), self.m_grid, grid)

    def attention_ms(self, batch, kv_len, q=1.0, separate: bool = False) -> np.ndarray:
        """One layer's attention for B sequences of KV length L with q queries each."""
        b = np.asarray(batch, dtype=float)
        q = np.asarray(q, dtype=float)
        if separate:
            return _bilinear(self.b_grid, self.s_grid, self.attn_ms[0], b * q, kv_len)
        qi = np.clip(np.rint(q).astype(int), 1, Q_MAX) - 1
        if qi.ndim == 0:
            return _bilinear(self.b_grid, self.s_grid, self.attn_ms[int(qi)], b, kv_len)
        out = np.empty(np.broadcast_shapes(qi.shape, b.shape, np.shape(kv_len)))
        b, s, qi = np.broadcast_arrays(b, np.asarray(kv_len, float), qi)
        for v in np.unique(qi):
            sel = qi == v
            out[sel] = _bilinear(self.b_grid, self.s_grid, self.attn_ms[v], b[sel], s[sel])
        return out

    def forward_ms(self, batch, q, kv_len, separate: bool = False) -> np.ndarray:
        """One forward of the whole model: B sequences, q tokens each, KV length L."""
        m = np.asarray(batch, dtype=float) * np.asarray(q, dtype=float)
        attn = self.attention_ms(batch, kv_len, q, separate)
        return self.layers * (self.at_m(self.layer_ms, m) + attn) + self.at_m(self.lm_head_ms, m)

    @property
    def chunk_per_token_ms(self) -> float:
        """One layer's GEMMs per token of a full prefill chunk (`PREFILL_CHUNK` tokens)."""
        return float(self.at_m(self.layer_ms, PREFILL_CHUNK)) / PREFILL_CHUNK

    def prefill_ms(self, tokens, prompt_len) -> np.ndarray:
        """Time of `tokens` prompt tokens riding in a step (chunked prefill): a full
        chunk's GEMM cost per token plus their causal attention over prompts of
        `prompt_len`. Linear in the tokens: the prompt tokens of a step arrive in chunks
        of thousands, whose GEMMs are compute-bound, and the break-even solve needs the
        step affine in tau."""
        n = np.asarray(tokens, dtype=float)
        per_token = tables._interp_extrap(
            np.log2(np.maximum(np.asarray(prompt_len, float), 1.0)),
            np.log2(self.p_grid),
            self.prefill_attn_per_token_ms,
        )
        return self.layers * n * (self.chunk_per_token_ms + per_token)

    def head_ms(self, batch, kv_len, fusion: float, vocab_share: float = 1.0) -> np.ndarray:
        """One EAGLE/EAGLE-3/MTP head forward: a fusion GEMM (2H->H, 3H->H; 0: none),
        one decoder layer and the LM head over `vocab_share` of the target's vocabulary
        (an EAGLE-3 head's reduced draft vocabulary), for B sequences."""
        b = np.asarray(batch, dtype=float)
        fuse = {0.0: 0.0, 2.0: self.fusion2_ms, 3.0: self.fusion3_ms}[float(fusion)]
        fuse_ms = self.at_m(fuse, b) if fusion else 0.0
        return (
            fuse_ms
            + self.at_m(self.layer_ms, b)
            + self.attention_ms(b, kv_len)
            + vocab_share * self.at_m(self.lm_head_ms, b)
        )

    def medusa_ms(self, batch, heads) -> np.ndarray:
        """One forward of `heads` Medusa heads (an H x H residual block and an LM head each)."""
        b = np.asarray(batch, dtype=float)
        per_head = self.at_m(self.resblock_ms, b) + self.at_m(self.lm_head_ms, b)
        return np.asarray(heads, dtype=float) * per_head


def _bilinear(xg, yg, z, x, y) -> np.ndarray:
    """z on the grid (xg, yg) at points (x, y), linear inside, extended linearly past the
    grid's ends (a batch or KV length beyond the measured range), never below zero."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    i = np.clip(np.searchsorted(xg, x) - 1, 0, len(xg) - 2)
    j = np.clip(np.searchsorted(yg, y) - 1, 0, len(yg) - 2)
    tx = (x - xg[i]) / (xg[i + 1] - xg[i])
    ty = (y - yg[j]) / (yg[j + 1] - yg[j])
    tx = np.maximum(tx, 0.0)
    ty = np.maximum(ty, 0.0)
    z00, z01, z10, z11 = z[i, j], z[i, j + 1], z[i + 1, j], z[i + 1, j + 1]
    out = (1 - tx) * ((1 - ty) * z00 + ty * z01) + tx * ((1 - ty) * z10 + ty * z11)
    return np.maximum(out, 0.0)


def build_surface(
    shape: Shape, system: str, engine: str, version: str, weight_dtype: str, kv_dtype: str, tp: int
) -> KernelSurface:
    """Read the tables and build the grids. Raises `NoSurface` where they cannot price it."""
    gemm_dtype = tables.GEMM_DTYPES.get(weight_dtype)
    kv_table = tables.KV_DTYPES.get(kv_dtype)
    if gemm_dtype is None or kv_table is None:
        raise NoSurface(f"no kernel tables for weights {weight_dtype} / KV {kv_dtype}")
    if shape.num_attention_heads % tp or shape.intermediate_size % tp:
        raise NoSurface(f"heads or MLP width not divisible by tp={tp}")
    gemm = tables.load_table(str(tables.table_path(system, engine, version, "gemm")), "gemm")
    m_grid = M_GRID
    h, hd = shape.hidden_size, shape.head_dim
    heads, kvh = shape.num_attention_heads // tp, max(1, shape.num_kv_heads // tp)
    inter = shape.intermediate_size // tp

    def g(n, k):
        return tables.gemm_curve(gemm, gemm_dtype, float(n), float(k), m_grid)

    linear = g((heads + 2 * kvh) * hd, h) + g(h, heads * hd) + g(2 * inter, h) + g(h, inter)
    layer = linear + _elementwise_ms(system, m_grid, h, (heads + kvh) * hd, inter)
    layer = layer + 2.0 * _allreduce_ms(system, engine, version, tp, m_grid * h)
    layer = _per_token_non_increasing(m_grid, layer)
    lm_head = _per_token_non_increasing(m_grid, g(shape.vocab_size / tp, h))
    b_grid, s_grid, attn = _decode_attention_grid(system, engine, version, heads, kvh, hd, kv_table)
    bb, ss = np.meshgrid(B_GRID, S_GRID, indexing="ij")
    attn = np.stack([_bilinear(b_grid, s_grid, a, bb, ss) for a in attn])
    # More queries over the same KV never cost less (the tables' grids at neighbouring
    # head counts can come from different kernels: 16 query heads timed below 8).
    attn = np.maximum.accumulate(attn, axis=0)
    p_grid, prefill_attn = _prefill_attention_grid(
        system, engine, version, heads, kvh, hd, kv_table
    )
    prefill_attn = tables._interp_extrap(np.log2(P_GRID), np.log2(p_grid), prefill_attn)
    return KernelSurface(
        label=f"kernels:{engine}-{version}/{system.split('_')[0]}",
        layers=float(shape.num_layers),
        m_grid=m_grid,
        layer_ms=layer,
        lm_head_ms=lm_head,
        fusion2_ms=g(h / tp, 2 * h),
        fusion3_ms=g(h / tp, 3 * h),
        resblock_ms=g(h / tp, h),
        b_grid=B_GRID,
        s_grid=S_GRID,
        attn_ms=attn,
        p_grid=P_GRID,
        prefill_attn_per_token_ms=prefill_attn,
    )


def _per_token_non_increasing(m: np.ndarray, t: np.ndarray) -> np.ndarray:
    """t with its time per token made non-increasing in m (least squares, pooling
    adjacent violators) and t itself non-decreasing. The GEMMs' tile steps (m = 129, 193
    start a new tile) make t(m)/m jump by a fraction of a percent; pooled, a batch just
    past a step and one just before it share the step's cost, and a larger batch never
    gives fewer tokens per second than a smaller one."""
    per_token = -tables._isotonic(-(t / m))
    return tables._isotonic(per_token * m)


def _elementwise_ms(system, m, hidden, rope_width, inter) -> np.ndarray:
    """A layer's element-wise kernels at m tokens, as aiconfigurator prices a mem op:
    bytes / (mem_bw * scaling) + a constant per op (bf16 activations)."""
    bw, scale, const_s = tables.system_memory_bandwidth(system)
    nbytes = 2.0 * m * (8.0 * hidden + 2.0 * rope_width + 3.0 * inter)
    return (nbytes / (bw * scale) + ELEMENTWISE_OPS_PER_LAYER * const_s) * 1e3


def _allreduce_ms(system, engine, version, tp, elements) -> np.ndarray:
    """One all-reduce of `elements` bf16 values on `tp` GPUs (0 at tp = 1); log-log
    interpolation of the engine's custom all-reduce table, fastest kernel per size."""
    if tp <= 1:
        return np.zeros_like(elements, dtype=float)
    df = tables.allreduce_table(system, engine, version)
    if df is None:
        raise NoSurface(f"no all-reduce table for {engine} on {system}")
    sub = df[(df["num_gpus"] == tp) & (df["allreduce_dtype"] == "bfloat16")]
    if sub.empty:
        raise NoSurface(f"no all-reduce measured on {tp} GPUs of {system}")
    best = sub.groupby("message_size")["latency"].min()
    x = np.log(best.index.to_numpy(float))
    y = np.log(best.to_numpy(float))
    return np.exp(tables._interp_extrap(np.log(np.maximum(elements, 1.0)), x, y, floor=None))


def _attention_subset(df, kvh, hd, kv_dtype, what):
    sub = df[
        (df["num_key_value_heads"] == kvh)
        & (df["head_dim"] == hd)
        & (df["kv_cache_dtype"] == kv_dtype)
        & (df["window_size"] == 0)
    ]
    if sub.empty:
        raise NoSurface(f"no {what} measured for {kvh} KV heads of dim {hd}, KV {kv_dtype}")
    return sub


def _heads_interp(cube: dict, want: float) -> np.ndarray:
    """Grids measured at several query-head counts, read at `want` heads: linear between
    them and past the largest; below the smallest, or with one count measured, that
    count's grid (decode attention is bound by the KV heads' reads, not the queries)."""
    hs = np.array(sorted(cube), float)
    if len(hs) == 1 or want <= hs[0]:
        return cube[hs[0]]
    i, j, w = tables._bracket(hs, want)
    return np.maximum((1 - w) * cube[hs[i]] + w * cube[hs[j]], 0.0)


@functools.lru_cache(maxsize=512)  # read-only grids, shared by the shapes of one head layout
def _decode_attention_grid(system, engine, version, heads, kvh, hd, kv_dtype):
    path = str(tables.table_path(system, engine, version, "generation_attention"))
    df = tables.load_table(path, "generation_attention")
    sub = _attention_subset(df, kvh, hd, kv_dtype, "decode attention")
    best = sub.groupby(["num_heads", "batch_size", "step"])["latency"].min()
    b_grid = np.array(sorted(sub["batch_size"].unique()), float)
    steps = np.array(sorted(sub["step"].unique()), float)
    cube = {}
    for nh, grid in best.groupby(level=0):
        piv = grid.droplevel(0).unstack("step").reindex(index=b_grid, columns=steps)
        piv = piv.interpolate(axis=1, limit_direction="both")
        piv = piv.interpolate(axis=0, limit_direction="both")
        if not piv.isna().to_numpy().any():
            cube[float(nh)] = piv.to_numpy(float)
    if not cube:
        raise NoSurface("decode attention table has no complete grid")
    packed = _per_head_non_increasing(cube)
    attn = np.stack(
        [_heads_interp(cube if q == 1 else packed, heads * q) for q in range(1, Q_MAX + 1)]
    )
    return b_grid, steps + 1.0, attn


def _per_head_non_increasing(cube: dict) -> dict:
    """The grids with time per query head non-increasing as the head count grows, for
    reading q verify queries packed as q x the model's query heads over its KV heads.

    A table's grid at a head count is the engine's non-speculative kernel for that head
    group, which at large groups can be another kernel: TensorRT-LLM's table times 96 and
    128 query heads over 2 KV heads 4-10x slower than 64, its XQA fallback. A verify runs
    the speculative kernel at the model's own group, which tiles q x group rows over one
    KV read (TensorRT-LLM decoderXQAImplCommon.cpp: multi-query-token kernels take any
    group), so its work grows at most linearly with the queries."""
    hs = sorted(cube)
    out = {hs[0]: cube[hs[0]]}
    for lo, hi in itertools.pairwise(hs):
        out[hi] = np.minimum(cube[hi], out[lo] * (hi / lo))
    return out


@functools.lru_cache(maxsize=512)  # read-only grids, shared by the shapes of one head layout
def _prefill_attention_grid(system, engine, version, heads, kvh, hd, kv_dtype):
    path = str(tables.table_path(system, engine, version, "context_attention"))
    df = tables.load_table(path, "context_attention")
    sub = _attention_subset(df, kvh, hd, kv_dtype, "prefill attention")
    sub = sub[sub["batch_size"] == sub["batch_size"].min()]
    best = sub.groupby(["num_heads", "isl"])["latency"].min()
    p_grid = np.array(sorted(sub["isl"].unique()), float)
    cube = {}
    for nh, grid in best.groupby(level=0):
        s = grid.droplevel(0).reindex(p_grid).interpolate(limit_direction="both")
        if not s.isna().any():
            cube[float(nh)] = s.to_numpy(float) / p_grid
    if not cube:
        raise NoSurface("prefill attention table has no complete grid")
    return p_grid, _heads_interp(cube, heads)
