"""`vllm bench serve --save-result` (or `--append-result`, one JSON object a line) results.

As vllm-project/vllm vllm/benchmarks/serve.py writes them (read at commit 009e6d4):
`date`, `backend`, `label`, `model_id`, `tokenizer_id`, `num_prompts`, `--metadata KEY=VALUE`
pairs, `request_rate` (req/s, or the string "inf"), `burstiness`, `max_concurrency` (null
when not capped), then `duration` (s), `completed`, `failed`, `total_input_tokens`,
`total_output_tokens`, `request_throughput`, `output_throughput` (tokens/s),
`total_token_throughput`, and `{mean,median,std,p<N>}_{ttft,tpot,itl,e2el}_ms`. TPOT is
(E2E - TTFT) / (output tokens - 1) per request. Against a speculating server it adds
`spec_decode_acceptance_rate` (%), `spec_decode_acceptance_length` (1 + accepted / drafts),
`spec_decode_num_drafts`, `spec_decode_draft_tokens`, `spec_decode_accepted_tokens` and
`spec_decode_per_position_acceptance_rates` (fractions of drafts accepted at each position,
so their count is K). The file records neither the GPU nor vLLM's version unless the user
passed them with `--metadata` (`gpu=...`, `vllm_version=...`, `method=...` are read).
"""

from __future__ import annotations

from profiler.imports.common import (
    Fields,
    Parsed,
    ServingPoint,
    acceptance_length,
    consistent,
    json_lines,
    load_json,
    refuse_disaggregated,
)
from simulator.errors import InputError

FORMAT = "vllm-bench-serve"
ENGINE = "vllm"
MIN_TPOT_MS = 0.05
"""Milliseconds per output token below which a value is taken for seconds."""


def _point(f: Fields, name: str) -> tuple[ServingPoint, str, str, str]:
    refuse_disaggregated(f)
    completed = f.whole("completed", "requests")
    concurrency = f.whole("max_concurrency", "requests in flight", required=False)
    rate = None
    if f.has("request_rate") and f.obj["request_rate"] != "inf":
        rate = f.number("request_rate", "requests/s", above=True)
    tpot = f.number("mean_tpot_ms", "ms per output token")
    if tpot < MIN_TPOT_MS:
        raise f.fail(
            "mean_tpot_ms",
            f"{tpot:g} ms per output token is below any engine's; vllm bench serve writes "
            "milliseconds: was it converted to seconds?",
        )
    out_rate = f.number("output_throughput", "output tokens/s", above=True)
    if f.has("duration") and f.has("total_output_tokens"):
        duration = f.number("duration", "seconds", above=True)
        total = f.number("total_output_tokens", "tokens")
        consistent(
            f, "output_throughput", out_rate, total / duration, "total_output_tokens / duration"
        )
    prompt = f.number("total_input_tokens", "tokens", required=False)
    output = f.number("total_output_tokens", "tokens", required=False)
    length = acceptance_length(f, "spec_decode_acceptance_length")
    per_position = f.rates("spec_decode_per_position_acceptance_rates")
    if length is not None and f.has("spec_decode_num_drafts"):
        drafts = f.whole("spec_decode_num_drafts", "drafts")
        accepted = f.whole("spec_decode_accepted_tokens", "tokens", low=0)
        consistent(
            f,
            "spec_decode_acceptance_length",
            length,
            1 + accepted / drafts,
            "1 + spec_decode_accepted_tokens / spec_decode_num_drafts",
        )
    point = ServingPoint(
        source=name,
        concurrency=None if concurrency is None else float(concurrency),
        request_rate=rate,
        prompt_tokens=None if prompt is None else prompt / completed,
        output_tokens=None if output is None else output / completed,
        speculative=length is not None,
        method=f.text("method") if length is not None else "",
        k=len(per_position.split(";")) if per_position else None,
        acceptance_length=length,
        acceptance_per_position=per_position,
        tpot_ms=tpot,
        ttft_ms=f.number("mean_ttft_ms", "ms"),
        itl_ms=f.number("mean_itl_ms", "ms", required=False),
        output_tok_s=out_rate,
    )
    version = f.text("vllm_version") or f.text("version")
    return point, f.text("model_id"), f.text("gpu"), version


def parse(text: str, name: str) -> Parsed:
    stripped = text.strip()
    try:
        objects = [(None, load_json(stripped, name))]
    except InputError:
        objects = json_lines(text, name)
    points, models, gpus, versions = [], set(), set(), set()
    for row, obj in objects:
        point, model, gpu, version = _point(Fields(obj, name, row=row), name)
        points.append(point)
        for values, v in ((models, model), (gpus, gpu), (versions, version)):
            if v:
                values.add(v)
    if len(models) > 1:
        raise Fields({}, name).fail("model_id", f"results of several models: {sorted(models)}")
    return Parsed(
        format=FORMAT,
        engine=ENGINE,
        version=", ".join(sorted(versions)),
        source=name,
        model=next(iter(models), ""),
        gpu=next(iter(gpus), ""),
        serving=tuple(points),
    )
