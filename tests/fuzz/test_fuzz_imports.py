"""Fuzz `profiler import` of engine result files: each bundled fixture (vLLM bench serve
and latency, SGLang bench_one_batch and bench_serving, trtllm-bench, speculators' CSV) with one field
replaced, deleted or misspelt, one CSV cell made nasty, or its text cut short, then parsed
and built into a profile with its host-cost fit. Each case is refused naming the file and
the field, or gives a profile whose every measured figure is finite and in range."""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from profiler.imports import parse_file
from profiler.imports.build import build
from profiler.imports.common import MAX_ACCEPTANCE_LENGTH
from tests.fuzz.harness import FUZZ, mutate_doc, nasty_text, nasty_value, paths, run_case, warm
from tests.profiler.test_imports import FIXTURES, LATENCY, SERVE

SETUP = {
    "sglang_bench_one_batch.jsonl": {"target": "qwen3-32b", "gpu": "h200"},
    SERVE[0]: {"gpu": "h200"},
    SERVE[1]: {"gpu": "h200", "method": "eagle3"},
    "trtllm_bench_report.json": {"target": "llama-3.1-8b", "gpu": "h200", "k": 3},
    "speculators_throughput_interactivity.csv": {
        "target": "llama-3.1-8b",
        "gpu": "h200",
        "method": "eagle3",
        "k": 3,
    },
    "vllm_latency_out128.json": {"target": "llama-3.1-8b", "gpu": "h200"},
    "sglang_bench_serving.jsonl": {"target": "llama-3.1-8b", "gpu": "h200", "method": "eagle3"},
    "sglang_bench_serving_old.jsonl": {"target": "llama-3.1-8b", "gpu": "h200"},
}
"""Each fixture and the flags its import needs; the latency file is imported beside its
sibling of another output length (one length alone fits nothing)."""
TEXT = {name: (FIXTURES / name).read_text() for name in SETUP}
DOCS = {
    n: json.loads(t.splitlines()[0] if n.endswith("l") else t)
    for n, t in TEXT.items()
    if not n.endswith(".csv")
}
ROWS = list(csv.DictReader(io.StringIO(TEXT["speculators_throughput_interactivity.csv"])))
JSON_CASES = [(name, path) for name, doc in DOCS.items() for path in paths(doc)]
COLUMNS = list(ROWS[0])


def _import(name: str, raw: bytes):
    files = [parse_file(raw, name, shape=LATENCY.get(name))]
    if name in LATENCY:
        sibling = "vllm_latency_out256.json"
        files.append(parse_file((FIXTURES / sibling).read_bytes(), sibling, shape=LATENCY[sibling]))
    return build(files, **SETUP[name])


def _sane(imported) -> None:
    points = imported.profile.serving_points
    for col in (
        "concurrency",
        "request_rate",
        "prompt_tokens",
        "output_tokens",
        "tpot_ms",
        "ttft_ms",
        "itl_ms",
        "output_tok_s",
    ):
        values = points[col].to_numpy(float)
        given_ = values[~np.isnan(values)]
        assert np.isfinite(given_).all() and (given_ >= 0).all(), f"{col}: {given_[:3]}"
    length = points["acceptance_length"].to_numpy(float)
    length = length[~np.isnan(length)]
    assert ((length >= 1) & (length <= MAX_ACCEPTANCE_LENGTH)).all(), f"acceptance {length}"
    fitted = imported.fit.fitted_ms
    assert fitted is None or (math.isfinite(fitted) and fitted >= 0), f"fitted {fitted}"
    steps = imported.profile.measurements.select_dtypes("number").to_numpy(float)
    steps = steps[~np.isnan(steps)]
    assert np.isfinite(steps).all() and (steps >= 0).all(), f"steps: {steps[:3]}"


def _json_bytes(name: str, doc) -> bytes:
    text = json.dumps(doc, allow_nan=True)
    if name.endswith(".jsonl"):
        text = "\n".join([text, *TEXT[name].splitlines()[1:]])
    return text.encode()


warm(lambda: _import(SERVE[1], TEXT[SERVE[1]].encode()))


@FUZZ
@given(
    case=st.sampled_from(JSON_CASES),
    how=st.sampled_from(["replace", "delete", "unknown"]),
    value=nasty_value(),
)
def test_import_json_fields(case, how, value):
    name, path = case
    raw = _json_bytes(name, mutate_doc(DOCS[name], path, how, value))
    run_case("import_json", lambda: _import(name, raw), _sane)


@FUZZ
@given(
    row=st.integers(min_value=0, max_value=len(ROWS) - 1),
    column=st.sampled_from(COLUMNS),
    value=nasty_text(),
)
def test_import_csv_cells(row, column, value):
    rows = [dict(r) for r in ROWS]
    rows[row][column] = value
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS)
    writer.writeheader()
    writer.writerows(rows)
    name = "speculators_throughput_interactivity.csv"
    raw = out.getvalue().encode()
    run_case("import_csv", lambda: _import(name, raw), _sane)


@FUZZ
@given(name=st.sampled_from(sorted(SETUP)), cut=st.floats(min_value=0.0, max_value=1.0))
def test_import_cut_short(name, cut):
    raw = TEXT[name].encode()
    raw = raw[: int(len(raw) * cut)]
    run_case("import_text", lambda: _import(name, raw), _sane)
