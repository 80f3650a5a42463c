"""One latency tracker for every device: CUDA events on a GPU, `perf_counter_ns` elsewhere.

`measure` runs warm-up calls, then timed calls until it has at least `repeats` samples *and*
at least `min_time_s` seconds of them (optimum-benchmark's rule, so fast steps are not
under-sampled), and returns the raw samples in milliseconds. Statistics come from the samples.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

# A bound on timed calls per point, so a microsecond-scale step with a long `min_time_s`
# cannot spin for millions of iterations.
MAX_SAMPLES = 10_000


@dataclass(frozen=True)
class LatencyStats:
    """Milliseconds over `repeats` samples."""

    median_ms: float
    p10_ms: float
    p90_ms: float
    repeats: int

    @classmethod
    def from_samples(cls, samples_ms: list[float] | np.ndarray) -> LatencyStats:
        a = np.asarray(samples_ms, dtype=np.float64)
        if a.size == 0:
            raise ValueError("no samples")
        p10, med, p90 = np.percentile(a, [10, 50, 90])
        return cls(float(med), float(p10), float(p90), int(a.size))


def measure(
    fn: Callable[[], object],
    device: torch.device,
    *,
    warmup: int,
    repeats: int,
    min_time_s: float,
) -> list[float]:
    """Raw per-call latencies of `fn` in milliseconds."""
    for _ in range(warmup):
        fn()
    if device.type == "cuda":
        return _measure_cuda(fn, device, repeats, min_time_s)
    return _measure_host(fn, repeats, min_time_s)


def _measure_host(fn: Callable[[], object], repeats: int, min_time_s: float) -> list[float]:
    samples: list[float] = []
    total_ns = 0
    min_ns = int(min_time_s * 1e9)
    while (len(samples) < repeats or total_ns < min_ns) and len(samples) < MAX_SAMPLES:
        t0 = time.perf_counter_ns()
        fn()
        dt = time.perf_counter_ns() - t0
        total_ns += dt
        samples.append(dt / 1e6)
    return samples


def _measure_cuda(
    fn: Callable[[], object], device: torch.device, repeats: int, min_time_s: float
) -> list[float]:
    # Events are recorded around every call and read after one synchronisation per round,
    # so no host sync sits between timed calls.
    samples: list[float] = []
    with torch.cuda.device(device):
        torch.cuda.synchronize()
        while len(samples) < MAX_SAMPLES:
            n = min(repeats, MAX_SAMPLES - len(samples))
            events = [
                (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                for _ in range(n)
            ]
            for start, end in events:
                start.record()
                fn()
                end.record()
            torch.cuda.synchronize()
            samples.extend(start.elapsed_time(end) for start, end in events)
            if sum(samples) >= min_time_s * 1e3:
                break
    return samples
