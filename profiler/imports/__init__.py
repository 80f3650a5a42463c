"""The user's own engine benchmarks as profiles: parsers for SGLang's `bench_one_batch` and
`bench_serving`, `vllm bench latency`, `vllm bench serve`, `trtllm-bench` and speculators'
`throughput_interactivity` CSV (one module each), the detector, the profile they build
(`build`) and the fit of the engine's per-step host cost to the serving points (`fit`).
No torch: the app imports this package. May import `simulator` (profile format, catalogs,
errors) and the profiler's writer (`profiler.measure`); never `profiler.cli`."""

from __future__ import annotations

from profiler.imports.common import Parsed, decode_text
from profiler.imports.detect import FORMATS, detect
from simulator.errors import InputError


def parse_file(
    data: bytes, name: str, fmt: str = "", shape: tuple[int, int, int] | None = None
) -> Parsed:
    """One file's bytes parsed as `fmt` (told from the content when '')."""
    from profiler.imports import (
        sglang_one_batch,
        sglang_serving,
        speculators_csv,
        trtllm_bench,
        vllm_latency,
        vllm_serve,
    )

    text = decode_text(data, name)
    fmt = fmt or detect(text, name)
    if fmt == vllm_latency.FORMAT:
        return vllm_latency.parse(text, name, shape)
    parsers = {
        sglang_one_batch.FORMAT: sglang_one_batch.parse,
        sglang_serving.FORMAT: sglang_serving.parse,
        vllm_serve.FORMAT: vllm_serve.parse,
        trtllm_bench.FORMAT: trtllm_bench.parse,
        speculators_csv.FORMAT: speculators_csv.parse,
    }
    if fmt not in parsers:
        raise InputError(f"unknown format '{fmt[:40]}' (known: {', '.join(FORMATS)})", file=name)
    return parsers[fmt](text, name)


__all__ = ["FORMATS", "InputError", "Parsed", "detect", "parse_file"]
