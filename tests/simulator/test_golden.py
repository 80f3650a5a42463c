"""Golden outputs: a seeded sweep through `predict` and seeded runs of the serving engine
give exactly the numbers committed in tests/simulator/data/, to the last bit.

They guard refactors (the model as stages, the serving engine as a scheduler object):
a change that moves any figure fails here. A change that means to move figures rewrites
them, and the diff of the CSV shows which:

    python tests/simulator/test_golden.py --write
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from simulator.inputs.profile import load_profile  # noqa: E402
from simulator.model.calibration import Calibration  # noqa: E402
from simulator.model.predict import predict  # noqa: E402
from simulator.serving import engine as serving  # noqa: E402

DATA = Path(__file__).parent / "data"
PREDICT_CSV = DATA / "golden_predict.csv"
SERVING_JSON = DATA / "golden_serving.json"


def scenarios(n: int = 480, seed: int = 0) -> pd.DataFrame:
    """Every method on five GPUs, closed and open loop, steady and decode_only, greedy
    and sampled, bf16 and fp8, given alpha, tau or measured positions."""
    rng = np.random.default_rng(seed)
    methods = np.array(["none", "draft_model", "eagle", "eagle3", "medusa", "mtp", "ngram"])
    method = methods[np.arange(n) % len(methods)]
    target = np.where(
        method == "mtp", "deepseek-v3", rng.choice(["llama-3.1-8b", "llama-3.3-70b"], n)
    )
    rate = np.where(rng.random(n) < 0.25, rng.uniform(0.5, 30, n), np.nan)
    spec = method != "none"
    alpha = rng.uniform(0.3, 0.95, n)
    how = rng.integers(0, 3, n)
    k = np.where(spec, rng.integers(1, 9, n), 0)
    return pd.DataFrame(
        {
            "target": target,
            "method": method,
            "draft": np.where(method == "draft_model", "llama-3.2-1b", ""),
            "gpu": rng.choice(["h100-sxm", "h200", "a100-80gb", "mi300x", "b200"], n),
            "num_gpus": np.where(target == "deepseek-v3", 8, rng.choice([1, 2, 4], n)),
            "weight_dtype": rng.choice(["bf16", "fp8"], n),
            "k": k,
            "medusa_heads": np.where(method == "medusa", 8, np.nan),
            "acceptance_rate": np.where(spec & (how == 0), alpha, np.nan),
            "mean_accepted_tokens": np.where(spec & (how == 1), 1 + 0.8 * alpha * k, np.nan),
            "acceptance_per_position": np.where(spec & (how == 2), "0.8;0.6;0.45", ""),
            "batch_size": np.where(np.isnan(rate), rng.choice([1, 4, 16, 64, 256], n), np.nan),
            "request_rate": rate,
            "prompt_len": rng.integers(64, 4096, n),
            "output_len": rng.integers(16, 1024, n),
            "serving": rng.choice(["steady", "decode_only"], n, p=[0.8, 0.2]),
            "temperature": rng.choice([0.0, 1.0], n),
        }
    )


def calibrated(n: int = 120, seed: int = 1) -> pd.DataFrame:
    """Rows on the committed CPU profile's device: measured, interpolated, fitted points."""
    rng = np.random.default_rng(seed)
    method = rng.choice(["none", "draft_model"], n)
    return pd.DataFrame(
        {
            "target": "specplan-byte-target",
            "method": method,
            "draft": np.where(method == "draft_model", "specplan-byte-draft", ""),
            "gpu": "cpu-profile",
            "weight_dtype": "fp32",
            "kv_dtype": "fp32",
            "k": np.where(method == "none", 0, rng.integers(1, 9, n)),
            "acceptance_rate": np.where(method == "none", np.nan, rng.uniform(0.3, 0.9, n)),
            "batch_size": rng.choice([1, 2, 3, 4, 8, 16, 32], n),
            "prompt_len": np.where(rng.random(n) < 0.6, 384, rng.integers(16, 512, n)),
            "output_len": 256,
        }
    )


def predicted() -> pd.DataFrame:
    cal = Calibration.from_profiles([load_profile(ROOT / "data/validation/cpu_profile.json")])
    gpu = sorted(cal.gpus)[0]
    rows = calibrated().assign(gpu=gpu)
    return pd.concat(
        [predict(scenarios()), predict(rows, calibration=cal)], ignore_index=True
    ).astype({c: str for c in ("latency_source", "status", "warnings")})


def served() -> dict:
    """Summaries of seeded runs: open and closed loop, a K schedule, a tight KV cache."""
    scen = dict(
        target="llama-3.1-8b", gpu="h100-sxm", method="eagle3", k=3, mean_accepted_tokens=2.8
    )
    out = {}
    prompt, output = serving.Lengths(512, "lognormal", 0.8), serving.Lengths(256, "lognormal", 0.7)
    for spec in (False, True):
        model = serving.step_model({**scen, "prompt_len": 512, "output_len": 256}, speculative=spec)
        for load in (
            serving.Load(600, rate=30.0, seed=3),
            serving.Load(400, concurrency=96, seed=1),
        ):
            run = serving.run(model, load, prompt, output, acceptance_spread=0.15)
            out[f"spec={spec} {load}"] = _summary(run)
    tight = dict(scen, target="llama-3.3-70b", num_gpus=2, gpu="a100-80gb")
    sched = serving.schedule_model(
        {**tight, "prompt_len": 2048, "output_len": 512}, [(1, 8, 4), (9, 64, 2), (65, 999, 0)]
    )
    for load in (serving.Load(400, rate=8.0, seed=9), serving.Load(300, concurrency=300, seed=9)):
        run = serving.run(
            sched,
            load,
            serving.Lengths(2048, "uniform", 1500),
            serving.Lengths(512, "lognormal", 1.0),
            acceptance_spread=0.2,
            max_num_batched_tokens=4096,
        )
        out[f"schedule {load}"] = _summary(run)
    return out


def _summary(run: serving.RunResult) -> dict:
    s = serving.summarise(run, slo_ttft_ms=500.0, slo_tpot_ms=20.0)
    s["ttft_sum"] = float(np.nansum(run.requests["ttft_ms"]))
    s["e2e_sum"] = float(np.nansum(run.requests["e2e_ms"]))
    s["queue_len"] = len(run.queue)
    return {k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in s.items()}


def test_predict_matches_the_golden_sweep():
    want = pd.read_csv(PREDICT_CSV, keep_default_na=False, na_values=[""])
    got = predicted()
    assert list(got.columns) == list(want.columns)
    for c in got.columns:
        a, b = got[c].to_numpy(), want[c].to_numpy()
        if got[c].dtype.kind in "fiub" and want[c].dtype.kind in "fiub":
            # Equal to the last few bits: numpy's SIMD paths differ by an ulp across CPUs.
            same = np.isclose(a.astype(float), b.astype(float), rtol=1e-12, atol=0.0) | (
                np.isnan(a.astype(float)) & np.isnan(b.astype(float))
            )
            assert same.all(), (c, np.flatnonzero(~same)[:5])
        else:
            got_text = pd.Series(a).fillna("").astype(str).to_numpy()
            want_text = pd.Series(b).fillna("").astype(str).to_numpy()
            assert (got_text == want_text).all(), c


def test_serving_matches_the_golden_runs():
    want = json.loads(SERVING_JSON.read_text("utf-8"))
    got = json.loads(json.dumps(served()))
    assert got == want


if __name__ == "__main__" and "--write" in sys.argv:
    DATA.mkdir(exist_ok=True)
    predicted().to_csv(PREDICT_CSV, index=False, float_format="%.17g")
    SERVING_JSON.write_text(json.dumps(served(), indent=1, sort_keys=True) + "\n", "utf-8")
    print(f"wrote {PREDICT_CSV} and {SERVING_JSON}")
