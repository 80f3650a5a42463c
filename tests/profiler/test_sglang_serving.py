"""`profiler import` of SGLang's `python -m sglang.bench_serving --output-file` JSONL, old and
new schemas: told from its content, one serving point a line, TPOT derived where the file has
no `mean_tpot_ms`, an infinite request rate read as a closed loop at `max_concurrency`, and
every bad field refused naming the file, the line and the field. Fixtures and where their
layout comes from: tests/profiler/fixtures/uploads/README.md."""

from __future__ import annotations

import contextlib
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profiler.cli import main
from profiler.imports import detect, parse_file
from profiler.imports.build import build
from profiler.imports.common import MAX_ROWS
from simulator.errors import InputError
from simulator.inputs.profile import load_profile
from tests.profiler.test_imports import _ODD, FIXTURES, SERVE

NEW = "sglang_bench_serving.jsonl"
OLD = "sglang_bench_serving_old.jsonl"


def lines(name: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / name).read_text().splitlines()]


def raw(objs: list[dict]) -> bytes:
    """JSONL as bench_serving writes it: `json.dumps` (inf as `Infinity`), one a line."""
    return "".join(json.dumps(o) + "\n" for o in objs).encode()


def first_edited(name: str, **changes) -> bytes:
    """The fixture with its first line's keys set (None: the key dropped)."""
    objs = lines(name)
    for key, value in changes.items():
        if value is None:
            objs[0].pop(key, None)
        else:
            objs[0][key] = value
    return raw(objs)


def parsed(name: str):
    return parse_file((FIXTURES / name).read_bytes(), name)


# ------------------------------------------------------------------------------ parsed


def test_both_schemas_are_told_from_their_content_and_vllm_serve_stays_vllm():
    for name in (NEW, OLD):
        assert detect((FIXTURES / name).read_text(), name) == "sglang-bench-serving"
        assert parse_file((FIXTURES / name).read_bytes(), name).format == "sglang-bench-serving"
    for name in SERVE:
        assert detect((FIXTURES / name).read_text(), name) == "vllm-bench-serve"
    # An SGLang backend beside a serving metric is enough, even without SGLang-only keys.
    assert detect('{"backend": "sglang-oai", "mean_ttft_ms": 30.0}', "x.jsonl") == (
        "sglang-bench-serving"
    )


def test_new_schema_lines_are_closed_loop_points_with_their_acceptance():
    p = parsed(NEW)
    objs = lines(NEW)
    assert (p.engine, p.model, p.gpu, p.version, p.notes) == ("sglang", "", "", "", ())
    assert [pt.concurrency for pt in p.serving] == [1, 16, 64, 1, 16, 64]
    assert all(pt.request_rate is None for pt in p.serving)  # request_rate: Infinity
    assert [pt.tpot_ms for pt in p.serving] == [o["mean_tpot_ms"] for o in objs]
    assert [pt.ttft_ms for pt in p.serving] == [o["mean_ttft_ms"] for o in objs]
    assert [pt.itl_ms for pt in p.serving] == [o["mean_itl_ms"] for o in objs]
    assert [pt.output_tok_s for pt in p.serving] == [o["output_throughput"] for o in objs]
    assert {(pt.prompt_tokens, pt.output_tokens) for pt in p.serving} == {(1024, 256)}
    plain, spec = p.serving[:3], p.serving[3:]
    assert not any(pt.speculative for pt in plain)
    assert all(pt.speculative and pt.method == "" and pt.k is None for pt in spec)
    assert [pt.acceptance_length for pt in spec] == [3.12, 3.01, 2.88]


def test_old_schema_derives_tpot_from_end_to_end_latency():
    """bench_serving @50a6136 writes no mean TTFT, TPOT or ITL and no max_concurrency."""
    p = parsed(OLD)
    objs = lines(OLD)
    assert all("mean_tpot_ms" not in o and "max_concurrency" not in o for o in objs)
    assert [pt.request_rate for pt in p.serving] == [2, 4, 8, 16]
    assert all(pt.concurrency is None and not pt.speculative for pt in p.serving)
    for pt, o in zip(p.serving, objs, strict=True):
        per_request = o["total_output_tokens"] / o["completed"]
        tpot = (o["mean_e2e_latency_ms"] - o["median_ttft_ms"]) / (per_request - 1)
        assert pt.tpot_ms == pytest.approx(tpot)
        assert pt.ttft_ms == o["median_ttft_ms"] and pt.itl_ms is None
    assert 5.5 < p.serving[0].tpot_ms < p.serving[-1].tpot_ms < 10
    tpot_note, ttft_note = sorted(p.notes, key=lambda n: "TPOT is" not in n)
    assert "mean_tpot_ms is not recorded" in tpot_note and "mean_e2e_latency_ms" in tpot_note
    assert "line(s) 1, 2, 3, 4" in tpot_note and tpot_note.startswith(OLD)
    assert "TTFT is median_ttft_ms" in ttft_note


def test_tpot_is_the_mean_itl_of_a_plain_run_and_end_to_end_of_a_speculative_one():
    objs = lines(NEW)
    for o in objs:
        del o["mean_tpot_ms"]
    p = parse_file(raw(objs), NEW)
    plain, spec = p.serving[0], p.serving[3]
    assert plain.tpot_ms == objs[0]["mean_itl_ms"]
    # A speculating server streams accept_length tokens a chunk: ITL is per chunk.
    assert spec.itl_ms == pytest.approx(spec.tpot_ms * 3.12, rel=0.02)
    o = objs[3]
    expected = (o["mean_e2e_latency_ms"] - o["mean_ttft_ms"]) / (256 - 1)
    assert spec.tpot_ms == pytest.approx(expected)
    itl_note = next(n for n in p.notes if "mean_itl_ms (" in n)
    e2e_note = next(n for n in p.notes if "mean_e2e_latency_ms" in n)
    assert "line(s) 1, 2, 3)" in itl_note and "line(s) 4, 5, 6)" in e2e_note
    assert "chunk" in e2e_note


# ----------------------------------------------------------------------- request rate


@pytest.mark.parametrize("rate", [math.inf, "inf", "Infinity"], ids=["float", "text", "Text"])
def test_an_infinite_rate_is_a_closed_loop_at_max_concurrency(rate):
    p = parse_file(first_edited(NEW, request_rate=rate, max_concurrency=16), NEW)
    assert (p.serving[0].concurrency, p.serving[0].request_rate) == (16, None)
    assert b"Infinity" in first_edited(NEW, request_rate=rate)  # as json writes float("inf")


def test_an_infinite_rate_without_max_concurrency_is_refused_naming_it():
    with pytest.raises(InputError) as err:
        parse_file(first_edited(NEW, max_concurrency=None), NEW)
    assert (err.value.file, err.value.row, err.value.field) == (NEW, 1, "max_concurrency")
    assert "request_rate is infinite" in str(err.value) and "not a steady load" in str(err.value)


def test_a_finite_rate_is_kept():
    p = parse_file(first_edited(NEW, request_rate=4.0, max_concurrency=None), NEW)
    assert (p.serving[0].concurrency, p.serving[0].request_rate) == (None, 4.0)
    p = parse_file(first_edited(NEW, request_rate=4.0), NEW)
    assert (p.serving[0].concurrency, p.serving[0].request_rate) == (1, 4.0)


# --------------------------------------------------------------------------- refusals

REFUSED = [
    # (file, changes to line 1, field named, words in the message)
    (NEW, {"mean_ttft_ms": None}, "mean_ttft_ms", "missing"),
    (NEW, {"mean_tpot_ms": 0.00558}, "mean_tpot_ms", "seconds"),
    (NEW, {"output_throughput": "fast"}, "output_throughput", "not a number"),
    (NEW, {"accept_length": 65}, "accept_length", "at most 17"),
    (NEW, {"mean_ttft_ms": math.nan}, "mean_ttft_ms", "not a finite number"),
    (NEW, {"max_concurrency": math.nan}, "max_concurrency", "not a finite number"),
    (NEW, {"request_rate": -math.inf}, "request_rate", "not a finite number"),
    (NEW, {"request_rate": "trace"}, "request_rate", "trace's timestamps"),
    (NEW, {"output_throughput": 173866.9}, "output_throughput", "another unit"),
    (NEW, {"concurrency": 3.5}, "concurrency", "above max_concurrency 1"),
    (NEW, {"completed": 0}, "completed", ">= 1"),
    (NEW, {"backend": "lmdeploy"}, "backend", "lmdeploy server"),
    (OLD, {"mean_e2e_latency_ms": 1.519}, "mean_e2e_latency_ms", "not above the TTFT"),
    (OLD, {"mean_e2e_latency_ms": 30.2}, "mean_e2e_latency_ms", "seconds"),
    (OLD, {"median_ttft_ms": None}, "mean_ttft_ms", "missing"),
    (OLD, {"total_output_tokens": 400}, "total_output_tokens", "two or more"),
    (OLD, {"request_rate": "2/s"}, "request_rate", "not a number"),
]


@pytest.mark.parametrize(
    "name,changes,field,words",
    REFUSED,
    ids=[f"{r[0].split('.')[0]}-{r[2]}-{r[3].replace(' ', '_')}" for r in REFUSED],
)
def test_refused_line_names_the_file_the_line_and_the_field(name, changes, field, words):
    with pytest.raises(InputError) as err:
        parse_file(first_edited(name, **changes), name)
    assert (err.value.file, err.value.row, err.value.field) == (name, 1, field)
    assert words in str(err.value)


def test_nan_is_refused_in_any_field_but_infinity_only_in_request_rate():
    text = first_edited(NEW, mean_itl_ms=math.nan).decode()
    assert "NaN" in text.splitlines()[0]
    with pytest.raises(InputError) as err:
        parse_file(text.encode(), NEW)
    assert err.value.field == "mean_itl_ms"
    with pytest.raises(InputError) as err:
        parse_file(first_edited(NEW, duration=math.inf), NEW)
    assert err.value.field == "duration"


def test_more_lines_than_a_sweep_has_are_refused():
    line = (FIXTURES / NEW).read_text().splitlines()[0]
    with pytest.raises(InputError, match=f"more than {MAX_ROWS:,} lines") as err:
        parse_file(f"{line}\n".encode() * (MAX_ROWS + 1), NEW)
    assert err.value.row == MAX_ROWS + 1


# ------------------------------------------------------- what newer trees also record


def _server_info(model: str = "meta-llama/Llama-3.1-8B-Instruct", **kw) -> dict:
    """The part of `/server_info` (server arguments and version) the parser reads."""
    return {
        "model_path": model,
        "served_model_name": model,
        "speculative_algorithm": "EAGLE3",
        "speculative_num_steps": 3,
        "speculative_eagle_topk": 1,
        "speculative_num_draft_tokens": 4,
        "tp_size": 1,
        "version": "0.5.4",
        **kw,
    }


def test_server_info_names_model_version_method_and_k():
    objs = lines(NEW)
    for o in objs[3:]:
        o["server_info"] = _server_info()
    objs[0]["server_info"] = _server_info(speculative_algorithm=None)
    p = parse_file(raw(objs), NEW)
    assert (p.model, p.version) == ("meta-llama/Llama-3.1-8B-Instruct", "0.5.4")
    spec = p.serving[3]
    assert (spec.method, spec.k, spec.acceptance_length) == ("eagle3", 3, 3.12)
    assert not p.serving[0].speculative
    imported = build([p], gpu="h200")  # the model from server_info; no --method needed
    assert imported.profile.models[0].id == "llama-3.1-8b"
    assert imported.profile.engine["version"] == "0.5.4"
    assert imported.fit.table["predicted_after_ms"].notna().all()


def test_server_info_of_a_tree_draft_leaves_k_to_the_user_and_bounds_acceptance():
    objs = lines(NEW)
    objs[3]["server_info"] = _server_info(speculative_eagle_topk=4, speculative_num_steps=5)
    assert parse_file(raw(objs), NEW).serving[3].k is None
    objs[3]["server_info"] = _server_info(speculative_num_steps=1)
    with pytest.raises(InputError) as err:
        parse_file(raw(objs), NEW)
    assert (err.value.row, err.value.field) == (4, "accept_length")


def test_several_models_or_engines_in_one_file_are_refused():
    objs = lines(NEW)
    objs[0]["server_info"] = _server_info()
    objs[1]["server_info"] = _server_info("Qwen/Qwen3-8B")
    with pytest.raises(InputError) as err:
        parse_file(raw(objs), NEW)
    assert err.value.field == "server_info.model_path" and "several models" in str(err.value)
    objs = lines(NEW)
    objs[0]["backend"] = "vllm"
    with pytest.raises(InputError) as err:
        parse_file(raw(objs), NEW)
    assert err.value.field == "backend"


def test_a_vllm_server_benchmarked_by_bench_serving_is_a_vllm_point():
    objs = [o for o in lines(NEW)[:3]]
    for o in objs:
        o["backend"] = "vllm"
    assert parse_file(raw(objs), NEW).engine == "vllm"


def test_the_refactor_spelling_of_the_token_totals_is_read():
    objs = lines(NEW)
    for o in objs:
        o["total_input"], o["total_output"] = (
            o.pop("total_input_tokens"),
            o.pop("total_output_tokens"),
        )
    p = parse_file(raw(objs), NEW)
    assert {(pt.prompt_tokens, pt.output_tokens) for pt in p.serving} == {(1024, 256)}


# -------------------------------------------------------------------------- end to end


def test_cli_import_writes_the_profile(tmp_path, capsys):
    out = tmp_path / "p.json"
    argv = ["import", str(FIXTURES / NEW), "--target", "llama-3.1-8b", "--gpu", "h200"]
    assert main([*argv, "--method", "eagle3", "--out", str(out)]) == 0
    p = load_profile(out)
    assert p.engine["name"] == "sglang" and p.engine["format"] == "sglang-bench-serving"
    points = p.serving_points
    assert points["method"].tolist() == ["", "", "", "eagle3", "eagle3", "eagle3"]
    assert points["acceptance_length"].tolist()[3:] == [3.12, 3.01, 2.88]
    assert p.engine["fit"]["points"] == 3  # fitted on the plain points
    assert out.with_suffix(".csv").is_file()
    assert "sglang" in capsys.readouterr().out


def test_cli_import_of_the_old_schema_says_how_tpot_was_had(tmp_path, capsys):
    out = tmp_path / "p.json"
    argv = ["import", str(FIXTURES / OLD), "--target", "llama-3.1-8b", "--gpu", "h200"]
    assert main([*argv, "--out", str(out)]) == 0
    p = load_profile(out)
    assert p.serving_points["request_rate"].tolist() == [2, 4, 8, 16]
    assert "mean_tpot_ms is not recorded" in p.engine["notes"]


# ------------------------------------------------------------------ never a traceback


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from([NEW, OLD]), pick=st.integers(0, 10**6), value=_ODD)
def test_any_field_of_any_value_is_read_or_refused_with_a_message(name, pick, value):
    objs = lines(name)
    key = sorted(objs[0])[pick % len(objs[0])]
    objs[0][key] = value
    try:
        p = parse_file(raw(objs), name)
    except InputError as exc:
        assert exc.file == name
        return
    for pt in p.serving:
        for v in (pt.tpot_ms, pt.ttft_ms, pt.output_tok_s):
            assert math.isfinite(v) and v > 0
    with contextlib.suppress(InputError):
        build([p], target="llama-3.1-8b", gpu="h200", method="eagle3", k=3)


@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_a_disaggregated_run_is_refused_as_such(mode):
    """Issue 34, Real files in: a prefill/decode split was priced as one aggregated
    replica."""
    objs = lines(NEW)
    objs[1]["server_info"] = _server_info(disaggregation_mode=mode)
    with pytest.raises(InputError) as err:
        parse_file(raw(objs), NEW)
    assert err.value.field == "server_info.disaggregation_mode"
    assert "prefill/decode split" in err.value.bare_message and err.value.row == 2
    objs[1]["server_info"] = _server_info(disaggregation_mode="null")
    assert len(parse_file(raw(objs), NEW).serving) == len(objs)
