"""Ground truth on this machine: real speculative decoding, measured, against the simulator.

`python -m profiler validate` loads the trained byte-level pair (`profiler.groundtruth.train_pair`),
generates from held-out prompts of the standard library (code and prose separately),
autoregressively and speculatively for K = 1..8 and several batch sizes, greedy and
sampled, and measures per-position acceptance, mean accepted tokens and decode tokens/s.
It profiles the same two architectures with the profiler's own run (`python -m profiler
run --draft`), asks the simulator (`simulator.model.predict`, calibrated by that profile) for
the speedup at every point with the acceptance measured there, and writes predicted
against measured.

The profile includes the draft timed inside the speculative loop (its `draft_in_loop`
table, `profiler.inloop`), which on a CPU costs up to twice the draft's isolated step; the
simulator prices a draft model with it. The prediction without that table, K isolated
draft steps, is kept alongside (`predicted_speedup_isolated_draft`).

Attention reads the valid context only, so a step's cost grows with the context: the
profile measures several contexts (`profile_contexts`), every step records the context it
ran at (`GenerationStats.step_context`), and each arm of a point is priced at its median
step context (`ar_context_len`, `spec_context_len`): the baseline's sequences sit at the
prompt plus what they generated, the speculative ones run ahead of them.

How the measurement copes with a shared machine (all of it is in the output):

- the baseline and the eight K runs of one (mode, workload, batch) are stepped in lockstep
  (`run_interleaved`), so they share the same seconds of a machine whose speed drifts;
- a run's step cost is the median of its per-step wall-clock times (every step of a run
  does the same work); the run's total decode wall clock is reported next to it;
- rounds are the outer loop and the profiler runs once after every round, so the profile
  (median over passes) and the measurement (median over rounds) cover the same minutes;
- a gate waits while other processes keep the cores busy (`QuietGate`).

Outputs under `data/validation/` (`--out-dir`); the validation runs on the CPU, so
`<device>` is `cpu` (the label is a parameter of `validate` for a future GPU run):

- `<device>_validation.csv`: one row per (mode, workload, batch, K);
- `<device>_acceptance.csv`: per-position acceptance, one row per position;
- `<device>_tau_iid.csv`: measured mean accepted tokens against the i.i.d. tau per K;
- `<device>_profile.json` / `.csv`: the profile the prediction used (with the draft's
  in-loop times);
- `<device>_summary.json`: settings, machine load, median and worst errors.

Units: ms, tokens/s (aggregate over the batch), relative errors as fractions
(predicted / measured - 1).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from profiler import options as lim
from profiler.groundtruth.corpus import load_corpus, sample_prompts
from profiler.groundtruth.specdec import (
    GREEDY,
    AutoregressiveDecoder,
    SpeculativeDecoder,
    run_interleaved,
)
from profiler.groundtruth.staging import staged
from profiler.groundtruth.train_pair import (
    DRAFT_ID,
    MODELS_DIR,
    TARGET_ID,
    check_pair,
    load_pair,
)
from simulator.inputs.profile import (
    LOOP_COLUMNS,
    Profile,
    load_profile,
    profile_to_csv,
    profile_to_json,
)
from simulator.inputs.scenarios import LIMITS
from simulator.model import acceptance
from simulator.model.calibration import Calibration, match_gpu_id
from simulator.model.defaults import DEFAULTS
from simulator.model.predict import predict as simulate

VALIDATION_DIR = Path(__file__).resolve().parents[2] / "data" / "validation"
WORKLOADS = ("code", "prose")
K_MAX = 8
HARNESS_DEFAULTS = DEFAULTS.without_engine()
"""The simulator's defaults for this harness. The loop here is not a serving engine: it
runs a fixed batch with no scheduler, no admission and no detokenisation, so the
engine's host costs (`engine_*` in `simulator.model.defaults`) do not apply; the profile
measures what the loop's forwards cost, and the scenarios are `decode_only` (nothing
is prefilled while the batch decodes)."""


@dataclass(frozen=True)
class ValidationSettings:
    """What is measured. Token counts are bytes (the pair is byte-level)."""

    batches: tuple[int, ...] = (1, 2, 4, 8, 16)
    ks: tuple[int, ...] = tuple(range(1, K_MAX + 1))
    # temperature 0 = greedy; 1.0 = sampling from the model's own distribution.
    temperatures: tuple[float, ...] = (0.0, 1.0)
    prompt_len: int = 128
    # 64 steps per run are plenty for a step-time median; shorter runs buy more rounds.
    new_tokens: int = 64
    # Every run (baseline and speculative) uses the same cache buffer; 520 leaves room for
    # sequences that accept more than the slowest of their batch (they run on until it
    # reaches new_tokens).
    max_len: int = 520
    # The contexts the profile measures (tokens). Attention reads the valid context only
    # (on a CPU up to the batch's longest sequence), so each arm is priced at the context
    # its steps ran at (`ar_context_len`, `spec_context_len`, measured per point), which
    # calibration interpolates between these; they span the prompt to the buffer's end.
    profile_contexts: tuple[int, ...] = (128, 256, 512)
    rounds: int = 8  # timed rounds; each runs the baseline and every K, stepped in turn
    warmup_rounds: int = 1
    # One thread: on a machine shared with other jobs, two OpenMP threads on two cores stall
    # at every barrier whenever another process holds one core (step times swung 10x in
    # trials); a single thread keeps a core to itself under up to one competing job.
    threads: int = 1
    seed: int = 0
    # Flags of each profiler pass (`python -m profiler run --warmup --repeats --min-time`).
    profile_warmup: int = 10
    profile_repeats: int = 20
    # With one pass per round (see `validate`) over three contexts, 0.05 s and 20 repeats per
    # point and pass add up to about a second per point, spread over the same minutes as the
    # generation runs; the combined profile is the median over the passes.
    profile_min_time_s: float = 0.05
    # Before every timed block the gate waits (up to `quiet_wait_s`) while other processes
    # keep more than `quiet_other_cores` cores busy: they would time-share the cores with
    # the measurement (see `QuietGate`).
    quiet_other_cores: float = 0.5
    quiet_wait_s: float = 30.0
    verify_overhead_ms: float | None = None
    """Fixed cost per speculative step in ms for the prediction; None is the simulator's
    own `DEFAULTS.verify_overhead_ms`."""

    @classmethod
    def quick(cls) -> ValidationSettings:
        """A reduced run for tests: seconds, not minutes."""
        return cls(
            batches=(1, 2),
            ks=(1, 2, 3),
            temperatures=(0.0, 1.0),
            prompt_len=32,
            new_tokens=16,
            max_len=80,
            profile_contexts=(32, 72),
            rounds=1,
            warmup_rounds=0,
            quiet_wait_s=0.0,
            profile_warmup=1,
            profile_repeats=3,
            profile_min_time_s=0.0,
        )


@dataclass
class _Accumulator:
    """Per-round values of one (mode, workload, batch, K) point, reduced by median."""

    rounds: dict[str, list[float]] = field(default_factory=dict)
    hist: np.ndarray | None = None
    identical: list[bool] = field(default_factory=list)

    def add(self, **values: float) -> None:
        for key, value in values.items():
            self.rounds.setdefault(key, []).append(float(value))

    def median(self, key: str) -> float:
        return float(np.median(self.rounds[key]))


def _cpu_jiffies() -> tuple[int, int, int] | None:
    """(busy jiffies of the whole machine, total jiffies, this process's jiffies), or None
    where /proc is not there (not Linux)."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = [int(x) for x in fh.readline().split()[1:]]
        with open("/proc/self/stat", encoding="ascii") as fh:
            mine = fh.read().rsplit(")", 1)[1].split()
    except (OSError, ValueError, IndexError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    total = sum(fields[:8])
    return total - idle, total, int(mine[11]) + int(mine[12])


class QuietGate:
    """Waits until no other process keeps the machine's cores busy.

    Other jobs on a small machine time-share its cores with the measurement; the gate reads
    /proc/stat over a short window and waits while other processes use more than
    `max_other_cores` cores (up to `max_wait_s`). What it cannot see (a neighbouring virtual
    machine on the same host) the medians over rounds average out.
    """

    def __init__(self, max_other_cores: float, max_wait_s: float, window_s: float = 0.5) -> None:
        self.max_other_cores = max_other_cores
        self.max_wait_s = max_wait_s
        self.window_s = window_s
        self.waited_s = 0.0
        self.readings: list[float] = []

    def other_cores(self) -> float:
        """Cores other processes kept busy during the last `window_s` seconds."""
        a = _cpu_jiffies()
        time.sleep(self.window_s)
        b = _cpu_jiffies()
        if a is None or b is None or b[1] <= a[1]:
            return 0.0
        ncpu = os.cpu_count() or 1
        return max(0.0, ((b[0] - a[0]) - (b[2] - a[2])) / (b[1] - a[1]) * ncpu)

    def wait(self) -> float:
        """Block until quiet (or the wait budget is spent); returns the last reading."""
        if self.max_wait_s <= 0:
            return float("nan")
        start = time.perf_counter()
        while True:
            cores = self.other_cores()
            if cores <= self.max_other_cores or time.perf_counter() - start >= self.max_wait_s:
                break
        self.waited_s += time.perf_counter() - start
        self.readings.append(cores)
        return cores


def _mode(temperature: float) -> str:
    return "greedy" if temperature <= GREEDY else f"sample_t{temperature:g}"


def load_prompts(settings: ValidationSettings) -> dict[str, np.ndarray]:
    """Held-out prompts per workload, `max(batches)` of them, `prompt_len` bytes each."""
    corpus = load_corpus(held_out_only=True)
    count = max(settings.batches)
    return {
        kind: sample_prompts(
            corpus.splits[kind]["held_out"], count, settings.prompt_len, seed=settings.seed + i
        )
        for i, kind in enumerate(WORKLOADS)
    }


def _run_block(target, draft, ids, temperature, rnd, settings, acc, timed) -> None:
    """One round of one (mode, workload, batch): the baseline and every K, in lockstep.

    The machine's speed swings by tens of percent from one second to the next (other
    virtual machines on the host), so runs measured one after the other would compare
    different machines. `run_interleaved` steps the baseline and all K runs in turn, each
    as far behind as the others, so they share the same seconds.
    """
    n, batch = settings.new_tokens, ids.shape[0]
    ar = AutoregressiveDecoder(
        target,
        ids,
        n,
        temperature=temperature,
        generator=torch.Generator().manual_seed(settings.seed + 1000 * rnd),
        max_len=settings.max_len,
    )
    spec = {
        k: SpeculativeDecoder(
            target,
            draft,
            ids,
            n,
            k,
            temperature=temperature,
            generator=torch.Generator().manual_seed(settings.seed + 1000 * rnd + k),
            max_len=settings.max_len,
        )
        for k in settings.ks
    }
    run_interleaved([ar, *spec.values()])
    ref, ar_stats = ar.result()
    for k in settings.ks:
        out, a = spec[k].result(), acc[k]
        st = out.stats
        if temperature <= GREEDY:
            a.identical.append(bool(torch.equal(out.truncated(n), ref)))
        if not timed:
            continue
        a.hist = st.accepted_hist if a.hist is None else a.hist + st.accepted_hist
        per_seq_step = st.tokens_emitted / st.steps / batch
        # Every step of a run does the same work, so a statistic of its step times is the
        # step's cost; the sum of the step times (the run's decode wall clock) is kept too.
        ar_ms = ar_stats.step_quantile_s(0.5) * 1e3
        spec_ms = st.step_quantile_s(0.5) * 1e3
        # A step's cost grows with the context it attends over, so the median step runs at
        # about the median context: what each arm is priced at (`predict`).
        a.add(
            ar_step_ms=ar_ms,
            spec_step_ms=spec_ms,
            ar_context_len=ar_stats.context_quantile(0.5),
            spec_context_len=st.context_quantile(0.5),
            measured_speedup=per_seq_step * ar_ms / spec_ms,
            ar_tok_s_wall=ar_stats.tokens_per_s,
            spec_tok_s_wall=st.tokens_per_s,
            measured_speedup_wall=st.tokens_per_s / ar_stats.tokens_per_s,
            spec_steps=st.steps,
            tokens_emitted=st.tokens_emitted,
        )


def measure(
    target,
    draft,
    prompts: dict[str, np.ndarray],
    settings: ValidationSettings,
    log=print,
    gate: QuietGate | None = None,
    between_rounds=None,
) -> pd.DataFrame:
    """Run every point; one row per (mode, workload, batch, K) with measured quantities.

    Rounds are the outer loop, so the rounds of one point are spread over the whole run and
    its medians average the machine's slow speed swings rather than catching one of them;
    `between_rounds(round_index)` runs after every timed round (the profiler's passes).
    """
    if gate is None:
        gate = QuietGate(settings.quiet_other_cores, settings.quiet_wait_s)
    blocks = [
        (temperature, workload, batch)
        for temperature in settings.temperatures
        for workload in WORKLOADS
        for batch in settings.batches
    ]
    acc = {blk: {k: _Accumulator() for k in settings.ks} for blk in blocks}
    other_cores: dict[tuple, list[float]] = {blk: [] for blk in blocks}
    for rnd in range(settings.warmup_rounds + settings.rounds):
        timed = rnd >= settings.warmup_rounds
        t0 = time.perf_counter()
        for blk in blocks:
            temperature, workload, batch = blk
            if timed:
                other_cores[blk].append(gate.wait())
            ids = torch.from_numpy(prompts[workload][:batch].astype(np.int64))
            _run_block(target, draft, ids, temperature, rnd, settings, acc[blk], timed)
        label = f"round {rnd + 1 - settings.warmup_rounds}" if timed else "warm-up round"
        log(f"{label}: {len(blocks)} blocks in {time.perf_counter() - t0:.0f} s")
        if timed and between_rounds is not None:
            between_rounds(rnd - settings.warmup_rounds)
    rows = []
    for blk in blocks:
        temperature, workload, batch = blk
        for k, a in acc[blk].items():
            total = int(a.hist.sum())
            at_least = a.hist[::-1].cumsum()[::-1]
            pos = at_least[1:] / total
            row = {
                "mode": _mode(temperature),
                "temperature": temperature,
                "workload": workload,
                "batch": batch,
                "k": k,
                "tau_measured": 1.0 + float(pos.sum()),
                "sequence_steps": total,
                **{key: a.median(key) for key in a.rounds},
                "measured_speedup_min": float(np.min(a.rounds["measured_speedup"])),
                "measured_speedup_max": float(np.max(a.rounds["measured_speedup"])),
                "other_cores_max": max(
                    (x for x in other_cores[blk] if not np.isnan(x)), default=np.nan
                ),
                "identical_to_target": (bool(all(a.identical)) if a.identical else np.nan),
            }
            row["ar_tok_s"] = batch / row["ar_step_ms"] * 1e3
            row["spec_tok_s"] = row["ar_tok_s"] * row["measured_speedup"]
            for i in range(1, K_MAX + 1):
                row[f"p{i}"] = float(pos[i - 1]) if i <= k else np.nan
            rows.append(row)
        last = rows[-len(settings.ks) :]
        log(
            f"{_mode(temperature)} {workload} B={batch}: "
            + " ".join(
                f"K{r['k']}:{r['measured_speedup']:.2f}x/tau{r['tau_measured']:.2f}" for r in last
            )
        )
    log(f"quiet gate: waited {gate.waited_s:.0f} s in all")
    return pd.DataFrame(rows)


def profiler_argv(out: Path, settings: ValidationSettings, *, device: str = "cpu") -> list[str]:
    """`python -m profiler run` over exactly the shapes the validation used."""
    return [
        "run",
        "--target",
        TARGET_ID,
        "--draft",
        DRAFT_ID,
        "--dtype",
        "fp32",
        "--device",
        device,
        "--threads",
        str(settings.threads),
        "--batch",
        ",".join(map(str, settings.batches)),
        "--k",
        ",".join(map(str, settings.ks)),
        "--context",
        ",".join(map(str, settings.profile_contexts)),
        "--warmup",
        str(settings.profile_warmup),
        "--repeats",
        str(settings.profile_repeats),
        "--min-time",
        str(settings.profile_min_time_s),
        "--out",
        str(out),
        "--quiet",
    ]


def run_profile(out: Path, settings: ValidationSettings, *, device: str = "cpu") -> Path:
    """One pass of the profiler's own run, in this process."""
    from profiler.measure import run_main

    argv = profiler_argv(out, settings, device=device)
    code = run_main(argv)
    if code:
        raise RuntimeError(f"python -m profiler {' '.join(argv)} exited with {code}")
    return out


def combine_profiles(paths: list[Path], out: Path, command: str) -> Path:
    """One profile from several passes of the same run: per point, the median over passes
    of each latency statistic (repeats summed). Written as JSON and CSV like the profiler's.
    """
    profiles = [load_profile(p) for p in paths]
    keys = ["model", "batch", "query_len", "context_len"]
    df = pd.concat([p.measurements for p in profiles], ignore_index=True)
    ok = df[df["status"] == "ok"]
    combined = ok.groupby(keys, sort=False, as_index=False).agg(
        median_ms=("median_ms", "median"),
        p10_ms=("p10_ms", "median"),
        p90_ms=("p90_ms", "median"),
        repeats=("repeats", "sum"),
        peak_bytes=("peak_bytes", "max"),
        status=("status", "first"),
        extrapolated=("extrapolated", "any"),
    )
    loops = pd.concat([p.draft_in_loop for p in profiles], ignore_index=True)
    loop = loops.groupby(
        ["draft", "target", "batch", "context_len", "position", "query_len"],
        sort=False,
        as_index=False,
    ).agg(
        median_ms=("median_ms", "median"),
        p10_ms=("p10_ms", "median"),
        p90_ms=("p90_ms", "median"),
        repeats=("repeats", "sum"),
    )
    # Medians of each column separately can cross; keep p10 <= median <= p90 per row.
    for table in (combined, loop):
        table["p10_ms"] = table[["p10_ms", "median_ms"]].min(axis=1)
        table["p90_ms"] = table[["p90_ms", "median_ms"]].max(axis=1)
    merged = replace(
        profiles[0],
        command=f"{command}  [x{len(paths)} passes spread over the validation rounds; "
        "per point the median over passes of each statistic]",
        measurements=combined,
        draft_in_loop=loop[list(LOOP_COLUMNS)],
    )
    out.write_text(profile_to_json(merged), encoding="utf-8")
    out.with_suffix(".csv").write_text(profile_to_csv(merged), encoding="utf-8")
    load_profile(out)  # the loader's checks, as the app would run them
    return out


def scenarios(points: pd.DataFrame, profile: Profile, context: np.ndarray) -> pd.DataFrame:
    """The simulator's scenario rows (`simulator.inputs.scenarios`) for the measured points: the
    profiled device and dtype, a draft model at each point's K and batch, its measured
    per-position acceptance, and prompt/output lengths whose mean context (prompt +
    output / 2) is the row's `context` (tokens, one per point), the span its steps attend."""
    context = np.rint(np.broadcast_to(np.asarray(context, dtype=float), (len(points),)))
    output = 2 * np.minimum(context // 4, 64).astype(int)
    k = points["k"].to_numpy(int)
    positions = points[[f"p{i}" for i in range(1, K_MAX + 1)]].to_numpy(float)
    return pd.DataFrame(
        {
            "target": TARGET_ID,
            "method": "draft_model",
            "draft": DRAFT_ID,
            "gpu": match_gpu_id(profile.device.name, profile.device.kind),
            "num_gpus": 1,
            "weight_dtype": profile.settings.dtype,
            "kv_dtype": profile.settings.dtype,
            "k": k,
            "acceptance_per_position": [
                ";".join(f"{x:.6f}" for x in row[:n]) for row, n in zip(positions, k, strict=True)
            ],
            "batch_size": points["batch"].to_numpy(int),
            "prompt_len": context.astype(int) - output // 2,
            "output_len": output,
            "serving": "decode_only",
        }
    )


def arm_contexts(points: pd.DataFrame, profile: Profile) -> tuple[np.ndarray, np.ndarray]:
    """The contexts (tokens) the baseline and the speculative arm of every point are priced
    at: their measured median step contexts (`ar_context_len`, `spec_context_len`) within
    the profile's context grid (calibration interpolates inside it). A run recorded before
    the contexts were measured is priced at its profile's context, which must be one."""
    grid = np.sort(profile.measurements["context_len"].unique().astype(float))
    if {"ar_context_len", "spec_context_len"} <= set(points.columns):
        return tuple(
            np.clip(points[c].to_numpy(float), grid[0], grid[-1])
            for c in ("ar_context_len", "spec_context_len")
        )
    if grid.size != 1:
        raise ValueError(
            "the points have no ar_context_len/spec_context_len and the profile measures "
            f"{grid.size} contexts: which one each arm ran at is unknown"
        )
    same = np.full(len(points), grid[0])
    return same, same


def predict(points: pd.DataFrame, profile_path: Path, settings: ValidationSettings) -> pd.DataFrame:
    """The simulator's prediction (`simulator.model.predict.predict`, calibrated by the profile)
    next to every measured point, with the point's measured per-position acceptance:

        speedup = tau * t_T(B, 1, L_base) / (draft time + t_T(B, K+1, L_spec) + verify overhead)

    Each arm is priced at the context its steps ran at (`arm_contexts`): the baseline's
    sequences stay at the prompt plus the tokens generated so far, the speculative ones
    run ahead (each step emits up to K+1 tokens, and the batch runs until its slowest
    sequence is done), so the simulator runs one scenario row per arm and point, and the
    speedup is its baseline TPOT over its speculative TPOT.

    The draft time is what the simulator prices: the profile's in-loop draft times summed
    over positions 1..K where the profile has them (`profiler run --draft` records them),
    K isolated draft steps otherwise. `predicted_speedup_isolated_draft` is the simulator
    with the in-loop table withheld, the pricing it used before the profile had one.
    """
    profile = load_profile(profile_path)
    cal = Calibration.from_profiles([profile])
    defaults = HARNESS_DEFAULTS
    if settings.verify_overhead_ms is not None:
        defaults = HARNESS_DEFAULTS.replace(verify_overhead_ms=settings.verify_overhead_ms)
    base_ctx, spec_ctx = arm_contexts(points, profile)
    base = simulate(
        scenarios(points, profile, base_ctx), defaults=defaults, calibration=cal, source=""
    )
    sc = scenarios(points, profile, spec_ctx)
    sim = simulate(sc, defaults=defaults, calibration=cal, source=str(profile_path))
    iso = simulate(sc, defaults=defaults, calibration=replace(cal, loops={}), source="")
    if not sim["latency_source"].astype(str).str.contains("draft:in-loop").all():
        sources = sorted(set(sim["latency_source"].astype(str)))
        raise ValueError(
            f"{profile_path}: the profile does not time the draft in the loop at every point "
            f"(sources: {', '.join(sources)}); profile with `profiler run --draft`"
        )
    k = points["k"].to_numpy(float)
    out = points.copy()
    out["context_priced_baseline"] = base_ctx
    out["context_priced_spec"] = spec_ctx
    out["target_step_ms"] = base["target_step_ms"].to_numpy()
    out["verify_step_ms"] = sim["verify_step_ms"].to_numpy()
    out["draft_step_ms"] = iso["draft_step_ms"].to_numpy() / k
    out["draft_time_isolated_ms"] = iso["draft_step_ms"].to_numpy()
    out["draft_time_in_loop_ms"] = sim["draft_step_ms"].to_numpy()
    out["verify_overhead_ms"] = defaults.verify_overhead_ms
    out["latency_source"] = sim["latency_source"].astype(str).to_numpy()
    out["tau_predicted"] = sim["tau"].to_numpy()
    out["predicted_spec_step_ms"] = sim["spec_step_ms"].to_numpy()
    out["predicted_spec_step_ms_isolated_draft"] = iso["spec_step_ms"].to_numpy()
    base_tpot = base["baseline_tpot_ms"].to_numpy()
    out["predicted_speedup"] = base_tpot / sim["spec_tpot_ms"].to_numpy()
    out["predicted_speedup_isolated_draft"] = base_tpot / iso["spec_tpot_ms"].to_numpy()
    for suffix in ("", "_isolated_draft"):
        out[f"error{suffix}"] = out[f"predicted_speedup{suffix}"] / out["measured_speedup"] - 1
    out["abs_error"] = out["error"].abs()
    # The i.i.d. view of the same point: the alpha that reproduces its tau, and the
    # prediction an i.i.d. alpha taken from position 1 alone would have made.
    out["alpha_iid_fit"] = acceptance.alpha_from_tau(out["tau_measured"].to_numpy(), k)
    tau_p1 = acceptance.tau_iid(out["p1"].to_numpy(), k)
    out["tau_iid_from_p1"] = tau_p1
    out["predicted_speedup_iid_p1"] = tau_p1 * out["target_step_ms"] / out["predicted_spec_step_ms"]
    # Where the time went: measured step times against the predicted ones.
    out["ar_step_excess_ms"] = out["ar_step_ms"] - out["target_step_ms"]
    out["spec_step_excess_ms"] = out["spec_step_ms"] - out["predicted_spec_step_ms"]
    return out


def acceptance_long(points: pd.DataFrame) -> pd.DataFrame:
    """Per-position acceptance, one row per (mode, workload, batch, K, position)."""
    rows = []
    for r in points.itertuples(index=False):
        for i in range(1, int(r.k) + 1):
            rows.append(
                {
                    "mode": r.mode,
                    "workload": r.workload,
                    "batch": r.batch,
                    "k": r.k,
                    "position": i,
                    "acceptance": getattr(r, f"p{i}"),
                    "sequence_steps": r.sequence_steps,
                }
            )
    return pd.DataFrame(rows)


def tau_vs_iid(points: pd.DataFrame) -> pd.DataFrame:
    """Measured tau per (mode, workload, K), pooled over batch sizes, against the i.i.d.
    tau(alpha, K) with alpha the pooled position-1 acceptance of that mode and workload.

    alpha is what an i.i.d. model means by per-token acceptance (P(a draft token is
    accepted) at a position that was reached); position 1 is always reached, the same
    distribution for every K, so pooling it over all K and batches gives the best estimate.
    """
    rows = []
    for (mode, workload), grp in points.groupby(["mode", "workload"], sort=False):
        w = grp["sequence_steps"].to_numpy(float)
        alpha = float(np.average(grp["p1"], weights=w))
        for k, g in grp.groupby("k"):
            wk = g["sequence_steps"].to_numpy(float)
            tau_m = float(np.average(g["tau_measured"], weights=wk))
            tau_i = float(acceptance.tau_iid(alpha, k))
            rows.append(
                {
                    "mode": mode,
                    "workload": workload,
                    "k": int(k),
                    "alpha": alpha,
                    "tau_measured": tau_m,
                    "tau_iid": tau_i,
                    "tau_iid_error": tau_i / tau_m - 1.0,
                    "alpha_iid_fit": float(acceptance.alpha_from_tau(tau_m, k)),
                    "sequence_steps": int(wk.sum()),
                }
            )
    return pd.DataFrame(rows)


def summarise(pred: pd.DataFrame, settings: ValidationSettings, extra: dict) -> dict:
    worst = pred.sort_values("abs_error", ascending=False).head(8)
    cols = ["mode", "workload", "batch", "k", "measured_speedup", "predicted_speedup", "error"]
    by_mode = pred.groupby("mode")["abs_error"].median().round(4).to_dict()
    return {
        "points": len(pred),
        "median_abs_error": round(float(pred["abs_error"].median()), 4),
        "p90_abs_error": round(float(pred["abs_error"].quantile(0.9)), 4),
        "max_abs_error": round(float(pred["abs_error"].max()), 4),
        "median_abs_error_by_mode": by_mode,
        "median_abs_error_by_batch": pred.groupby("batch")["abs_error"].median().round(4).to_dict(),
        "median_error_signed": round(float(pred["error"].median()), 4),
        "median_abs_error_isolated_draft": round(
            float(pred["error_isolated_draft"].abs().median()), 4
        ),
        "greedy_identical_to_target": bool(
            pred.loc[pred["mode"] == "greedy", "identical_to_target"].astype(bool).all()
        ),
        "worst_points": worst[cols].round(4).to_dict("records"),
        "settings": asdict(settings),
        **extra,
    }


def validate(
    settings: ValidationSettings,
    out_dir: Path = VALIDATION_DIR,
    *,
    models_dir: Path = MODELS_DIR,
    profile: Path | None = None,
    device_label: str = "cpu",
    log=print,
) -> dict:
    """Measure, profile, predict and write the CSVs; returns the summary.

    Without `profile`, the profiler runs once after every timed round (as many passes as
    rounds, spread over the same minutes as the measurement) and the passes are combined.
    """
    torch.set_num_threads(settings.threads)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    load_start = os.getloadavg()
    target, draft = load_pair(models_dir)
    prompts = load_prompts(settings)
    gate = QuietGate(settings.quiet_other_cores, settings.quiet_wait_s)
    passes: list[Path] = []
    pass_dir = out_dir / f".{device_label}_profile_passes"

    def profile_pass(index: int) -> None:
        pass_dir.mkdir(exist_ok=True)
        gate.wait()
        passes.append(run_profile(pass_dir / f"pass{index}.json", settings))
        torch.set_num_threads(settings.threads)

    points = measure(
        target,
        draft,
        prompts,
        settings,
        log=log,
        gate=gate,
        between_rounds=profile_pass if profile is None else None,
    )
    load_end = os.getloadavg()
    final = out_dir / f"{device_label}_profile.json"
    with staged(out_dir, device_label, log) as stage:
        if profile is None:
            command = "python -m profiler " + " ".join(profiler_argv(_shown(final), settings))
            profile = combine_profiles(passes, stage / final.name, command)
            for p in pass_dir.iterdir():
                p.unlink()
            pass_dir.rmdir()
            log(f"profiled {TARGET_ID} and {DRAFT_ID} in {len(passes)} passes -> {final}")
        stem = stage / device_label
        pred = predict(points, profile, settings)
        prof = load_profile(profile)
        pred.to_csv(f"{stem}_validation.csv", index=False, float_format="%.6g")
        acceptance_long(pred).to_csv(f"{stem}_acceptance.csv", index=False, float_format="%.6g")
        tau_table = tau_vs_iid(pred)
        tau_table.to_csv(f"{stem}_tau_iid.csv", index=False, float_format="%.6g")
        summary = summarise(
            pred,
            settings,
            {
                "command": " ".join(["python -m profiler validate", *sys.argv[2:]]),
                "profile": str(Path(profile).name),
                "profiler_command": "python -m profiler "
                + " ".join(profiler_argv(_shown(final), settings)),
                **run_facts(models_dir, prof, settings.threads, started, load_start, load_end),
                "tau_iid_max_abs_error": round(float(tau_table["tau_iid_error"].abs().max()), 4),
                "quiet_gate": {
                    "waited_s": round(gate.waited_s, 1),
                    "other_cores_max_at_start_of_a_block": round(
                        max(gate.readings, default=0.0), 2
                    ),
                },
            },
        )
        Path(f"{stem}_summary.json").write_text(json.dumps(summary, indent=2) + "\n", "utf-8")
    log(
        f"median |error| {summary['median_abs_error']:.1%} over {summary['points']} points "
        f"(p90 {summary['p90_abs_error']:.1%}, max {summary['max_abs_error']:.1%}); "
        f"wrote {out_dir / device_label}_*.csv"
    )
    return summary


def run_facts(models_dir, prof, threads: int, started: float, load_start, load_end) -> dict:
    """What a summary records of the run itself: the pair's folder, the device and threads,
    torch, the wall seconds since `started` (a perf_counter reading), the load averages."""
    return {
        "models_dir": str(_shown(models_dir)),
        "device": f"{prof.device.name} ({prof.device.kind}, {threads} thread(s))",
        "torch": torch.__version__,
        "total_seconds": round(time.perf_counter() - started, 1),
        "load_average_start": [round(x, 2) for x in load_start],
        "load_average_end": [round(x, 2) for x in load_end],
    }


def _shown(path: Path) -> Path:
    """A path relative to the repository when it lies inside it (for files we commit)."""
    root = Path(__file__).resolve().parents[2]
    try:
        return Path(path).resolve().relative_to(root)
    except ValueError:
        return Path(path)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = ValidationSettings()
    parser.add_argument("--quick", action="store_true", help="a reduced run for tests")
    parser.add_argument("--out-dir", type=Path, help=OUT_DIR_HELP)
    parser.add_argument("--models-dir", type=Path, default=MODELS_DIR)
    parser.add_argument("--profile", type=Path, help="use this profile instead of profiling")
    parser.add_argument(
        "--batch", help=f"batch sizes, 1..{lim.MAX_BATCH} (default {','.join(map(str, d.batches))})"
    )
    parser.add_argument("--k", help=f"speculative lengths, 1..{K_MAX}, e.g. 1-8")
    parser.add_argument(
        "--temperatures", help=f"0..{LIMITS['temperature'][0]:g}, 0 = greedy (default 0,1)"
    )
    parser.add_argument(
        "--rounds", type=int, help=f"timed rounds, 1..{lim.MAX_ROUNDS} (default {d.rounds})"
    )
    parser.add_argument("--threads", type=int, help=f"torch CPU threads (default {d.threads})")
    parser.add_argument(
        "--verify-overhead-ms",
        type=float,
        help="fixed cost per speculative step in the prediction, ms (default: the "
        f"simulator's, {DEFAULTS.verify_overhead_ms})",
    )


OUT_DIR_HELP = (
    "folder the run's files replace (default: data/validation, the committed reference run; "
    "a --quick run must name its own)"
)


def out_dir_from_args(args: argparse.Namespace) -> Path:
    """--out-dir, or the committed reference folder when none is given; UsageError for a
    --quick run without one, whose reduced files would replace the reference ones."""
    from profiler.flags import UsageError

    if args.out_dir is not None:
        return args.out_dir
    if args.quick:
        raise UsageError(
            f"--quick: a reduced run would replace the reference files in "
            f"{_shown(VALIDATION_DIR)}; give --out-dir"
        )
    return VALIDATION_DIR


def settings_from_args(args: argparse.Namespace) -> ValidationSettings:
    """The settings the flags ask for; UsageError names a bad flag."""
    from profiler.flags import UsageError, check_whole, parse_ints, parse_temperatures

    settings = ValidationSettings.quick() if args.quick else ValidationSettings()
    changes: dict = {"verify_overhead_ms": args.verify_overhead_ms}
    if args.verify_overhead_ms is not None and not args.verify_overhead_ms >= 0:
        raise UsageError(f"--verify-overhead-ms: {args.verify_overhead_ms} must be >= 0")
    if args.batch:
        changes["batches"] = tuple(
            parse_ints(args.batch, "--batch", minimum=1, maximum=lim.MAX_BATCH)
        )
    if args.k:
        changes["ks"] = tuple(parse_ints(args.k, "--k", minimum=1, maximum=K_MAX))
    if args.temperatures:
        changes["temperatures"] = parse_temperatures(args.temperatures)
    for flag, value, high in (
        ("--rounds", args.rounds, lim.MAX_ROUNDS),
        ("--threads", args.threads, lim.max_threads()),
    ):
        check_whole(flag, value, 1, high)
        if value is not None:
            changes[flag.strip("-")] = value
    if args.profile is not None and not args.profile.is_file():
        raise UsageError(f"--profile: {args.profile} is not a file")
    return ValidationSettings(**{**asdict(settings), **changes})


def run_from_args(args: argparse.Namespace) -> int:
    out_dir = out_dir_from_args(args)
    settings = settings_from_args(args)
    check_pair(args.models_dir)
    validate(settings, out_dir, models_dir=args.models_dir, profile=args.profile)
    return 0
