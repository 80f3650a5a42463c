"""The deployment search: spec refusals, stage one against a brute force, the bisection
against a direct sweep of rates, and the Ray path (a real local Ray, started once) with a
worker that dies, a Ctrl-C and an infeasible space."""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import shlex
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simulator.cli.main import main
from simulator.errors import InputError
from simulator.inputs import scenarios
from simulator.search import parse_spec, run_search
from simulator.search import table as search_table
from simulator.search.bisect import max_rate, step_ratio, trickle
from simulator.search.candidates import expand
from simulator.search.cli import write_table
from simulator.search.confirm import confirm, probe_fn, step_model_of
from simulator.search.driver import _job, dominated
from simulator.search.runners import InlineRunner, RayRunner
from simulator.search.screen import screen
from simulator.serving import engine as serving

LLAMA_EAGLE3 = {"method": "eagle3", "acceptance_rate": 0.75}
LLAMA_DRAFT = {"method": "draft_model", "draft": "llama-3.2-1b", "acceptance_rate": 0.65}
QWEN_DRAFT = {"method": "draft_model", "draft": "qwen2.5-0.5b", "acceptance_rate": 0.6}


def spec_dict(**over) -> dict:
    """About 50 candidates of Llama-3.1-8B (42: 3 GPUs, TP 1 and 2, 4 methods, K 2 or per
    batch), a Qwen draft that cannot run beside it, and a TTFT-bound SLO at which the
    fast GPUs' P99 TPOT falls below a slow GPU's floor, so stage one has all three reasons
    to drop a candidate."""
    d = {
        "models": ["llama-3.1-8b"],
        "traffic": {
            "rate": 10,
            "prompt": {"mean": 2048, "kind": "lognormal", "spread": 0.4},
            "output": {"mean": 128, "kind": "lognormal", "spread": 0.4},
        },
        "slo": {"p99_ttft_ms": 1000, "p99_tpot_ms": 22},
        "candidates": {
            "gpus": ["l40s", "a100-80gb", "h100-sxm"],
            "tp": [1, 2],
            "methods": ["none", LLAMA_EAGLE3, LLAMA_DRAFT, QWEN_DRAFT],
            "k": [2, "per batch"],
            "max_num_seqs": [16],
        },
        "simulation": {"requests": 80, "window": 2},
    }
    for key, value in over.items():
        d[key] = {**d.get(key, {}), **value} if isinstance(value, dict) else value
    return d


@functools.cache
def _confirm_cached(job):
    return confirm(job)


@pytest.fixture(scope="module")
def space():
    """The search over `spec_dict` and the brute force: every runnable candidate's arms
    confirmed, no pruning, no ordering, no window. Both use `confirm`, which is
    deterministic (`test_confirm_is_deterministic`), so each job is simulated once."""
    spec = parse_spec(spec_dict())
    searched = run_search(spec, runner=InlineRunner(_confirm_cached))
    rows = []
    for s in screen(spec, expand(spec)):
        if s.dropped.startswith("cannot run"):
            continue
        spec_arm = _confirm_cached(_job(spec, s.spec))
        base_arm = _confirm_cached(_job(spec, s.base))
        rows.append(search_table.row(spec, s, spec_arm, base_arm))
    return spec, searched, search_table.finish(rows)


# --- the specification -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"candidates": {"gpu": ["h100-sxm"]}}, "candidates.gpu", "did you mean 'gpus'"),
        ({"candidates": {"gpus": []}}, "candidates.gpus", "empty"),
        ({"candidates": {"gpus": ["h100"]}}, "candidates.gpus", "not known"),
        ({"traffic": {"rate": {"min": 20, "max": 5}}}, "traffic.rate", "empty range"),
        ({"slo": {"p99_tpot": 50}}, "slo.p99_tpot", "did you mean 'p99_tpot_ms'"),
        ({"candidates": {"k": [0]}}, "candidates.k", "outside 1..16"),
        (
            {"candidates": {"methods": [{"method": "eagle3"}]}},
            "candidates.methods[0]",
            "exactly one",
        ),
        ({"simulation": {"requests": 10}}, "simulation.requests", "outside 50"),
        ({"prices": {"h100-sxm": -1}}, "prices.h100-sxm", "outside"),
        ({"traffic": {"prompt": {"mean": 0}}}, "traffic.prompt.mean", "outside"),
    ],
)
def test_spec_refuses_naming_the_field(change, field, words):
    with pytest.raises(InputError) as err:
        parse_spec(spec_dict(**change))
    assert err.value.field == field
    assert words in str(err.value)


def test_engine_passes_through_only_when_the_scenarios_know_it():
    spec = parse_spec(spec_dict(candidates={"engines": ["vllm"]}))
    row = expand(spec)[0].row
    assert ("engine" in row) == ("engine" in scenarios.INPUT_COLUMNS)
    if "engine" not in scenarios.INPUT_COLUMNS:
        with pytest.raises(InputError, match="needs the scenario column 'engine'"):
            parse_spec(spec_dict(candidates={"engines": ["sglang"]}))


def test_cli_refuses_a_bad_spec_with_status_2_and_writes_nothing(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("models: [llama-3.1-8b]\ntraffic: {rate: 1, prompt: 1, output: 1}\n")
    out = tmp_path / "r.csv"
    assert main(["search", "--spec", str(bad), "--out", str(out)]) == 2
    assert "field 'slo': is required" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == [bad]


# --- stage one against the brute force ---------------------------------------------------


def test_search_optimum_equals_the_brute_force(space):
    _, searched, brute = space
    assert len(brute) >= 25
    best = searched.optimum
    brute_best = brute[brute["optimum"]].iloc[0]
    assert best["id"] == brute_best["id"]
    assert best["cost_per_mtok_usd"] == brute_best["cost_per_mtok_usd"]


def test_cost_per_mtok_is_at_the_specs_demand_on_the_whole_replicas_it_needs(space):
    """Issue 34, smaller defects: $/1M was each replica's at its own max rate, as if the
    demand filled every replica it buys. At the spec's 10 requests/s it is the replicas'
    hourly cost over the demand's tokens, never below the max-rate figure."""
    spec, searched, _ = space
    t = searched.table
    ok = t[(t["max_rate_rps"] > 0) & (t["status"] == "ok")]
    assert len(ok) >= 5
    demand_tokens_h = spec.traffic.rate_max * spec.traffic.output.mean * 3600
    assert np.allclose(ok["cost_per_mtok_usd"], ok["hourly_usd"] * 1e6 / demand_tokens_h)
    assert (ok["cost_per_mtok_usd"] >= ok["cost_per_mtok_at_max_rate_usd"] * (1 - 1e-12)).all()
    part_filled = ok["replicas"] * ok["max_rate_rps"] > spec.traffic.rate_max * 1.01
    assert (
        ok.loc[part_filled, "cost_per_mtok_usd"]
        > ok.loc[part_filled, "cost_per_mtok_at_max_rate_usd"]
    ).all()
    assert part_filled.any()


def test_stage_one_never_drops_a_configuration_on_the_brute_force_fronts(space):
    _, searched, brute = space
    reasons = {why.split(":")[0].split(" by ")[0] for _, _, why in searched.dropped}
    # Not vacuous: stage one dropped candidates for each of its reasons here.
    assert {"cannot run", "misses the TPOT SLO at any rate", "dominated"} <= reasons
    confirmed = set(searched.table["id"])
    for front in ("on_cost_front", "on_throughput_front"):
        on_front = set(brute.loc[brute[front], "id"])
        assert on_front <= confirmed
        assert on_front == set(searched.table.loc[searched.table[front], "id"])


def test_dominated_needs_every_bound_beaten():
    spec = parse_spec(spec_dict())
    s = next(x for x in screen(spec, expand(spec)) if not x.dropped)
    beat = {
        "id": 99,
        "max_rate_rps": 1.0,
        "status": "ok",
        "cost_per_mtok_usd": s.cost_lb / 2,
        "tpot_p99_ms": s.spec.tpot_floor_ms / 2,
        "tok_s_per_gpu": s.tok_s_gpu_ub * 2,
        "tok_s_per_user": s.tok_s_user_ub * 2,
    }
    assert dominated(s, [beat]) is beat
    for key in ("cost_per_mtok_usd", "tpot_p99_ms", "tok_s_per_gpu", "tok_s_per_user"):
        worse = {**beat, key: beat[key] * 8 if "ms" in key or "usd" in key else beat[key] / 8}
        assert dominated(s, [worse]) is None


def test_the_floor_and_ceiling_are_what_the_simulation_prices():
    """The proof behind stage one: no step a decoding request takes is cheaper per token
    than the floor (the step table never dips below its batch-1 step), and the bisection
    never probes above the ceiling."""
    spec = parse_spec(spec_dict())
    kept = [s for s in screen(spec, expand(spec)) if not s.dropped]
    for s in kept[::4]:
        model = step_model_of(s.spec)
        tables = model.models.items() if hasattr(model, "models") else [(model.k, model)]
        per_token = min(float(m.decode_ms[1:].min()) / (k + 1) for k, m in tables)
        assert per_token >= s.spec.tpot_floor_ms * (1 - 1e-12)


def test_max_gpus_and_goodput():
    spec = parse_spec(
        spec_dict(
            slo={"p99_ttft_ms": None, "p99_tpot_ms": None, "goodput": None},
            candidates={"gpus": ["h100-sxm"], "methods": ["none"], "max_gpus": 3},
        )
        | {"slo": {"goodput": {"ttft_ms": 1000, "tpot_ms": 22, "fraction": 0.9}}}
    )
    spec = dataclasses.replace(spec, traffic=dataclasses.replace(spec.traffic, rate_max=20.0))
    result = run_search(spec)
    # TP1's ceiling is 8.9 requests/s (3 replicas, 3 GPUs), TP2's 12.1 (2 replicas, 4 GPUs).
    assert [why for _, _, why in result.dropped] == [
        "needs at least 4 GPUs for the demand, above max_gpus"
    ]
    assert len(result.table) == 1 and result.optimum is not None
    assert spec.slo.meets({"refused": 0, "slo_attainment": 0.9}, 100)
    assert not spec.slo.meets({"refused": 0, "slo_attainment": 0.89}, 100)


# --- stage two: the bisection ------------------------------------------------------------


def test_bisection_within_one_step_of_a_direct_sweep():
    spec = parse_spec(spec_dict())
    s = next(x for x in screen(spec, expand(spec)) if x.candidate.row["gpu"] == "h100-sxm")
    job = _job(spec, s.spec)
    probe = probe_fn(job, step_model_of(s.spec))

    def meets(summary):
        return spec.slo.meets(summary, job.requests)

    ceiling = s.spec.ceiling_rps
    found = max_rate(probe, meets, ceiling, iterations=10)
    # A direct sweep: 60 rates evenly spaced in log between the trickle and the ceiling.
    grid = np.geomspace(trickle(ceiling), ceiling, 60)
    passing = [r for r in grid if meets(probe(r))]
    swept = max(passing)
    step = max(grid[1] / grid[0], step_ratio(ceiling, 10))
    assert found.rate > 0
    assert abs(math.log(found.rate / swept)) <= math.log(step) + 1e-9
    assert found.lo <= found.rate < found.hi <= found.lo * step_ratio(ceiling, 10) * (1 + 1e-9)


def test_confirm_is_deterministic():
    spec = parse_spec(spec_dict())
    s = next(x for x in screen(spec, expand(spec)) if x.candidate.row["method"] == "eagle3")
    a, b = confirm(_job(spec, s.spec)), confirm(_job(spec, s.spec))
    assert (a.max_rate_rps, a.summary) == (b.max_rate_rps, b.summary)
    assert a.max_rate_rps <= s.spec.ceiling_rps


def test_infeasible_space_names_the_closest():
    spec = parse_spec(
        spec_dict(
            slo={"p99_tpot_ms": 5},
            candidates={"gpus": ["h100-sxm"], "tp": [1], "methods": ["none", LLAMA_EAGLE3]},
            # Spread wide enough that EAGLE-3's P99 misses 5 ms (at its default, 0.03, it meets).
            simulation={"acceptance_spread": 0.1},
        )
    )
    result = run_search(spec)
    assert result.optimum is None
    assert result.message.startswith("no configuration meets a P99 TPOT of 5 ms; the closest is ")
    assert "h100-sxm" in result.message and "P99 TPOT" in result.message


def test_write_leaves_nothing_half_written(tmp_path, monkeypatch):
    out = tmp_path / "r.csv"

    def broken(self, path, **kw):
        Path(path).write_text("id,half")
        raise OSError("disk full")

    monkeypatch.setattr(pd.DataFrame, "to_csv", broken)
    with pytest.raises(OSError):
        write_table(pd.DataFrame({"id": [1]}), str(out))
    assert list(tmp_path.iterdir()) == []


# --- the Ray path ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    package = str(Path(__file__).resolve().parents[2])
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        runtime_env={"env_vars": {"PYTHONPATH": package}},
    )
    yield ray
    ray.shutdown()


def small_spec():
    return parse_spec(
        spec_dict(
            candidates={"gpus": ["h100-sxm"], "methods": ["none", LLAMA_EAGLE3], "k": [2, 4]},
        )
    )


_MARKER = {"path": ""}


def _crash_once(job):
    """A confirming task whose first run kills its worker process (pickled by value, with
    the marker's path, so the worker needs no import of this test module)."""
    marker = _MARKER["path"]
    if not os.path.exists(marker):
        Path(marker).write_text("died")
        os._exit(1)
    return confirm(job)


def test_ray_matches_the_in_process_search(ray_local):
    spec = small_spec()
    streamed = []
    on_ray = run_search(spec, runner=RayRunner(), on_result=lambda r, d, t: streamed.append(d))
    here = run_search(spec)
    assert streamed == list(range(1, len(on_ray.table) + 1))
    pd.testing.assert_frame_equal(on_ray.table, here.table)


def test_a_worker_that_dies_is_retried(ray_local, tmp_path):
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(__import__(__name__))
    marker = tmp_path / "crashed"
    _MARKER["path"] = str(marker)
    spec = parse_spec(spec_dict(candidates={"gpus": ["h100-sxm"], "tp": [1], "methods": ["none"]}))
    runner = RayRunner(fn=_crash_once)
    result = run_search(spec, runner=runner)
    assert marker.read_text() == "died"
    expected = run_search(spec)
    pd.testing.assert_frame_equal(result.table, expected.table)
    assert (result.table["status"] == "ok").all()


def test_ctrl_c_keeps_what_finished(ray_local, tmp_path, monkeypatch):
    from simulator.search import cli

    spec_file = tmp_path / "s.yaml"
    import yaml

    spec_file.write_text(yaml.safe_dump(spec_dict(candidates={"gpus": ["h100-sxm"]})))
    out = tmp_path / "r.parquet"
    lines = []

    def interrupt(row, done, total):
        lines.append(done)
        if done == 2:
            raise KeyboardInterrupt
        return ""

    monkeypatch.setattr(cli, "_line", interrupt)
    assert main(["search", "--spec", str(spec_file), "--out", str(out)]) == 130
    kept = pd.read_parquet(out)
    assert len(kept) == 2 and lines == [1, 2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.parquet", "s.yaml"]
    assert serving.MAX_REQUESTS  # the simulator stays importable after the cancel


def _paths(node, prefix=()):
    """Every (path, value) of a nested spec: dict keys and list indices."""
    yield prefix, node
    items = (
        node.items()
        if isinstance(node, dict)
        else enumerate(node)
        if isinstance(node, list)
        else ()
    )
    for key, child in items:
        yield from _paths(child, (*prefix, key))


def _replaced(node, path, value):
    if not path:
        return value
    copy = dict(node) if isinstance(node, dict) else list(node)
    copy[path[0]] = _replaced(node[path[0]], path[1:], value)
    return copy


@pytest.mark.parametrize("junk", [None, "x", -1, 0, 1e400, True, [], {}, [[]], "per batch"])
def test_any_junk_cell_is_refused_cleanly_or_accepted(junk):
    """Every field of a valid spec replaced by junk: a clean `InputError` or a valid spec,
    never another exception."""
    base = spec_dict(prices={"h100-sxm": 2.5})
    for path, _ in _paths(base):
        if not path:
            continue
        try:
            parse_spec(_replaced(base, path, junk))
        except InputError as exc:
            assert exc.field or "spec" in str(exc), (path, junk, str(exc))


def test_a_job_that_raises_becomes_a_failed_row_not_a_crash():
    def broken(job):
        raise RuntimeError("boom")

    spec = parse_spec(spec_dict(candidates={"gpus": ["h100-sxm"], "tp": [1], "methods": ["none"]}))
    result = run_search(spec, runner=InlineRunner(broken))
    assert list(result.table["status"]) == ["failed: RuntimeError: boom"]
    assert result.optimum is None


def test_search_help_imports_neither_pandas_nor_ray():
    import subprocess
    import sys

    code = (
        "import sys, contextlib, io\n"
        "from simulator.cli.main import main\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['search', '--help'])\n"
        "print(sorted(m for m in ('pandas', 'ray', 'numpy') if m in sys.modules))\n"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_each_row_carries_its_launch_command(space):
    _, searched, _ = space
    t = searched.table
    assert t["launch_command"].str.startswith("vllm serve meta-llama/Llama-3.1-8B-Instruct").all()
    for row in t.itertuples():
        assert f"--tensor-parallel-size {row.tp}" in row.launch_command
        ks = {int(part.split(":")[1]) for part in row.k_schedule.split(";") if part}
        if len(ks) > 1:
            assert "num_speculative_tokens_per_batch_size" in row.launch_command
        if row.method == "none":
            assert "--speculative-config" not in row.launch_command


def test_keep_optimum_confirms_fewer_and_finds_the_same_optimum(space):
    _, searched, brute = space
    spec = parse_spec(spec_dict(simulation={"keep": "optimum"}))
    cheap = run_search(spec, runner=InlineRunner(_confirm_cached))
    assert len(cheap.table) < len(searched.table)
    assert cheap.optimum["id"] == brute[brute["optimum"]].iloc[0]["id"]
    assert any("dominated" in why for _, _, why in cheap.dropped)


def test_the_acceptance_spread_defaults_to_the_methods_as_serve_and_the_dashboard():
    """Issue 27: one acceptance-spread default (`simulator.serving.spread`), not the search's 0.1."""
    from simulator.serving.spread import default_acceptance_spread

    for given, expect in ((None, None), (0.2, 0.2)):
        sim = {"requests": 80, "window": 2}
        if given is not None:
            sim["acceptance_spread"] = given
        spec = parse_spec(spec_dict(simulation=sim))
        arms = [s.spec for s in screen(spec, expand(spec)) if s.spec is not None]
        for arm in arms[:6]:
            method = str(dict(arm.scenario).get("method", "none"))
            want = default_acceptance_spread(method) if expect is None else expect
            assert _job(spec, arm).acceptance_spread == want, method


def test_a_trtllm_launch_caps_the_kv_pool_at_the_capacity_the_search_sized():
    """TensorRT-LLM's memory fraction is of the memory left after the weights, so its
    launch carries the KV capacity the candidate was simulated with as
    kv_cache_config.max_tokens (simulator.planning.launch.trtllm_command)."""
    from simulator import predict
    from simulator.model.defaults import DEFAULTS
    from simulator.serving.engine import arm_scenario

    spec = parse_spec(
        spec_dict(candidates={"gpus": ["h100-sxm"], "tp": [1], "engines": ["trtllm"], "k": [2]})
    )
    c = next(c for c in expand(spec) if c.row["method"] == "eagle3")
    command = search_table.launch_command(c, (), spec)
    defaults = dataclasses.replace(DEFAULTS, max_num_seqs=c.max_num_seqs)
    want = predict(pd.DataFrame([arm_scenario(c.row, True)]), defaults=defaults)
    tokens = int(want["kv_capacity_tokens_spec"].iloc[0])
    assert tokens > 0 and f"max_tokens: {tokens}" in command


# --- layouts -----------------------------------------------------------------------------


def _moe_spec(**candidates) -> dict:
    return spec_dict(
        models=["deepseek-v3", "llama-3.1-8b"],
        candidates={
            "gpus": ["h200"],
            "tp": [8],
            "engines": ["vllm", "sglang", "trtllm"],
            "methods": ["none"],
            "k": [2],
            **candidates,
        },
    )


def test_search_spans_layouts_for_an_moe_target_and_not_for_a_dense_one():
    """Per GPU count and engine, the MoE target gets attention DP 1, 2, 4, 8 with EP 1 or 8
    (TensorRT-LLM, whose attention DP spans every GPU: DP 1 or 8); the dense target TP8
    alone, its row giving only num_gpus as before layouts."""
    if "engine" not in scenarios.INPUT_COLUMNS:
        pytest.skip("engines need the scenario column 'engine'")
    cands = expand(parse_spec(_moe_spec()))
    seen: dict[tuple[str, str], list[str]] = {}
    for c in cands:
        seen.setdefault((c.row["target"], c.engine), []).append(c.layout.describe())
    assert seen[("deepseek-v3", "vllm")] == [
        "TP8",
        "TP8 EP8",
        "TP4 DP2",
        "TP4 DP2 EP8",
        "TP2 DP4",
        "TP2 DP4 EP8",
        "TP1 DP8",
        "TP1 DP8 EP8",
    ]
    assert seen[("deepseek-v3", "trtllm")] == ["TP8", "TP8 EP8", "TP1 DP8", "TP1 DP8 EP8"]
    for engine in ("vllm", "sglang", "trtllm"):
        assert seen[("llama-3.1-8b", engine)] == ["TP8"]
    dense = next(c for c in cands if c.row["target"] == "llama-3.1-8b")
    assert "tp_size" not in dense.row and dense.row["num_gpus"] == 8
    moe = [c for c in cands if c.row["target"] == "deepseek-v3"]
    assert all(c.row["tp_size"] * c.row["attention_dp_size"] == 8 for c in moe)
    assert all(c.row["moe_tp_size"] * c.row["moe_ep_size"] == 8 for c in moe)


@pytest.mark.parametrize(
    ("layouts", "field", "words"),
    [
        ([{"tp_size": 8, "ep_size": 8}], "candidates.layouts[0].ep_size", "moe_ep_size"),
        ([{"attention_dp_size": 8}], "candidates.layouts[0].tp_size", "is required"),
        (
            [{"tp_size": 8}, {"tp_size": 8, "moe_ep_size": 3}],
            "candidates.layouts[1].moe_ep_size",
            "does not divide",
        ),
        (
            [{"tp_size": 8, "moe_ep_size": 4, "moe_tp_size": 4}],
            "candidates.layouts[0].moe_tp_size",
            "2 would be",
        ),
        ([{"tp_size": 0}], "candidates.layouts[0].tp_size", "outside"),
        (["TP8 EP8"], "candidates.layouts[0]", "must be a mapping"),
        ([], "candidates.layouts", "is empty"),
    ],
)
def test_a_pinned_bad_layout_is_refused_naming_the_field(layouts, field, words):
    with pytest.raises(InputError) as err:
        parse_spec(spec_dict(candidates={"tp": None, "layouts": layouts}))
    assert err.value.field == field
    assert words in str(err.value)


def test_layouts_and_tp_are_one_or_the_other():
    with pytest.raises(InputError) as err:
        parse_spec(spec_dict(candidates={"layouts": [{"tp_size": 2}]}))
    assert err.value.field == "candidates.layouts"
    with pytest.raises(InputError) as err:
        parse_spec(spec_dict(candidates={"tp": None}))
    assert err.value.field == "candidates.tp"


def test_stage_one_drops_pinned_layouts_that_cannot_run_and_says_why():
    """A dense target has no experts to spread; an MoE target on a GPU without kernel
    tables is priced on the roofline, which prices every layout as TP (so only TP stays)."""
    dense = parse_spec(
        spec_dict(
            candidates={
                "gpus": ["h100-sxm"],
                "tp": None,
                "layouts": [{"tp_size": 2}, {"tp_size": 2, "moe_ep_size": 2}],
                "methods": ["none"],
            }
        )
    )
    kept, dropped = screen(dense, expand(dense))
    assert kept.dropped == ""
    assert dropped.dropped.startswith("cannot run") and "has none" in dropped.dropped
    roofline = parse_spec(
        spec_dict(
            models=["deepseek-v3"],
            prices={"mi300x": 2.0},
            candidates={
                "gpus": ["mi300x"],
                "tp": None,
                "layouts": [{"tp_size": 8}, {"tp_size": 8, "moe_ep_size": 8}],
                "methods": ["none"],
            },
        )
    )
    tp, ep = screen(roofline, expand(roofline))
    assert not tp.dropped.startswith("cannot run: layout")
    assert ep.dropped.startswith("cannot run: layout TP8 EP8 is priced only from the kernel")


def test_the_winning_row_shows_its_layout_and_launches_it():
    """DeepSeek-V3 pinned to SGLang TP1 DP8 EP8 on H200 (priced from aiconfigurator-core's
    engine): the row names the layout and its command carries --dp, --enable-dp-attention
    and --ep-size."""
    if "engine" not in scenarios.INPUT_COLUMNS:
        pytest.skip("engines need the scenario column 'engine'")
    spec = parse_spec(
        spec_dict(
            models=["deepseek-v3"],
            traffic={"rate": 5, "prompt": {"mean": 1024}, "output": {"mean": 64}},
            slo={"p99_ttft_ms": 5000, "p99_tpot_ms": 200},
            candidates={
                "gpus": ["h200"],
                "tp": None,
                "layouts": [{"tp_size": 1, "attention_dp_size": 8, "moe_ep_size": 8}],
                "engines": ["sglang"],
                "methods": ["none"],
                "max_num_seqs": [32],
            },
            simulation={"requests": 50, "iterations": 3},
        )
    )
    result = run_search(spec, runner=InlineRunner())
    best = result.optimum
    assert best is not None, result.message or result.dropped
    assert best["layout"] == "TP1 DP8 EP8" and best["tp"] == 8 and best["nodes"] == 1
    args = shlex.split(best["launch_command"].splitlines()[-1])
    assert args[args.index("--tp") + 1] == "8"
    assert args[args.index("--dp") + 1] == "8" and "--enable-dp-attention" in args
    assert args[args.index("--ep-size") + 1] == "8"
