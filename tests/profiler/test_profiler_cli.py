"""`python -m profiler`: a tiny profile end to end, flag errors, Ctrl-C, device info."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
import types
from pathlib import Path

import pandas as pd
import pytest
import torch

from profiler import cli, device, measure
from profiler.progress import Bar
from simulator.inputs.profile import SCHEMA, load_profile

ROOT = Path(__file__).resolve().parents[2]
QUICK = ["--repeats", "3", "--warmup", "1", "--min-time", "0", "--threads", "1", "--quiet"]


@pytest.fixture(autouse=True)
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.mark.timing
def test_tiny_profile_from_the_shell_in_under_30_s(tmp_path):
    out = tmp_path / "cpu" / "tiny.json"
    cmd = [sys.executable, "-m", "profiler", "run", "--target", "tiny", "--device", "cpu"]
    cmd += ["--batch", "1,2,4", "--k", "1-3", "--context", "64,512", "--out", str(out)]
    cmd += ["--repeats", "5", "--warmup", "2", "--min-time", "0.01", "--threads", "1"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    elapsed = time.monotonic() - t0
    assert done.returncode == 0, done.stderr
    assert elapsed < 30, f"took {elapsed:.1f} s"
    assert "ETA" in done.stderr and "wrote" in done.stderr
    profile = load_profile(out)
    again = load_profile(out.with_suffix(".csv"))
    assert profile.schema == SCHEMA
    assert profile.device.kind == "cpu" and profile.device.cpu_threads == 1
    assert profile.settings.dtype == "bf16" and profile.settings.cuda_graphs is False
    (model,) = profile.models
    assert model.id == "tiny" and not model.extrapolated and model.layers_run == [2]
    assert model.kv_bytes_per_token == model.kv_bytes_per_token_formula == 2 * 2 * 2 * 16 * 2
    assert model.weight_bytes == 106816 * 2
    df = profile.measurements
    assert len(df) == 3 * 4 * 2 and (df["status"] == "ok").all()
    assert sorted(df["query_len"].unique()) == [1, 2, 3, 4]
    assert (df["p10_ms"] <= df["median_ms"]).all() and (df["median_ms"] <= df["p90_ms"]).all()
    assert (df["repeats"] >= 5).all()
    assert again.measurements.equals(profile.measurements)
    assert json.loads(out.read_text())["command"].startswith("python -m profiler run")


def test_the_readme_quick_start_is_a_small_grid_of_decode_and_verify_points():
    """README's CPU quick start: every kind of point, few enough for seconds on 2 cores
    (timed by hand; the tests run on shared machines)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(".venv/bin/python -m profiler run --target tiny ")
    command = text[start : text.index("```", start)].replace("\\\n", " ")
    argv = shlex.split(command)[3:]
    args = cli.make_parser("run").parse_args(argv)
    batches, ks, contexts = measure.grid_values(args)
    assert args.device == "auto" and args.dtype == "bf16" and args.threads is None  # defaults
    assert len(batches) * (len(ks) + 1) * len(contexts) <= 32
    assert min(batches) == 1 and max(batches) == 64 and len(contexts) >= 2
    assert max(contexts) <= 1024


def _fail(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "flag", "words"),
    [
        (["--target", "nope"], "--target", "unknown model id 'nope'"),
        (["--target", "tiny", "--draft", "nope"], "--draft", "unknown"),
        (["--target", "tiny", "--draft", "tiny"], "--draft", "the target itself"),
        (["--target", "tiny", "--batch", "0,1"], "--batch", "outside"),
        (["--target", "tiny", "--batch", "two"], "--batch", "not a whole number"),
        (["--target", "tiny", "--k", "0-3"], "--k", "outside 1..63"),
        (["--target", "tiny", "--k", "5-2"], "--k", "backwards"),
        (["--target", "tiny", "--context=-5"], "--context", ""),
        (["--target", "tiny", "--repeats", "0"], "--repeats", ">= 1"),
        (["--target", "tiny", "--min-time", "nan"], "--min-time", ""),
        (["--target", "tiny", "--out", "x.txt"], "--out", ".json"),
        (["--target", "tiny", "--depths", "1,4"], "--depths", "two depths below 2"),
        (["--target", "llama-3.3-70b", "--max-layers", "1"], "--max-layers", ""),
        (["--target", "tiny", "--models-csv", "/nonexistent.csv"], "--models-csv", "not found"),
        (["--target", "tiny", "--dtype", "int4"], "--dtype", "invalid choice"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(extra, flag, words, capsys, tmp_path):
    err = _fail(["run", "--device", "cpu", "--quiet", *extra], capsys)
    assert flag in err and words in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "flag", "words"),
    [
        (["validate", "--k", "0-3"], "--k", "outside 1..8"),
        (["validate", "--k", "9"], "--k", "outside 1..8"),
        (["validate", "--batch", "x"], "--batch", "not a whole number"),
        (["validate", "--temperatures", "hot"], "--temperatures", "not numbers"),
        (["validate", "--temperatures=-1"], "--temperatures", "outside 0..100"),
        (["validate", "--rounds", "0"], "--rounds", "outside 1..100"),
        (["validate", "--verify-overhead-ms=-0.1"], "--verify-overhead-ms", ">= 0"),
        (["validate", "--profile", "/nonexistent.json"], "--profile", "not a file"),
        (["train-pair", "--target-steps", "0"], "--target-steps", "outside 1..10,000"),
        (["train-pair", "--threads", "0"], "--threads", "outside 1"),
        # Each of these crashed: libgomp ran out of memory (a segfault for train-pair),
        # the corpus sampler raised, or the run started and failed when it read the pair.
        (["validate", "--threads", "99999"], "--threads", "outside 1.."),
        (["serve-bench", "--threads", "99999"], "--threads", "outside 1.."),
        (["train-pair", "--threads", "99999"], "--threads", "outside 1.."),
        (["train-pair", "--seq-len", "99999999"], "--seq-len", "outside 1..512"),
        (["train-pair", "--batch-size", "99999999"], "--batch-size", "outside 1..4,096"),
        (["train-pair", "--seed=-1"], "--seed", "outside 0.."),
        (["serve-bench", "--requests", "99999999"], "--requests", "outside 1..100,000"),
        # Each of these ran for days, or crashed after minutes of work: serve-bench's K
        # allocated a 98 GB cache, and a temperature above the simulator's limit raised
        # once the serving was measured, having replaced half the committed files.
        (["validate", "--rounds", "100000000000"], "--rounds", "outside 1..100"),
        (["validate", "--batch", "1,100000000"], "--batch", "outside 1..4096"),
        (["validate", "--temperatures", "0,inf"], "--temperatures", "outside 0..100"),
        (["serve-bench", "--temperatures", "1e308"], "--temperatures", "outside 0..100"),
        (["serve-bench", "--temperatures", ","], "--temperatures", "give numbers"),
        (["serve-bench", "--k", "1000000"], "--k", "outside 1..8"),
        (["serve-bench", "--rounds", "100000000000"], "--rounds", "outside 1..100"),
        (["train-pair", "--target-steps", "100000000000"], "--target-steps", "outside 1..10,000"),
        (["train-pair", "--draft-steps", "100000000000"], "--draft-steps", "outside 1..10,000"),
        (["validate", "--models-dir", "/nonexistent"], "--models-dir", "train-pair"),
        (["serve-bench", "--models-dir", "/nonexistent"], "--models-dir", "train-pair"),
        # A reduced run for tests replaced the committed reference files in data/validation.
        (["validate", "--quick"], "--quick", "give --out-dir"),
        (["serve-bench", "--quick"], "--quick", "give --out-dir"),
        (["serve-bench", "--quick", "--repredict"], "--quick", "give --out-dir"),
    ],
)
def test_ground_truth_flags_are_checked_before_work(argv, flag, words, capsys):
    err = _fail(argv, capsys)
    assert flag in err and words in err
    assert "Traceback" not in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message without a GPU")
def test_cuda_without_a_gpu_is_a_flag_error(capsys):
    err = _fail(["run", "--target", "tiny", "--device", "cuda"], capsys)
    assert "--device" in err and "cuda" in err


def test_ctrl_c_writes_what_was_measured(monkeypatch, tmp_path, capsys):
    advance = Bar.advance

    def interrupt_after_three(self, label):
        advance(self, label)
        if self.done == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(Bar, "advance", interrupt_after_three)
    out = tmp_path / "partial.json"
    argv = ["run", "--target", "tiny", "--device", "cpu", "--batch", "1,2", "--k", "1"]
    argv += ["--context", "16,32", "--out", str(out), *QUICK]
    assert cli.main(argv) == 130
    assert "interrupted" in capsys.readouterr().err
    profile = load_profile(out)
    assert len(profile.measurements) == 3
    assert len(load_profile(out.with_suffix(".csv")).measurements) == 3


@pytest.mark.timing
def test_forced_extrapolation_records_depths(tmp_path, capsys):
    out = tmp_path / "deep.json"
    argv = ["run", "--target", "llama-3.2-1b", "--device", "cpu", "--dtype", "bf16"]
    argv += ["--batch", "1", "--k", "1", "--context", "16", "--max-layers", "2", "--out", str(out)]
    # Two depths of a real catalog architecture (about 0.7 GB of bf16 weights at depth 2).
    assert cli.main([*argv, *QUICK]) == 0
    assert "extrapolating" in capsys.readouterr().err
    profile = load_profile(out)
    (model,) = profile.models
    assert model.extrapolated and model.layers_run == [1, 2] and model.num_layers == 16
    assert model.weight_bytes == 1235814400 * 2
    assert model.kv_bytes_per_token == model.kv_bytes_per_token_formula == 16 * 2 * 8 * 64 * 2
    df = profile.measurements
    assert df["extrapolated"].all() and (df["status"] == "ok").all()
    assert (df["peak_bytes"] > model.weight_bytes).all()


def test_info_says_why_there_is_no_gpu(capsys):
    assert cli.main(["info", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "(cpu)" in out and "memory:" in out and "threads:" in out
    if not torch.cuda.is_available():
        assert "no GPU:" in out


def test_device_slug():
    assert device.slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    info = device.describe("cpu", threads=1)
    assert device.device_slug(info) == "cpu"
    assert info.kind == "cpu" and info.memory_bytes > 0 and info.cpu_threads == 1


def _fake_pynvml() -> types.ModuleType:
    """Enough of nvidia-ml-py's surface to exercise the NVML code path without a driver."""
    nv = types.ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    class NotSupported(NVMLError):
        pass

    mem = types.SimpleNamespace(total=80 * 2**30, used=2 * 2**30, free=78 * 2**30)
    nv.NVMLError = NVMLError
    nv.NVML_CLOCK_SM, nv.NVML_CLOCK_MEM, nv.NVML_TEMPERATURE_GPU = 1, 2, 0
    nv.nvmlInit = lambda: None
    nv.nvmlShutdown = lambda: None
    nv.nvmlSystemGetDriverVersion = lambda: b"560.35.03"
    nv.nvmlDeviceGetCount = lambda: 1
    nv.nvmlDeviceGetHandleByIndex = lambda i: f"h{i}"
    nv.nvmlDeviceGetUUID = lambda h: "GPU-1234"
    nv.nvmlDeviceGetName = lambda h: b"NVIDIA H100 80GB HBM3"
    nv.nvmlDeviceGetMemoryInfo = lambda h: mem
    nv.nvmlDeviceGetClockInfo = lambda h, kind: 1980 if kind == 1 else 2619
    nv.nvmlDeviceGetMaxClockInfo = lambda h, kind: 1980 if kind == 1 else 2619
    nv.nvmlDeviceGetPowerUsage = lambda h: 312_500
    nv.nvmlDeviceGetEnforcedPowerLimit = lambda h: 700_000
    nv.nvmlDeviceGetTemperature = lambda h, kind: 41
    nv.nvmlDeviceGetCudaComputeCapability = lambda h: (9, 0)

    def unsupported(h):
        raise NotSupported("Not Supported")

    nv.nvmlDeviceGetMemoryBusWidth = unsupported
    return nv


def test_nvml_metrics_are_converted_and_unsupported_ones_are_none(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml())
    monkeypatch.setattr(device.importlib.util, "find_spec", lambda name: object())
    nvml, reason = device.NVML.open()
    assert reason is None
    assert nvml.driver() == "560.35.03"
    static = nvml.static("h0")
    assert static["name"] == "NVIDIA H100 80GB HBM3"
    assert static["power_limit_w"] == 700.0
    assert static["memory_total_bytes"] == 80 * 2**30
    assert static["compute_capability"] == "9.0"
    assert static["memory_bus_width_bits"] is None
    snap = nvml.snapshot("h0")
    assert snap == {
        "sm_clock_mhz": 1980,
        "mem_clock_mhz": 2619,
        "power_w": 312.5,
        "memory_used_bytes": 2 * 2**30,
        "temperature_c": 41,
    }
    nvml.close()


def test_nvml_failure_is_one_line_reason(monkeypatch):
    nv = _fake_pynvml()

    def no_driver():
        raise nv.NVMLError("NVML Shared Library Not Found")

    nv.nvmlInit = no_driver
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    monkeypatch.setattr(device.importlib.util, "find_spec", lambda name: object())
    nvml, reason = device.NVML.open()
    assert nvml is None and "NVML Shared Library Not Found" in reason and "\n" not in reason


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_profile_with_graphs(tmp_path):
    out = tmp_path / "tiny.json"
    argv = ["run", "--target", "tiny", "--device", "cuda", "--batch", "1,4", "--k", "2"]
    argv += ["--context", "64", "--out", str(out), "--repeats", "5", "--quiet"]
    assert cli.main(argv) == 0
    profile = load_profile(out)
    assert profile.device.kind == "cuda" and profile.settings.cuda_graphs
    assert (profile.measurements["status"] == "ok").all()


def _run_pair(tmp_path, device_flag: str, extra=()):
    out = tmp_path / "pair.json"
    argv = ["run", "--target", "specplan-byte-target", "--draft", "specplan-byte-draft"]
    argv += ["--device", device_flag, "--dtype", "fp32", "--batch", "1,2", "--k", "1,3"]
    argv += ["--context", "16,48", "--out", str(out), *extra]
    assert cli.main(argv) == 0
    return load_profile(out), load_profile(out.with_suffix(".csv"))


def test_draft_is_timed_inside_the_loop(tmp_path):
    from simulator import predict
    from simulator.model.calibration import Calibration, match_gpu_id

    profile, from_csv = _run_pair(tmp_path, "cpu", QUICK)
    loop = profile.draft_in_loop
    # batches x contexts x positions 1..K_max (K_max = 3, the grid's largest K).
    assert len(loop) == 2 * 2 * 3
    assert set(loop["position"]) == {1, 2, 3}
    assert (loop.loc[loop["position"] == 1, "query_len"] == 2).all()
    assert (loop.loc[loop["position"] > 1, "query_len"] == 1).all()
    assert (loop["target"] == "specplan-byte-target").all()
    assert (loop["median_ms"] > 0).all() and (loop["repeats"] >= 3).all()
    assert len(from_csv.draft_in_loop) == len(loop)
    # The simulator prices a draft model at a covered point with the in-loop times.
    cal = Calibration.from_profiles([profile])
    row = dict(
        target="specplan-byte-target",
        method="draft_model",
        draft="specplan-byte-draft",
        gpu=match_gpu_id(profile.device.name, profile.device.kind),
        weight_dtype="fp32",
        kv_dtype="fp32",
        k=3,
        acceptance_rate=0.6,
        batch_size=2,
        prompt_len=40,
        output_len=16,
    )
    r = predict(pd.DataFrame([row]), calibration=cal).iloc[0]
    assert r["latency_source"].endswith("draft:in-loop")
    at = loop[(loop["batch"] == 2) & (loop["context_len"] == 48)]
    assert r["draft_step_ms"] == pytest.approx(at["median_ms"].sum(), rel=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_draft_in_loop_with_graphs(tmp_path):
    profile, _ = _run_pair(tmp_path, "cuda", ["--repeats", "5", "--quiet"])
    assert profile.settings.cuda_graphs
    assert len(profile.draft_in_loop) == 12 and (profile.draft_in_loop["median_ms"] > 0).all()


def _no_setup(args):
    raise AssertionError("the device was set up before the flags were checked")


@pytest.mark.parametrize("where", ["folder", "csv-folder", "below-a-file"])
def test_bad_out_exits_2_before_the_device_is_set_up(where, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(measure, "_setup", _no_setup)
    (tmp_path / "afile").write_text("")
    (tmp_path / "p.csv").mkdir()
    out = {
        "folder": tmp_path / "dir.json",
        "csv-folder": tmp_path / "p.json",
        "below-a-file": tmp_path / "afile" / "sub" / "p.json",
    }[where]
    if where == "folder":
        out.mkdir()
    err = _fail(["run", "--target", "tiny", "--device", "cpu", "--out", str(out)], capsys)
    assert "--out" in err and ("is a folder" in err or "is a file" in err)


def test_out_in_a_read_only_folder_exits_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(measure, "_setup", _no_setup)
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    if os.geteuid() == 0:  # root may write anywhere: deny as a read-only mount would
        allowed = os.access
        monkeypatch.setattr(os, "access", lambda p, mode: Path(p) != locked and allowed(p, mode))
    try:
        argv = ["run", "--target", "tiny", "--device", "cpu", "--out", str(locked / "p.json")]
        err = _fail(argv, capsys)
    finally:
        locked.chmod(0o755)
    assert f"--out: no permission to write in '{locked}'" in err


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--target", "specplan-byte-target", "--context", "64,513"], "specplan-byte-target"),
        (
            ["--target", "llama-3.2-1b", "--draft", "specplan-byte-draft", "--context", "1024"],
            "specplan-byte-draft",
        ),
    ],
)
def test_context_above_the_models_positions_exits_2(extra, words, capsys, monkeypatch):
    monkeypatch.setattr(measure, "_setup", _no_setup)
    err = _fail(["run", "--device", "cpu", *extra], capsys)
    assert "--context" in err and words in err and "max_position_embeddings 512" in err


def test_context_limit_comes_from_the_models_csv(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(measure, "_setup", _no_setup)
    catalog = pd.read_csv(ROOT / "data/models.csv", dtype=str, keep_default_na=False)
    catalog.loc[catalog["id"] == "tiny", "max_position_embeddings"] = "100"
    path = tmp_path / "models.csv"
    catalog.to_csv(path, index=False)
    argv = ["run", "--target", "tiny", "--models-csv", str(path), "--context", "64,128"]
    err = _fail(argv, capsys)
    assert "--context: 128 is above tiny's max_position_embeddings 100" in err
    err = _fail(["check-extrapolation", *argv[1:]], capsys)
    assert "--context: 128" in err


def test_context_at_the_limit_and_models_without_one_pass_the_check(monkeypatch, capsys):
    monkeypatch.setattr(measure, "_setup", _no_setup)
    for target, context in (("specplan-byte-target", "512"), ("tiny", "100000")):
        # The flags pass, so the run reaches the device set-up, whose error ends the run
        # before the first point (exit 1, nothing written).
        assert cli.main(["run", "--target", target, "--context", context]) == measure.EXIT_FAILED
        assert "device was set up" in capsys.readouterr().err
