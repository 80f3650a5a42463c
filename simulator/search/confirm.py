"""Stage two, one arm: the request-level simulation's highest rate within the SLOs.

`confirm(job)` is what a Ray task runs (and what the in-process runner runs): it builds the
arm's step model (`serving.step_model`, or `serving.schedule_model` for a K schedule),
bisects the rate (`bisect.max_rate`) with one `serving.run` per probe, and returns the
latency summary at the rate found. Only `simulator.serving.engine`'s public functions are used.
Same job, same seed: same answer, on any worker.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from simulator.errors import InputError
from simulator.model.defaults import DEFAULTS
from simulator.search.bisect import max_rate
from simulator.search.screen import Arm
from simulator.search.spec import Slo
from simulator.serving import engine as serving

SUMMARY_KEYS = (
    "ttft_p50_ms",
    "ttft_p99_ms",
    "tpot_p50_ms",
    "tpot_p99_ms",
    "itl_p99_ms",
    "throughput_tok_s",
    "slo_attainment",
    "refused",
    "preemptions",
)
"""What an arm's result keeps of the summary at its rate."""


@dataclass(frozen=True)
class Job:
    """One arm to bisect, with everything the simulation reads."""

    arm: Arm
    prompt: serving.Lengths
    output: serving.Lengths
    slo: Slo
    requests: int
    seed: int
    acceptance_spread: float
    iterations: int


@dataclass(frozen=True)
class ArmResult:
    """`max_rate_rps`: highest rate within the SLOs (0: none); `summary`: latencies at it
    (or at the trickle when 0); `status`: 'ok' or why the arm cannot run."""

    key: str
    max_rate_rps: float
    summary: dict
    probes: int
    status: str
    seconds: float


def step_model_of(arm: Arm):
    """The step model (or K schedule) `serving.run` prices this arm's steps with."""
    scenario = dict(arm.scenario)
    defaults = dataclasses.replace(DEFAULTS, max_num_seqs=arm.max_num_seqs)
    if arm.ranges is not None:
        return serving.schedule_model(scenario, arm.ranges, defaults=defaults)
    return serving.step_model(scenario, speculative=arm.speculative, defaults=defaults)


def probe_fn(job: Job, model):
    """rate -> summary of one seeded run of `job.requests` requests at that rate."""

    def probe(rate: float) -> dict:
        result = serving.run(
            model,
            serving.Load(requests=job.requests, rate=rate, seed=job.seed),
            job.prompt,
            job.output,
            acceptance_spread=job.acceptance_spread,
            max_num_batched_tokens=DEFAULTS.max_num_batched_tokens,
            max_num_seqs=job.arm.max_num_seqs,
        )
        slo = job.slo
        return serving.summarise(
            result,
            slo_ttft_ms=slo.ttft_ms if slo.ttft_ms is not None else float("inf"),
            slo_tpot_ms=slo.tpot_ms if slo.tpot_ms is not None else float("inf"),
        )

    return probe


def confirm(job: Job) -> ArmResult:
    """Bisect one arm's highest rate within the SLO (see the module docstring)."""
    start = time.perf_counter()
    arm = job.arm
    try:
        model = step_model_of(arm)
    except InputError as exc:
        return ArmResult(arm.key, 0.0, {}, 0, f"cannot run: {exc.bare_message}", 0.0)
    found = max_rate(
        probe_fn(job, model),
        lambda s: job.slo.meets(s, job.requests),
        arm.ceiling_rps,
        job.iterations,
    )
    summary = {k: float(found.summary.get(k, float("nan"))) for k in SUMMARY_KEYS}
    return ArmResult(
        key=arm.key,
        max_rate_rps=found.rate,
        summary=summary,
        probes=found.probes,
        status="ok",
        seconds=time.perf_counter() - start,
    )
