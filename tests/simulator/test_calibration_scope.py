"""Calibration touches only what the profile measured (issue 25): a target-and-draft profile
moves the target's and the draft model's steps, never an EAGLE/Medusa/MTP head's, nor the
engine's host costs; `latency_source` says which parts were calibrated."""

import itertools

import pandas as pd
import pytest

from simulator import predict
from simulator.inputs.profile import SCHEMA, profile_from_dict
from simulator.model.calibration import Calibration

SLOW = 1.8
"""The profile's steps: this many times the uncalibrated step, as the profiler of commit
c9957ef measured the 8B on an H200 (7.4-8.4 ms against the model's 4.1)."""


def _slow_h200_profile() -> Calibration:
    """An H200 profile of llama-3.1-8b alone (no head), every point SLOW x the roofline."""
    rows = []
    for b, q, c in itertools.product((1, 4, 16, 64), (1, 4, 5), (512, 2048)):
        base = predict(
            pd.DataFrame(
                [
                    dict(
                        target="llama-3.1-8b",
                        gpu="h200",
                        batch_size=b,
                        method="none",
                        engine="other",
                    )
                ]
            )
        ).iloc[0]["baseline_step_ms"]
        t = SLOW * base * (1 + 0.1 * (q - 1))
        rows.append(
            dict(
                model="llama-3.1-8b",
                batch=b,
                query_len=q,
                context_len=c,
                median_ms=t,
                p10_ms=t,
                p90_ms=t,
                repeats=5,
                peak_bytes=1,
                status="ok",
                extrapolated=False,
            )
        )
    profile = profile_from_dict(
        {
            "schema": SCHEMA,
            "created": "2026-12-04T07:09:50+00:00",
            "command": "synthetic",
            "device": {
                "name": "NVIDIA H200",
                "kind": "cuda",
                "memory_bytes": 150109880320,
                "driver": "580.159.04",
                "torch_version": "2.11.0+cu130",
                "cpu_threads": 16,
            },
            "settings": {
                "dtype": "bf16",
                "warmup": 5,
                "repeats": 20,
                "min_time_s": 0.05,
                "cuda_graphs": True,
            },
            "models": [
                {
                    "id": "llama-3.1-8b",
                    "architecture": {},
                    "layers_run": [32],
                    "num_layers": 32,
                    "extrapolated": False,
                    "weight_bytes": 16060522496,
                    "kv_bytes_per_token": 131072,
                    "kv_bytes_per_token_formula": 131072,
                }
            ],
            "measurements": rows,
        }
    )
    return Calibration.from_profiles([profile])


# engine "other": the roofline is what calibration replaces; the kernel tables
# (tests/simulator/test_kernels.py) price rows no profile covers.
ROW = dict(
    engine="other",
    target="llama-3.1-8b",
    gpu="h200",
    method="eagle3",
    k=3,
    acceptance_rate=0.75,
    batch_size=16,
    serving="decode_only",
)


@pytest.mark.parametrize("method", ["eagle3", "eagle", "medusa"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_head_the_profile_does_not_cover_keeps_its_uncalibrated_price(method, temperature):
    """The issue's case: 8B EAGLE-3 on h200, K=3, batch 16, calibrated with a profile that
    has no EAGLE head. Before the fix the head's three steps moved from 4.41 to 3.05 ms
    (priced on the target's fitted bandwidth and overhead) while the target's step moved
    to its measured time."""
    cal = _slow_h200_profile()
    row = pd.DataFrame([{**ROW, "method": method, "temperature": temperature}])
    plain = predict(row).iloc[0]
    calibrated = predict(row, calibration=cal).iloc[0]
    assert calibrated["draft_step_ms"] == pytest.approx(plain["draft_step_ms"], rel=1e-12)
    assert calibrated["engine_ms_spec"] == pytest.approx(plain["engine_ms_spec"], rel=1e-12)
    assert calibrated["engine_ms_baseline"] == pytest.approx(plain["engine_ms_baseline"], rel=1e-12)
    # What the profile measured does move: the target's decode and verify steps.
    assert calibrated["baseline_step_ms"] > 1.5 * plain["baseline_step_ms"]
    assert calibrated["verify_step_ms"] > 1.5 * plain["verify_step_ms"]
    assert calibrated["latency_source"].split() == [
        "target:interpolated",
        "verify:interpolated",
        "head:uncalibrated",
    ]


def test_a_draft_model_outside_the_profile_is_priced_by_the_fit_and_said_so():
    """A separate draft model the profile did not time is priced on the fitted device, as
    before, and labelled 'fitted'; only heads are left uncalibrated."""
    cal = _slow_h200_profile()
    row = pd.DataFrame([{**ROW, "method": "draft_model", "draft": "llama-3.2-1b"}])
    calibrated = predict(row, calibration=cal).iloc[0]
    assert calibrated["latency_source"].split()[-1] == "draft:fitted"


def test_a_head_row_on_another_gpu_stays_roofline():
    row = pd.DataFrame([{**ROW, "gpu": "h100-sxm"}])
    out = predict(row, calibration=_slow_h200_profile()).iloc[0]
    assert out["latency_source"] == "roofline"
    assert out["speedup"] == pytest.approx(predict(row).iloc[0]["speedup"], rel=1e-12)
