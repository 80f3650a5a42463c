"""vllm-project/speculators `scripts/evaluate/throughput_interactivity.py` CSVs.

Columns as its `CSV_COLUMNS` (read at commit 01d6d4d): `model` (the series label),
`point`, `offered_rps`, `offered_concurrency` (closed-loop streams N; empty for open-loop
`rate<r>` points), `repeat`, `source_json`, `strategy`, `measured_duration_s`, request
counts, `achieved_rps`, `completed_rps`, `aggregate_output_tps` (output tokens/s in the
window), `mean_active_concurrency`, `interactivity_tps_user`, `mean_itl_ms` (GuideLLM's
(last token - first token) / (tokens - 1): vLLM's TPOT), `interactivity_itl_tps_user`
(1000 / mean_itl_ms), `mean_output_tokens`, `mean_prompt_tokens`, `mean_cached_tokens`,
`mean_output_tokens_per_iteration`, `median_ttft_ms`, `p99_ttft_ms`, `median_itl_ms`,
`arrival_burstiness`, `acceptance_length` (1 + accepted / drafts; empty without a
speculator), `num_drafts`, `num_accepted_tokens`, `stop_reason`. The engine is a vLLM
server; the CSV records neither the model id, the GPU nor vLLM's version.
"""

from __future__ import annotations

import csv
import io

from profiler.imports.common import (
    MAX_ROWS,
    Fields,
    Parsed,
    ServingPoint,
    acceptance_length,
    consistent,
)
from profiler.imports.vllm_serve import MIN_TPOT_MS

FORMAT = "speculators-throughput-interactivity"
ENGINE = "vllm"
REQUIRED = ("aggregate_output_tps", "mean_itl_ms", "median_ttft_ms", "mean_output_tokens")


def _row(f: Fields, name: str) -> ServingPoint:
    concurrency = f.number("offered_concurrency", "streams", required=False, above=True)
    rate = None
    if concurrency is None:
        rate = f.number("offered_rps", "requests/s", above=True)
    tpot = f.number("mean_itl_ms", "ms per output token")
    if tpot < MIN_TPOT_MS:
        raise f.fail(
            "mean_itl_ms",
            f"{tpot:g} ms per output token is below any engine's; the CSV holds "
            "milliseconds: was it converted to seconds?",
        )
    if f.has("interactivity_itl_tps_user"):
        speed = f.number("interactivity_itl_tps_user", "tokens/s per user", above=True)
        consistent(f, "interactivity_itl_tps_user", speed, 1000.0 / tpot, "1000 / mean_itl_ms")
    length = acceptance_length(f, "acceptance_length")
    return ServingPoint(
        source=name,
        concurrency=concurrency,
        request_rate=rate,
        prompt_tokens=f.number("mean_prompt_tokens", "tokens", required=False),
        output_tokens=f.number("mean_output_tokens", "tokens", above=True),
        speculative=length is not None,
        method="",
        k=None,
        acceptance_length=length,
        acceptance_per_position="",
        tpot_ms=tpot,
        ttft_ms=f.number("median_ttft_ms", "ms"),
        itl_ms=None,
        output_tok_s=f.number("aggregate_output_tps", "output tokens/s", above=True),
    )


def parse(text: str, name: str) -> Parsed:
    reader = csv.DictReader(io.StringIO(text))
    try:
        columns = reader.fieldnames or []
        missing = [c for c in REQUIRED if c not in columns]
        if missing:
            raise Fields({}, name, row=1).fail(missing[0], "column is missing")
        if "offered_concurrency" not in columns and "offered_rps" not in columns:
            raise Fields({}, name, row=1).fail("offered_concurrency", "column is missing")
        points, labels = [], set()
        for record in reader:
            line = reader.line_num
            if len(points) >= MAX_ROWS:
                raise Fields({}, name, row=line).fail("", f"more than {MAX_ROWS:,} rows")
            if None in record:
                raise Fields({}, name, row=line).fail("", "more values than the header")
            f = Fields(record, name, row=line)
            points.append(_row(f, name))
            if f.has("model"):
                labels.add(f.text("model"))
    except csv.Error as exc:
        raise Fields({}, name).fail("", f"not a readable CSV table ({exc})") from None
    if not points:
        raise Fields({}, name, row=2).fail("", "no data rows below the header")
    notes = (f"{name}: series {', '.join(sorted(labels))}",) if labels else ()
    return Parsed(
        format=FORMAT, engine=ENGINE, version="", source=name, serving=tuple(points), notes=notes
    )
