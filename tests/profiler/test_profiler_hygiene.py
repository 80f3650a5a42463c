"""`python -m profiler run`: limits on every flag (checked before torch loads), atomic writes,
points kept on Ctrl-C and on errors, no garbage collection per point, the thread count, the
OpenMP wait policy and a busy-machine warning in the profile. No timing assertions: the machines are shared."""

from __future__ import annotations

import gc
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from profiler import cli, device, measure, runner
from profiler import options as lim
from profiler.timing import MAX_SAMPLES
from simulator.inputs.profile import SCHEMA, load_profile

ROOT = Path(__file__).resolve().parents[2]
QUICK = ["--repeats", "2", "--warmup", "0", "--min-time", "0", "--threads", "1", "--quiet"]
# 2 batches x 2 query lengths (K = 1) x 2 contexts = 8 points.
GRID = ["--batch", "1,2", "--k", "1", "--context", "16,32"]
POINTS = 8
REAL_MEASURE = runner.measure


@pytest.fixture(autouse=True)
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def _run(out: Path, *extra: str, grid=GRID) -> int:
    argv = ["run", "--target", "tiny", "--device", "cpu", "--dtype", "fp32", *grid]
    return cli.main([*argv, "--out", str(out), *QUICK, *extra])


def _stop_at(monkeypatch, point: int, exc: BaseException) -> None:
    """Raise `exc` from the timing function as grid point `point` (1-based) starts; the
    first call times the untimed warm-up point."""
    calls = [0]

    def timed(*args, **kwargs):
        calls[0] += 1
        if calls[0] == point + 1:
            raise exc
        return REAL_MEASURE(*args, **kwargs)

    monkeypatch.setattr(runner, "measure", timed)


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# ------------------------------------------------------------------------ refused flags


def _no_setup(args):
    raise AssertionError("the device was set up before the flags were checked")


@pytest.mark.parametrize(
    ("extra", "flag", "words"),
    [
        (["--min-time", "inf"], "--min-time", "the limit is 60"),
        (["--min-time", "nan"], "--min-time", "0..60"),
        (["--min-time=-1"], "--min-time", "0..60"),
        (["--min-time", "61"], "--min-time", "the limit is 60"),
        (["--threads", "100000"], "--threads", f"above the limit {lim.max_threads()}"),
        (["--threads", "0"], "--threads", ">= 1"),
        (["--threads", "two"], "--threads", "not a whole number"),
        (["--repeats", "1e11"], "--repeats", f"1..{lim.MAX_REPEATS}"),
        (["--repeats", "100000000000"], "--repeats", f"above the limit {lim.MAX_REPEATS}"),
        (["--repeats=-3"], "--repeats", ">= 1"),
        (["--warmup=-1"], "--warmup", ">= 0"),
        (["--warmup", "1001"], "--warmup", f"above the limit {lim.MAX_WARMUP}"),
        (["--batch", "1-100000000000"], "--batch", f"outside 1..{lim.MAX_BATCH}"),
        (["--batch", "0"], "--batch", "outside"),
        (["--batch", "1-4096", "--k", "1-8"], "--batch, --k, --context", "the limit is 10,000"),
        (["--k", "64"], "--k", "outside 1..63"),
        (["--context", "1-100000"], "--context", "more than 10,000 values"),
        (["--context", "1,99999999999"], "--context", f"outside 0..{lim.MAX_CONTEXT}"),
        (["--seed=-1"], "--seed", ">= 0"),
        (["--seed", str(2**32)], "--seed", f"above the limit {2**32 - 1}"),
        (["--max-layers", "0"], "--max-layers", ">= 1"),
        (["--max-layers", "99999999999"], "--max-layers", "above the limit 10000"),
        (["--depths", "1-100000000000"], "--depths", "outside 1..10000"),
        (
            ["--draft", "specplan-byte-draft", "--batch", "1-40", "--k", "63", "--context", "1-4"],
            "--draft",
            "the limit is 10,000",
        ),
    ],
)
def test_absurd_flags_exit_2_naming_the_flag_and_its_limit(extra, flag, words, capsys, monkeypatch):
    monkeypatch.setattr(measure, "_setup", _no_setup)
    with pytest.raises(SystemExit) as info:
        cli.main(["run", "--target", "tiny", "--device", "cpu", *extra])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert flag in err and words in err, err
    assert "Traceback" not in err


def test_help_states_the_limits(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["run", "--help"])
    assert info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for words in (
        f"1..{lim.MAX_BATCH}",
        "1..63",
        f"1..{lim.MAX_REPEATS}",
        "0..60",
        f"1..{lim.max_threads()}",
        "physical cores",
        "partial.json",
    ):
        assert words in text, words


def test_limits_fit_the_timer_and_the_profile_loader():
    from simulator.inputs import profile

    assert lim.MAX_REPEATS == MAX_SAMPLES
    # A target and a draft at the largest grid must still load.
    rows = getattr(profile, "MAX_MEASUREMENTS", 2 * lim.MAX_GRID_POINTS)
    tokens = getattr(profile, "MAX_TOKENS", lim.MAX_CONTEXT)
    assert rows >= max(2 * lim.MAX_GRID_POINTS, lim.MAX_LOOP_ROWS)
    assert tokens >= lim.MAX_CONTEXT


def test_refused_flags_and_help_do_not_import_torch():
    code = textwrap.dedent(
        """
        import sys
        from profiler import cli

        cases = [
            ["run", "--target", "tiny", "--threads", "100000"],
            ["run", "--target", "tiny", "--repeats", "1e11"],
            ["run", "--target", "tiny", "--min-time", "inf"],
            ["run", "--target", "tiny", "--batch", "1-100000000000"],
            ["run", "--target", "nope"],
            ["run", "--target", "specplan-byte-target", "--context", "100000"],
            ["run", "--target", "tiny", "--depths", "1,4"],
            ["run", "--target", "tiny", "--out", "x.txt"],
            ["check-extrapolation", "--target", "tiny", "--warmup", "-1"],
            ["--help"],
            ["run", "--help"],
        ]
        for argv in cases:
            try:
                cli.main(argv)
            except SystemExit as exc:
                assert exc.code in (0, 2), (argv, exc.code)
            else:
                raise AssertionError(f"{argv} was not refused")
            assert "torch" not in sys.modules, argv
        print("no torch")
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "no torch" in done.stdout


# ------------------------------------------------------------- Ctrl-C, errors, atomic writes


def test_ctrl_c_before_the_first_point_keeps_the_existing_file(tmp_path, monkeypatch, capsys):
    out = tmp_path / "tiny.json"
    assert _run(out) == 0
    before = out.read_bytes(), out.with_suffix(".csv").read_bytes()
    _stop_at(monkeypatch, 1, KeyboardInterrupt())
    assert _run(out) == measure.EXIT_INTERRUPTED
    err = capsys.readouterr().err
    assert "before the first point" in err and "left as it was" in err
    assert (out.read_bytes(), out.with_suffix(".csv").read_bytes()) == before
    assert _files(tmp_path) == ["tiny.csv", "tiny.json"]


def test_ctrl_c_before_the_first_point_writes_nothing(tmp_path, monkeypatch, capsys):
    _stop_at(monkeypatch, 1, KeyboardInterrupt())
    assert _run(tmp_path / "tiny.json") == measure.EXIT_INTERRUPTED
    assert "nothing written" in capsys.readouterr().err
    assert _files(tmp_path) == []


def test_ctrl_c_at_point_n_writes_the_points_before_it(tmp_path, monkeypatch, capsys):
    out = tmp_path / "tiny.json"
    _stop_at(monkeypatch, 4, KeyboardInterrupt())
    assert _run(out) == measure.EXIT_INTERRUPTED
    assert "interrupted: wrote" in capsys.readouterr().err
    profile = load_profile(out)
    assert profile.schema == SCHEMA and len(profile.measurements) == 3
    assert len(load_profile(out.with_suffix(".csv")).measurements) == 3
    assert _files(tmp_path) == ["tiny.csv", "tiny.json"]  # no temporary file left
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask  # as a plain write would leave it


@pytest.mark.parametrize("exc", [RuntimeError("kernel failed"), ValueError("bad shape")])
def test_an_error_mid_run_writes_the_points_before_it(exc, tmp_path, monkeypatch, capsys):
    out = tmp_path / "tiny.json"
    _stop_at(monkeypatch, 6, exc)
    assert _run(out) == measure.EXIT_FAILED
    err = capsys.readouterr().err
    assert f"stopped by {type(exc).__name__}: {exc}" in err and "wrote" in err
    assert len(load_profile(out).measurements) == 5
    assert len(load_profile(out.with_suffix(".csv")).measurements) == 5


def test_an_error_in_the_draft_loop_keeps_the_grid_and_the_rows_done(tmp_path, monkeypatch):
    from profiler import inloop

    real = inloop.measure_draft_in_loop
    calls = [0]

    def second_cell_fails(*args, **kwargs):
        calls[0] += 1
        if calls[0] == 2:
            raise RuntimeError("lost the device")
        return real(*args, **kwargs)

    monkeypatch.setattr(inloop, "measure_draft_in_loop", second_cell_fails)
    out = tmp_path / "pair.json"
    argv = ["run", "--target", "specplan-byte-target", "--draft", "specplan-byte-draft"]
    argv += ["--device", "cpu", "--dtype", "fp32", "--batch", "1,2", "--k", "2"]
    argv += ["--context", "16", "--out", str(out), *QUICK]
    assert cli.main(argv) == measure.EXIT_FAILED
    profile = load_profile(out)
    assert len(profile.measurements) == 2 * 2 * 2  # both models' grids
    assert len(profile.draft_in_loop) == 2  # the first (batch, context) cell, K_max = 2


def test_a_run_cut_short_never_replaces_a_file_with_more_points(tmp_path, monkeypatch, capsys):
    out = tmp_path / "tiny.json"
    assert _run(out) == 0
    before = out.read_bytes(), out.with_suffix(".csv").read_bytes()
    _stop_at(monkeypatch, 4, KeyboardInterrupt())
    assert _run(out) == measure.EXIT_INTERRUPTED
    err = capsys.readouterr().err
    assert f"kept {out} as it was ({POINTS} points" in err
    assert (out.read_bytes(), out.with_suffix(".csv").read_bytes()) == before
    partial = tmp_path / "tiny.partial.json"
    assert len(load_profile(partial).measurements) == 3
    assert len(load_profile(partial.with_suffix(".csv")).measurements) == 3
    assert _files(tmp_path) == ["tiny.csv", "tiny.json", "tiny.partial.csv", "tiny.partial.json"]


def test_a_run_cut_short_replaces_a_file_with_fewer_points(tmp_path, monkeypatch):
    out = tmp_path / "tiny.json"
    _stop_at(monkeypatch, 3, KeyboardInterrupt())
    assert _run(out) == measure.EXIT_INTERRUPTED
    assert len(load_profile(out).measurements) == 2
    _stop_at(monkeypatch, 6, KeyboardInterrupt())
    assert _run(out) == measure.EXIT_INTERRUPTED
    assert len(load_profile(out).measurements) == 5
    assert _files(tmp_path) == ["tiny.csv", "tiny.json"]


def test_a_finished_run_replaces_the_file(tmp_path):
    """The rule for a run that finished: it measured the grid it was asked for."""
    out = tmp_path / "tiny.json"
    assert _run(out) == 0
    assert _run(out, grid=["--batch", "1", "--k", "1", "--context", "16"]) == 0
    assert len(load_profile(out).measurements) == 2


def test_atomic_write_leaves_the_old_file_when_the_write_fails(tmp_path, monkeypatch):
    path = tmp_path / "p.json"
    path.write_text("old", encoding="utf-8")

    def fail(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(measure.os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        measure.write_atomic(path, "new")
    assert path.read_text(encoding="utf-8") == "old"
    assert _files(tmp_path) == ["p.json"]


# -------------------------------------------------------- garbage collection and threads


def test_no_garbage_collection_per_point(tmp_path, monkeypatch):
    collections = []
    enabled_while_timing = []
    real_collect, real_measure = gc.collect, runner.measure

    def collect(*args):
        collections.append(args)
        return real_collect(*args)

    def timed(*args, **kwargs):
        enabled_while_timing.append(gc.isenabled())
        return real_measure(*args, **kwargs)

    monkeypatch.setattr(gc, "collect", collect)
    monkeypatch.setattr(runner, "measure", timed)
    assert gc.isenabled()
    assert _run(tmp_path / "tiny.json") == 0
    assert len(enabled_while_timing) == POINTS + 1  # and the warm-up point
    assert not any(enabled_while_timing)
    assert len(collections) <= 1  # once, after the model
    assert gc.isenabled()


def test_weights_are_counted_without_dynamo():
    code = textwrap.dedent(
        """
        import sys
        from profiler.runner import full_weight_bytes
        from simulator.inputs.catalog import default_models

        for spec in default_models().values():
            full_weight_bytes(spec, "bf16")
        print("torch._dynamo" in sys.modules)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "False"


def test_building_a_model_imports_neither_dynamo_nor_sympy():
    """Both cost 0.5-2 s of a run's start-up (`nn.Embedding`'s init on meta, `to_empty`).
    Only the build on a device is checked: a run never builds a model on meta."""
    code = textwrap.dedent(
        """
        import sys
        import torch
        from profiler.model import ArchConfig, DecoderLM
        from simulator.inputs.catalog import default_models

        DecoderLM(ArchConfig.from_spec(default_models()["tiny"]), dtype=torch.bfloat16)
        print(sorted(m for m in ("torch._dynamo", "sympy") if m in sys.modules))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]"


def _profiler(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    env = {**env, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "profiler", *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_openmp_threads_sleep_when_other_work_shares_the_cpus():
    """A spinning OpenMP thread holds its core while its partner queues behind other work:
    1.1-2.4x slower steps with one other busy process on a 2-core VM, 6-100x at load 2-3."""

    def choose(others, load, cpus=2, threads=2, given="", loaded=False):
        return measure.choose_omp_policy(given, loaded, others, load, cpus, threads)

    # An idle machine keeps libgomp's default: sleeping costs 30-70% of a 1-10 ms step.
    policy, why = choose(0.05, 0.2)
    assert policy is None and "libgomp's default" in why
    assert "kept 0.05 CPUs busy" in why and "load average 0.20" in why
    # Other work now, whatever the load average says (it trails by a minute).
    policy, why = choose(0.8, 0.39)
    assert policy == "PASSIVE" and "set by the profiler: other processes kept 0.80" in why
    # A run right after another run: the load average remembers it, the CPUs are idle.
    assert choose(0.0, 1.6)[0] is None
    assert choose(None, 2.5)[0] == "PASSIVE"  # above the CPUs: busy, as the notes say
    assert choose(None, 0.3)[0] is None
    # Other work that fits on the CPUs the run leaves free.
    assert choose(0.9, 1.0, threads=1)[0] is None
    assert choose(5.0, 5.0, cpus=16, threads=8)[0] is None
    assert choose(9.0, 9.0, cpus=16, threads=8)[0] == "PASSIVE"
    # The environment decides; a torch already loaded has read it.
    assert choose(1.9, 9.0, given="ACTIVE") == (None, "from the environment")
    assert choose(1.9, 9.0, loaded=True)[0] is None


def test_other_processes_cpu_use_from_proc_stat():
    stat = "cpu  300 0 100 900 0 0 0 0 0 0\ncpu0 100 0 50 450 0 0 0 0 0 0\n"
    stat += "cpu1 200 0 50 450 0 0 0 0 0 0\nintr 5\n"
    _, busy, _ = device.cpu_sample(stat, allowed={0, 1})
    hz = os.sysconf("SC_CLK_TCK")
    assert busy == 400 / hz
    assert device.cpu_sample(stat, allowed={1})[1] == 250 / hz
    assert device.cpu_sample("intr 5\n") is None
    # Over 2 s the CPUs did 3 s of work, this process 1 s of it.
    assert device.other_cpus((10.0, 5.0, 1.0), (12.0, 8.0, 2.0)) == 1.0
    assert device.other_cpus((10.0, 5.0, 1.0), (10.05, 8.0, 2.0)) is None
    assert device.other_cpus(None, (12.0, 8.0, 2.0)) is None
    assert device.other_cpus((10.0, 5.0, 1.0), (12.0, 5.0, 2.0)) == 0.0
    assert device.cpu_sample() is None or device.cpu_sample()[0] > 0


def test_the_openmp_policy_and_why_are_in_the_profile(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = tmp_path / "tiny.json"
    argv = ["run", "--target", "tiny", "--device", "cpu", *GRID, "--out", str(out), *QUICK]
    done = _profiler(*argv, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    for source in (out, out.with_suffix(".csv")):
        (model,) = load_profile(source).models
        # Which one depends on the load of the machine running the tests.
        assert re.search(
            r"OMP_WAIT_POLICY=(PASSIVE \(set by the profiler|unset \(idle threads spin, then "
            r"sleep, libgomp's default): other processes kept [0-9.]+ CPUs busy",
            model.notes,
        ), model.notes
    done = _profiler("info", "--device", "cpu", env={**env, "OMP_WAIT_POLICY": "ACTIVE"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "openmp: OMP_WAIT_POLICY=ACTIVE (from the environment)" in done.stdout


def test_other_work_arriving_while_threads_spin_is_recorded(tmp_path, monkeypatch, capsys):
    if lim.max_threads() < 2:
        pytest.skip("one CPU: a single OpenMP thread has no partner to wait for")
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    load = [0.0]
    monkeypatch.setattr(device, "load_average", lambda: load[0])

    def timed(*args, **kwargs):
        load[0] = 4.6  # two other busy processes start once the run is under way
        return REAL_MEASURE(*args, **kwargs)

    monkeypatch.setattr(runner, "measure", timed)
    out = tmp_path / "tiny.json"
    argv = ["run", "--target", "tiny", "--device", "cpu", "--dtype", "fp32", *GRID]
    argv += ["--out", str(out), *QUICK[:-3], "--threads", "2", "--quiet"]
    assert cli.main(argv) == 0
    words = "other work during the run while idle OpenMP threads spin"
    assert words in capsys.readouterr().err
    (model,) = load_profile(out).models
    assert words in model.notes and "load average 4.60 at the end, 2 of it" in model.notes
    # No warning with one thread (nothing to wait for) or with sleeping threads.
    assert measure.spin_note(4.6, 2, 1) == ""
    assert measure.spin_note(2.4, 2, 2) == ""  # this run's own threads and a little more
    monkeypatch.setenv("OMP_WAIT_POLICY", "passive")
    assert measure.spin_note(4.6, 2, 2) == ""


def test_default_threads_are_the_physical_cores_and_recorded(tmp_path, monkeypatch):
    monkeypatch.setattr(device, "physical_cores", lambda *a, **k: 1)
    monkeypatch.setattr(device, "load_average", lambda: 0.0)
    out = tmp_path / "tiny.json"
    argv = ["run", "--target", "tiny", "--device", "cpu", "--dtype", "fp32", *GRID]
    argv += ["--out", str(out), "--repeats", "2", "--warmup", "0", "--min-time", "0", "--quiet"]
    assert cli.main(argv) == 0
    assert torch.get_num_threads() == 1
    profile = load_profile(out)
    assert profile.device.cpu_threads == 1
    assert "busy" not in profile.models[0].notes


def test_a_busy_machine_is_recorded_and_printed(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(device, "load_average", lambda: 64.0)
    out = tmp_path / "tiny.json"
    assert _run(out) == 0
    err = capsys.readouterr().err
    assert "busy machine: 1-minute load average 64.00" in err
    for source in (out, out.with_suffix(".csv")):
        (model,) = load_profile(source).models
        assert "busy machine: 1-minute load average 64.00" in model.notes
        assert f"above its {lim.cpu_count()} CPUs" in model.notes


def test_busy_note_counts_the_runs_own_threads():
    assert device.busy_note(None, 2) == ""
    assert device.busy_note(2.0, 2) == ""
    assert "load average 2.50" in device.busy_note(2.5, 2)
    # At the end the load includes this run's threads.
    assert device.busy_note(3.5, 2, own_threads=2) == ""
    assert "2 of it this run's" in device.busy_note(4.5, 2, own_threads=2)


CPUINFO_SMT = "\n\n".join(
    f"processor\t: {i}\nphysical id\t: 0\ncore id\t\t: {i // 2}\nmodel name\t: test"
    for i in range(8)
)


def test_physical_cores_count_hyperthreads_once(monkeypatch):
    monkeypatch.setattr(device, "_cgroup_cpu_quota", lambda: None)
    assert device.physical_cores(CPUINFO_SMT, allowed=set(range(8))) == 4
    assert device.physical_cores(CPUINFO_SMT, allowed={0, 1, 2}) == 2
    # No core ids (some VMs): the logical CPUs count.
    assert device.physical_cores("processor\t: 0\n\nprocessor\t: 1", allowed={0, 1}) == 2
    monkeypatch.setattr(device, "_cgroup_cpu_quota", lambda: 1)
    assert device.physical_cores(CPUINFO_SMT, allowed=set(range(8))) == 1
    assert 1 <= device.physical_cores() <= lim.cpu_count()
