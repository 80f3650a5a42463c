"""The serving benchmark: a real continuous-batching loop around the trained pair.

Its timings are consistent per request, greedy speculative serving emits the target's own
greedy output, it serves the very requests `simulator.serving.engine` simulates, and the CSVs
(a reduced run here, the committed one in `data/validation/`) carry the issue's columns.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest
import torch

from profiler import cli
from profiler.groundtruth import serve_bench as sb
from profiler.groundtruth.specdec import autoregressive_generate
from profiler.groundtruth.train_pair import load_pair
from profiler.groundtruth.validate import VALIDATION_DIR
from simulator.inputs.profile import load_profile
from simulator.model.calibration import Calibration
from simulator.serving import engine as serving

TEXT = (
    b'def parse(text):\n    """Return a dictionary of the key-value pairs found in text."""\n'
    b"    result = {}\n    for line in text.splitlines():\n"
    b'        key, _, value = line.partition("=")\n'
    b"        result[key.strip()] = value.strip()\n    return result\n\n\n"
    b"The functions in this module read simple key-value files and return dictionaries.\n"
)
ISSUE_COLUMNS = ["rate", "mode", "arm", "requests"] + [
    f"{side}_{m}" for m in sb.METRICS for side in ("predicted", "measured", "error")
]


@pytest.fixture(scope="module")
def pair():
    torch.set_num_threads(1)
    return load_pair()


def _prompts(n: int, length: int) -> list[np.ndarray]:
    data = np.frombuffer(TEXT, dtype=np.uint8)
    return [data[(7 * i) % (len(data) - length) :][:length] for i in range(n)]


# Bursts (three at once, more than max_num_seqs), a lull, a request of one token.
ARRIVAL_MS = np.array([0.0, 0.0, 0.0, 3.0, 40.0, 41.0, 42.0])
OUTPUT_LEN = np.array([6, 11, 1, 9, 14, 3, 7])


@pytest.mark.parametrize("k", [0, 3])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_timings_are_consistent_and_the_scheduler_keeps_its_limits(pair, k, temperature):
    target, draft = pair
    seqs, budget = 3, 3 * (k + 1) + 20  # prompts of 24 bytes prefill in more than one chunk
    res = sb.serve(
        target,
        draft,
        ARRIVAL_MS,
        _prompts(len(ARRIVAL_MS), 24),
        OUTPUT_LEN,
        k=k,
        temperature=temperature,
        max_num_seqs=seqs,
        max_num_batched_tokens=budget,
    )
    req = res.requests
    assert (req["first_ms"] > req["arrival_ms"]).all()
    assert (req["finish_ms"] >= req["first_ms"]).all()
    assert ((req["finish_ms"] > req["first_ms"]) == (req["output_len"] > 1)).all()
    np.testing.assert_allclose(req["ttft_ms"], req["first_ms"] - req["arrival_ms"])
    for i, (times, counts) in enumerate(res.emissions):
        assert times[0] == req["first_ms"][i] and times[-1] == req["finish_ms"][i]
        assert counts[0] == 1 and (counts >= 1).all() and counts.sum() == OUTPUT_LEN[i]
        assert counts.max() <= k + 1
        # The inter-token latencies of a request add up to its decode time.
        assert np.diff(times).sum() == pytest.approx(req["finish_ms"][i] - req["first_ms"][i])
        assert len(res.tokens[i]) == OUTPUT_LEN[i]
        assert all(0 <= t < 256 for t in res.tokens[i])
    out = req["output_len"].to_numpy()
    tpot = (req["finish_ms"] - req["first_ms"]) / np.maximum(out - 1, 1)
    np.testing.assert_allclose(req["tpot_ms"][out > 1], tpot[out > 1])
    assert np.isnan(req["tpot_ms"][out == 1]).all()
    steps = res.steps
    assert steps["decoding"].max() <= seqs
    assert (steps["decoding"] * (k + 1) + steps["prefill_tokens"] <= budget).all()
    assert (steps["step_ms"] > 0).all() and steps["end_ms"].is_monotonic_increasing
    assert steps["prefill_tokens"].sum() == 24 * len(ARRIVAL_MS)
    # The simulator's summary reads the measurement: every ITL of every request is there.
    run = res.run_result()
    assert run.itl_chunk_ms[0].size == sum(len(t) - 1 for t, _ in res.emissions)
    assert run.itl_token_ms[1].sum() == (OUTPUT_LEN - 1).sum()
    stats = serving.summarise(run, slo_ttft_ms=1e9, slo_tpot_ms=1e9)
    assert stats["slo_attainment"] == 1.0 and np.isfinite(stats["throughput_tok_s"])
    if k:
        assert res.accepted_hist.sum() == req["spec_rounds"].sum() > 0
    else:
        assert req["first_position_acceptance"].isna().all()


@pytest.mark.parametrize("k", [0, 3])
def test_greedy_serving_emits_the_targets_own_greedy_output(pair, k):
    target, draft = pair
    prompts = _prompts(len(ARRIVAL_MS), 24)
    res = sb.serve(
        target,
        draft,
        ARRIVAL_MS,
        prompts,
        OUTPUT_LEN,
        k=k,
        max_num_seqs=3,
        max_num_batched_tokens=3 * (k + 1) + 20,
    )
    for i, prompt in enumerate(prompts):
        ids = torch.from_numpy(prompt.astype(np.int64))[None]
        ref, _ = autoregressive_generate(target, ids, int(OUTPUT_LEN[i]))
        assert res.tokens[i] == ref[0].tolist(), f"request {i}"


def test_the_loop_serves_the_requests_the_simulator_simulates():
    prompt, output = serving.Lengths(128.0), serving.Lengths(48.0, "lognormal", 0.4)
    arrival, p_len, o_len = sb.request_plan(12.5, 40, 7, prompt, output)
    model = serving.StepModel(
        decode_ms=np.full(9, 2.0),
        prefill_ms_per_token=0.05,
        kv_blocks=10**6,
        lookahead=0,
        k=0,
        conditional=np.zeros(0),
    )
    sim = serving.run(model, serving.Load(requests=40, rate=12.5, seed=7), prompt, output)
    np.testing.assert_array_equal(sim.requests["arrival_ms"], arrival)
    np.testing.assert_array_equal(sim.requests["output_len"], o_len)
    np.testing.assert_array_equal(sim.requests["prompt_len"], p_len)


def test_acceptance_spread_is_net_of_binomial_noise():
    rng = np.random.default_rng(0)
    n = np.full(400, 20)
    same = rng.binomial(n, 0.6) / n
    df = pd.DataFrame({"first_position_acceptance": same, "spec_rounds": n})
    # The raw standard deviation is the binomial noise, ~0.11; net of it, next to nothing.
    assert same.std() > 0.1 and sb.acceptance_spread(df) < 0.05
    levels = rng.choice([0.3, 0.9], 400)
    mixed = rng.binomial(n, levels) / n
    df = pd.DataFrame({"first_position_acceptance": mixed, "spec_rounds": n})
    assert sb.acceptance_spread(df) == pytest.approx(0.3, abs=0.03)


def test_rounds_are_concatenated_back_to_back():
    def run(arrival, e2e):
        req = pd.DataFrame(
            {
                "arrival_ms": arrival,
                "e2e_ms": e2e,
                "ttft_ms": 1.0,
                "tpot_ms": 1.0,
                "output_len": 10,
            }
        )
        return serving.RunResult(
            requests=req,
            queue=pd.DataFrame({"time_ms": [1.0], "waiting": [0]}),
            itl_chunk_ms=(np.ones(3), np.ones(3)),
            itl_token_ms=(np.ones(3), np.ones(3)),
            preemptions=0,
            steps=5,
        )

    both = sb.concat_runs([run([10.0, 20.0], [5.0, 80.0]), run([5.0], [45.0])])
    np.testing.assert_array_equal(both.requests["arrival_ms"], [10.0, 20.0, 105.0])
    assert both.steps == 10 and both.itl_chunk_ms[0].size == 6
    stats = serving.summarise(both, slo_ttft_ms=10.0, slo_tpot_ms=10.0)
    assert stats["throughput_tok_s"] == pytest.approx(30 / 0.14)


def _check_finite(df: pd.DataFrame) -> None:
    """Predicted and measured values are finite; an error is finite wherever something was
    measured (goodput is 0 where no request met the SLOs, and its error undefined)."""
    for m in sb.METRICS:
        assert np.isfinite(df[f"predicted_{m}"]).all() and np.isfinite(df[f"measured_{m}"]).all()
        measured = df[f"measured_{m}"] > 0
        assert np.isfinite(df.loc[measured, f"error_{m}"]).all()
        assert df.loc[~measured, f"error_{m}"].isna().all()
    for m in sb.HEADLINE:
        assert (df[f"measured_{m}"] > 0).all()


def test_quick_bench_writes_the_issue_columns(pair, tmp_path):
    settings = sb.BenchSettings.quick()
    summary = sb.serve_bench(
        settings,
        tmp_path,
        profile=VALIDATION_DIR / "cpu_profile.json",
        prompts=[np.stack(_prompts(settings.requests, settings.prompt_len))],
        log=lambda _: None,
    )
    df = pd.read_csv(tmp_path / "cpu_serving.csv")
    assert list(df.columns[:4]) == ["rate", "mode", "arm", "k"]
    assert set(ISSUE_COLUMNS) <= set(df.columns)
    assert len(df) == len(settings.rates) * len(settings.temperatures) * 2
    assert set(df["arm"]) == {"baseline", "spec"} and set(df["mode"]) == {"greedy", "sample_t1"}
    _check_finite(df)
    assert (df["requests"] == settings.requests).all()
    assert set(summary["median_abs_error"]) == set(sb.HEADLINE)
    requests = pd.read_csv(tmp_path / "cpu_serving_requests.csv")
    assert len(requests) == len(df) * settings.requests
    steps = pd.read_csv(tmp_path / "cpu_serving_steps.csv")
    assert steps["decoding"].max() <= settings.max_num_seqs
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "cpu_serving.csv",
        "cpu_serving_requests.csv",
        "cpu_serving_steps.csv",
        "cpu_serving_summary.json",
    ]


def test_a_failure_after_the_measurement_leaves_the_committed_files_whole(
    pair, tmp_path, monkeypatch
):
    """A run that fails once the serving is measured (here the simulation) keeps every
    file of the previous run, and keeps the new measurement beside them."""
    for name in ("cpu_serving.csv", "cpu_serving_requests.csv", "cpu_serving_summary.json"):
        (tmp_path / name).write_text(f"previous {name}\n")

    def refuse(*args, **kwargs):
        raise RuntimeError("the simulation refused")

    monkeypatch.setattr(sb, "simulate_runs", refuse)
    settings = sb.BenchSettings.quick()
    lines = []
    with pytest.raises(RuntimeError, match="refused"):
        sb.serve_bench(
            settings,
            tmp_path,
            profile=VALIDATION_DIR / "cpu_profile.json",
            prompts=[np.stack(_prompts(settings.requests, settings.prompt_len))],
            log=lines.append,
        )
    for name in ("cpu_serving.csv", "cpu_serving_requests.csv", "cpu_serving_summary.json"):
        assert (tmp_path / name).read_text() == f"previous {name}\n"
    kept = tmp_path / ".cpu_serving_new" / "cpu_serving_requests.csv"
    assert len(pd.read_csv(kept)) == len(settings.rates) * len(settings.temperatures) * 2 * (
        settings.requests
    )
    assert "files are unchanged" in lines[-1] and str(kept.parent) in lines[-1]


def test_committed_serving_comparison_has_the_columns_and_finite_values():
    df = pd.read_csv(VALIDATION_DIR / "cpu_serving.csv")
    assert set(ISSUE_COLUMNS) <= set(df.columns)
    _check_finite(df)
    assert df["rate"].nunique() >= 3
    assert set(df["arm"]) == {"baseline", "spec"} and set(df["mode"]) == {"greedy", "sample_t1"}
    assert len(df) == df["rate"].nunique() * 4
    for m in sb.METRICS:
        ok = df[f"measured_{m}"] > 0
        np.testing.assert_allclose(
            df.loc[ok, f"error_{m}"],
            df.loc[ok, f"predicted_{m}"] / df.loc[ok, f"measured_{m}"] - 1,
            rtol=1e-4,
            atol=1e-4,
        )
    summary = json.loads((VALIDATION_DIR / "cpu_serving_summary.json").read_text("utf-8"))
    for m, value in summary["median_abs_error"].items():
        assert value == pytest.approx(df[f"error_{m}"].abs().median(), abs=1e-3)


def test_committed_predictions_are_what_the_simulator_gives_from_the_committed_profile():
    """The simulation half of the committed comparison, again from its inputs (the measured
    acceptance in the CSV, the committed profile): it still holds for this simulator."""
    df = pd.read_csv(VALIDATION_DIR / "cpu_serving.csv")
    summary = json.loads((VALIDATION_DIR / "cpu_serving_summary.json").read_text("utf-8"))
    settings = sb.BenchSettings(
        **{
            key: tuple(value) if isinstance(value, list) else value
            for key, value in summary["settings"].items()
        }
    )
    cal = Calibration.from_profiles([load_profile(VALIDATION_DIR / "cpu_serving_profile.json")])
    temps = {"greedy": 0.0, "sample_t1": 1.0}
    for r in df.itertuples(index=False):
        positions = np.array([float(x) for x in r.acceptance_per_position.split(";")])
        pred, _ = sb.simulate_row(
            settings,
            cal,
            r.rate,
            temps[r.mode],
            r.arm,
            positions,
            r.acceptance_spread,
            r.rounds,
        )
        for m in sb.METRICS:
            assert pred[m] == pytest.approx(getattr(r, f"predicted_{m}"), rel=1e-3), (r, m)


@pytest.mark.parametrize(
    ("argv", "flag", "words"),
    [
        (["serve-bench", "--rates", "x"], "--rates", "not numbers"),
        (["serve-bench", "--rates", "0,5"], "--rates", "above 0"),
        (["serve-bench", "--k", "0"], "--k", "outside 1..8"),
        (["serve-bench", "--output", "poisson:3"], "--output", "fixed:MEAN"),
        (["serve-bench", "--slo-tpot-ms", "0"], "--slo-tpot-ms", "> 0"),
        (["serve-bench", "--profile", "/nonexistent.json"], "--profile", "not a file"),
    ],
)
def test_serve_bench_flags_are_checked_before_work(argv, flag, words, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert flag in err and words in err


def test_repredict_rewrites_only_the_simulated_half(tmp_path):
    """`serve-bench --repredict` re-runs the simulation against the committed measurement:
    measured columns stay byte for byte, predictions are recomputed (a stale one is
    replaced) and the summary's medians follow the rewritten errors."""
    for name in ("cpu_serving.csv", "cpu_serving_summary.json", "cpu_serving_profile.json"):
        shutil.copy(VALIDATION_DIR / name, tmp_path / name)
    before = pd.read_csv(tmp_path / "cpu_serving.csv")
    stale = before.copy()
    stale.loc[0, "predicted_tpot_p50_ms"] = 999.0
    stale.to_csv(tmp_path / "cpu_serving.csv", index=False)
    summary = sb.repredict(tmp_path, log=lambda *_: None)
    after = pd.read_csv(tmp_path / "cpu_serving.csv")
    measured = [c for c in before.columns if c.startswith("measured_")]
    pd.testing.assert_frame_equal(after[measured], before[measured])
    assert after.loc[0, "predicted_tpot_p50_ms"] == pytest.approx(
        before.loc[0, "predicted_tpot_p50_ms"], rel=1e-3
    )
    for m, value in summary["median_abs_error"].items():
        assert value == pytest.approx(after[f"error_{m}"].abs().median(), abs=1e-4)
