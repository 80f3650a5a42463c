"""How a profiling run measures (`RunOptions`) and the limits on every flag, without torch.

The CLI checks its flags against these limits and refuses a bad one before it imports torch
(a second or more on a busy machine), so `--help` and a refused flag answer at once. Counts
are numbers of steps or points, times are seconds, sizes are tokens or sequences.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the annotation only; importing torch here would defeat the module
    import torch

DTYPES = ("bf16", "fp16", "fp32")
# Depths for a model too large to run whole: small enough that even a 405B layer stack fits
# one GPU, spread enough (1:2:4) that the line's slope is well determined.
DEFAULT_DEPTHS = (1, 2, 4)


@dataclass(frozen=True)
class RunOptions:
    """How to measure. The CLI's defaults come from here."""

    device: torch.device
    # What serving engines run; on CPUs with AVX-512 BF16 it is also faster than fp32.
    dtype: str = "bf16"
    # Untimed steps per point (after one untimed point per model): between Vidur's 2 and
    # vLLM's 10; allocator growth and kernel selection are done by then.
    warmup: int = 5
    # Timed steps per point, at least: enough for a p10 and p90 that are not the extremes.
    repeats: int = 20
    # Seconds of timed steps per point, at least, so microsecond-scale steps are not
    # under-sampled; a 70B decode step exceeds it with `repeats` alone.
    min_time_s: float = 0.05
    # Engines replay decode and verify steps from CUDA graphs; eager timing would add the
    # launch overhead they do not pay.
    cuda_graphs: bool = True
    depths: tuple[int, ...] | None = None
    max_layers: int | None = None
    seed: int = 0


# ------------------------------------------------------------------------------ flag limits

MAX_K = 63
"""Speculative length: q = K + 1 <= 64 covers tree verification sizes too."""
MAX_BATCH = 4096
"""Sequences per step: four times the largest `max_num_seqs` serving engines default to."""
MAX_CONTEXT = 1 << 24
"""Context tokens (16.7M): above every catalog window (Llama 4 Scout's 10M) and the most a
profile may hold (`simulator.inputs.profile.MAX_TOKENS`)."""
MAX_GRID_POINTS = 10_000
"""Points per model (batches x query lengths x contexts), also the most values one grid flag
may expand to: a profile holds at most 20,000 rows, a target and a draft share it, and the
default grid has 189."""
MAX_LOOP_ROWS = 10_000
"""Draft-in-loop rows (batches x contexts x K_max) of a run with --draft, for the same reason."""
MAX_REPEATS = 10_000
"""Timed steps per point: `profiler.timing.MAX_SAMPLES` stops every point there anyway."""
MAX_WARMUP = 1_000
"""Untimed steps per point: allocator growth and kernel selection settle within ten."""
MAX_MIN_TIME_S = 60.0
"""Seconds of timed steps per point; 60 s times the default 189 points is already 3 hours."""
MAX_DEPTH = 10_000
"""Layers for --depths and --max-layers: the deepest catalog model has 126."""
MAX_SEED = 2**32 - 1
"""torch and numpy both take a 32-bit seed."""
MAX_ROUNDS = 100
"""Rounds of `validate` (timed rounds per point, default 8) and of `serve-bench` (each serves
every rate and arm again, default 3). Their defaults take about 25 and 6 minutes on the
2-core development machine, so 100 rounds is already hours to a day."""
MAX_TRAIN_STEPS = 10_000
"""Optimiser steps per model of `train-pair`: 40 times the target's default of 240, which
trained the committed pair."""


def cpu_count() -> int:
    """Logical CPUs this process may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def max_threads() -> int:
    """Torch threads a run may ask for: more than the CPUs it may use only makes OpenMP
    threads wait on each other."""
    return cpu_count()


def requested_depths(
    model_id: str, num_layers: int, depths: tuple[int, ...] | None, max_layers: int | None
) -> tuple[int, ...] | None:
    """The depths `--depths` or `--max-layers` ask for a model of `num_layers` layers:
    `(num_layers,)` to run it whole, a few depths to extrapolate from, or None when neither
    flag decides (the device's free memory does). ValueError names the flag."""
    if depths:
        below = tuple(sorted({d for d in depths if d < num_layers}))
        if len(below) < 2:
            if not below:
                return (num_layers,)
            raise ValueError(
                f"--depths: {model_id} has {num_layers} layers; give at least two depths "
                f"below {num_layers}"
            )
        return below
    if max_layers is not None and num_layers > max_layers:
        below = tuple(d for d in DEFAULT_DEPTHS if d <= max_layers)
        if len(below) < 2:
            raise ValueError("--max-layers: must be at least 2 to fit a line in depth")
        return below
    return None
