"""The draft's forward time inside a speculative round, as speculation runs it.

The grid (`profiler.runner`) times every model on its own, back to back, with its weights and
cache warm. In speculative decoding every round starts the draft right after the target's
verify forward has streamed the target's weights through the caches (CPU caches, a GPU's L2),
and position 1 of a round feeds two tokens (the last accepted token, which the draft has not
seen when all K were accepted, and the bonus token; `profiler.groundtruth.specdec` does this). On the
2-core CPU of `data/validation/` the draft took 1.8x its isolated time at position 1 and
1.2-1.5x at later positions; pricing the draft as K isolated steps under-cost every round.

`measure_draft_in_loop` times, per round: one target forward of K_max + 1 tokens (the verify
step), then K_max draft forwards, each timed on its own (CUDA events on a GPU, with every
forward replayed from a CUDA graph when the grid used graphs; `perf_counter_ns` elsewhere).
Rows are the profile's `draft_in_loop` rows (`simulator.inputs.profile.LOOP_COLUMNS`), in ms.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from itertools import pairwise

import numpy as np
import torch

from profiler.model import ArchConfig, DecoderLM, KVCache
from profiler.runner import (
    TORCH_DTYPES,
    Grid,
    Progress,
    RunOptions,
    capture_graph,
    collect_garbage,
    free_memory,
    gc_paused,
    is_oom,
)
from profiler.timing import MAX_SAMPLES
from simulator.inputs.specs import ModelSpec

FIRST_QUERY_LEN = 2
"""Tokens the draft reads at position 1 of a round (see the module docstring)."""


def _steps(model: DecoderLM, cache: KVCache, ids: torch.Tensor, length: int, depth: int):
    def step() -> torch.Tensor:
        # Attends to the `length` valid slots and its own tokens, whatever the cache holds.
        return model(ids, cache, num_layers=depth, context_len=length)

    return step


@torch.inference_mode()
def measure_draft_in_loop(
    target: DecoderLM,
    draft: DecoderLM,
    ids: tuple[str, str],
    batch: int,
    context: int,
    k_max: int,
    opts: RunOptions,
    *,
    target_depth: int,
    graphs: bool,
) -> list[dict]:
    """Per position 1..k_max: the draft's forward time after a verify forward, in ms.

    `ids` are the (target, draft) model ids the rows name; the target runs its first
    `target_depth` layers (all of them unless the grid extrapolated it).

    Runs `opts.warmup` untimed rounds, then rounds until there are `opts.repeats` of them
    and `opts.min_time_s` seconds of timed draft forwards. Raises torch's OOM like a grid
    point; the caller decides what to skip.
    """
    device, dtype = opts.device, TORCH_DTYPES[opts.dtype]
    span = context + k_max + 1
    t_cfg = replace(
        target.cfg,
        num_layers=target_depth,
        num_dense_layers=min(target_depth, target.cfg.num_dense_layers),
    )
    t_cache = KVCache(t_cfg, batch, span, device=device, dtype=dtype)
    d_cache = KVCache(draft.cfg, batch, span, device=device, dtype=dtype)
    gen = torch.Generator(device=device).manual_seed(opts.seed)

    def tokens(q: int, vocab: int) -> torch.Tensor:
        return torch.randint(0, vocab, (batch, q), device=device, generator=gen)

    verify = _steps(
        target, t_cache, tokens(k_max + 1, target.cfg.vocab_size), context, target_depth
    )
    # Position 1 writes slots context and context + 1; position i >= 2 writes context + i.
    drafts = [
        _steps(
            draft,
            d_cache,
            tokens(FIRST_QUERY_LEN if i == 1 else 1, draft.cfg.vocab_size),
            context if i == 1 else context + i,
            draft.cfg.num_layers,
        )
        for i in range(1, k_max + 1)
    ]
    fns: list[Callable[[], object]] = [verify, *drafts]
    if graphs:
        fns = [capture_graph(fn, device).replay for fn in fns]
    rounds = _time_rounds(fns[0], fns[1:], device, opts)
    p10, med, p90 = np.percentile(rounds, [10, 50, 90], axis=0)
    return [
        {
            "draft": ids[1],
            "target": ids[0],
            "batch": batch,
            "context_len": context,
            "position": i + 1,
            "query_len": FIRST_QUERY_LEN if i == 0 else 1,
            "median_ms": float(med[i]),
            "p10_ms": float(p10[i]),
            "p90_ms": float(p90[i]),
            "repeats": int(rounds.shape[0]),
        }
        for i in range(k_max)
    ]


def _time_rounds(verify, drafts, device: torch.device, opts: RunOptions) -> np.ndarray:
    """(rounds, positions) draft forward times in ms."""
    cuda = device.type == "cuda"
    out: list[list[float]] = []
    total_ms = 0.0
    r = 0
    while r < opts.warmup or len(out) < opts.repeats or total_ms < opts.min_time_s * 1e3:
        if len(out) * len(drafts) >= MAX_SAMPLES:
            break
        verify()
        if cuda:
            events = [torch.cuda.Event(enable_timing=True) for _ in range(len(drafts) + 1)]
            events[0].record()
            for fn, end in zip(drafts, events[1:], strict=True):
                fn()
                end.record()
            torch.cuda.synchronize(device)
            times = [a.elapsed_time(b) for a, b in pairwise(events)]
        else:
            times = []
            for fn in drafts:
                t0 = time.perf_counter_ns()
                fn()
                times.append((time.perf_counter_ns() - t0) / 1e6)
        if r >= opts.warmup:
            out.append(times)
            total_ms += sum(times)
        r += 1
    return np.asarray(out, dtype=np.float64)


def profile_draft_in_loop(
    target: ModelSpec,
    draft: ModelSpec,
    grid: Grid,
    opts: RunOptions,
    *,
    target_depth: int,
    progress: Progress | None = None,
    rows: list[dict] | None = None,
) -> tuple[list[dict], str]:
    """`draft_in_loop` rows for every (context, batch) of the grid, K_max = the grid's
    largest query length - 1; and a note for the draft's profile entry ('' if none).

    An out-of-memory at one batch skips the larger batches of the same context. Rows are
    appended to `rows` when given, so on Ctrl-C or an error the caller holds those done.
    """
    progress = progress or Progress()
    k_max = max(max(grid.query_lens) - 1, 1)
    dtype = TORCH_DTYPES[opts.dtype]
    graphs = (
        opts.cuda_graphs
        and opts.device.type == "cuda"
        and not (target.num_experts or draft.num_experts)
    )
    notes = []
    if target_depth < target.num_layers:
        notes.append(
            f"draft_in_loop timed after {target_depth} of the target's {target.num_layers} layers"
        )
    rows = [] if rows is None else rows
    t_model = d_model = None
    try:
        torch.manual_seed(opts.seed)
        t_model = DecoderLM(
            ArchConfig.from_spec(target, target_depth),
            device=opts.device,
            dtype=dtype,
            seed=opts.seed,
        ).eval()
        d_model = DecoderLM(
            ArchConfig.from_spec(draft), device=opts.device, dtype=dtype, seed=opts.seed + 1
        ).eval()
        with gc_paused():
            for context in grid.contexts:
                for batch in grid.batches:
                    label = f"{draft.id} after {target.id} B={batch} L={context}"
                    try:
                        cell = measure_draft_in_loop(
                            t_model,
                            d_model,
                            (target.id, draft.id),
                            batch,
                            context,
                            k_max,
                            opts,
                            target_depth=target_depth,
                            graphs=graphs,
                        )
                    except (RuntimeError, torch.OutOfMemoryError) as exc:
                        if not is_oom(exc):
                            raise
                        collect_garbage(opts.device)
                        notes.append(
                            f"draft_in_loop out of memory from batch {batch} at L={context}"
                        )
                        progress.advance_loop(label + " (out of memory)", 0)
                        break
                    finally:
                        free_memory(opts.device)
                    rows.extend(cell)
                    progress.advance_loop(label, len(cell))
    except (RuntimeError, torch.OutOfMemoryError) as exc:
        if not is_oom(exc):
            raise
        notes.append("draft_in_loop not timed: target and draft weights did not fit together")
    finally:
        t_model = d_model = None
        collect_garbage(opts.device)
    return rows, "; ".join(notes)
