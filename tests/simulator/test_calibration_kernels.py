"""A profile on rows the kernel tables price (issue 25 item 3): it scales the parts it
measured and keeps the tables' shape for what it did not. A profile of decode steps alone
leaves the engine's verify/decode ratio as the tables have it; a profile with verify
forwards (query_len > 1) around the row sets the verify step; heads and host costs stay
the engine's, so engines still differ once calibrated."""

import itertools

import pandas as pd
import pytest

from simulator import predict
from simulator.inputs.profile import SCHEMA, profile_from_dict
from simulator.model.calibration import Calibration
from simulator.model.defaults import DEFAULTS

ROW = dict(
    target="llama-3.1-8b",
    gpu="h200",
    method="eagle",
    k=4,
    acceptance_rate=0.75,
    batch_size=64,
    serving="decode_only",
)
BATCHES, CONTEXTS = (16, 64, 128), (512, 1152, 2048)
"""The synthetic profiles' grid: it holds ROW's point exactly (decode_only: the context
is the prompt plus half the output, 1152 tokens)."""


def _decode_ms(b: int, c: int) -> float:
    """A made-up decode step (ms), slower than any engine's and not of the tables' shape."""
    return 9.0 + 0.05 * b + 0.002 * c


def _raw_profile(verify_ratio: float | None):
    """An H200 profile of llama-3.1-8b: decode steps on the grid, and where `verify_ratio`
    is given, forwards of 5 tokens (K = 4) costing that many decode steps."""
    queries = (1,) if verify_ratio is None else (1, 5)
    rows = []
    for b, q, c in itertools.product(BATCHES, queries, CONTEXTS):
        t = _decode_ms(b, c) * (1.0 if q == 1 else verify_ratio)
        rows.append(
            dict(model="llama-3.1-8b", batch=b, query_len=q, context_len=c, median_ms=t)
            | dict(p10_ms=t, p90_ms=t, repeats=5, peak_bytes=1, status="ok", extrapolated=False)
        )
    device = dict(name="NVIDIA H200", kind="cuda", memory_bytes=150109880320, cpu_threads=16)
    model = dict(id="llama-3.1-8b", architecture={}, layers_run=[32], num_layers=32)
    model |= dict(extrapolated=False, weight_bytes=16060522496, kv_bytes_per_token=131072)
    model |= dict(kv_bytes_per_token_formula=131072)
    return profile_from_dict(
        {
            "schema": SCHEMA,
            "created": "2026-12-04T12:00:00+00:00",
            "command": "synthetic",
            "device": device | dict(driver="580.159.04", torch_version="2.11.0+cu130"),
            "settings": dict(dtype="bf16", warmup=5, repeats=20, min_time_s=0.05, cuda_graphs=True),
            "models": [model],
            "measurements": rows,
        }
    )


def _profile(verify_ratio: float | None) -> Calibration:
    return Calibration.from_profiles([_raw_profile(verify_ratio)])


LAUNCHED = DEFAULTS.replace(max_num_seqs=256)
"""Both arms at the asked batch: a launch that sets its cap (SGLang's default of 48 with
speculation would run the verify at another batch than the decode it is compared to)."""


def _both(row: dict, cal: Calibration):
    table = pd.DataFrame([row])
    plain = predict(table, defaults=LAUNCHED).iloc[0]
    return plain, predict(table, calibration=cal, defaults=LAUNCHED).iloc[0]


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_a_decode_only_profile_keeps_the_engines_verify_to_decode_ratio(engine):
    plain, cal = _both({**ROW, "engine": engine}, _profile(None))
    assert plain["latency_source"].startswith("kernels:")
    assert cal["context_len"] == 1152
    # The decode step is the profile's, measured at this very point.
    assert cal["target_step_ms"] == pytest.approx(_decode_ms(64, 1152), rel=1e-9)
    assert cal["target_step_ms"] > 1.05 * plain["target_step_ms"]
    # Verify keeps the tables' ratio to the decode step.
    assert cal["verify_step_ms"] / cal["target_step_ms"] == pytest.approx(
        plain["verify_step_ms"] / plain["target_step_ms"], rel=1e-9
    )
    # The head and the engine's host costs are not in the profile: the tables' own.
    for col in ("draft_step_ms", "engine_ms_baseline", "engine_ms_spec"):
        assert cal[col] == pytest.approx(plain[col], rel=1e-12), col
    assert cal["latency_source"].split() == [
        "target:profile",
        "verify:scaled",
        "head:kernels",
        "host:kernels",
        f"base:{plain['latency_source']}",
    ]


def test_a_profile_with_verify_forwards_sets_the_verify_step():
    ratio = 2.0
    plain, cal = _both(ROW, _profile(ratio))
    assert plain["verify_step_ms"] / plain["target_step_ms"] < 1.6
    assert cal["target_step_ms"] == pytest.approx(_decode_ms(64, 1152), rel=1e-9)
    assert cal["verify_step_ms"] == pytest.approx(ratio * _decode_ms(64, 1152), rel=1e-9)
    assert cal["latency_source"].split()[:2] == ["target:profile", "verify:profile"]
    # Between measured points the profile's ratio to the tables is interpolated.
    between = _both({**ROW, "batch_size": 96}, _profile(ratio))[1]
    assert between["verify_step_ms"] / between["target_step_ms"] == pytest.approx(ratio, rel=0.05)


def test_calibrated_rows_still_differ_by_engine():
    cal = _profile(None)
    out = predict(
        pd.DataFrame([{**ROW, "engine": e} for e in ("vllm", "sglang", "trtllm")]),
        calibration=cal,
    )
    assert out["engine_ms_spec"].nunique() == 3
    assert out["speedup"].nunique() == 3


def test_a_model_or_tp_the_profile_did_not_measure_keeps_the_tables():
    cal = _profile(None)
    for row in ({**ROW, "target": "llama-3.1-70b", "num_gpus": 4}, {**ROW, "num_gpus": 2}):
        plain, calibrated = _both(row, cal)
        assert calibrated["latency_source"] == plain["latency_source"]
        assert calibrated["speedup"] == pytest.approx(plain["speedup"], rel=1e-12)


def test_verify_forwards_far_from_the_engines_ratio_are_named():
    from simulator.validation.step_gap import verify_gaps, verify_warnings

    decode_only = _raw_profile(None)
    assert verify_gaps(decode_only) == [] and verify_warnings(decode_only) == []
    costly, cheap = _raw_profile(3.0), _raw_profile(0.9)
    assert all(g.engine == "kernels:vllm-0.24.0/h200" for g in verify_gaps(costly))
    assert "understate speculation" in verify_warnings(costly)[0]
    assert "overstate speculation" in verify_warnings(cheap)[0]


def test_the_cli_says_when_a_profile_of_the_rows_gpu_times_none_of_their_models(tmp_path, capsys):
    from pathlib import Path

    from simulator.cli.main import main

    fused = Path(__file__).resolve().parents[2] / "data/profiles/nvidia-h200/fused-reference.json"
    src, out = tmp_path / "s.csv", tmp_path / "p.csv"
    pd.DataFrame([{**ROW, "target": "qwen3-32b"}]).to_csv(src, index=False)
    capsys.readouterr()
    assert main(["predict", "--in", str(src), "--out", str(out), "--profile", str(fused)]) == 0
    err = capsys.readouterr().err
    assert "times none of these rows' models" in err and "set gpu to" not in err
    assert pd.read_csv(out)["latency_source"].iloc[0].startswith("kernels:")
