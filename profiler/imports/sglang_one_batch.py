"""SGLang `python -m sglang.bench_one_batch` results (`--result-filename`, JSONL, appended).

One line per (batch_size, input_len, output_len) point, as `latency_test_run_once` in
sgl-project/sglang python/sglang/bench_one_batch.py writes it (read at commit 0094415):
`run_name`, `batch_size`, `input_len`, `output_len`, `prefill_latency` (s, the whole batch's
prompt in one forward), `prefill_throughput` (tokens/s), `median_decode_latency` (s per
decode step, median over the output_len - 1 steps), `median_decode_throughput` (tokens/s),
`total_latency` (s), `overall_throughput`. The file records neither the model nor the GPU
nor SGLang's version. A decode step here is one forward and its sampling with no scheduler
around it: the closest analogue of the profiler's grid.
"""

from __future__ import annotations

from profiler.imports.common import Fields, Parsed, StepPoint, consistent, json_lines

FORMAT = "sglang-bench-one-batch"
ENGINE = "sglang"
MAX_DECODE_S = 5.0
"""Seconds per decode step above which a value is taken for milliseconds: a 671B model on
eight GPUs decodes in tens of milliseconds."""
MAX_PREFILL_S = 600.0


def parse(text: str, name: str) -> Parsed:
    steps = []
    notes = []
    for n, obj in json_lines(text, name):
        f = Fields(obj, name, row=n)
        batch = f.whole("batch_size", "sequences")
        input_len = f.whole("input_len", "tokens")
        output_len = f.whole("output_len", "tokens")
        prefill = f.number("prefill_latency", "seconds", above=True, high=MAX_PREFILL_S)
        if f.has("prefill_throughput"):
            rate = f.number("prefill_throughput", "tokens/s", above=True)
            consistent(
                f,
                "prefill_throughput",
                rate,
                input_len * batch / prefill,
                "batch_size x input_len / prefill_latency",
            )
        steps.append(StepPoint(batch, input_len, 0, prefill * 1e3, 1, name))
        if output_len < 2:
            notes.append(f"line {n}: output_len {output_len} has no decode step")
            continue
        step = f.number(
            "median_decode_latency", "seconds per decode step", above=True, high=MAX_DECODE_S
        )
        if f.has("median_decode_throughput"):
            rate = f.number("median_decode_throughput", "tokens/s", above=True)
            consistent(
                f,
                "median_decode_throughput",
                rate,
                batch / step,
                "batch_size / median_decode_latency",
            )
        # Decode steps attend over input_len + 1 ... input_len + output_len - 1 tokens.
        steps.append(
            StepPoint(batch, 1, input_len + output_len // 2, step * 1e3, output_len - 1, name)
        )
    if not steps:
        raise Fields({}, name).fail("batch_size", "no result line in the file")
    return Parsed(
        format=FORMAT,
        engine=ENGINE,
        version="",
        source=name,
        steps=tuple(steps),
        notes=tuple(notes),
    )
