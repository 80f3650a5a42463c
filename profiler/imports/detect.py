"""Which engine benchmark a file is, told from its content (not its name)."""

from __future__ import annotations

import json

from profiler.imports import (
    sglang_one_batch,
    sglang_serving,
    speculators_csv,
    trtllm_bench,
    vllm_latency,
    vllm_serve,
)
from simulator.errors import InputError

FORMATS = {
    sglang_one_batch.FORMAT: "SGLang python -m sglang.bench_one_batch (JSONL)",
    sglang_serving.FORMAT: "SGLang python -m sglang.bench_serving --output-file (JSONL)",
    vllm_latency.FORMAT: "vllm bench latency --output-json (JSON)",
    vllm_serve.FORMAT: "vllm bench serve --save-result (JSON, or JSONL with --append-result)",
    trtllm_bench.FORMAT: "trtllm-bench throughput --report_json (JSON)",
    speculators_csv.FORMAT: "speculators throughput_interactivity.py parse (CSV)",
}
"""Format name -> what produces it."""


def _first_object(text: str):
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    for line in text.splitlines():
        if line.strip():
            try:
                return json.loads(line)
            except (ValueError, RecursionError):
                return None
    return None


def _sglang_serving(obj, keys: set) -> bool:
    """bench_serving's result: a key vllm bench serve's lacks, or an SGLang `backend` beside
    a serving metric (both write `mean_ttft_ms` and `output_throughput`)."""
    if keys & sglang_serving.ONLY_KEYS:
        return True
    backend = obj.get("backend") if isinstance(obj, dict) else None
    serving = keys & {"mean_ttft_ms", "median_ttft_ms", "output_throughput"}
    return isinstance(backend, str) and backend.startswith("sglang") and bool(serving)


def detect(text: str, name: str) -> str:
    """The format name of `text`; InputError listing the formats when none fits."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        obj = _first_object(stripped)
        keys = set(obj) if isinstance(obj, dict) else set()
        if "median_decode_latency" in keys or "prefill_latency" in keys:
            return sglang_one_batch.FORMAT
        if "avg_latency" in keys or {"latencies", "percentiles"} <= keys:
            return vllm_latency.FORMAT
        if "performance" in keys:
            return trtllm_bench.FORMAT
        if _sglang_serving(obj, keys):
            return sglang_serving.FORMAT
        if keys & {"mean_tpot_ms", "output_throughput", "max_concurrency", "mean_ttft_ms"}:
            return vllm_serve.FORMAT
    else:
        header = stripped.splitlines()[0] if stripped else ""
        if "aggregate_output_tps" in header.split(","):
            return speculators_csv.FORMAT
    known = "; ".join(FORMATS.values())
    raise InputError(
        f"not a benchmark result this tool reads (the formats: {known}); or name the format "
        "with --format",
        file=name,
    )
