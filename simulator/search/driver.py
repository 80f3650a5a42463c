"""The search loop: screen, then confirm the survivors in order of their cost bound.

Candidates are confirmed cheapest bound first, at most `simulation.window` in flight. Before
candidate i is submitted, every candidate `window` places before it has finished, and i is
dropped if one of those confirmed results dominates i's stage-one bounds on both fronts
(lower cost and lower P99 TPOT than i can reach; more tokens/s per GPU and per user than i
can reach): i then cannot be on either front, nor the optimum. Only those results decide,
never ones that happen to have finished sooner, so the table is the same on 1 worker or
100, for a given seed. Results are reported as they finish; a KeyboardInterrupt cancels
what is in flight and keeps what finished.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from simulator.search import table
from simulator.search.candidates import Candidate, expand
from simulator.search.confirm import ArmResult, Job, confirm, probe_fn, step_model_of
from simulator.search.runners import InlineRunner
from simulator.search.screen import Arm, Screened, screen
from simulator.search.spec import SearchSpec
from simulator.serving.spread import default_acceptance_spread


@dataclass
class SearchResult:
    """`table`: confirmed candidates (`table.COLUMNS`), cheapest first; `dropped`:
    (candidate label, why) for every candidate not confirmed; `cancelled`: stopped early;
    `message`: the infeasibility sentence when no configuration meets the SLO."""

    table: pd.DataFrame
    dropped: list[tuple[int, str, str]] = field(default_factory=list)
    cancelled: bool = False
    message: str = ""
    seconds: float = 0.0
    arms_run: int = 0

    @property
    def optimum(self) -> pd.Series | None:
        hit = self.table[self.table["optimum"]] if len(self.table) else self.table
        return hit.iloc[0] if len(hit) else None


@dataclass(frozen=True)
class Plan:
    """What the search will run, said before it runs: counts and the time estimate (s)."""

    candidates: int
    dropped: dict[str, int]
    to_confirm: int
    arms: int
    probes_per_arm: int
    seconds_per_probe: float
    workers: int

    @property
    def estimate_s(self) -> float:
        return self.arms * self.probes_per_arm * self.seconds_per_probe / self.workers

    def describe(self) -> str:
        why = ", ".join(f"{n} {k}" for k, n in self.dropped.items() if n)
        return (
            f"{self.candidates} candidates; stage one drops {sum(self.dropped.values())}"
            f"{f' ({why})' if why else ''}; {self.to_confirm} to confirm: {self.arms} arms "
            f"of up to {self.probes_per_arm} simulations, about {self.seconds_per_probe:.2f} s "
            f"each: estimate ~{self.estimate_s:.0f} s on {self.workers} worker(s)"
        )


def _job(spec: SearchSpec, arm: Arm) -> Job:
    sim = spec.simulation
    return Job(
        arm=arm,
        prompt=spec.traffic.prompt,
        output=spec.traffic.output,
        slo=spec.slo,
        requests=sim.requests,
        seed=sim.seed,
        acceptance_spread=default_acceptance_spread(str(dict(arm.scenario).get("method", "none")))
        if sim.acceptance_spread is None
        else sim.acceptance_spread,
        iterations=sim.iterations,
    )


def _kind(reason: str) -> str:
    if reason.startswith("cannot run"):
        return "cannot run"
    if reason.startswith("misses"):
        return "miss the TPOT SLO at any rate"
    if reason.startswith("needs"):
        return "need more than max_gpus"
    return "other"


def _seconds_per_probe(spec: SearchSpec, arms: list[Arm]) -> float:
    """Time one simulation at half the first arm's ceiling, in this process."""
    if not arms:
        return 0.0
    job = _job(spec, arms[0])
    start = time.perf_counter()
    # Only an estimate: the arm's own run reports any error.
    with contextlib.suppress(Exception):
        probe_fn(job, step_model_of(arms[0]))(arms[0].ceiling_rps / 2)
    return time.perf_counter() - start


def dominated(s: Screened, rows: list[dict], keep: str = "fronts") -> dict | None:
    """The first confirmed row that beats every bound of `s` on both fronts (`keep`
    'optimum': on cost alone), if any."""
    for r in rows:
        if not (r["max_rate_rps"] > 0 and r["status"] == "ok"):
            continue
        if keep == "optimum" and r["cost_per_mtok_usd"] < s.cost_lb:
            return r
        if (
            r["cost_per_mtok_usd"] < s.cost_lb
            and r["tpot_p99_ms"] < s.spec.tpot_floor_ms
            and r["tok_s_per_gpu"] > s.tok_s_gpu_ub
            and r["tok_s_per_user"] > s.tok_s_user_ub
        ):
            return r
    return None


def run_search(
    spec: SearchSpec,
    *,
    runner=None,
    max_configs: int | None = None,
    prune: bool = True,
    on_plan: Callable[[Plan], None] | None = None,
    on_result: Callable[[dict, int, int], None] | None = None,
) -> SearchResult:
    """Run the two stages; `runner` defaults to this process (`InlineRunner`).

    `max_configs` confirms at most that many survivors (cheapest bound first); `prune`
    False confirms every runnable candidate (the brute force the tests compare with).
    `on_result(row, done, total)` is called as each candidate finishes."""
    start = time.perf_counter()
    runner = runner or InlineRunner()
    screened = screen(spec, expand(spec))
    dropped = [(s.candidate.id, s.candidate.label(), s.dropped) for s in screened if s.dropped]
    if not prune:
        dropped = [d for d in dropped if d[2].startswith("cannot run")]
        gone = {d[0] for d in dropped}
        survivors = [s for s in screened if s.candidate.id not in gone]
    else:
        survivors = [s for s in screened if not s.dropped]
    survivors.sort(key=lambda s: (s.cost_lb, s.candidate.id))
    if max_configs is not None and len(survivors) > max_configs:
        for s in survivors[max_configs:]:
            dropped.append((s.candidate.id, s.candidate.label(), "beyond --max-configs"))
        survivors = survivors[:max_configs]
    arms = list({a.key: a for s in survivors for a in (s.spec, s.base)}.values())
    counts: dict[str, int] = {}
    for _, _, why in dropped:
        counts[_kind(why)] = counts.get(_kind(why), 0) + 1
    plan = Plan(
        candidates=len(screened),
        dropped=counts,
        to_confirm=len(survivors),
        arms=len(arms),
        probes_per_arm=spec.simulation.iterations + 2,
        seconds_per_probe=_seconds_per_probe(spec, arms),
        workers=runner.workers,
    )
    if on_plan:
        on_plan(plan)
    loop = _Loop(spec, runner, survivors, prune, on_result)
    cancelled = False
    try:
        loop.run()
    except KeyboardInterrupt:
        cancelled = True
        runner.cancel(list(loop.pending))
    rows = [loop.rows[i] for i in sorted(loop.rows)]
    dropped += loop.pruned
    result = SearchResult(
        table=table.finish(rows),
        dropped=dropped,
        cancelled=cancelled,
        seconds=time.perf_counter() - start,
        arms_run=len(loop.results),
    )
    feasible = bool(len(rows)) and bool(result.table["optimum"].any())
    if not cancelled and not feasible:
        result.message = infeasible_message(spec, screened, loop.results)
    return result


class _Loop:
    """The confirming loop's state: handles in flight, arm results, finished rows."""

    def __init__(self, spec, runner, survivors: list[Screened], prune: bool, on_result):
        self.spec, self.runner, self.survivors = spec, runner, survivors
        self.prune, self.on_result = prune, on_result
        self.pending: dict = {}  # handle -> arm key
        self.submitted: set[str] = set()
        self.results: dict[str, ArmResult] = {}
        self.rows: dict[int, dict] = {}  # position -> row
        self.waiting: dict[int, Screened] = {}  # position -> candidate submitted, unfinished
        self.pruned: list[tuple[int, str, str]] = []

    def run(self) -> None:
        window = self.spec.simulation.window
        for pos, s in enumerate(self.survivors):
            while any(p <= pos - window for p in self.waiting):
                self._collect()
            if self.prune:
                known = [self.rows[p] for p in sorted(self.rows) if p <= pos - window]
                beat = dominated(s, known, self.spec.simulation.keep)
                if beat is not None:
                    self.pruned.append(
                        (s.candidate.id, s.candidate.label(), f"dominated by #{beat['id']}")
                    )
                    continue
            for arm in (s.spec, s.base):
                if arm.key not in self.submitted:
                    self.submitted.add(arm.key)
                    self.pending[self.runner.submit(_job(self.spec, arm))] = arm.key
            self.waiting[pos] = s
            self._finish_ready()
        while self.waiting:
            self._collect()

    def _collect(self) -> None:
        for handle in self.runner.wait(list(self.pending)):
            key = self.pending.pop(handle)
            self.results[key] = self.runner.get(handle)
        self._finish_ready()

    def _finish_ready(self) -> None:
        total = len(self.survivors)
        for pos in sorted(self.waiting):
            s = self.waiting[pos]
            if s.spec.key in self.results and s.base.key in self.results:
                del self.waiting[pos]
                r = table.row(self.spec, s, self.results[s.spec.key], self.results[s.base.key])
                self.rows[pos] = r
                if self.on_result:
                    self.on_result(r, len(self.rows), total)


def infeasible_message(spec: SearchSpec, screened: list[Screened], results) -> str:
    """'no configuration meets a P99 TPOT of 5 ms; the closest is ...': the runnable
    candidate whose probe at the trickle rate came nearest the SLO (each metric over its
    limit), probed here when stage one dropped them all."""
    runnable = [s for s in screened if not s.dropped.startswith("cannot run")]
    head = f"no configuration meets {spec.slo.describe()}"
    if not runnable:
        return f"{head}; none of the candidates can run"
    probed = [(s, results[s.spec.key]) for s in runnable if s.spec.key in results]
    if not probed:
        nearest = min(runnable, key=lambda s: (s.spec.tpot_floor_ms, s.candidate.id))
        probed = [(nearest, confirm(_job(spec, nearest.spec)))]

    def miss(pair) -> float:
        sm = pair[1].summary
        over = [1.0]
        if spec.slo.tpot_ms is not None:
            over.append(sm.get("tpot_p99_ms", math.inf) / spec.slo.tpot_ms)
        if spec.slo.ttft_ms is not None:
            over.append(sm.get("ttft_p99_ms", math.inf) / spec.slo.ttft_ms)
        worst = max(over)
        return worst if math.isfinite(worst) else math.inf

    s, res = min(probed, key=lambda p: (miss(p), p[0].candidate.id))
    sm = res.summary
    if not sm:
        return f"{head}; the closest, {s.candidate.label()}, {res.status}"
    return (
        f"no configuration meets {spec.slo.describe(sm)}; the closest is {s.candidate.label()}: P99 TPOT "
        f"{sm['tpot_p99_ms']:.1f} ms, P99 TTFT {sm['ttft_p99_ms']:.0f} ms even at "
        f"{min(0.01, s.spec.ceiling_rps / 100):.3g} requests/s"
    )


__all__ = ["Candidate", "Plan", "SearchResult", "run_search"]
