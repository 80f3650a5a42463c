"""Calibration: measured points reproduced, interpolation between them, a fitted
roofline beyond them, and rows on other devices untouched."""

import itertools
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from simulator import predict
from simulator.inputs.catalog import default_models
from simulator.inputs.profile import SCHEMA, profile_from_dict
from simulator.model.calibration import Calibration, match_gpu_id, summary
from simulator.model.defaults import DEFAULTS
from simulator.model.latency import ModelArrays, get_model_traffic

TRUE_BW, TRUE_TF, O0, O1 = 40.0, 0.4, 0.3, 0.05  # GB/s, TFLOP/s, ms, ms per layer


def _truth(model_id, batch, q, ctx):
    spec = default_models()[model_id]
    nbytes, flops = get_model_traffic(ModelArrays.from_specs([spec]), batch, q, ctx, 4.0, 4.0, 1)
    roof = np.maximum(nbytes / (TRUE_BW * 1e9), flops / (TRUE_TF * 1e12)) * 1e3
    return float(roof[0] + O0 + O1 * spec.num_layers)


def _profile(models=("tiny", "llama-3.2-1b")):
    rows = []
    for m, b, q, c in itertools.product(models, (1, 4, 16), (1, 3, 5), (128, 512)):
        t = _truth(m, b, q, c)
        rows.append(
            dict(
                model=m,
                batch=b,
                query_len=q,
                context_len=c,
                median_ms=t,
                p10_ms=t * 0.97,
                p90_ms=t * 1.05,
                repeats=10,
                peak_bytes=1,
                status="ok",
                extrapolated=False,
            )
        )
    spec = default_models()
    return profile_from_dict(
        {
            "schema": SCHEMA,
            "created": "2026-12-02T12:00:00+00:00",
            "command": "synthetic",
            "device": {
                "name": "Test CPU",
                "kind": "cpu",
                "memory_bytes": 16 * 2**30,
                "driver": None,
                "torch_version": "2.13.0",
                "cpu_threads": 2,
            },
            "settings": {
                "dtype": "fp32",
                "warmup": 1,
                "repeats": 10,
                "min_time_s": 0.0,
                "cuda_graphs": False,
            },
            "models": [
                {
                    "id": m,
                    "architecture": {},
                    "layers_run": [spec[m].num_layers],
                    "num_layers": spec[m].num_layers,
                    "extrapolated": False,
                    "weight_bytes": spec[m].total_params * 4,
                    "kv_bytes_per_token": 1,
                    "kv_bytes_per_token_formula": 1,
                }
                for m in models
            ],
            "measurements": rows,
        },
        name="synthetic.json",
    )


def _predict(cal, **row):
    # The isolated step of a bare loop of forwards: what the profile measured, no engine.
    base = dict(
        gpu="cpu",
        weight_dtype="fp32",
        kv_dtype="bf16",
        prompt_len=100,
        output_len=56,
        serving="decode_only",
    )
    return predict(
        pd.DataFrame([{**base, **row}]), calibration=cal, defaults=DEFAULTS.without_engine()
    ).iloc[0]


def test_fit_recovers_the_roofline():
    cal = Calibration.from_profiles([_profile()])
    fit = cal.fits["cpu"]
    assert fit.bandwidth_gbps == pytest.approx(TRUE_BW, rel=0.1)
    assert fit.tflops == pytest.approx(TRUE_TF, rel=0.1)
    assert fit.median_rel_error < 0.03


def test_measured_points_reproduced_and_labelled():
    cal = Calibration.from_profiles([_profile()])
    # context = prompt + output / 2 = 128, a measured point; but kv_dtype must match
    row = _predict(cal, target="llama-3.2-1b", batch_size=4, kv_dtype="bf16")
    assert row["target_step_ms"] == pytest.approx(_truth("llama-3.2-1b", 4, 1, 128))
    assert row["latency_source"] == "target:measured"


def test_interpolated_and_fitted_points():
    cal = Calibration.from_profiles([_profile()])
    mid = _predict(cal, target="llama-3.2-1b", batch_size=8, prompt_len=300, output_len=40)
    assert "interpolated" in mid["latency_source"]
    assert mid["target_step_ms"] == pytest.approx(_truth("llama-3.2-1b", 8, 1, 320), rel=0.05)
    far = _predict(cal, target="llama-3.2-1b", batch_size=64, prompt_len=2000, output_len=100)
    assert "fitted" in far["latency_source"]
    assert far["target_step_ms"] == pytest.approx(_truth("llama-3.2-1b", 64, 1, 2050), rel=0.1)


def test_speculative_row_uses_measured_draft_and_verify():
    cal = Calibration.from_profiles([_profile()])
    row = _predict(
        cal,
        target="llama-3.2-1b",
        method="draft_model",
        draft="tiny",
        k=4,
        acceptance_rate=0.7,
        batch_size=4,
    )
    assert row["latency_source"] == "target:measured verify:measured draft:measured"
    t1 = _truth("llama-3.2-1b", 4, 1, 128)
    t5 = _truth("llama-3.2-1b", 4, 5, 128)
    d1 = _truth("tiny", 4, 1, 128)
    assert row["spec_step_ms"] == pytest.approx(4 * d1 + t5 + 0.30)
    assert row["baseline_step_ms"] == pytest.approx(t1)
    # The synthetic pair does not share a tokenizer: priced, but it cannot run.
    assert "tokenizers differ" in row["status"] and np.isnan(row["speedup"])


def test_other_devices_untouched():
    cal = Calibration.from_profiles([_profile()])
    table = pd.DataFrame([dict(target="llama-3.1-8b", gpu="h100-sxm")])
    assert predict(table, calibration=cal).iloc[0]["target_step_ms"] == pytest.approx(
        predict(table).iloc[0]["target_step_ms"]
    )
    # Untouched: priced as without a profile (the kernel tables, where they cover it).
    assert (
        predict(table, calibration=cal).iloc[0]["latency_source"]
        == predict(table).iloc[0]["latency_source"]
    )


@pytest.mark.parametrize(
    ("name", "kind", "gid"),
    [
        ("NVIDIA H100 80GB HBM3", "cuda", "h100-sxm"),
        ("NVIDIA H100 PCIe", "cuda", "h100-pcie"),
        ("NVIDIA H200", "cuda", "h200"),
        ("NVIDIA L40S", "cuda", "l40s"),
        ("NVIDIA L4", "cuda", "l4"),
        ("NVIDIA A100-SXM4-40GB", "cuda", "a100-40gb"),
        ("AMD Instinct MI300X", "cuda", "mi300x"),
        ("Intel Xeon", "cpu", "cpu"),
        ("Some Future GPU", "cuda", "profile-some-future-gpu"),
    ],
)
def test_device_names_map_to_catalog(name, kind, gid):
    assert match_gpu_id(name, kind) == gid


def test_cpu_reference_profile_reproduced_at_measured_points():
    """The bundled CPU profile of `tiny`: every measured decode and verify point comes
    back within 10% (exactly, as it is looked up), labelled measured; a batch between
    two measured ones is labelled interpolated and lies between them."""
    from pathlib import Path

    from simulator.inputs.profile import load_profile

    path = Path(__file__).resolve().parents[2] / "data/profiles/cpu/tiny.json"
    profile = load_profile(path)
    cal = Calibration.from_profiles([profile])
    m = profile.measurements_for("tiny")
    rows = []
    for _, r in m.iterrows():
        k = int(r["query_len"]) - 1
        rows.append(
            dict(
                target="tiny",
                gpu="cpu",
                weight_dtype=profile.settings.dtype,
                kv_dtype=profile.settings.dtype,
                batch_size=int(r["batch"]),
                prompt_len=int(r["context_len"]) - 1,
                output_len=2,
                method="ngram" if k else "none",
                k=k,
                acceptance_rate=0.5 if k else None,
            )
        )
    out = predict(pd.DataFrame(rows), calibration=cal)
    got = np.where(m["query_len"] > 1, out["verify_step_ms"], out["target_step_ms"])
    # A verify timed faster than the decode step at its batch and context (timing noise)
    # is priced at the decode step's time, and calibration says so.
    decode = m[m["query_len"] == 1].set_index(["batch", "context_len"])["median_ms"]
    floor = decode.reindex(pd.MultiIndex.from_frame(m[["batch", "context_len"]])).to_numpy()
    np.testing.assert_allclose(got, np.fmax(m["median_ms"], floor), rtol=0.10)
    assert out["latency_source"].str.contains("measured").all()
    assert any("faster than the decode step" in line for line in summary(cal))

    between = _predict(
        cal,
        target="tiny",
        batch_size=3,
        prompt_len=127,
        output_len=2,
        weight_dtype=profile.settings.dtype,
        kv_dtype=profile.settings.dtype,
    )
    assert between["latency_source"] == "target:interpolated"
    lo, hi = sorted(
        m[(m["query_len"] == 1) & (m["context_len"] == 128) & m["batch"].isin([2, 4])]["median_ms"]
    )
    assert lo <= between["target_step_ms"] <= hi


def _with_loop(profile, times_by_batch, *, target="llama-3.2-1b", draft="tiny", context=128):
    """The profile plus a draft_in_loop table: per batch, ms per position."""
    rows = [
        dict(
            draft=draft,
            target=target,
            batch=b,
            context_len=context,
            position=i + 1,
            query_len=2 if i == 0 else 1,
            median_ms=t,
            p10_ms=t,
            p90_ms=t,
            repeats=10,
        )
        for b, times in times_by_batch.items()
        for i, t in enumerate(times)
    ]
    return replace(profile, draft_in_loop=pd.DataFrame(rows))


def test_in_loop_draft_times_are_summed_over_positions():
    profile = _with_loop(_profile(), {1: [1.0, 0.5, 0.4], 16: [3.0, 2.0, 1.0]})
    cal = Calibration.from_profiles([profile])
    row = dict(target="llama-3.2-1b", method="draft_model", draft="tiny", acceptance_rate=0.7)
    # K = 2 at a measured batch: positions 1 + 2.
    r = _predict(cal, **row, k=2, batch_size=1)
    assert r["draft_step_ms"] == pytest.approx(1.5)
    assert r["latency_source"] == "target:measured verify:measured draft:in-loop"
    t3 = _truth("llama-3.2-1b", 1, 3, 128)
    assert r["spec_step_ms"] == pytest.approx(1.5 + t3 + 0.30)
    # K = 5, beyond the 3 timed positions: the last position's time repeats.
    assert _predict(cal, **row, k=5, batch_size=1)["draft_step_ms"] == pytest.approx(2.7)
    # Between batches 1 and 16, linear in batch: B = 4 is 3/15 of the way.
    mid = (1.9 + 0.2 * (6.0 - 1.9), 1.5 + 0.2 * (5.0 - 1.5))
    assert _predict(cal, **row, k=3, batch_size=4)["draft_step_ms"] == pytest.approx(mid[0])
    assert _predict(cal, **row, k=2, batch_size=4)["draft_step_ms"] == pytest.approx(mid[1])


def test_in_loop_table_applies_only_where_it_covers_the_row():
    profile = _with_loop(_profile(), {1: [1.0, 0.5], 4: [1.2, 0.6]})
    cal = Calibration.from_profiles([profile])
    row = dict(method="draft_model", draft="tiny", acceptance_rate=0.7, k=2)
    # Outside the table's batches, and another context: K isolated draft steps again.
    for extra in (dict(batch_size=16), dict(batch_size=4, prompt_len=480, output_len=64)):
        r = _predict(cal, target="llama-3.2-1b", **row, **extra)
        assert "draft:in-loop" not in r["latency_source"]
        assert r["draft_step_ms"] > 0
    r = _predict(cal, target="llama-3.2-1b", **row, batch_size=16)
    assert r["draft_step_ms"] == pytest.approx(2 * _truth("tiny", 16, 1, 128))
    # Timed after another target: does not apply to this pair.
    other = Calibration.from_profiles(
        [_with_loop(_profile(), {4: [9.0, 9.0]}, target="tiny", draft="llama-3.2-1b")]
    )
    r = _predict(other, target="llama-3.2-1b", **row, batch_size=4)
    assert r["draft_step_ms"] == pytest.approx(2 * _truth("tiny", 4, 1, 128))


def test_verify_faster_than_decode_is_floored_and_said():
    """A verify timed far below the decode step (the issue's 841x at K = 3) is priced at
    the decode step's time, so the speedup stays within K + 1, and a warning says so."""
    from pathlib import Path

    from simulator.inputs.profile import load_profile

    path = Path(__file__).resolve().parents[2] / "data/profiles/cpu/tiny.json"
    profile = load_profile(path)
    rows = profile.measurements
    fast = (rows["query_len"] == 4) & (rows["batch"] == 1) & (rows["context_len"] == 128)
    rows.loc[fast, ["median_ms", "p10_ms", "p90_ms"]] = 0.001
    cal = Calibration.from_profiles([profile])
    row = _predict(
        cal,
        target="tiny",
        method="ngram",
        k=3,
        acceptance_rate=0.99,
        batch_size=1,
        prompt_len=127,
        output_len=2,
        weight_dtype=profile.settings.dtype,
        kv_dtype=profile.settings.dtype,
    )
    assert row["verify_step_ms"] >= row["target_step_ms"]
    assert row["speedup"] <= 4.0
    assert any("priced at the decode step" in line for line in summary(cal))


def test_profiled_model_outside_the_catalog_needs_its_architecture():
    from pathlib import Path

    from simulator.errors import InputError
    from simulator.inputs.profile import load_profile

    path = Path(__file__).resolve().parents[2] / "data/profiles/cpu/tiny.json"
    profile = load_profile(path)
    pm = replace(profile.models[0], id="not-in-catalog", architecture={"num_layers": 2})
    profile = replace(profile, models=(pm,))
    profile.measurements["model"] = "not-in-catalog"
    with pytest.raises(InputError, match=r"architecture\.hidden_size"):
        Calibration.from_profiles([profile])


def test_profiled_moe_model_outside_the_catalog_is_refused():
    """An MoE model outside the catalog was calibrated as dense (its num_experts read and
    then dropped), skewing the fit: it is refused, naming the field."""
    from pathlib import Path

    from simulator.errors import InputError
    from simulator.inputs.profile import load_profile

    path = Path(__file__).resolve().parents[2] / "data/profiles/cpu/tiny.json"
    profile = load_profile(path)
    arch = {**profile.models[0].architecture, "num_experts": 8, "experts_per_token": 2}
    pm = replace(profile.models[0], id="not-in-catalog", architecture=arch)
    profile = replace(profile, models=(pm,))
    profile.measurements["model"] = "not-in-catalog"
    with pytest.raises(InputError, match="mixture-of-experts") as info:
        Calibration.from_profiles([profile])
    assert info.value.field == "architecture.num_experts"
    # The same model as a dense one still calibrates.
    dense = replace(pm, architecture={**arch, "num_experts": 0, "experts_per_token": 0})
    Calibration.from_profiles([replace(profile, models=(dense,))])
