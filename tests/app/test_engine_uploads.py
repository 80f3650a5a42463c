"""An engine's own benchmark results uploaded on the Profiles page: parsed as data, shown as
text and tables, refused naming the field, and, for a `vllm bench serve` pair, the
Validation page's "Your engine" rows (measured TPOT against predicted before and after the
fit of the engine's host cost)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.app.conftest import shown

FIXTURES = Path(__file__).resolve().parents[1] / "profiler" / "fixtures" / "uploads"
SERVE = ("vllm_serve_c16_baseline.json", "vllm_serve_c16_eagle3.json")


def _file(name: str, **changes) -> tuple[str, bytes, str]:
    data = (FIXTURES / name).read_bytes()
    if changes:
        obj = json.loads(data)
        obj.update(changes)
        data = json.dumps(obj).encode()
    return name, data, "application/json"


def _slower_baseline() -> tuple[str, bytes, str]:
    """The baseline result of an engine whose every step costs 1.5 ms more: TPOT and the
    throughput it implies moved together, as a real run's would."""
    obj = json.loads((FIXTURES / SERVE[0]).read_bytes())
    tpot = obj["mean_tpot_ms"] + 1.5
    obj["mean_tpot_ms"] = tpot
    obj["duration"] *= (obj["mean_ttft_ms"] + 255 * tpot) / obj["mean_e2el_ms"]
    obj["output_throughput"] = obj["total_output_tokens"] / obj["duration"]
    return "slow_baseline.json", json.dumps(obj).encode(), "application/json"


def _open(at):
    at.toggle(key="engine_upload_on").set_value(True).run()
    assert not at.exception, [e.value for e in at.exception]


def _upload(at, files, *, gpu="h200", method="eagle3"):
    if not at.toggle(key="engine_upload_on").value:
        _open(at)
    at.selectbox(key="engine_gpu").set_value(gpu)
    at.selectbox(key="engine_method").set_value(method)
    at.file_uploader(key="engine_upload").set_value(list(files)).run()
    assert not at.exception, [e.value for e in at.exception]


def _your_engine(at):
    at.switch_page("views/validation.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    frames = [d.value for d in at.dataframe if "measured TPOT (ms)" in d.value.columns]
    return frames[0] if frames else None


def test_without_engine_results_the_tab_says_how_to_add_them(app):
    at = app("validation")
    assert _your_engine(at) is None
    assert any("profiler import" in i.value for i in at.info)


def test_an_uploaded_serve_pair_moves_the_your_engine_row(app):
    at = app("profiles")
    _upload(at, [_file(n) for n in SERVE])
    assert any("vllm" in s.value and "2 serving points" in s.value for s in at.success)
    points = next(d.value for d in at.dataframe if "measured TPOT (ms)" in d.value.columns)
    assert points["measured TPOT (ms)"].tolist() == [8.62, 5.21]
    rows = _your_engine(at).set_index("file")
    plain, spec = rows.loc[SERVE[0]], rows.loc[SERVE[1]]
    assert plain["predicted, host cost fitted (ms)"] == pytest.approx(8.62, abs=0.01)
    assert plain["predicted, default costs (ms)"] != pytest.approx(8.62, abs=0.05)
    assert spec["measured TPOT (ms)"] == 5.21 and not spec["fitted on"]
    first = spec["predicted, host cost fitted (ms)"]
    pairs = next(d.value for d in at.dataframe if "tpot_speedup" in d.value.columns)
    assert pairs["tpot_speedup"].tolist() == [pytest.approx(8.62 / 5.21, abs=1e-3)]
    assert pairs["predicted_after"].iloc[0] == pytest.approx(8.62 / first, abs=2e-3)

    # A slower engine, uploaded next, moves the row: its plain point, the fitted host
    # cost and with it the speculative prediction.
    at.switch_page("views/profiles.py")
    at.run()
    _upload(at, [_slower_baseline(), _file(SERVE[1])])
    rows = _your_engine(at).set_index("file")
    slow = rows.loc["slow_baseline.json"]
    assert slow["measured TPOT (ms)"] == pytest.approx(10.12)
    assert slow["predicted, host cost fitted (ms)"] == pytest.approx(10.12, abs=0.01)
    assert rows.loc[SERVE[1], "predicted, host cost fitted (ms)"] > first + 0.3


def test_an_engine_profile_can_calibrate_every_page(app):
    at = app("profiles")
    _open(at)
    at.selectbox(key="engine_target").set_value("llama-3.1-8b")
    _upload(at, [_sglang()])
    assert any("6 forwards" in s.value for s in at.success)
    options = at.selectbox(key="calibrate_with").options
    assert any(o.startswith("uploaded: sglang-import") for o in options)


def _sglang():
    name = "sglang_bench_one_batch.jsonl"
    return name, (FIXTURES / name).read_bytes(), "application/json"


def test_the_model_a_file_does_not_record_is_asked_for(app):
    at = app("profiles")
    _upload(at, [_sglang()])
    assert any("'Model'" in e.value for e in at.error)
    assert not any("--target" in e.value for e in at.error), "names the CLI flag"
    at.selectbox(key="engine_target").set_value("llama-3.1-8b")
    at.run()
    assert not at.error
    assert any("6 forwards" in s.value for s in at.success)


@pytest.mark.parametrize(
    "changes,field",
    [({"mean_tpot_ms": "fast"}, "mean_tpot_ms"), ({"completed": None}, "completed")],
)
def test_a_bad_file_is_refused_naming_the_field(app, changes, field):
    at = app("profiles")
    _upload(at, [_file(SERVE[0], **changes)])
    assert any(field in shown(e.value) and SERVE[0] in shown(e.value) for e in at.error)
    assert not any(
        o.startswith("uploaded: vllm-import") for o in at.selectbox(key="calibrate_with").options
    )


def test_nothing_from_a_file_is_rendered_as_markup(app):
    at = app("profiles")
    name = "**bold**[x](http://e.test)<img src=x>.json"
    data = json.loads((FIXTURES / SERVE[0]).read_bytes())
    data["vllm_version"] = "<script>alert(1)</script>*0.11*"
    _upload(at, [(name, json.dumps(data).encode(), "application/json")])
    (ok,) = at.success
    assert shown(ok.value).count(name) == 1  # every character escaped, shown as written
    assert "\\*\\*bold\\*\\*" in ok.value and "\\<img" in ok.value
    assert "\\<script\\>" in ok.value and "<script>" not in ok.value


def test_the_engine_uploader_shows_only_when_asked_for(app):
    at = app("profiles")
    assert len(at.get("file_uploader")) == 1  # the profile uploader alone
    _open(at)
    assert len(at.get("file_uploader")) == 2


def test_calibrating_with_an_engine_profile_applies_its_host_cost(app):
    at = app("profiles")
    _upload(at, [_file(n) for n in SERVE])
    label = "uploaded: vllm-import-vllm_serve_c16_baseline.json"
    at.selectbox(key="calibrate_with").set_value(label).run()
    assert not at.exception
    from profiler.imports import parse_file
    from profiler.imports.build import build

    parsed = [parse_file((FIXTURES / n).read_bytes(), n) for n in SERVE]
    fitted = build(parsed, gpu="h200", method="eagle3").fit.fitted_ms
    lines = [c.value for c in at.caption if "engine host cost" in c.value]
    assert lines and "h200" in lines[0] and f"{fitted:.3f} ms" in lines[0]


def _one_batch(decode_s: float) -> tuple[str, bytes, str]:
    """An SGLang bench_one_batch line: batch 1, input 2048, output 32, a 0.1 s prefill."""
    line = {
        "run_name": "gb200",
        "batch_size": 1,
        "input_len": 2048,
        "output_len": 32,
        "prefill_latency": 0.1,
        "median_decode_latency": decode_s,
    }
    return "one_batch.jsonl", json.dumps(line).encode(), "application/json"


def test_an_impossible_import_is_refused_naming_the_point_and_the_bound(app):
    """Issue 34 wrong answer 3: a 3.3 ms decode step (Qwen3-30B-A3B's) imported as the dense
    qwen3-32b on GB200, whose weights take 8 ms to read, calibrates nothing."""
    at = app("profiles")
    _open(at)
    at.selectbox(key="engine_target").set_value("qwen3-32b")
    _upload(at, [_one_batch(0.0033)], gpu="gb200", method="mtp")
    errors = [shown(e.value) for e in at.error]
    assert any("decode step at batch 1" in e and "3.3 ms" in e and "8.03 ms" in e for e in errors)
    assert any("GB/s peak" in e and "one_batch.jsonl" in e for e in errors)
    assert not any(
        o.startswith("uploaded: sglang-import") for o in at.selectbox(key="calibrate_with").options
    )
    at.selectbox(key="engine_target").set_value("qwen3-30b-a3b").run()
    assert not at.error and any("2 forwards" in s.value for s in at.success)


def test_a_file_recording_another_model_says_so(app):
    at = app("profiles")
    _open(at)
    at.selectbox(key="engine_target").set_value("llama-3.1-70b")
    _upload(at, [_file(SERVE[0])], method="(as the files record it)")
    warnings = [shown(w.value) for w in at.warning]
    assert any("meta-llama/Llama-3.1-8B-Instruct" in w and "llama-3.1-70b" in w for w in warnings)


def test_the_method_chosen_for_a_plain_looking_file_is_kept(app):
    """Issue 34 wrong answer 4: a `vllm bench serve` result without acceptance keys, uploaded
    with the method MTP, is a speculative run: not fitted on as a plain one, unpriced with
    the reason until its acceptance length is given, then priced."""
    at = app("profiles")
    _open(at)
    at.number_input(key="engine_k").set_value(3)
    _upload(at, [_file(SERVE[0])], method="mtp")
    points = next(d.value for d in at.dataframe if "measured TPOT (ms)" in d.value.columns)
    assert points["speculative"].tolist() == [True] and not points["fitted on"].any()
    assert "give 'Acceptance length'" in points["not priced because"].iloc[0]
    assert any("not priced" in t.value and "acceptance" in t.value for t in at.text)
    at.number_input(key="engine_acceptance").set_value(2.4).run()
    assert not at.exception and not at.error
    rows = _your_engine(at)
    assert rows["predicted, default costs (ms)"].notna().all() and not rows["fitted on"].any()
    assert rows["not priced because"].tolist() == [""]


def test_a_bad_file_beside_good_ones_is_named_and_the_good_ones_kept(app):
    at = app("profiles")
    _upload(at, [_file(SERVE[0]), ("cut.json", b'{"mean_tpot_ms": 8', "application/json")])
    assert any("1 serving points" in s.value for s in at.success)
    assert any("cut.json not imported" in w.value for w in at.warning)


def test_the_gpus_per_replica_control_sets_the_fit_and_a_conflict_names_it(app):
    at = app("profiles")
    at.toggle(key="engine_upload_on").set_value(True).run()
    at.number_input(key="engine_num_gpus").set_value(2)
    _upload(at, [_file(SERVE[0])])
    assert any("1 serving points" in s.value for s in at.success)
    trt = "trtllm_bench_report.json"
    doc = json.loads((FIXTURES / trt).read_bytes())
    doc["world_info"]["tp_size"] = doc["world_info"]["world_size"] = 8
    at.file_uploader(key="engine_upload").set_value(
        [(trt, json.dumps(doc).encode(), "application/json")]
    ).run()
    assert any("'GPUs per replica'" in e.value and "records 8" in e.value for e in at.error)


def test_your_engine_headlines_the_speculative_points_out_of_sample_sorted_by_load(app):
    """Issue 34, Real files in: the tab led with the plain points' in-sample fit."""
    at = app("profiles")
    _upload(at, [_file(SERVE[1]), _file(SERVE[0], max_concurrency=4)])
    rows = _your_engine(at)
    assert rows["concurrency"].tolist() == sorted(rows["concurrency"].tolist())
    metrics = {m.label: m.value for m in at.metric}
    spec = rows[rows["speculative"] & ~rows["fitted on"]]
    expected = spec["error after"].abs().median()
    assert metrics["speculative points, out of sample"] == f"{expected:.1%}"
