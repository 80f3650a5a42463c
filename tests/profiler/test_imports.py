"""`profiler import`: each engine's benchmark format parsed from its fixture, refused when a
field is missing, in another unit or text where a number goes; the profile it builds, the
fit of the engine's host cost, and the CLI. Fixtures and where their layout comes from:
tests/profiler/fixtures/uploads/README.md."""

from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profiler.cli import main
from profiler.imports import detect, parse_file
from profiler.imports.build import build, latency_steps, refit
from profiler.imports.fit import method_name
from simulator.errors import InputError
from simulator.inputs.profile import (
    load_profile,
    profile_from_dict,
    profile_to_csv,
    profile_to_json,
)

FIXTURES = Path(__file__).parent / "fixtures" / "uploads"
SERVE = ("vllm_serve_c16_baseline.json", "vllm_serve_c16_eagle3.json")
LATENCY = {"vllm_latency_out128.json": (8, 32, 128), "vllm_latency_out256.json": (8, 32, 256)}


def data(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def parsed(name: str, **kw):
    return parse_file(data(name), name, shape=LATENCY.get(name), **kw)


# ----------------------------------------------------------------------------- parsers


def test_detects_every_fixture_from_its_content():
    expected = {
        "sglang_bench_one_batch.jsonl": "sglang-bench-one-batch",
        "vllm_latency_out128.json": "vllm-bench-latency",
        SERVE[0]: "vllm-bench-serve",
        "trtllm_bench_report.json": "trtllm-bench",
        "speculators_throughput_interactivity.csv": "speculators-throughput-interactivity",
    }
    for name, fmt in expected.items():
        assert detect(data(name).decode(), name) == fmt
    with pytest.raises(InputError, match="not a benchmark result"):
        detect('{"hello": 1}', "x.json")
    with pytest.raises(InputError, match="not a benchmark result"):
        detect("a,b\n1,2\n", "x.csv")


def test_sglang_bench_one_batch_gives_decode_and_prefill_forwards():
    p = parsed("sglang_bench_one_batch.jsonl")
    assert (p.engine, p.model, p.gpu) == ("sglang", "", "")
    decode = {(s.batch, s.context_len): s.median_ms for s in p.steps if s.query_len == 1}
    # median_decode_latency is seconds per step; decode attends over input + output / 2.
    assert decode == pytest.approx({(1, 2064): 5.31, (16, 2064): 6.72, (64, 2064): 9.85})
    prefill = {(s.batch, s.query_len): s.median_ms for s in p.steps if s.query_len > 1}
    assert prefill[(16, 2048)] == pytest.approx(813.0)
    assert {s.repeats for s in p.steps if s.query_len == 1} == {31}


def test_vllm_latency_pair_gives_the_step_time():
    runs = [r for name in LATENCY for r in parsed(name).latency_runs]
    steps, notes = latency_steps(runs)
    by_out = {r["output_len"]: r["avg_s"] for r in runs}
    assert notes == []
    assert len(steps) == 1
    step = steps[0]
    assert (step.batch, step.query_len, step.context_len) == (8, 1, 32 + (128 + 256) // 2)
    assert step.median_ms == pytest.approx((by_out[256] - by_out[128]) * 1e3 / 128)
    assert 5.0 < step.median_ms < 6.0


def test_one_vllm_latency_run_says_it_gives_no_step():
    with pytest.raises(InputError, match="second run that differs only in --output-len"):
        build([parsed("vllm_latency_out128.json")], target="llama-3.1-8b", gpu="h200")
    # Beside other content the profile is written and the note says the same.
    imported = build(
        [parsed("vllm_latency_out128.json"), parsed(SERVE[0])],
        target="llama-3.1-8b",
        gpu="h200",
    )
    assert any("only one vllm bench latency run" in n for n in imported.notes)


def test_vllm_latency_needs_its_shape():
    name = "vllm_latency_out128.json"
    with pytest.raises(InputError) as err:
        parse_file(data(name), name)
    assert err.value.field == "batch_size"
    assert "--latency-shape" in str(err.value)


def test_vllm_serve_pair_is_a_measured_speedup_with_its_acceptance():
    points = [pt for name in SERVE for pt in parsed(name).serving]
    plain, spec = points
    assert (plain.speculative, spec.speculative) == (False, True)
    assert plain.concurrency == spec.concurrency == 16
    assert spec.k == 3 and spec.acceptance_per_position == "0.72;0.52;0.36"
    assert spec.acceptance_length == pytest.approx(2.6, rel=1e-4)
    assert (plain.prompt_tokens, plain.output_tokens) == (1024, 256)
    imported = build([parsed(n) for n in SERVE], gpu="h200", method="eagle3")
    assert imported.profile.models[0].id == "llama-3.1-8b"  # from model_id
    row = imported.speedups.iloc[0]
    assert row["throughput_speedup"] == pytest.approx(spec.output_tok_s / plain.output_tok_s)
    assert row["tpot_speedup"] == pytest.approx(8.62 / 5.21)
    after = imported.fit.table["predicted_after_ms"].tolist()
    assert row["predicted_after"] == pytest.approx(after[0] / after[1])


def test_trtllm_bench_report_records_model_gpu_and_version():
    p = parsed("trtllm_bench_report.json")
    assert (p.engine, p.version, p.dtype) == ("tensorrt-llm", "1.1.0", "bf16")
    (pt,) = p.serving
    assert pt.tpot_ms == 6.84 and pt.ttft_ms == 58.2 and pt.concurrency == 32
    assert pt.acceptance_length == 2.69 and pt.method == "Eagle"
    imported = build([p], method="eagle3", k=3)
    assert imported.profile.device.name.startswith("NVIDIA H200")
    assert imported.profile.engine["version"] == "1.1.0"


def test_speculators_csv_rows_are_serving_points():
    p = parsed("speculators_throughput_interactivity.csv")
    assert [pt.concurrency for pt in p.serving] == [1, 4, 16]
    assert [pt.tpot_ms for pt in p.serving] == [3.02, 3.61, 5.08]
    assert all(pt.speculative and pt.acceptance_length > 2.6 for pt in p.serving)


# ----------------------------------------------------------------------- refused files


def _json_edit(name: str, edit) -> bytes:
    text = data(name).decode()
    if name.endswith(".jsonl"):
        lines = text.splitlines()
        obj = json.loads(lines[0])
        edit(obj)
        return "\n".join([json.dumps(obj), *lines[1:]]).encode()
    obj = json.loads(text)
    edit(obj)
    return json.dumps(obj).encode()


def _csv_edit(name: str, edit) -> bytes:
    rows = list(csv.DictReader(io.StringIO(data(name).decode())))
    edit(rows[0])
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode()


def _drop(*path):
    def edit(obj):
        for key in path[:-1]:
            obj = obj[key]
        del obj[path[-1]]

    return edit


def _set(value, *path, scale=None):
    def edit(obj):
        for key in path[:-1]:
            obj = obj[key]
        obj[path[-1]] = float(obj[path[-1]]) * scale if scale is not None else value

    return edit


SGL = "sglang_bench_one_batch.jsonl"
LAT = "vllm_latency_out128.json"
TRT = "trtllm_bench_report.json"
SPEC = "speculators_throughput_interactivity.csv"
REFUSED = [
    # (file, edit, field named, words in the message)
    (SGL, _drop("median_decode_latency"), "median_decode_latency", "missing"),
    (SGL, _set(None, "median_decode_latency", scale=1000.0), "median_decode_latency", "unit"),
    (SGL, _set("sixteen", "batch_size"), "batch_size", "not a number"),
    (LAT, _drop("avg_latency"), "avg_latency", "missing"),
    (LAT, _set(None, "avg_latency", scale=1000.0), "avg_latency", "unit"),
    (LAT, _set("0.73s", "avg_latency"), "avg_latency", "not a number"),
    (SERVE[1], _drop("mean_tpot_ms"), "mean_tpot_ms", "missing"),
    (SERVE[1], _set(None, "mean_tpot_ms", scale=1e-3), "mean_tpot_ms", "seconds"),
    (
        SERVE[1],
        _set([72.0, 52.0, 36.0], "spec_decode_per_position_acceptance_rates"),
        "spec_decode_per_position_acceptance_rates[0]",
        "unit",
    ),
    (SERVE[0], _set("fast", "output_throughput"), "output_throughput", "not a number"),
    (
        TRT,
        _drop("performance", "system_output_throughput_tok_s"),
        "performance.system_output_throughput_tok_s",
        "missing",
    ),
    (
        TRT,
        _set(None, "streaming_metrics", "avg_tpot_ms", scale=1e-3),
        "streaming_metrics.avg_tpot_ms",
        "seconds",
    ),
    (
        TRT,
        _set("many", "request_info", "avg_num_concurrent_requests"),
        "request_info.avg_num_concurrent_requests",
        "not a number",
    ),
    (SPEC, _drop("mean_itl_ms"), "mean_itl_ms", "missing"),
    (SPEC, _set(None, "mean_itl_ms", scale=1e-3), "mean_itl_ms", "seconds"),
    (SPEC, _set("n/a", "aggregate_output_tps"), "aggregate_output_tps", "not a number"),
]


@pytest.mark.parametrize(
    "name,edit,field,words",
    REFUSED,
    ids=[f"{r[0].split('.')[0]}-{r[2]}-{r[3].replace(' ', '_')}" for r in REFUSED],
)
def test_refused_file_names_the_field(name, edit, field, words):
    if name.endswith(".csv"):
        if words == "missing":
            rows = list(csv.DictReader(io.StringIO(data(name).decode())))
            cols = [c for c in rows[0] if c != field]
            out = io.StringIO()
            w = csv.DictWriter(out, fieldnames=cols, extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)
            raw = out.getvalue().encode()
        else:
            raw = _csv_edit(name, edit)
    else:
        raw = _json_edit(name, edit)
    with pytest.raises(InputError) as err:
        parse_file(raw, name, shape=LATENCY.get(name))
    assert err.value.field == field
    assert err.value.file == name
    assert words in str(err.value)


def test_binary_and_empty_files_are_refused():
    with pytest.raises(InputError, match="not UTF-8"):
        parse_file(b"\xff\xfe\x00bin", "x.json")
    with pytest.raises(InputError, match="empty"):
        parse_file(b"  \n", "x.json")


# ---------------------------------------------------------------- profile and the fit


def test_imported_profile_round_trips_with_engine_and_serving_points():
    imported = build([parsed(n) for n in SERVE], gpu="h200", method="eagle3")
    p = imported.profile
    assert p.engine["name"] == "vllm" and p.engine["files"] == list(SERVE)
    assert p.engine["fit"]["term"] == "engine_step_ms"
    for text, name in ((profile_to_json(p), "p.json"), (profile_to_csv(p), "p.csv")):
        back = load_profile(text.encode(), name=name)
        assert back.engine == p.engine
        pd.testing.assert_frame_equal(back.serving_points, p.serving_points)


def test_step_measurements_calibrate_like_a_profile():
    from simulator.model.calibration import Calibration

    imported = build([parsed(SGL)], target="llama-3.1-8b", gpu="h200")
    cal = Calibration.from_profiles([imported.profile])
    ids = [np.array([v], dtype=object) for v in ("h200", "llama-3.1-8b", "bf16")]
    ms, how = cal.measured_ms(*ids, np.array([1]), 16, 1, 2064)
    assert how[0] == "measured" and ms[0] == pytest.approx(6.72)


def test_fit_moves_the_plain_point_onto_its_measurement_and_predicts_the_speculative_one():
    imported = build([parsed(n) for n in SERVE], gpu="h200", method="eagle3")
    fit = imported.fit
    table = fit.table.set_index("source")
    plain, spec = table.loc[SERVE[0]], table.loc[SERVE[1]]
    assert bool(plain["fitted_on"]) and not bool(spec["fitted_on"])
    assert fit.fitted_ms != pytest.approx(fit.default_ms)
    assert abs(plain["error_after"]) < 0.01 < abs(plain["error_before"])
    assert spec["predicted_after_ms"] > spec["predicted_before_ms"]  # more host cost


def test_speculative_points_without_a_method_are_not_priced():
    imported = build([parsed(SERVE[1])], gpu="h200")
    assert imported.fit.fitted_ms is None
    assert "method is not recorded" in imported.fit.table["reason"].iloc[0]


def test_method_names_as_engines_write_them():
    assert method_name("Eagle3") == "eagle3"
    assert method_name("DraftTarget") == "draft_model"
    assert method_name("lookahead") == ""


def test_bad_serving_points_in_a_profile_name_the_field():
    imported = build([parsed(SERVE[0])], gpu="h200")
    raw = json.loads(profile_to_json(imported.profile))
    raw["serving_points"][0]["tpot_ms"] = "slow"
    with pytest.raises(InputError) as err:
        profile_from_dict(raw, "p.json")
    assert err.value.field == "serving_points[0].tpot_ms"


# ---------------------------------------------------------------------------------- CLI


def test_cli_import_writes_a_profile(tmp_path, capsys):
    out = tmp_path / "engine.json"
    shapes = [f"--latency-shape={n}={','.join(map(str, s))}" for n, s in LATENCY.items()]
    argv = ["import", *(str(FIXTURES / n) for n in LATENCY), *shapes]
    argv += ["--target", "llama-3.1-8b", "--gpu", "h200", "--engine-version", "0.11.0"]
    assert main([*argv, "--out", str(out)]) == 0
    p = load_profile(out)
    assert p.engine["version"] == "0.11.0" and len(p.measurements) == 1
    assert out.with_suffix(".csv").is_file()
    assert "vllm 0.11.0" in capsys.readouterr().out


def test_cli_import_exits_2_naming_the_field(tmp_path, capsys):
    bad = tmp_path / "serve.json"
    bad.write_bytes(_json_edit(SERVE[0], _drop("mean_tpot_ms")))
    with pytest.raises(SystemExit) as exc:
        main(["import", str(bad), "--gpu", "h200", "--out", str(tmp_path / "p.json")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "field 'mean_tpot_ms'" in err and "serve.json" in err
    assert not (tmp_path / "p.json").exists()


def test_cli_import_without_gpu_asks_for_it(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["import", str(FIXTURES / SERVE[0]), "--out", str(tmp_path / "p.json")])
    assert exc.value.code == 2
    assert "--gpu" in capsys.readouterr().err


def test_an_imported_profile_calibrates_the_engine_cost_on_its_gpu_only():
    from simulator.model.calibration import Calibration, summary
    from simulator.model.predict import predict

    imported = build([parsed(n) for n in SERVE], gpu="h200", method="eagle3")
    cal = Calibration.from_profiles([imported.profile])
    assert cal.engine_steps == {"h200": pytest.approx(imported.fit.fitted_ms)}
    assert any("engine host cost" in line for line in summary(cal))
    rows = pd.DataFrame(
        {
            "target": ["llama-3.1-8b"] * 2,
            "gpu": ["h200", "h100-sxm"],
            "batch_size": [16, 16],
            "prompt_len": [1024, 1024],
            "output_len": [256, 256],
        }
    )
    plain, calibrated = predict(rows, kernels=False), predict(rows, calibration=cal)
    # The baseline point the fit was made on now predicts its measured TPOT.
    assert calibrated["baseline_tpot_ms"][0] == pytest.approx(8.62, rel=1e-3)
    assert plain["baseline_tpot_ms"][0] != pytest.approx(8.62, rel=0.02)
    # The other GPU is not calibrated: the kernel tables price it, as without a profile.
    assert calibrated["baseline_tpot_ms"][1] == predict(rows)["baseline_tpot_ms"][1]
    assert calibrated["latency_source"].tolist() == ["host:fitted", "kernels:vllm-0.24.0/h100"]


# ------------------------------------------------------------------ never a traceback

_ODD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)
JSON_FIXTURES = [SGL, LAT, *SERVE, TRT]


@settings(max_examples=30, deadline=None)
@given(
    name=st.sampled_from(JSON_FIXTURES),
    pick=st.integers(min_value=0, max_value=10**6),
    value=_ODD,
)
def test_any_field_of_any_value_is_read_or_refused_with_a_message(name, pick, value):
    """Every top-level field of each JSON fixture set to an odd value (null, a boolean, a
    huge or non-finite number, text, a list, an object): the parser reads it or raises
    InputError, never another exception."""
    text = data(name).decode()
    first = text.splitlines()[0] if name.endswith(".jsonl") else text
    obj = json.loads(first)
    key = sorted(obj)[pick % len(obj)]
    obj[key] = value
    raw = json.dumps(obj).encode()
    try:
        p = parse_file(raw, name, shape=LATENCY.get(name))
    except InputError as exc:
        assert exc.file == name
        return
    if p.serving:
        with contextlib.suppress(InputError):
            build([p], target="llama-3.1-8b", gpu="h200", method="eagle3", k=3)


def test_vllm_serve_metadata_names_gpu_version_and_method():
    """`vllm bench serve --metadata gpu=h200 vllm_version=0.11.0 method=eagle3` puts those
    keys at the top of the result: no flag is needed then."""
    files = []
    for name in SERVE:
        obj = json.loads(data(name))
        obj.update(gpu="h200", vllm_version="0.11.0", method="eagle3")
        files.append(parse_file(json.dumps(obj).encode(), name))
    imported = build(files)
    assert imported.profile.engine["version"] == "0.11.0"
    assert imported.profile.device.name.startswith("NVIDIA H200")
    assert imported.profile.serving_points["method"].tolist() == ["", "eagle3"]
    assert imported.fit.table["predicted_after_ms"].notna().all()


def test_vllm_serve_append_result_is_one_object_a_line():
    """`--append-result` writes each run's JSON object on its own line."""
    lines = b"\n".join(json.dumps(json.loads(data(n))).encode() for n in SERVE)
    p = parse_file(lines, "appended.json")
    assert [pt.speculative for pt in p.serving] == [False, True]


# ------------------------------------------------- issue 34: physically possible imports


def _one_batch(tmp_path, decode_s: float, prefill_s: float = 0.1, batch: int = 1):
    """An SGLang bench_one_batch line (batch, input 2048, output 32) with these times."""
    line = {
        "run_name": "gb200",
        "batch_size": batch,
        "input_len": 2048,
        "output_len": 32,
        "prefill_latency": prefill_s,
        "median_decode_latency": decode_s,
    }
    return parse_file(json.dumps(line).encode(), "one_batch.jsonl")


def test_a_decode_step_faster_than_reading_the_weights_is_refused(tmp_path):
    """Issue 34 wrong answer 3: Qwen3-30B-A3B's 3.3 ms decode step imported as the dense
    qwen3-32b on GB200, whose bf16 weights alone take 8 ms to read at 8,000 GB/s."""
    p = _one_batch(tmp_path, 0.0033)
    with pytest.raises(InputError) as err:
        build([p], target="qwen3-32b", gpu="gb200")
    msg = str(err.value)
    assert err.value.file == "one_batch.jsonl"
    assert "decode step at batch 1, context 2,064 tokens" in msg and "3.3 ms" in msg
    assert "at least 8.03 ms" in msg and "GB of bf16 weights" in msg
    assert "/ (1 x gb200 x 8000 GB/s peak)" in msg
    # The same file as the MoE model that ran: its active experts read in under 1 ms.
    imported = build([p], target="qwen3-30b-a3b", gpu="gb200")
    assert len(imported.profile.measurements) == 2


def test_a_prefill_faster_than_its_flops_is_refused(tmp_path):
    p = _one_batch(tmp_path, 0.009, prefill_s=0.005)
    with pytest.raises(InputError, match=r"batch 1 x 2,048 tokens.*TFLOP/s peak"):
        build([p], target="qwen3-32b", gpu="gb200")


def test_a_moe_step_near_its_active_weights_is_kept(tmp_path):
    """The MoE bound counts only top-k experts per layer: a batch-64 step of
    qwen3-30b-a3b at 1.8 ms on GB200 (above its 1.57 ms floor) is a real run."""
    p = _one_batch(tmp_path, 0.0018, prefill_s=0.5, batch=64)
    imported = build([p], target="qwen3-30b-a3b", gpu="gb200")
    assert imported.profile.measurements["median_ms"].min() == pytest.approx(1.8)


def test_every_bundled_fixture_is_above_its_bound():
    from profiler.imports.bounds import step_floor
    from simulator.inputs.catalog import default_gpus, default_models

    spec, gpu = default_models()["llama-3.1-8b"], default_gpus()["h200"]
    runs = [r for n in LATENCY for r in parsed(n).latency_runs]
    steps = [*parsed(SGL).steps, *latency_steps(runs)[0]]
    ratios = [
        s.median_ms / step_floor(spec, gpu, "bf16", 1, s.batch, s.query_len, s.context_len).ms
        for s in steps
    ]
    assert min(ratios) > 1.5


def test_a_recorded_model_other_than_the_chosen_one_is_said(tmp_path, capsys):
    imported = build([parsed(SERVE[0])], target="llama-3.1-70b", gpu="h200")
    (warning,) = imported.warnings
    assert "records the model 'meta-llama/Llama-3.1-8B-Instruct'" in warning
    assert "llama-3.1-8b" in warning and "not the chosen llama-3.1-70b" in warning
    assert warning in imported.profile.engine["notes"]
    assert build([parsed(SERVE[0])], gpu="h200").warnings == ()
    out = tmp_path / "p.json"
    argv = ["import", str(FIXTURES / SERVE[0]), "--target", "llama-3.1-70b", "--gpu", "h200"]
    assert main([*argv, "--out", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[2].startswith("warning: ") and "not the chosen llama-3.1-70b" in printed[2]


# ------------------------------------------------------- issue 34: --method is honoured


def test_a_method_given_for_a_file_without_acceptance_is_a_speculative_run():
    """Issue 34 wrong answer 4: `--method mtp` on a vllm bench serve result that has no
    acceptance keys stored a plain run, and plain runs are what the host cost is fitted on."""
    imported = build([parsed(SERVE[0])], gpu="h200", method="mtp", k=3)
    points = imported.profile.serving_points
    assert points["speculative"].tolist() == [True] and points["method"].tolist() == ["mtp"]
    fit = imported.fit
    assert fit.fitted_ms is None and fit.points == 0 and not fit.table["fitted_on"].any()
    assert "acceptance is not recorded: give --acceptance" in fit.table["reason"].iloc[0]
    headline = "\n".join(fit.lines())
    assert "not priced" in headline and SERVE[0] in headline and "--acceptance" in headline
    assert any("--method mtp" in n and "speculating server" in n for n in imported.notes)


def test_a_given_acceptance_prices_the_run_without_fitting_on_it():
    imported = build([parsed(SERVE[0])], gpu="h200", method="mtp", k=3, acceptance=2.4)
    row = imported.fit.table.iloc[0]
    assert np.isfinite(row["predicted_before_ms"]) and row["reason"] == ""
    assert not row["fitted_on"] and imported.fit.fitted_ms is None
    assert imported.profile.engine["fit"]["acceptance"] == 2.4
    assert any("acceptance length 2.4" in n and "not measured" in n for n in imported.notes)
    assert any("not fitted" in line for line in imported.fit.lines())
    again = refit(load_profile(profile_to_json(imported.profile).encode(), name="p.json"))
    assert again.table["predicted_before_ms"].iloc[0] == pytest.approx(row["predicted_before_ms"])


@pytest.mark.parametrize(
    "kw,field",
    [
        ({"acceptance": 0.5}, "--acceptance"),
        ({"acceptance": float("nan")}, "--acceptance"),
        ({"method": "lookahead"}, "--method"),
    ],
)
def test_a_bad_method_or_acceptance_is_refused(kw, field):
    with pytest.raises(InputError) as err:
        build([parsed(SERVE[0])], gpu="h200", **{"method": "mtp", "k": 3, **kw})
    assert err.value.field == field


def test_cli_import_keeps_the_method_and_takes_the_acceptance(tmp_path, capsys):
    out = tmp_path / "p.json"
    argv = ["import", str(FIXTURES / SERVE[0]), "--gpu", "h200", "--method", "mtp"]
    assert main([*argv, "--out", str(out)]) == 0
    p = load_profile(out)
    assert p.serving_points["speculative"].tolist() == [True]
    assert "give --acceptance" in capsys.readouterr().out
    assert main([*argv, "--k", "3", "--acceptance", "2.4", "--out", str(out)]) == 0
    assert refit(load_profile(out)).table["predicted_before_ms"].notna().all()
