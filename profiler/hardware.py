"""How close to the hardware a profile got: the device's copy rate and matmul rate, measured
at the start of a run, and per point the bytes a step moves and the fraction of the copy
rate it reached.

The copy rate is what a bandwidth test reports: one large device-to-device copy, bytes read
plus bytes written per second (NVIDIA's H200 gave 4,095 GB/s against a 4,800 GB/s
datasheet). A decode step is a stream of weight and cache reads, so its bytes over its time,
as a fraction of the copy rate, says how much of the memory system it used: engines'
decode kernels reach 0.6-0.8 of it at batch 1 on an 8B model, and a step far below that
spends its time on something else (launch gaps, unfused small kernels, reading more than
it needs). On a CPU the copy is a large host tensor copy, with the profile's threads.

Rates are GB/s (1e9 bytes per second) and TFLOP/s; bytes are bytes.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

CUDA_COPY_BYTES = 1 << 30
"""1 GiB per buffer on a GPU: far beyond any L2, a copy of it takes ~0.5 ms on an H200."""
HOST_COPY_BYTES = 1 << 27
"""128 MiB on a CPU: source and destination together beyond most server parts' last-level
cache, and a fraction of a second to measure."""
MATMUL_SIZE = 8192
"""Square bf16 matmul of 8192: 1.1 TFLOP, compute-bound on every GPU."""
REPEATS = 10


def measure_rates(device: torch.device) -> tuple[float, float | None]:
    """(copy rate GB/s, bf16 matmul TFLOP/s or None) of `device`, as a run starts."""
    return copy_gbps(device, repeats=REPEATS if device.type == "cuda" else 5), matmul_tflops(device)


def _timed_ms(fn: Callable[[], object], device: torch.device, repeats: int) -> float:
    """Median milliseconds of `repeats` calls after two warm-up calls."""
    for _ in range(2):
        fn()
    samples = []
    if device.type == "cuda":
        for _ in range(repeats):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end))
    else:
        for _ in range(repeats):
            t0 = time.perf_counter_ns()
            fn()
            samples.append((time.perf_counter_ns() - t0) / 1e6)
    samples.sort()
    return samples[len(samples) // 2]


def copy_gbps(device: torch.device, nbytes: int | None = None, repeats: int = REPEATS) -> float:
    """Copy rate in GB/s, counting the bytes read and the bytes written."""
    if nbytes is None:
        nbytes = CUDA_COPY_BYTES if device.type == "cuda" else HOST_COPY_BYTES
    src = torch.ones(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    ms = _timed_ms(lambda: dst.copy_(src), device, repeats)
    return 2 * nbytes / (ms * 1e-3) / 1e9


def matmul_tflops(device: torch.device, size: int = MATMUL_SIZE, repeats: int = REPEATS):
    """A square bf16 matmul's rate in TFLOP/s on a GPU; None on a CPU (not measured there:
    a CPU's bf16 GEMM rate says little about its decode steps, which are bandwidth-bound)."""
    if device.type != "cuda":
        return None
    a = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    b = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    ms = _timed_ms(lambda: a @ b, device, repeats)
    return 2 * size**3 / (ms * 1e-3) / 1e12
