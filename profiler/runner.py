"""Profiling runs: build a random-weight model, sweep the (batch, query_len, context_len) grid,
time each forward step, and collect the rows of a `specplan.profile/v1` file.

Times are milliseconds, memory bytes. The grid is walked context by context, query length by
query length, batch ascending, so an out-of-memory at one batch marks the larger batches of
the same (query_len, context_len) as out of memory without running them.

Models too large for the device run at a few depths sharing one set of weights (the first d
layers of the deepest), and every point is extrapolated to the full depth with a line in d.

On the host, every query length and depth of a (batch, context) runs on one KV cache filled
with random values once (`CachePool`): each point gets a contiguous prefix of exactly
`context + q` slots, laid out as a fresh cache, so the step reads what it read before; the
random fill, 0.4 s per point at 64 x 8192 tokens of the tiny model, was most of a CPU run's
time outside the timed steps (11 s of the default grid, now about 1 s).

Python's cyclic garbage collector is paused while a model's points run (`gc_paused`): a full
collection walks every object torch created (0.15 s each on a 2-core VM) and, run by the
interpreter at a random moment, lands inside a timed step. Tensors are freed by reference
counting anyway; collections run between models and after an out-of-memory.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import torch

from profiler.extrapolate import extrapolate, extrapolate_stats
from profiler.model import ArchConfig, DecoderLM, KVCache, mla_note, weight_bytes
from profiler.options import DEFAULT_DEPTHS, RunOptions, requested_depths
from profiler.timing import LatencyStats, measure
from simulator.inputs.profile import SCHEMA, DeviceInfo, Profile, profile_from_dict
from simulator.inputs.specs import DTYPE_BYTES, ModelSpec
from simulator.validation.step_gap import annotate

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# Share of free memory the full weights may take before the profiler switches to depths;
# the rest is for the KV cache, activations and CUDA graph pools of the grid's points.
WEIGHTS_FIT_FRACTION = 0.8
# Eager calls on a side stream before a CUDA graph capture (cuBLAS handles, lazy init).
GRAPH_WARMUP_CALLS = 3
# Share of available host memory the caches a CPU run reuses across query lengths and depths
# may hold (`CachePool`); the tiny model's default grid holds 0.27 GB at context 8192.
CACHE_POOL_FRACTION = 0.25


@dataclass(frozen=True)
class Grid:
    """The points to measure: every batch x query length x context length."""

    batches: tuple[int, ...]
    query_lens: tuple[int, ...]
    contexts: tuple[int, ...]

    def shapes(self) -> Iterator[tuple[int, int]]:
        """(query_len, context_len) pairs; batches run ascending inside each."""
        for context in self.contexts:
            for q in self.query_lens:
                yield q, context

    def __len__(self) -> int:
        return len(self.batches) * len(self.query_lens) * len(self.contexts)


@dataclass(frozen=True)
class PointResult:
    status: str  # 'ok' | 'oom'
    stats: LatencyStats | None
    peak_bytes: int
    # CUDA only: device memory in use by everyone (the NVML / cudaMemGetInfo view, CUDA
    # context and allocator reserve included) and torch's reserved bytes, after the step.
    device_used_bytes: int | None = None
    reserved_bytes: int | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class ModelRun:
    """What was measured for one model; `rows` are measurement rows of the profile."""

    spec: ModelSpec
    entry: dict[str, Any]
    rows: list[dict[str, Any]] = field(default_factory=list)
    # (batch, q, context) -> {depth: PointResult}; kept for the extrapolation check.
    by_depth: dict[tuple[int, int, int], dict[int, PointResult]] = field(default_factory=dict)

    def device_memory(self) -> dict[str, int]:
        """Largest device-wide use and torch reserve seen over the points (CUDA only)."""
        results = [r for by in self.by_depth.values() for r in by.values()]
        out = {}
        for key in ("device_used_bytes", "reserved_bytes"):
            values = [getattr(r, key) for r in results if getattr(r, key) is not None]
            if values:
                out[f"{key}_max"] = max(values)
        return out


def is_oom(exc: BaseException | None) -> bool:
    """An allocation failure, also when it surfaces as the cause of a failed graph capture."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, torch.OutOfMemoryError):
            return True
        text = str(exc).lower()
        if isinstance(exc, RuntimeError) and (
            "out of memory" in text or "can't allocate memory" in text
        ):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def free_memory(device: torch.device) -> None:
    """Between points: hand the CUDA allocator's cached blocks back (no garbage collection;
    the point's tensors are already freed by reference counting)."""
    if device.type == "cuda":
        torch.cuda.empty_cache()


def collect_garbage(device: torch.device) -> None:
    """Between models and after an out-of-memory: a full collection, then `free_memory`."""
    gc.collect()
    free_memory(device)


@contextmanager
def gc_paused() -> Iterator[None]:
    """No automatic garbage collection inside (explicit `gc.collect()` still runs)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def available_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    from profiler.device import host_available_bytes

    return host_available_bytes()


def full_weight_bytes(spec: ModelSpec, dtype: str) -> int:
    """Bytes of the full-depth model's parameters, from the architecture (no memory)."""
    element = torch.tensor([], dtype=TORCH_DTYPES[dtype]).element_size()
    return ArchConfig.from_spec(spec).num_parameters() * element


def plan_depths(spec: ModelSpec, opts: RunOptions) -> tuple[int, ...]:
    """Depths to run: `(num_layers,)` for a whole model, else the depths to extrapolate from.

    Raises ValueError naming the flag when the request cannot be honoured.
    """
    full = spec.num_layers
    requested = requested_depths(spec.id, full, opts.depths, opts.max_layers)
    if requested:
        return requested
    if full_weight_bytes(spec, opts.dtype) > WEIGHTS_FIT_FRACTION * available_bytes(opts.device):
        depths = tuple(d for d in DEFAULT_DEPTHS if d < full)
        if len(depths) >= 2:
            return depths
    return (full,)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class CachePool:
    """Host only: one random-filled KV cache per batch at the current context, for the
    deepest depth and the longest query, on which every (query length, depth) point of that
    (batch, context) runs (`KVCache.prefix_of`: contiguous, exactly `context + q` slots, laid
    out as a fresh cache). Filling a cache with random values is the costly part of setting
    up a point on a CPU (0.4 s for 64 x 8192 tokens of the tiny model in bf16), and the grid
    asks for each (batch, context) once per query length and depth.

    The grid walks query lengths inside a context and batches inside a query length, so the
    caches of all batches of one context are held, at most `budget_bytes` of them; a batch
    beyond it, or whose big cache does not fit in memory, gets a fresh cache per point as
    before. Moving to another context, or `clear()`, frees them. Not used on a GPU, where the
    allocator's peak is the point's measured memory and a random fill takes microseconds.
    """

    def __init__(
        self, cfg: ArchConfig, longest_query: int, opts: RunOptions, budget_bytes: int
    ) -> None:
        self.cfg = cfg
        self.longest_query = longest_query
        self.device, self.dtype = opts.device, TORCH_DTYPES[opts.dtype]
        element = torch.tensor([], dtype=self.dtype).element_size()
        # Key and value bytes of one token of one sequence in one layer.
        self.slot_bytes = 2 * cfg.num_kv_heads * cfg.head_dim * element
        self.budget_bytes = budget_bytes
        self.context: int | None = None
        self.held: dict[int, KVCache] = {}
        self.fills = 0  # caches allocated and filled with random values

    def held_bytes(self) -> int:
        return sum(c.nbytes() for c in self.held.values())

    def clear(self) -> None:
        self.held.clear()
        self.context = None

    def cache(self, cfg: ArchConfig, batch: int, q: int, context: int) -> KVCache:
        """A cache of `cfg.num_layers` layers and `context + q` slots for one point."""
        if context != self.context:
            self.clear()  # before this context allocates
            self.context = context
        base = self.held.get(batch) or self._hold(cfg, batch, q, context)
        if base is None:
            return self._fill(cfg, batch, context + q)
        return KVCache.prefix_of(base, cfg, context + q)

    def _hold(self, cfg: ArchConfig, batch: int, q: int, context: int) -> KVCache | None:
        """The big cache of `batch` at `context`, now held; None when it is over the budget
        or out of memory while the point's own, smaller cache may still fit."""
        length = context + self.longest_query
        if self.held_bytes() + self.cfg.num_layers * batch * length * self.slot_bytes > (
            self.budget_bytes
        ):
            return None
        try:
            base = self._fill(self.cfg, batch, length)
        except (RuntimeError, torch.OutOfMemoryError) as exc:
            if not is_oom(exc) or (cfg.num_layers, q) == (self.cfg.num_layers, self.longest_query):
                raise
            return None
        self.held[batch] = base
        return base

    def _fill(self, cfg: ArchConfig, batch: int, max_len: int) -> KVCache:
        cache = KVCache(cfg, batch, max_len, device=self.device, dtype=self.dtype)
        self.fills += 1
        return cache


def run_point(
    model: DecoderLM,
    batch: int,
    q: int,
    context: int,
    depth: int,
    opts: RunOptions,
    *,
    graphs: bool,
    pool: CachePool | None = None,
) -> PointResult:
    """Time one forward step of the first `depth` layers at (batch, q, context); the cache
    comes from `pool` when given (the host), else is allocated and filled for the point."""
    device, dtype = opts.device, TORCH_DTYPES[opts.dtype]
    cfg = replace(
        model.cfg, num_layers=depth, num_dense_layers=min(depth, model.cfg.num_dense_layers)
    )
    cache = ids = graph = None
    oom = False
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    try:
        # max_len = context + q: attention reads exactly the context plus the new tokens.
        if pool is not None:
            cache = pool.cache(cfg, batch, q, context)
        else:
            cache = KVCache(cfg, batch, context + q, device=device, dtype=dtype)
        gen = torch.Generator(device=device).manual_seed(opts.seed)
        ids = torch.randint(0, cfg.vocab_size, (batch, q), device=device, generator=gen)

        def step() -> torch.Tensor:
            # Every timed step sees exactly `context` valid slots and attends to those and
            # its own q tokens, as an engine's step does.
            return model(ids, cache, num_layers=depth, context_len=context)

        fn: Callable[[], object] = step
        if graphs:
            graph = capture_graph(step, device)
            fn = graph.replay
        samples = measure(
            fn, device, warmup=opts.warmup, repeats=opts.repeats, min_time_s=opts.min_time_s
        )
        stats = LatencyStats.from_samples(samples)
        if device.type != "cuda":
            # The CPU allocator keeps no peak statistics: count the tensors the step owns.
            logits = batch * q * cfg.vocab_size * torch.tensor([], dtype=dtype).element_size()
            return PointResult("ok", stats, weight_bytes(model) + cache.nbytes() + logits)
        free, total = torch.cuda.mem_get_info(device)
        return PointResult(
            "ok",
            stats,
            int(torch.cuda.max_memory_allocated(device)),
            device_used_bytes=int(total - free),
            reserved_bytes=int(torch.cuda.max_memory_reserved(device)),
        )
    except (RuntimeError, torch.OutOfMemoryError) as exc:
        if not is_oom(exc):
            raise
        peak = int(torch.cuda.max_memory_allocated(device)) if device.type == "cuda" else 0
        oom = True
        return PointResult("oom", None, peak)
    finally:
        # Drop the cache and the graph's memory pool before the next point allocates; after
        # an out-of-memory, also what the failed step's frames held.
        cache = ids = graph = fn = None
        if oom:
            if pool is not None:
                pool.clear()  # the held caches too, before the next point allocates
            collect_garbage(device)
        else:
            free_memory(device)


def capture_graph(step: Callable[[], torch.Tensor], device: torch.device) -> torch.cuda.CUDAGraph:
    """Capture one call of `step` in a CUDA graph (static shapes, static cache tensors)."""
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(GRAPH_WARMUP_CALLS):
            step()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    _sync(device)
    return graph


def model_entry(spec: ModelSpec, depths: Sequence[int], opts: RunOptions, notes: str) -> dict:
    """The `models[i]` entry: architecture, depths run, full weight and KV bytes."""
    full_cfg = ArchConfig.from_spec(spec)
    dtype = TORCH_DTYPES[opts.dtype]
    run_cfg = ArchConfig.from_spec(spec, max(depths))
    # Measured from an allocated cache: bytes per token per layer, times the full depth.
    probe = KVCache(run_cfg, 1, 8, device=opts.device, dtype=dtype)
    per_layer_token = probe.nbytes() // (8 * run_cfg.num_layers)
    measured = per_layer_token * spec.num_layers
    formula = int(spec.kv_values_per_token_per_layer * spec.num_layers * DTYPE_BYTES[opts.dtype])
    return {
        "id": spec.id,
        "architecture": full_cfg.to_dict(),
        "layers_run": list(depths),
        "num_layers": spec.num_layers,
        "extrapolated": max(depths) < spec.num_layers,
        "weight_bytes": full_weight_bytes(spec, opts.dtype),
        "kv_bytes_per_token": int(measured),
        "kv_bytes_per_token_formula": formula,
        "notes": notes,
    }


class Progress:
    """Hook the CLI passes in. `start` gets what the run will write: grid points over all
    models and draft-in-loop rows (`loop_rows_planned`), the units of the run's summary. The
    runner reports each finished grid point; the draft-in-loop timing reports each finished
    (batch, context) with the rows it wrote (none after an out-of-memory)."""

    def start(self, total: int, loop_rows: int = 0) -> None: ...

    def advance(self, label: str) -> None: ...

    def advance_loop(self, label: str, rows: int) -> None: ...


def loop_rows_planned(grid: Grid) -> int:
    """Draft-in-loop rows of a run where nothing runs out of memory: positions 1..K_max (the
    grid's largest query length - 1, at least 1) at every (batch, context)."""
    k_max = max(max(grid.query_lens) - 1, 1)
    return len(grid.batches) * len(grid.contexts) * k_max


def _notes_and_graphs(spec: ModelSpec, depths: tuple, opts: RunOptions) -> tuple[list, bool]:
    """The notes a model's profile entry carries (MLA, CUDA graphs off for MoE, depths
    extrapolated), and whether its points run as CUDA graphs."""
    full = spec.num_layers
    extrapolated = max(depths) < full
    notes = []
    note = mla_note(spec)
    if note:
        notes.append(note)
    graphs = opts.cuda_graphs and opts.device.type == "cuda"
    if graphs and spec.num_experts:
        graphs = False
        notes.append("CUDA graphs off: MoE routing needs host-side expert counts")
    if extrapolated:
        notes.append(
            f"extrapolated from depths {', '.join(map(str, depths))} to {full} layers "
            "(least-squares line in depth per grid point)"
        )
        if spec.num_experts and spec.num_dense_layers:
            notes.append(
                f"shallow runs use MoE layers only; the {spec.num_dense_layers} dense layers "
                "are costed as MoE layers"
            )
    return notes, graphs


def profile_model(
    spec: ModelSpec,
    grid: Grid,
    opts: RunOptions,
    *,
    progress: Progress | None = None,
    depths: Sequence[int] | None = None,
    extra_depths: Sequence[int] = (),
    run: ModelRun | None = None,
) -> ModelRun:
    """Measure every grid point of one model; on Ctrl-C `run` holds the points done so far.

    `extra_depths` are also run but not used in the fit (the extrapolation check runs the full
    depth next to the shallow ones).
    """
    progress = progress or Progress()
    depths = tuple(depths or plan_depths(spec, opts))
    full = spec.num_layers
    notes, graphs = _notes_and_graphs(spec, depths, opts)
    entry = model_entry(spec, depths, opts, "; ".join(notes))
    if run is None:
        run = ModelRun(spec, entry)
    else:
        run.entry = entry
    all_depths = tuple(sorted(set(depths) | set(extra_depths)))
    torch.manual_seed(opts.seed)
    try:
        model = DecoderLM(
            ArchConfig.from_spec(spec, max(all_depths)),
            device=opts.device,
            dtype=TORCH_DTYPES[opts.dtype],
            seed=opts.seed,
        ).eval()
    except (RuntimeError, torch.OutOfMemoryError) as exc:
        if not is_oom(exc):
            raise
        collect_garbage(opts.device)
        run.entry["notes"] = "; ".join(
            [*notes, f"the weights of {max(all_depths)} layers did not fit (try --max-layers)"]
        )
        for q, context in grid.shapes():
            for batch in grid.batches:
                run.rows.append(_row(spec.id, batch, q, context, depths, {}, full, 0, 0))
                progress.advance(f"{spec.id} B={batch} q={q} L={context} (weights do not fit)")
        return run
    wb_model = weight_bytes(model)
    wb_full = entry["weight_bytes"]
    pool = None
    if opts.device.type != "cuda":
        budget = int(CACHE_POOL_FRACTION * available_bytes(opts.device))
        pool = CachePool(model.cfg, max(grid.query_lens), opts, budget)
    try:
        with torch.inference_mode(), gc_paused():
            # One untimed point first: lazy initialisation (kernel selection, allocator growth,
            # cuBLAS/oneDNN handles) otherwise lands in the first measured point.
            q0, context0 = next(grid.shapes())
            run_point(
                model,
                grid.batches[0],
                q0,
                context0,
                max(all_depths),
                replace(opts, repeats=1, min_time_s=0.0),
                graphs=graphs,
                pool=pool,
            )
            for q, context in grid.shapes():
                oom = False
                for batch in grid.batches:
                    label = f"{spec.id} B={batch} q={q} L={context}"
                    results: dict[int, PointResult] = {}
                    if not oom:
                        for d in all_depths:
                            results[d] = run_point(
                                model, batch, q, context, d, opts, graphs=graphs, pool=pool
                            )
                            if not results[d].ok:
                                break
                    run.by_depth[(batch, q, context)] = results
                    row = _row(spec.id, batch, q, context, depths, results, full, wb_model, wb_full)
                    oom = oom or row["status"] == "oom"
                    run.rows.append(row)
                    progress.advance(label)
    finally:
        del model, pool
        collect_garbage(opts.device)
    return run


def _row(
    model_id: str,
    batch: int,
    q: int,
    context: int,
    depths: Sequence[int],
    results: dict[int, PointResult],
    full: int,
    wb_model: int,
    wb_full: int,
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "model": model_id,
        "batch": batch,
        "query_len": q,
        "context_len": context,
    }
    extrapolated = len(depths) > 1
    if not all(d in results and results[d].ok for d in depths):
        failed = [r.peak_bytes for r in results.values() if not r.ok]
        return {
            **row,
            "median_ms": math.nan,
            "p10_ms": math.nan,
            "p90_ms": math.nan,
            "repeats": 0,
            "peak_bytes": max(failed, default=0),
            "status": "oom",
            "extrapolated": extrapolated,
        }
    if not extrapolated:
        r = results[depths[0]]
        s = r.stats
        return {
            **row,
            "median_ms": s.median_ms,
            "p10_ms": s.p10_ms,
            "p90_ms": s.p90_ms,
            "repeats": s.repeats,
            "peak_bytes": r.peak_bytes,
            "status": "ok",
            "extrapolated": False,
        }
    stats = [
        (results[d].stats.median_ms, results[d].stats.p10_ms, results[d].stats.p90_ms)
        for d in depths
    ]
    med, p10, p90 = extrapolate_stats(depths, stats, full)
    # Memory: the weights are known exactly; only what the step adds (KV cache, activations)
    # is fitted in depth.
    extra = extrapolate(depths, [results[d].peak_bytes - wb_model for d in depths], full)
    return {
        **row,
        "median_ms": med,
        "p10_ms": p10,
        "p90_ms": p90,
        "repeats": min(results[d].stats.repeats for d in depths),
        "peak_bytes": int(wb_full + extra),
        "status": "ok",
        "extrapolated": True,
    }


def build_profile(
    runs: Sequence[ModelRun],
    device: DeviceInfo,
    opts: RunOptions,
    command: str,
    *,
    cuda_graphs_used: bool,
    draft_in_loop: Sequence[dict] = (),
) -> Profile:
    """Validate and wrap the measured rows as a `Profile` (raises InputError if malformed)."""
    data = {
        "schema": SCHEMA,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command,
        "device": {
            "name": device.name,
            "kind": device.kind,
            "memory_bytes": device.memory_bytes,
            "driver": device.driver,
            "torch_version": device.torch_version,
            "cpu_threads": device.cpu_threads,
            "nvml": device.nvml,
            "reason_no_gpu": device.reason_no_gpu,
            "copy_gbps": device.copy_gbps,
            "matmul_tflops": device.matmul_tflops,
        },
        "settings": {
            "dtype": opts.dtype,
            "warmup": opts.warmup,
            "repeats": opts.repeats,
            "min_time_s": opts.min_time_s,
            "cuda_graphs": cuda_graphs_used,
        },
        "models": [r.entry for r in runs],
        "measurements": [
            row
            for r in runs
            for row in annotate(
                [dict(x) for x in r.rows], r.spec, DTYPE_BYTES[opts.dtype], device.copy_gbps
            )
        ],
    }
    if draft_in_loop:
        data["draft_in_loop"] = list(draft_in_loop)
    return profile_from_dict(data, "profile")
