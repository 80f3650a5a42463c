"""SGLang `python -m sglang.bench_serving --output-file FILE` results (JSONL: one object
appended per run).

As sgl-project/sglang python/sglang/bench_serving.py builds `result` in `benchmark` and
appends `json.dumps(result)` and a newline to `--output-file` (read at commit 0033168):
`backend` (`sglang`, `sglang-native`, `sglang-oai`, `sglang-oai-chat`; or `vllm`, `trt`,
`lmdeploy`... when it benchmarked another engine's server), `dataset_name`, `request_rate`
(req/s; the default `float("inf")`, which Python's json writes as the bare token
`Infinity`, sends every request at once: with `max_concurrency` a closed loop of that many
requests), `max_concurrency` (null when not capped), `sharegpt_output_len`,
`random_input_len`, `random_output_len`, `random_range_ratio`, then `duration` (s),
`completed`, `total_input_tokens`, `total_output_tokens`, `total_output_tokens_retokenized`,
`request_throughput` (req/s), `input_throughput`, `output_throughput` (tokens/s),
`{mean,median,std,p99}_e2e_latency_ms`, `{mean,median,std,p99}_ttft_ms`,
`{mean,median,std,p99}_tpot_ms` (per request (E2E - TTFT) / (output tokens - 1), averaged),
`{mean,median,std,p95,p99}_itl_ms` (gaps between streamed chunks), `concurrency` (the sum of
E2E latencies / duration: requests in flight on average) and `accept_length` (the server's
`avg_spec_accept_length` from `/get_server_info`, tokens per verify step; null unless an
SGLang server speculated).

The old schema (the same function at commit 50a6136) writes `backend`, `dataset_name`,
`request_rate`, the three token totals, `mean_e2e_latency_ms`, `median_e2e_latency_ms`,
`median_ttft_ms`, `median_itl_ms`, `output_throughput`, the four dataset arguments,
`duration` and `completed` only: no mean TTFT, TPOT or ITL, no `max_concurrency` (the
script had no such option) and no acceptance. TPOT is then derived (`_tpot`, said in the
notes) and TTFT is the median.

Newer trees move the script to python/sglang/benchmark/serving.py (read at commit 00f9ec4;
`python -m sglang.bench_serving` still runs it) and add `tag`, `server_info` (the server's
`/server_info`: its arguments, among them `model_path`, `served_model_name`,
`speculative_algorithm`, `speculative_num_steps`, `speculative_eagle_topk`, `tp_size`, and
`version`), p90/p95 percentiles, `max_output_tokens_per_s` and `max_concurrent_requests`;
`request_rate` is the string "trace" when it replayed a trace's timestamps. A refactor of
python/sglang/benchmark/metrics.py (commit 1291c7f) writes the totals as `total_input` and
`total_output`; both spellings are read. Nothing records the GPU; the model, SGLang's
version and the speculative method only `server_info` does.
"""

from __future__ import annotations

import math

from profiler.imports.common import (
    Fields,
    Parsed,
    ServingPoint,
    acceptance_length,
    consistent,
    json_lines,
    load_json,
)
from profiler.imports.vllm_serve import MIN_TPOT_MS
from simulator.errors import InputError

FORMAT = "sglang-bench-serving"
ONLY_KEYS = frozenset(
    {
        "mean_e2e_latency_ms",
        "median_e2e_latency_ms",
        "total_output_tokens_retokenized",
        "accept_length",
        "sharegpt_output_len",
        "random_input_len",
        "random_output_len",
        "random_range_ratio",
    }
)
"""Keys of bench_serving's result that vllm bench serve's has not (it writes `*_e2el_ms`)."""
ENGINES = {"sglang": "sglang", "vllm": "vllm", "trt": "tensorrt-llm"}
"""`backend` (its part before '-') -> the engine whose server was benchmarked."""
METHODS = {"nextn": "mtp", "standalone": "draft_model"}
"""SGLang's `speculative_algorithm` names the simulator spells otherwise."""


def _engine(f: Fields) -> str:
    """The engine benchmarked, from `backend` (SGLang's when not recorded)."""
    backend = f.text("backend", default="sglang").lower()
    engine = ENGINES.get(backend.split("-")[0])
    if engine is None:
        raise f.fail(
            "backend",
            f"'{backend}': bench_serving measured the {backend} server; SpecPlan imports "
            "SGLang, vLLM and TensorRT-LLM servers' results",
        )
    return engine


def _infinite(raw) -> bool:
    """Whether `request_rate` is bench_serving's default: `Infinity` or the text "inf"."""
    if isinstance(raw, str):
        return raw.strip().lower() in ("inf", "infinity")
    return isinstance(raw, float) and raw == math.inf


def _load(f: Fields) -> tuple[float | None, float | None]:
    """(requests in flight, requests/s) the run held; an infinite `request_rate` (every
    request sent at once) is a closed loop of `max_concurrency` requests: rate None."""
    cap = f.whole("max_concurrency", "requests in flight", required=False)
    raw = f.obj.get("request_rate")
    if isinstance(raw, str) and raw.strip().lower() == "trace":
        raise f.fail(
            "request_rate",
            "'trace': the run replayed a trace's timestamps, neither a steady request rate "
            "nor a closed loop; rerun with --request-rate or --max-concurrency",
        )
    rate = None
    if not _infinite(raw):
        rate = f.number("request_rate", "requests/s", above=True)
    elif cap is None:
        raise f.fail(
            "max_concurrency",
            "is missing, and request_rate is infinite: every request was sent at once with "
            "nothing capping how many ran together, not a steady load; rerun with "
            "--max-concurrency N (or a finite --request-rate)",
        )
    if cap is not None and f.has("concurrency"):
        mean = f.number("concurrency", "requests in flight on average")
        if mean > cap * 1.01:
            raise f.fail(
                "concurrency",
                f"{mean:g} requests in flight on average is above max_concurrency {cap}",
            )
    return (None if cap is None else float(cap)), rate


def _total(f: Fields, key: str, alias: str, *, required: bool = False) -> float | None:
    """A token total (tokens), under its name or the refactor's `alias`."""
    if not f.has(key) and f.has(alias):
        key = alias
    return f.number(key, "tokens", required=required)


def _ttft(f: Fields, old: bool) -> tuple[float, str]:
    """(mean TTFT in ms, a note when the median stands in: the old schema has no mean)."""
    if old and not f.has("mean_ttft_ms") and f.has("median_ttft_ms"):
        how = "mean_ttft_ms is not recorded (an older bench_serving): TTFT is median_ttft_ms"
        return f.number("median_ttft_ms", "ms"), how
    return f.number("mean_ttft_ms", "ms"), ""


_NO_TPOT = "mean_tpot_ms is not recorded: "


def _tpot(f: Fields, ttft: float, speculative: bool) -> tuple[float, str, str]:
    """(TPOT in ms per output token, the field it was read or derived from, how derived)."""
    if f.has("mean_tpot_ms"):
        return f.number("mean_tpot_ms", "ms per output token"), "mean_tpot_ms", ""
    if f.has("mean_itl_ms") and not speculative:
        how = f"{_NO_TPOT}TPOT is mean_itl_ms (a server not speculating streams a token a gap)"
        return f.number("mean_itl_ms", "ms per output token"), "mean_itl_ms", how
    completed = f.whole("completed", "requests")
    per_request = _total(f, "total_output_tokens", "total_output", required=True) / completed
    if per_request <= 1:
        raise f.fail(
            "total_output_tokens",
            f"{per_request:g} output tokens per request: TPOT needs two or more",
        )
    e2e = f.number("mean_e2e_latency_ms", "ms")
    if e2e <= ttft:
        raise f.fail("mean_e2e_latency_ms", f"{e2e:g} ms is not above the TTFT, {ttft:g} ms")
    how = f"{_NO_TPOT}TPOT is (mean_e2e_latency_ms - TTFT) / (output tokens per request - 1)"
    if speculative:
        how += ", not mean_itl_ms: a speculating server streams a chunk of tokens a gap"
    return (e2e - ttft) / (per_request - 1), "mean_e2e_latency_ms", how


def _throughput(f: Fields) -> float:
    """Output tokens/s, checked against the totals over the duration."""
    out_rate = f.number("output_throughput", "output tokens/s", above=True)
    total = _total(f, "total_output_tokens", "total_output")
    if f.has("duration") and total is not None:
        duration = f.number("duration", "seconds", above=True)
        consistent(
            f, "output_throughput", out_rate, total / duration, "total_output_tokens / duration"
        )
    return out_rate


def _server(f: Fields) -> dict:
    """What `server_info` (newer trees) records: model id, version, method, K, GPUs."""
    s = f.sub("server_info", required=False)
    if s is None:
        return {"model": "", "version": "", "method": "", "k": None, "gpus": 1}
    split = s.text("disaggregation_mode").lower()
    if split in ("prefill", "decode"):
        raise s.fail(
            "disaggregation_mode",
            f"a {split} server of a prefill/decode split: the run spans the prefill and "
            "decode pools, not what the model simulates (one replica doing both); import "
            "an aggregated run",
        )
    algorithm = s.text("speculative_algorithm").lower()
    algorithm = "" if algorithm == "none" else algorithm
    topk = s.whole("speculative_eagle_topk", "draft branches", required=False)
    k = None
    if algorithm and topk in (None, 1):  # a chain: K = its steps (a tree's K is not)
        k = s.whole("speculative_num_steps", "draft tokens per step", required=False)
    return {
        "model": s.text("served_model_name") or s.text("model_path"),
        "version": s.text("version"),
        "method": METHODS.get(algorithm, algorithm),
        "k": k,
        "gpus": s.whole("tp_size", "GPUs", required=False, high=1024) or 1,
    }


def _acceptance(f: Fields, k: int | None) -> float | None:
    """`accept_length` (tokens per verify step), at most K + 1 when K is recorded."""
    length = acceptance_length(f, "accept_length")
    if length is not None and k is not None and length > k + 1 + 1e-6:
        raise f.fail("accept_length", f"{length:g} tokens per verify step is above K + 1 = {k + 1}")
    return length


def _point(f: Fields, name: str) -> tuple[ServingPoint, dict, list[str]]:
    """One line's serving point, what its `server_info` records, and how its TPOT and TTFT
    were had ('' where read as written)."""
    server = _server(f)
    server["engine"] = _engine(f)
    concurrency, rate = _load(f)
    completed = f.whole("completed", "requests")
    length = _acceptance(f, server["k"])
    speculative = length is not None or bool(server["method"])
    ttft, ttft_how = _ttft(f, old=not f.has("mean_tpot_ms"))
    tpot, tpot_key, tpot_how = _tpot(f, ttft, speculative)
    if tpot < MIN_TPOT_MS:
        raise f.fail(
            tpot_key,
            f"{tpot:g} ms per output token is below any engine's; bench_serving writes "
            "milliseconds: was it converted to seconds?",
        )
    prompt = _total(f, "total_input_tokens", "total_input")
    output = _total(f, "total_output_tokens", "total_output")
    point = ServingPoint(
        source=name,
        concurrency=concurrency,
        request_rate=rate,
        prompt_tokens=None if prompt is None else prompt / completed,
        output_tokens=None if output is None else output / completed,
        speculative=speculative,
        method=server["method"] if speculative else "",
        k=server["k"] if speculative else None,
        acceptance_length=length,
        acceptance_per_position="",
        tpot_ms=tpot,
        ttft_ms=ttft,
        itl_ms=f.number("mean_itl_ms", "ms", required=False),
        output_tok_s=_throughput(f),
    )
    return point, server, [h for h in (ttft_how, tpot_how) if h]


def _objects(text: str, name: str) -> list[tuple[int | None, object]]:
    """The file's objects: one JSON object (a reformatted single run) or one a line."""
    try:
        return [(None, load_json(text.strip(), name))]
    except InputError:
        return json_lines(text, name)


def _notes(name: str, how: dict[str, list[int | None]], gpus: int) -> tuple[str, ...]:
    """One note per derivation, naming the lines it was used on; the GPUs of a replica."""
    notes = []
    for what, rows in how.items():
        lines = ", ".join(str(r) for r in rows if r is not None) or "1"
        notes.append(f"{name}: {what} (line(s) {lines})")
    if gpus > 1:
        notes.append(f"{name}: tp_size {gpus}; the fit prices one replica on {gpus} GPUs")
    return tuple(notes)


def _one(f: Fields, key: str, values: set[str], what: str) -> str:
    if len(values) > 1:
        raise f.fail(key, f"results of several {what}: {sorted(values)}")
    return next(iter(values), "")


def parse(text: str, name: str) -> Parsed:
    points, servers, how = [], [], {}
    for row, obj in _objects(text, name):
        point, server, derived = _point(Fields(obj, name, row=row), name)
        points.append(point)
        servers.append(server)
        for what in derived:
            how.setdefault(what, []).append(row)
    top = Fields({}, name)
    engine = _one(top, "backend", {s["engine"] for s in servers}, "engines' servers")
    models = {s["model"] for s in servers if s["model"]}
    model = _one(top, "server_info.model_path", models, "models")
    gpus = max(s["gpus"] for s in servers)
    return Parsed(
        format=FORMAT,
        engine=engine,
        version=", ".join(sorted({s["version"] for s in servers if s["version"]})),
        source=name,
        model=model,
        serving=tuple(points),
        notes=_notes(name, how, gpus),
        num_gpus=gpus,
    )
