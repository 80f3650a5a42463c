"""`vllm bench latency --output-json` results.

As vllm-project/vllm vllm/benchmarks/latency.py writes them (read at commit 00cae07):
`avg_latency` and `std_latency` (s), `latencies` (s, one per iteration), `percentiles`
({"10", "25", "50", "75", "90", "99"}: s). Each sample is one whole `llm.generate()` of
`--batch-size` prompts of `--input-len` tokens generating `--output-len` tokens: prefill
and every decode step together. The file does not record the batch size, the lengths, the
model, the GPU or vLLM's version, so the shape comes from the user (or from `batch_size`,
`input_len` and `output_len` keys added to the file). Two runs that differ only in output
length give the decode step: (t(O2) - t(O1)) / (O2 - O1).
"""

from __future__ import annotations

from profiler.imports.common import Fields, Parsed, consistent, load_json

FORMAT = "vllm-bench-latency"
ENGINE = "vllm"
MAX_LATENCY_S = 36_000.0
SHAPE_KEYS = ("batch_size", "input_len", "output_len")


def parse(text: str, name: str, shape: tuple[int, int, int] | None = None) -> Parsed:
    f = Fields(load_json(text, name), name)
    avg = f.number("avg_latency", "seconds per generate()", above=True, high=MAX_LATENCY_S)
    samples = f.obj.get("latencies")
    if samples is not None:
        if not isinstance(samples, list) or not samples:
            raise f.fail("latencies", "expected a non-empty list of seconds")
        values = [
            f.check(f"latencies[{i}]", v, "seconds", high=MAX_LATENCY_S)
            for i, v in enumerate(samples[:100_000])
        ]
        consistent(f, "avg_latency", avg, sum(values) / len(values), "the mean of latencies")
    pct = f.sub("percentiles", required=False)
    if pct is not None and pct.has("50"):
        pct.number("50", "seconds", high=MAX_LATENCY_S)
    if all(f.has(k) for k in SHAPE_KEYS):
        batch, input_len, output_len = (f.whole(k, "tokens or sequences") for k in SHAPE_KEYS)
    elif shape is not None:
        batch, input_len, output_len = shape
    else:
        raise f.fail(
            "batch_size",
            "vllm bench latency's JSON does not record --batch-size, --input-len and "
            "--output-len: give them for this file (CLI: --latency-shape "
            f"{name}=BATCH,INPUT,OUTPUT; the Profiles page: the shape box)",
        )
    run = {
        "batch": batch,
        "input_len": input_len,
        "output_len": output_len,
        "avg_s": avg,
        "samples": len(samples) if isinstance(samples, list) else 1,
        "source": name,
    }
    return Parsed(format=FORMAT, engine=ENGINE, version="", source=name, latency_runs=(run,))
