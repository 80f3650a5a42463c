"""`make gpu-check` (bench/gpu_check.py): without a CUDA device it says so in one line and
exits 2; its table and criteria, on the reference figures."""

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from bench.gpu_check import comparison, criteria
from bench.reference_profile import main as reference_profile
from simulator.inputs.profile import load_profile

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = pd.read_csv(ROOT / "data" / "step_reference" / "h200_decode_step_ms.csv")


def test_without_cuda_it_says_so_and_exits_2_without_a_traceback():
    if torch.cuda.is_available():
        pytest.skip("on a GPU the check runs for real (minutes)")
    done = subprocess.run(
        [sys.executable, "bench/gpu_check.py"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 2
    assert "no CUDA device" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""


def test_the_fused_reference_meets_the_step_criteria_and_not_the_copy_one():
    table = comparison(
        load_profile(ROOT / "data/profiles/nvidia-h200/fused-reference.json"), REFERENCE
    )
    b1 = table[(table["model"] == "llama-3.1-8b") & (table["batch"] == 1)]
    assert b1["x_fused"].tolist() == [1.0, 1.0]
    assert b1["x_floor"].round(2).tolist() == [1.62, 1.6]
    verdicts = dict(criteria(table, True))
    assert [v for k, v in verdicts.items() if "within" in k] == [True, True]
    # The fused decoder itself moved 0.72-0.73 of the copy rate at B=1: below the 75%.
    assert [v for k, v in verdicts.items() if "copy rate" in k] == [False]


def test_the_old_profiler_fails_the_step_criteria(tmp_path):
    out = tmp_path / "old.json"
    assert reference_profile(["--series", "profiler_c9957ef", "--out", str(out)]) == 0
    table = comparison(load_profile(out), REFERENCE)
    verdicts = criteria(table, None)
    assert [ok for line, ok in verdicts if "within" in line] == [False, False]
    worst = table.groupby("model")["x_fused"].max().round(2).to_dict()
    assert worst == {"llama-3.1-8b": 2.06, "llama-3.2-1b": 3.15}
