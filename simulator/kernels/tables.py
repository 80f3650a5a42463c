"""Where aiconfigurator-core keeps its measured per-op tables, and how they are read.

aiconfigurator-core (NVIDIA, Apache-2.0, pinned in requirements.txt) ships tables of
kernel latencies measured with each engine on each GPU:
`systems/data/<system>/<op>/<engine>/<version>/<table>.parquet`. Its query API is
compiled (Rust) and answers one point per call, so this module reads the tables
themselves (pandas + pyarrow) and `simulator.kernels.surface` builds numpy grids from
them. `REQUIRED_COLUMNS` is what is relied on; `load_table` raises `KernelTableError`
naming the file and the missing columns if a release moves or renames them.

Latencies in the tables are milliseconds; message sizes of the all-reduce tables are
elements (bf16).
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from simulator.kernels.engines import host_versions

ENGINES = ("vllm", "sglang", "trtllm")
"""Engines the tables were measured with, as the `engine` scenario column names them."""

ENGINE_CHOICES = (*ENGINES, "other")
"""Values of the `engine` column: `other` is an engine without tables (a research engine,
llama.cpp, ...): its rows are priced on the roofline."""

SYSTEMS = {
    "h100-sxm": "h100_sxm",
    "h200": "h200_sxm",
    "b200": "b200_sxm",
    "gb200": "gb200",
    "a100-80gb": "a100_sxm",
    "l40s": "l40s",
}
"""Catalog GPU id (data/gpus.csv) -> aiconfigurator system. Others (MI300X, the RTX
cards, H20, H800, L4, A100 40GB, CPU) have no tables: their rows stay on the roofline."""

GEMM_DTYPES = {"bf16": "bfloat16", "fp16": "bfloat16", "fp8": "fp8"}
"""Weight dtype -> the tables' `gemm_dtype` (fp16 is priced as bf16: same tensor cores).
int8/int4/fp4 weights have no table here and stay on the roofline."""

KV_DTYPES = {"bf16": "bfloat16", "fp16": "bfloat16", "fp8": "fp8"}

TABLES = {
    "gemm": ("gemm", "gemm_perf.parquet"),
    "generation_attention": ("attention", "generation_attention_perf.parquet"),
    "context_attention": ("attention", "context_attention_perf.parquet"),
    "allreduce": ("comm", "custom_allreduce_perf.parquet"),
}
"""Table name -> (op folder, file name)."""

REQUIRED_COLUMNS = {
    "gemm": ("gemm_dtype", "m", "n", "k", "latency"),
    "generation_attention": (
        "batch_size",
        "num_heads",
        "num_key_value_heads",
        "head_dim",
        "kv_cache_dtype",
        "step",
        "latency",
    ),
    "context_attention": (
        "batch_size",
        "isl",
        "num_heads",
        "num_key_value_heads",
        "head_dim",
        "kv_cache_dtype",
        "latency",
    ),
    "allreduce": ("allreduce_dtype", "num_gpus", "message_size", "latency", "kernel_source"),
}


class KernelTableError(RuntimeError):
    """The installed aiconfigurator-core does not have a table where it is expected."""


def data_root() -> Path:
    """The installed package's `systems/data` folder."""
    import aiconfigurator_core

    return Path(aiconfigurator_core.__file__).resolve().parent / "systems" / "data"


@functools.cache
def engine_versions() -> tuple[str, ...]:
    """Every engine version the `engine_version` column accepts: those with GEMM tables on
    some system in the installed package and those with host costs of their own
    (data/engine_host_costs.csv), oldest first; empty if the package is missing."""
    found = {v for e in ENGINES for v in engine_versions_of(e)}
    return tuple(sorted(found, key=_version_key))


@functools.cache
def table_versions_of(engine: str) -> tuple[str, ...]:
    """The versions of one engine with GEMM tables on some system, oldest first; empty for
    `other` or without the package."""
    if engine not in ENGINES:
        return ()
    try:
        root = data_root()
    except ImportError:
        return ()
    found = {p.parent.name for p in root.glob(f"*/gemm/{engine}/*/gemm_perf.parquet")}
    return tuple(sorted(found, key=_version_key))


@functools.cache
def engine_versions_of(engine: str) -> tuple[str, ...]:
    """The versions of one engine a row may name, oldest first: its table versions and,
    where the package is installed, the versions with host costs of their own (their
    kernels are priced from the nearest table version, `host_only`)."""
    tabled = table_versions_of(engine)
    if not tabled:
        return ()
    return tuple(sorted({*tabled, *host_versions(engine)}, key=_version_key))


def host_only(engine: str, version: str) -> bool:
    """Whether `version` has host costs of its own but no kernel tables on any system."""
    return version in host_versions(engine) and version not in table_versions_of(engine)


def nearest(version: str, have) -> str | None:
    """Of the versions `have`, the oldest at or after `version`, else the newest."""
    ordered = sorted(have, key=_version_key)
    later = [v for v in ordered if _version_key(v) >= _version_key(version)]
    return (later or ordered[-1:] or [None])[0]


@functools.cache
def prices_version(gpu_id: str, engine: str, version: str) -> bool:
    """Whether `version` of `engine` has the compute tables for catalog GPU `gpu_id`."""
    system = SYSTEMS.get(gpu_id)
    if system is None or engine not in ENGINES:
        return False
    try:
        return resolve_version(system, engine, version) is not None
    except ImportError:
        return False


GPUS_PER_NODE = {
    "h100-sxm": 8,
    "h100-pcie": 8,
    "h200": 8,
    "b200": 8,
    "a100-80gb": 8,
    "a100-40gb": 8,
    "l40s": 8,
    "gb200": 4,
}
"""GPUs per host (one launch of the engine per host), from aiconfigurator-core's system
files (`systems/<system>.yaml`, `node.num_gpus_per_node`): 8 for the HGX boards, 4 for a
GB200 compute tray (2 Grace CPUs x 2 GPUs). A GB200 NVL72 rack joins 18 trays in one NVLink
domain of 72 GPUs, so a replica over several trays keeps NVLink speed, but each tray is still
a host the launch must start on."""

DEFAULT_GPUS_PER_NODE = 8
"""Other GPUs: the 8-GPU server most clouds rent (MI300X platforms, H800/H20 boards)."""


def get_gpus_per_node(gpu_id: str) -> int:
    """GPUs per host of a catalog GPU (`GPUS_PER_NODE`)."""
    return GPUS_PER_NODE.get(gpu_id, DEFAULT_GPUS_PER_NODE)


def systems_root() -> Path:
    return data_root().parent


def _version_key(version: str) -> tuple:
    parts = []
    for piece in version.replace("rc", ".-1.").replace("post", ".").split("."):
        parts.append(int(piece) if piece.lstrip("-").isdigit() else -2)
    return tuple(parts)


def versions(system: str, engine: str, table: str) -> list[str]:
    """Versions of `engine` on `system` that hold `table`, oldest first."""
    folder, name = TABLES[table]
    base = data_root() / system / folder / engine
    if not base.is_dir():
        return []
    found = [p.name for p in base.iterdir() if (p / name).is_file()]
    return sorted(found, key=_version_key)


def resolve_version(system: str, engine: str, version: str | None = None) -> str | None:
    """The engine version whose GEMM and attention tables price `system`: `version` if the
    tables hold it, the nearest (`nearest`) if it is a version with host costs alone
    (`host_only`), else (None asked) the newest that has all three compute tables."""
    have = [
        set(versions(system, engine, t))
        for t in ("gemm", "generation_attention", "context_attention")
    ]
    common = set.intersection(*have) if have else set()
    if version is not None:
        if version in common:
            return version
        return nearest(version, common) if host_only(engine, version) else None
    return max(common, key=_version_key) if common else None


def table_path(system: str, engine: str, version: str, table: str) -> Path:
    folder, name = TABLES[table]
    return data_root() / system / folder / engine / version / name


@functools.lru_cache(maxsize=64)
def load_table(path: str, table: str):
    """One parquet table as a DataFrame, its required columns checked."""
    import pandas as pd

    p = Path(path)
    if not p.is_file():
        raise KernelTableError(f"aiconfigurator-core table not found: {p}")
    df = pd.read_parquet(p)
    missing = [c for c in REQUIRED_COLUMNS[table] if c not in df.columns]
    if missing:
        raise KernelTableError(f"{p}: columns {missing} missing (have {list(df.columns)})")
    if "attention" in table and "window_size" not in df.columns:
        df = df.assign(window_size=0)  # older tables: full attention only
    return df


def allreduce_table(system: str, engine: str, version: str):
    """The engine's custom all-reduce table on `system` at `version` or the newest before
    it (the comm tables are versioned apart from the compute tables); None if none."""
    have = versions(system, engine, "allreduce")
    if not have:
        return None
    older = [v for v in have if _version_key(v) <= _version_key(version)]
    chosen = older[-1] if older else have[-1]
    return load_table(str(table_path(system, engine, chosen, "allreduce")), "allreduce")


@functools.lru_cache(maxsize=16)
def system_memory_bandwidth(system: str) -> tuple[float, float, float]:
    """(bytes/s, empirical scaling, constant s per op) of `system` from its YAML, the
    figures aiconfigurator prices element-wise ops with."""
    import yaml

    spec = yaml.safe_load((systems_root() / f"{system}.yaml").read_text())
    gpu = spec["gpu"]
    return (
        float(gpu["mem_bw"]),
        float(gpu.get("mem_bw_empirical_scaling_factor", 1.0)),
        float(gpu.get("mem_empirical_constant_latency", 0.0)),
    )


def gemm_curve(df, dtype: str, n: float, k: float, m_grid: np.ndarray) -> np.ndarray:
    """GEMM latency (ms) of an (m x k) @ (k x n) at each m of `m_grid`, for any n, k.

    Latency is close to proportional to n*k at fixed m in both regimes (weight bytes and
    FLOPs both scale so), and bilinear interpolation in (n, k) is exact for c*n*k: the
    four measured shapes around (n, k) are read and blended, extrapolating from the last
    two grid values beyond the measured range (e.g. an LM head of 128k columns).
    Of several kernels measured for a shape, the fastest (the one the engine picks).
    """
    ns, ks, curves = _gemm_pivot(id(df), df, dtype)
    fused = fused_quant_ms(df) if dtype == "fp8" else 0.0
    n0, n1, wn = _bracket(ns, n)
    k0, k1, wk = _bracket(ks, k)
    out = np.zeros_like(m_grid, dtype=float)
    for i, wi in ((n0, 1 - wn), (n1, wn)):
        for j, wj in ((k0, 1 - wk), (k1, wk)):
            if wi * wj == 0:
                continue
            ms, lat = curves[(ns[i], ks[j])]
            out += wi * wj * _interp_extrap(m_grid, ms, lat)
    return _isotonic(np.maximum(out - fused, _floor(df)))


def _isotonic(y: np.ndarray) -> np.ndarray:
    """The non-decreasing sequence nearest to y in least squares (pool adjacent
    violators): a GEMM of more rows never runs faster, and where the tables' noise says
    otherwise (a few percent between neighbouring m of the flat, memory-bound region)
    the neighbours are averaged rather than the lowest or highest kept."""
    blocks: list[list[float]] = []  # [sum, count]
    for v in y:
        blocks.append([float(v), 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            total, count = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += count
    return np.concatenate([np.full(int(c), t / c) for t, c in blocks])


def fused_quant_ms(df) -> float:
    """What an fp8 GEMM of the table costs beyond its kernel when it does no work: the
    smallest fp8 GEMM's latency minus the smallest bf16 GEMM's (ms, never negative).

    The collectors time an fp8 linear layer with its activation quantisation as a
    separate kernel; the engines fuse that quantisation into the norm or all-reduce
    before the GEMM. The difference at the smallest shape (no arithmetic to speak of) is
    that separate kernel: 2 us in vLLM's and SGLang's H200 tables, 9.4 us in
    TensorRT-LLM's (whose measured serving runs are nonetheless faster than vLLM's).
    """
    return max(0.0, _floor(df, "fp8") - _floor(df))


_FLOORS: dict = {}


def _floor(df, dtype: str = "bfloat16") -> float:
    """The smallest latency of a GEMM table's `dtype` rows (ms)."""
    key = (id(df), dtype)
    if key not in _FLOORS:
        _FLOORS[key] = float(df.loc[df["gemm_dtype"] == dtype, "latency"].min())
    return _FLOORS[key]


_PIVOTS: dict = {}


def _gemm_pivot(key, df, dtype):
    if (key, dtype) not in _PIVOTS:
        sub = df[df["gemm_dtype"] == dtype]
        if sub.empty:
            raise KernelTableError(f"no {dtype} GEMMs in the table")
        best = sub.groupby(["n", "k", "m"], sort=True)["latency"].min().reset_index()
        curves = {
            (n, k): (g["m"].to_numpy(float), g["latency"].to_numpy(float))
            for (n, k), g in best.groupby(["n", "k"], sort=True)
        }
        ns = np.array(sorted(best["n"].unique()), float)
        ks = np.array(sorted(best["k"].unique()), float)
        _PIVOTS[(key, dtype)] = (ns, ks, curves)
    return _PIVOTS[(key, dtype)]


def _bracket(grid: np.ndarray, x: float) -> tuple[int, int, float]:
    """Indices of the grid values around x and the weight of the upper one (beyond the
    grid: the last two values and a weight past 1 or below 0, a linear extrapolation)."""
    if len(grid) == 1:
        return 0, 0, 0.0
    i = int(np.clip(np.searchsorted(grid, x) - 1, 0, len(grid) - 2))
    return i, i + 1, float((x - grid[i]) / (grid[i + 1] - grid[i]))


def _interp_extrap(x: np.ndarray, xp: np.ndarray, fp: np.ndarray, floor=0.0) -> np.ndarray:
    """np.interp, continued linearly past the last point (never below `floor`; None: no
    floor, for values in log space)."""
    y = np.interp(x, xp, fp)
    if len(xp) >= 2:
        slope = (fp[-1] - fp[-2]) / (xp[-1] - xp[-2])
        y = np.where(x > xp[-1], fp[-1] + slope * (x - xp[-1]), y)
    return y if floor is None else np.maximum(y, floor)
