"""How close to the hardware a profile got: the copy rate measured at the start of a run,
and per point the bytes a step moves and the fraction of the copy rate it reached."""

import math

import pandas as pd
import pytest
import torch

from profiler.hardware import copy_gbps, matmul_tflops, measure_rates
from simulator.errors import InputError
from simulator.inputs.catalog import default_models
from simulator.inputs.profile import (
    load_profile,
    profile_from_dict,
    profile_to_csv,
    profile_to_json,
)
from simulator.validation.step_gap import annotate, step_bytes
from tests.simulator.test_harm_case import FUSED, REFERENCE


def test_host_copy_rate_is_measured_and_no_matmul_rate_on_a_cpu():
    rate = copy_gbps(torch.device("cpu"), nbytes=1 << 22, repeats=3)
    assert 0.01 < rate < 10_000  # GB/s, read + write
    assert matmul_tflops(torch.device("cpu")) is None


def test_measure_rates_on_a_cpu():
    copy, matmul = measure_rates(torch.device("cpu"))
    assert copy > 0 and matmul is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_copy_and_matmul_rates_are_plausible():
    copy, matmul = measure_rates(torch.device("cuda"))
    assert 100 < copy < 20_000 and 10 < matmul < 5_000


def test_step_bytes_are_the_reference_bytes_floor():
    """Weights read (not the untied embedding table) + KV read and written: the bytes floor
    of data/step_reference/ is exactly these bytes at 4.8 TB/s."""
    table = pd.read_csv(REFERENCE)
    floor = table[table["series"] == "bytes_floor"]
    models = default_models()
    for r in floor.itertuples():
        nbytes = step_bytes(models[r.model], r.batch, r.query_len, r.context_len, 2.0)
        assert nbytes / 4.8e12 * 1e3 == pytest.approx(r.step_ms, abs=6e-5), r


def test_annotate_gives_bytes_and_fraction_and_leaves_oom_rows_without_fraction():
    spec = default_models()["llama-3.1-8b"]
    rows = [
        dict(batch=1, query_len=1, context_len=512, median_ms=5.0, status="ok"),
        dict(batch=64, query_len=1, context_len=512, median_ms=math.nan, status="oom"),
    ]
    annotate(rows, spec, 2.0, 4000.0)
    assert rows[0]["copy_fraction"] == pytest.approx(rows[0]["bytes_moved"] / 5e-3 / 4e12)
    assert rows[1]["bytes_moved"] > rows[0]["bytes_moved"] and rows[1]["copy_fraction"] is None
    annotate(rows, spec, 2.0, None)
    assert rows[0]["copy_fraction"] is None


def test_rates_and_fractions_survive_json_and_csv_and_bad_values_are_refused():
    profile = load_profile(FUSED)
    assert profile.device.copy_gbps == 4095.0
    m = profile.measurements
    decode_8b = m[(m["model"] == "llama-3.1-8b") & (m["query_len"] == 1)]["copy_fraction"]
    assert decode_8b.between(0.7, 0.9).all()  # the fused decoder: 0.72 at B=1, 0.89 at 128
    assert m["copy_fraction"].between(0.1, 1.0).all()
    for text in (profile_to_json(profile), profile_to_csv(profile)):
        again = load_profile(text.encode(), name="p.json" if text[0] == "{" else "p.csv")
        pd.testing.assert_frame_equal(again.measurements, profile.measurements)
        assert again.device == profile.device
    data = __import__("json").loads(profile_to_json(profile))
    data["measurements"][0]["copy_fraction"] = "fast"
    with pytest.raises(InputError, match=r"measurements\[0\]\.copy_fraction"):
        profile_from_dict(data)
    data["measurements"][0]["copy_fraction"] = 4095.0  # a rate where a fraction goes
    with pytest.raises(InputError, match="copy_fraction"):
        profile_from_dict(data)
    data["measurements"][0]["copy_fraction"] = 0.7
    data["device"]["copy_gbps"] = -1
    with pytest.raises(InputError, match=r"device\.copy_gbps"):
        profile_from_dict(data)
