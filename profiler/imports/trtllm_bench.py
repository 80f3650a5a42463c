"""TensorRT-LLM `trtllm-bench throughput --report_json` reports.

As `ReportUtility.get_statistics_dict` in NVIDIA/TensorRT-LLM
tensorrt_llm/bench/dataclasses/reporting.py writes them (read at commit 0249976):
`engine` {model, model_path, version, backend, dtype, ...}, `machine` {name, memory.total
(GiB)} or null, `world_info` {tp_size, pp_size, max_batch_size, ...}, `request_info`
{num_requests, avg_num_concurrent_requests, avg_input_length, avg_output_length},
`performance` {total_latency_ms, request_throughput_req_s, system_output_throughput_tok_s,
output_throughput_per_user_tok_s, ...}, with `--streaming` also `streaming_metrics`
{avg_ttft_ms, avg_tpot_ms, tpot_percentiles, ...} (ms), and with speculation
`decoding_stats` {mode, acceptance_length_percentiles {minimum, maximum, average, p50, p90,
p95, p99}, ...}.
"""

from __future__ import annotations

from profiler.imports.common import Fields, Parsed, ServingPoint, acceptance_length, load_json
from profiler.imports.vllm_serve import MIN_TPOT_MS

FORMAT = "trtllm-bench"
ENGINE = "tensorrt-llm"
DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def parse(text: str, name: str) -> Parsed:
    f = Fields(load_json(text, name), name)
    perf = f.sub("performance")
    engine = f.sub("engine", required=False)
    machine = f.sub("machine", required=False)
    world = f.sub("world_info", required=False)
    requests = f.sub("request_info")
    stream = f.sub("streaming_metrics", required=False)
    decoding = f.sub("decoding_stats", required=False)
    notes = []
    tpot = ttft = None
    if stream is not None:
        tpot = stream.number("avg_tpot_ms", "ms per output token")
        if tpot < MIN_TPOT_MS:
            raise stream.fail(
                "avg_tpot_ms",
                f"{tpot:g} ms per output token is below any engine's; trtllm-bench writes "
                "milliseconds: was it converted to seconds?",
            )
        ttft = stream.number("avg_ttft_ms", "ms", required=False)
    else:
        notes.append(f"{name}: not run with --streaming, so no TPOT or TTFT: not fitted")
    length = None
    if decoding is not None:
        al = decoding.sub("acceptance_length_percentiles", required=False)
        if al is not None:
            length = acceptance_length(al, "average", required=True)
    point = ServingPoint(
        source=name,
        concurrency=requests.number("avg_num_concurrent_requests", "requests", above=True),
        request_rate=None,
        prompt_tokens=requests.number("avg_input_length", "tokens", required=False),
        output_tokens=requests.number("avg_output_length", "tokens", required=False),
        speculative=length is not None,
        method=decoding.text("mode") if decoding is not None else "",
        k=None,
        acceptance_length=length,
        acceptance_per_position="",
        tpot_ms=tpot,
        ttft_ms=ttft,
        itl_ms=None,
        output_tok_s=perf.number("system_output_throughput_tok_s", "output tokens/s", above=True),
    )
    tp = world.whole("tp_size", "GPUs", required=False) if world is not None else None
    if tp and tp > 1:
        notes.append(f"{name}: tp_size {tp}; the fit prices one replica on {tp} GPUs")
    raw_dtype = engine.text("dtype") if engine is not None else ""
    return Parsed(
        format=FORMAT,
        engine=ENGINE,
        version=engine.text("version") if engine is not None else "",
        source=name,
        model=engine.text("model") if engine is not None else "",
        gpu=machine.text("name") if machine is not None else "",
        dtype=DTYPES.get(raw_dtype.lower(), ""),
        serving=(point,),
        notes=tuple(notes),
        num_gpus=tp or 1,
    )
