"""The measurement loop: statistics, out-of-memory handling, extrapolation in depth, and that
measured latency grows where the work grows."""

from __future__ import annotations

import io
import time
from dataclasses import replace

import numpy as np
import pytest
import torch

from profiler import runner
from profiler.check import extrapolation_errors, summary_lines
from profiler.extrapolate import extrapolate, extrapolate_stats, fit_line
from profiler.inloop import profile_draft_in_loop
from profiler.progress import Bar
from profiler.runner import Grid, PointResult, RunOptions, plan_depths, profile_model
from profiler.timing import MAX_SAMPLES, LatencyStats, measure
from simulator.inputs.catalog import default_models
from simulator.inputs.specs import ModelSpec

CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def one_thread():
    # Two OpenMP threads on a shared 2-core runner spin against other processes and turn a
    # 0.6 ms step into 15 ms; one thread keeps these tests fast and their ratios stable.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


FAST = RunOptions(device=CPU, dtype="fp32", warmup=1, repeats=3, min_time_s=0.0)


def _spec(ident: str, layers: int, hidden: int, *, kv_heads: int = 2, vocab: int = 512):
    heads = max(4, hidden // 32)
    return ModelSpec(
        id=ident,
        name=ident,
        tokenizer="byte",
        total_params=1,
        active_params=1,
        num_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=hidden // heads,
        intermediate_size=4 * hidden,
        vocab_size=vocab,
    )


def test_stats_are_quantiles_of_the_samples():
    s = LatencyStats.from_samples(list(range(1, 101)))
    assert s.repeats == 100
    assert s.median_ms == pytest.approx(50.5)
    assert s.p10_ms == pytest.approx(10.9)
    assert s.p90_ms == pytest.approx(90.1)
    with pytest.raises(ValueError):
        LatencyStats.from_samples([])


def test_measure_honours_repeats_and_min_time():
    calls = []
    samples = measure(lambda: calls.append(1), CPU, warmup=2, repeats=5, min_time_s=0.0)
    assert len(samples) == 5 and len(calls) == 7
    t0 = time.perf_counter()
    samples = measure(lambda: time.sleep(0.002), CPU, warmup=0, repeats=2, min_time_s=0.03)
    assert sum(samples) >= 30.0
    assert len(samples) >= 2
    assert time.perf_counter() - t0 < 5
    assert len(measure(lambda: None, CPU, warmup=0, repeats=1, min_time_s=60.0)) == MAX_SAMPLES


def test_line_fit_recovers_fixed_and_per_layer_cost():
    fixed, per_layer = fit_line([1, 2, 4], [5.0, 8.0, 14.0])
    assert (fixed, per_layer) == pytest.approx((2.0, 3.0))
    med, p10, p90 = extrapolate_stats([1, 2, 4], [(5, 4, 6), (8, 7, 9), (14, 13, 15)], 80)
    assert (med, p10, p90) == pytest.approx((242.0, 241.0, 243.0))
    # Lines that cross beyond the data keep the quantiles ordered.
    med, p10, p90 = extrapolate_stats([1, 2], [(5, 4.9, 6), (6, 6.5, 6.6)], 10)
    assert p10 <= med <= p90
    with pytest.raises(ValueError):
        fit_line([2, 2], [1.0, 1.0])


def test_depth_plan():
    spec = default_models()["llama-3.3-70b"]
    assert plan_depths(spec, replace(FAST, depths=(1, 2, 4))) == (1, 2, 4)
    assert plan_depths(spec, replace(FAST, max_layers=8)) == (1, 2, 4)
    tiny = default_models()["tiny"]
    assert plan_depths(tiny, FAST) == (2,)
    assert plan_depths(tiny, replace(FAST, depths=(4, 8))) == (2,)
    with pytest.raises(ValueError, match="--depths"):
        plan_depths(tiny, replace(FAST, depths=(1, 4)))
    with pytest.raises(ValueError, match="--max-layers"):
        plan_depths(spec, replace(FAST, max_layers=1))
    # 405B in bf16 is 800 GB: more than any host here, so it is cut to depths automatically.
    assert plan_depths(default_models()["llama-3.1-405b"], replace(FAST, dtype="bf16")) == (
        1,
        2,
        4,
    )


def test_extrapolation_of_a_line_is_exact(monkeypatch):
    """With step time fixed + per_layer * depth, the extrapolated rows equal the full model."""
    spec = _spec("line8", 8, 64)

    def fake_point(model, batch, q, context, depth, opts, *, graphs, pool=None):
        t = 2.0 + 3.0 * depth + 0.1 * batch
        return PointResult("ok", LatencyStats(t, 0.9 * t, 1.1 * t, 5), 1000 + 100 * depth)

    monkeypatch.setattr(runner, "run_point", fake_point)
    grid = Grid((1, 4), (1, 3), (16,))
    run = profile_model(spec, grid, FAST, depths=(1, 2, 4), extra_depths=(8,))
    assert run.entry["extrapolated"] is True
    assert run.entry["layers_run"] == [1, 2, 4]
    assert "extrapolated from depths 1, 2, 4" in run.entry["notes"]
    for row in run.rows:
        assert row["extrapolated"] is True
        assert row["median_ms"] == pytest.approx(2.0 + 24.0 + 0.1 * row["batch"])
    table = extrapolation_errors(run)
    assert len(table) == 4
    assert np.abs(table["error_pct"]).max() < 1e-9
    assert "error" in "\n".join(summary_lines(table, spec, (1, 2, 4)))


def test_out_of_memory_is_recorded_and_larger_batches_skipped(monkeypatch):
    attempted = []

    class SmallMemoryCache(runner.KVCache):
        def __init__(self, cfg, batch_size, max_len, **kw):
            if max_len != 8:  # not the 1 x 8 cache that measures KV bytes per token
                attempted.append(batch_size)
            if batch_size >= 4:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1 GiB")
            super().__init__(cfg, batch_size, max_len, **kw)

    monkeypatch.setattr(runner, "KVCache", SmallMemoryCache)
    spec = default_models()["tiny"]
    run = profile_model(spec, Grid((1, 2, 4, 8, 16), (1,), (16, 32)), FAST)
    statuses = [(r["context_len"], r["batch"], r["status"]) for r in run.rows]
    assert statuses == [
        (16, 1, "ok"),
        (16, 2, "ok"),
        (16, 4, "oom"),
        (16, 8, "oom"),
        (16, 16, "oom"),
        (32, 1, "ok"),
        (32, 2, "ok"),
        (32, 4, "oom"),
        (32, 8, "oom"),
        (32, 16, "oom"),
    ]
    # One cache per (batch, context), the untimed warm-up point's first; it serves batch 1.
    assert attempted == [1, 2, 4, 1, 2, 4]
    oom = [r for r in run.rows if r["status"] == "oom"]
    assert all(np.isnan(r["median_ms"]) and r["repeats"] == 0 for r in oom)


def _counting_caches(monkeypatch, too_big: int | None = None) -> list[tuple[int, int, int]]:
    """(layers, batch, max_len) of every cache the runner allocates and fills, the 1 x 8
    probe that measures KV bytes per token left out; a cache of more than `too_big` slots
    runs out of memory."""
    made = []

    class Counted(runner.KVCache):
        def __init__(self, cfg, batch_size, max_len, **kw):
            if too_big is not None and max_len > too_big:
                raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to")
            if max_len != 8:
                made.append((cfg.num_layers, batch_size, max_len))
            super().__init__(cfg, batch_size, max_len, **kw)

    monkeypatch.setattr(runner, "KVCache", Counted)
    return made


def test_one_cache_per_batch_and_context_serves_every_query_length_and_depth(monkeypatch):
    made = _counting_caches(monkeypatch)
    spec = _spec("deep4", 4, 64)
    grid = Grid((1, 4), (1, 3, 5), (16, 32))
    run = profile_model(spec, grid, FAST, depths=(1, 2), extra_depths=(4,))
    # The deepest depth and the longest query, once per (batch, context): not once per
    # point and depth (3 x 3 x 4 = 36 random fills).
    assert made == [(4, 1, 21), (4, 4, 21), (4, 1, 37), (4, 4, 37)]
    assert all(r["status"] == "ok" for r in run.rows) and len(run.rows) == len(grid)
    # Memory is what the point's own cache of context + q slots holds, as before.
    cfg = runner.ArchConfig.from_spec(spec)
    for (batch, q, context), by in run.by_depth.items():
        for depth, result in by.items():
            kv = 2 * depth * batch * (context + q) * cfg.num_kv_heads * cfg.head_dim * 4
            logits = batch * q * cfg.vocab_size * 4
            model_bytes = cfg.num_parameters() * 4
            assert result.peak_bytes == model_bytes + kv + logits


def test_caches_over_the_budget_are_filled_per_point(monkeypatch):
    made = _counting_caches(monkeypatch)
    monkeypatch.setattr(runner, "CACHE_POOL_FRACTION", 0.0)
    grid = Grid((1, 2), (1, 3), (16,))
    profile_model(default_models()["tiny"], grid, FAST)
    # The warm-up point, then every point its own cache of exactly context + q slots.
    assert made == [(2, 1, 17), (2, 1, 17), (2, 2, 17), (2, 1, 19), (2, 2, 19)]


def test_a_point_whose_shared_cache_does_not_fit_gets_its_own(monkeypatch):
    # 16 + 5 slots do not fit, 16 + 1 and 16 + 3 do: those points are measured, only q = 5
    # is out of memory.
    made = _counting_caches(monkeypatch, too_big=20)
    run = profile_model(default_models()["tiny"], Grid((1, 2), (1, 3, 5), (16,)), FAST)
    assert [(r["query_len"], r["batch"], r["status"]) for r in run.rows] == [
        (1, 1, "ok"),
        (1, 2, "ok"),
        (3, 1, "ok"),
        (3, 2, "ok"),
        (5, 1, "oom"),
        (5, 2, "oom"),
    ]
    assert all(max_len in (17, 19) for _, _, max_len in made)


def test_the_cache_pool_is_freed_when_the_context_changes():
    spec = default_models()["tiny"]
    cfg = runner.ArchConfig.from_spec(spec)
    pool = runner.CachePool(cfg, 5, FAST, budget_bytes=1 << 30)
    first = pool.cache(cfg, 2, 1, 16)
    assert pool.cache(cfg, 2, 5, 16).k.data_ptr() == first.k.data_ptr()
    assert set(pool.held) == {2} and pool.fills == 1
    pool.cache(cfg, 2, 3, 32)
    assert pool.context == 32 and pool.fills == 2
    assert pool.held[2].max_len == 37  # the context-16 cache was dropped first
    pool.clear()
    assert not pool.held and pool.held_bytes() == 0


def test_weights_that_do_not_fit_make_every_point_oom(monkeypatch):
    real = runner.DecoderLM

    def no_memory(cfg, *, device=None, **kwargs):
        if str(device) == "meta":  # counting bytes allocates nothing
            return real(cfg, device=device, **kwargs)
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate")

    monkeypatch.setattr(runner, "DecoderLM", no_memory)
    run = profile_model(default_models()["tiny"], Grid((1, 2), (1,), (8,)), FAST)
    assert [r["status"] for r in run.rows] == ["oom", "oom"]
    assert "did not fit" in run.entry["notes"]


def test_other_runtime_errors_are_not_swallowed(monkeypatch):
    class Broken(runner.KVCache):
        def __init__(self, *a, **kw):
            raise RuntimeError("shape mismatch")

    monkeypatch.setattr(runner, "KVCache", Broken)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        profile_model(default_models()["tiny"], Grid((1,), (1,), (8,)), FAST)


@pytest.mark.timing
def test_latency_grows_with_batch_query_length_and_context():
    """Each comparison multiplies the work (32x tokens, 9x tokens, 32x context); measured
    ratios on a busy 2-core runner are 2.5x to 20x, the asserted one is 1.3x."""
    spec = _spec("grow", 2, 512, kv_heads=16, vocab=1024)
    opts = replace(FAST, warmup=2, repeats=5, min_time_s=0.02)
    run = profile_model(spec, Grid((1, 32), (1, 9), (64, 2048)), opts)
    # The fast tail: other jobs on a shared runner add time to whichever point is running.
    t = {(r["batch"], r["query_len"], r["context_len"]): r["p10_ms"] for r in run.rows}
    print({k: round(v, 2) for k, v in t.items()})
    assert all(r["status"] == "ok" for r in run.rows)
    for context in (64, 2048):
        # Batch: 32 sequences against 1.
        assert t[32, 9, context] > 1.3 * t[1, 9, context]
        assert t[32, 1, context] > 1.3 * t[1, 1, context]
        # Query length: verifying 9 tokens per sequence against decoding 1.
        assert t[32, 9, context] > 1.3 * t[32, 1, context]
    for q in (1, 9):
        # Context: attention over 2048 cached tokens against 64.
        assert t[32, q, 2048] > 1.3 * t[32, q, 64]
    # Peak memory grows with the cache.
    peak = {(r["batch"], r["context_len"]): r["peak_bytes"] for r in run.rows}
    assert peak[32, 2048] > peak[32, 64] > peak[1, 64]


@pytest.mark.timing
def test_extrapolation_error_on_a_model_that_runs_whole():
    """An 8-layer model run whole and at depths 1, 2, 4: the line through the shallow runs
    predicts the full-depth step. Depths are timed round-robin and the fastest call of each
    is compared, because other jobs on a shared runner only ever add time, and they add it
    to whichever depth happens to be running."""
    spec = _spec("deep8", 8, 256, kv_heads=4, vocab=512)
    model = runner.DecoderLM(runner.ArchConfig.from_spec(spec), dtype=torch.float32).eval()
    errors = []
    for batch, q in ((16, 1), (16, 5)):
        ids = torch.randint(0, 512, (batch, q))
        caches = {
            d: runner.KVCache(replace(model.cfg, num_layers=d), batch, 256 + q)
            for d in (1, 2, 4, 8)
        }
        best = dict.fromkeys(caches, float("inf"))
        with torch.inference_mode():
            for _ in range(25):
                for d, cache in caches.items():
                    cache.lengths.fill_(256)
                    t0 = time.perf_counter_ns()
                    model(ids, cache, num_layers=d)
                    best[d] = min(best[d], (time.perf_counter_ns() - t0) / 1e6)
        predicted = extrapolate([1, 2, 4], [best[1], best[2], best[4]], 8)
        errors.append(100.0 * (predicted - best[8]) / best[8])
        print(f"B={batch} q={q}: fastest ms {best}, predicted 8 layers {predicted:.2f}")
    print(f"extrapolation error (%): {[round(e, 1) for e in errors]}")
    assert max(abs(e) for e in errors) < 30.0


def test_profile_model_reports_the_extrapolation_error():
    spec = _spec("deep4", 4, 64)
    run = profile_model(spec, Grid((1,), (1,), (16,)), FAST, depths=(1, 2), extra_depths=(4,))
    table = extrapolation_errors(run)
    assert list(table.columns[:5]) == [
        "batch",
        "query_len",
        "context_len",
        "measured_ms",
        "extrapolated_ms",
    ]
    assert len(table) == 1 and np.isfinite(table["error_pct"]).all()


def test_progress_bar_in_a_log_prints_lines_with_eta():
    stream = io.StringIO()
    bar = Bar(stream)
    bar.start(3)
    for i in range(3):
        bar.advance(f"point {i}")
    bar.finish()
    text = stream.getvalue()
    assert "3/3 points" in text and "ETA" in text and "\r" not in text


def test_progress_says_points_and_in_loop_rows_as_the_summary_counts_them():
    stream = io.StringIO()
    bar = Bar(stream)
    bar.start(16, loop_rows=6)
    for i in range(16):
        bar.advance(f"point {i}")
    for context in (16, 32):
        bar.advance_loop(f"draft B=1 L={context}", rows=3)
    bar.finish()
    last = stream.getvalue().splitlines()[-1]
    assert "16/16 points + 6/6 in-loop rows" in last
    assert "18/" not in stream.getvalue() and "/18" not in stream.getvalue()


def test_progress_totals_are_what_a_run_writes():
    """A target and draft profiled with the draft in the loop: the bar's totals equal the
    grid rows and the draft-in-loop rows the summary counts."""
    target, draft = _spec("t", 2, 64), _spec("d", 1, 64)
    grid = Grid((1, 2), (1, 2, 3, 4), (16,))
    bar = Bar(io.StringIO())
    bar.start(len(grid) * 2, loop_rows=runner.loop_rows_planned(grid))
    runs = [profile_model(spec, grid, FAST, progress=bar) for spec in (target, draft)]
    loop_rows, _ = profile_draft_in_loop(target, draft, grid, FAST, target_depth=2)
    assert bar.done == bar.total == sum(len(r.rows) for r in runs) == 16
    assert bar.loop_total == len(loop_rows) == 6


def test_a_log_ends_with_the_counts_reached_when_rows_are_skipped():
    stream = io.StringIO()
    bar = Bar(stream)
    bar.start(2, loop_rows=6)
    bar.advance("point 0")
    bar.advance("point 1")
    bar.advance_loop("draft B=1", rows=3)
    bar.advance_loop("draft B=2 (out of memory)", rows=0)
    bar.finish()
    assert "2/2 points + 3/6 in-loop rows" in stream.getvalue().splitlines()[-1]
