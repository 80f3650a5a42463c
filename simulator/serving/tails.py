"""Steady-state tail latencies from the request-level simulation, and the highest request
rate a replica serves within P99 SLOs.

A run starts from an empty engine: its first requests meet no queue, and its last ones
see the arrivals stop. A short run therefore reads P99 low near saturation (issue 27: 300
requests gave 29.6 requests/s per replica where 3,000 gave 22.2). Here each estimate

- cuts a warm-up (the first `WARMUP_SHARE` of the requests, by arrival) and a drain (the
  last `DRAIN_SHARE`) before taking percentiles;
- runs two replications with independent seeds and doubles the requests per replication
  until their P99s agree within `TOLERANCE` (5%), or until the SLO decision the caller asks
  for is the same for both with that margin, or until `MAX_TAIL_REQUESTS`;
- reports the pooled P99 with the two replications' P99s as its range (a rerun with
  another seed moves the P99 within it);
- sizes no rate above what the replica sustains with `TOLERANCE` to spare
  (`sustained_rate`): at a load the replica only just serves, the queue is a random walk
  and its P99 grows with the length of the run, so no run length gives a steady one (8B on
  one H200, kernel tables: two seeds of 2,000 requests met a 2 s P99 TTFT at 25.7
  requests/s, where the replica completes 25.6-25.9 a second; 20,000 requests read 2.8 s).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from simulator.model.defaults import DEFAULTS, ModelDefaults
from simulator.serving.engine import BLOCK_SIZE, Lengths, Load, StepModel, run, step_model

WARMUP_SHARE = 0.2
"""Share of the requests, first by arrival, left out of the tail statistics."""
DRAIN_SHARE = 0.1
"""Share of the requests, last by arrival, left out: no arrivals follow them."""
TOLERANCE = 0.05
"""Largest relative difference between two seeds' P99s for the estimate to count as
converged."""
START_REQUESTS = 1_000
"""Requests per replication at first. Not fewer: a short run is biased low, not only
noisy (both seeds of 500 requests agreed on 23.6 requests/s per replica where longer runs
settle at 21.5), and two seeds cannot see a bias they share."""
MAX_TAIL_REQUESTS = 32_000
"""Most requests per replication. On the 2-core development machine 32,000 requests of an
8B draft-model arm took about 3 s."""
CAPACITY_REQUESTS = 4_000
"""Requests per replication of the saturated run that measures what a replica sustains."""
SEED_STRIDE = 1_000_003
"""The second replication's seed is the first's plus this (independent streams)."""
METRICS = ("ttft", "tpot")


@dataclass(frozen=True)
class TailEstimate:
    """P99 TTFT and TPOT (ms) of one arm at one load, warm-up and drain cut.

    `*_range_ms`: the two replications' P99s (low, high). `requests`: per replication.
    `converged`: the replications agree within `TOLERANCE`. `refused_share`: requests
    refused (longer than the context window or the KV cache), of all."""

    ttft_p99_ms: float
    tpot_p99_ms: float
    ttft_range_ms: tuple[float, float]
    tpot_range_ms: tuple[float, float]
    requests: int
    converged: bool
    refused_share: float

    def spread(self, metric: str) -> float:
        """Relative width of the replications' range of `metric` ('ttft' or 'tpot')."""
        lo, hi = getattr(self, f"{metric}_range_ms")
        mid = (lo + hi) / 2
        return (hi - lo) / mid if mid > 0 else 0.0


def steady_samples(requests, column: str) -> np.ndarray:
    """Finite values of `column` of a run's requests, warm-up and drain cut."""
    order = np.argsort(requests["arrival_ms"].to_numpy(), kind="stable")
    n = len(order)
    kept = order[int(n * WARMUP_SHARE) : n - int(n * DRAIN_SHARE)]
    values = requests[column].to_numpy()[kept]
    return values[np.isfinite(values)]


def _p99(values: np.ndarray) -> float:
    return float(np.percentile(values, 99)) if len(values) else math.inf


def _side(lo: float, hi: float, slo: float) -> int:
    """+1 when both replications miss `slo` by the margin, -1 when both meet it by the
    margin, 0 when the decision is not clear. The margin is the replications' own
    disagreement, at least `TOLERANCE`: two seeds 40% apart say the P99 is that uncertain."""
    mid = (lo + hi) / 2
    margin = max(TOLERANCE, (hi - lo) / mid if mid > 0 else 0.0)
    if lo / (1 + margin) > slo:
        return 1
    if hi * (1 + margin) < slo:
        return -1
    return 0


def _decided(ranges: dict, slos: dict | None) -> bool:
    if not slos:
        return False
    sides = [_side(*ranges[m], slos[m]) for m in METRICS if m in slos]
    return any(s == 1 for s in sides) or all(s == -1 for s in sides)


def steady_tails(
    model: StepModel,
    load: Load,
    prompt: Lengths,
    output: Lengths,
    *,
    acceptance_spread: float = 0.0,
    slos: dict | None = None,
    start: int = START_REQUESTS,
    cap: int = MAX_TAIL_REQUESTS,
    defaults: ModelDefaults = DEFAULTS,
) -> TailEstimate:
    """Steady-state P99s of one arm at one load (`load.requests` is ignored: the run
    length is chosen here, from `start` doubling to `cap`). `slos` ({'ttft': ms, 'tpot':
    ms}) lets a clear decision against them stop early."""
    n = max(1, min(start, cap))
    while True:
        pooled = {m: [] for m in METRICS}
        ranges = {m: [] for m in METRICS}
        refused = 0
        for seed in (load.seed, load.seed + SEED_STRIDE):
            result = run(
                model,
                Load(requests=n, rate=load.rate, concurrency=load.concurrency, seed=seed),
                prompt,
                output,
                acceptance_spread=acceptance_spread,
                max_num_batched_tokens=defaults.max_num_batched_tokens,
                max_num_seqs=defaults.max_num_seqs,
            )
            refused += int(result.extra.get("refused", 0))
            for m in METRICS:
                values = steady_samples(result.requests, f"{m}_ms")
                pooled[m].append(values)
                ranges[m].append(_p99(values))
        ranges = {m: (min(v), max(v)) for m, v in ranges.items()}
        estimate = TailEstimate(
            ttft_p99_ms=_p99(np.concatenate(pooled["ttft"])),
            tpot_p99_ms=_p99(np.concatenate(pooled["tpot"])),
            ttft_range_ms=ranges["ttft"],
            tpot_range_ms=ranges["tpot"],
            requests=n,
            converged=False,
            refused_share=refused / (2 * n),
        )
        converged = all(estimate.spread(m) <= TOLERANCE for m in METRICS)
        if converged or _decided(ranges, slos) or n >= cap:
            return TailEstimate(**{**estimate.__dict__, "converged": converged})
        n = min(2 * n, cap)


def sustained_rate(
    model: StepModel,
    prompt: Lengths,
    output: Lengths,
    *,
    acceptance_spread: float = 0.0,
    seed: int = 0,
    requests: int = CAPACITY_REQUESTS,
    defaults: ModelDefaults = DEFAULTS,
) -> float:
    """Requests per second one replica completes when it never runs short of work: a
    closed loop with as many requests in flight as the engine runs at once (`max_num_seqs`,
    or fewer where the KV cache holds fewer requests of the mean length: more would only
    measure preemption's recomputation), completions counted between the warm-up and the
    drain; the lower of two seeds."""
    per_request = prompt.mean + output.mean + model.lookahead
    fit = int(model.kv_blocks * BLOCK_SIZE // per_request)
    in_flight = max(1, min(defaults.max_num_seqs or model.max_num_seqs, fit))
    rates = []
    for s in (seed, seed + SEED_STRIDE):
        result = run(
            model,
            Load(requests=requests, concurrency=in_flight, seed=s),
            prompt,
            output,
            acceptance_spread=acceptance_spread,
            max_num_batched_tokens=defaults.max_num_batched_tokens,
            max_num_seqs=defaults.max_num_seqs,
        )
        req = result.requests
        done = np.sort((req["arrival_ms"] + req["e2e_ms"]).to_numpy(dtype=float))
        done = done[np.isfinite(done)]
        a, b = int(len(done) * WARMUP_SHARE), len(done) - 1 - int(len(done) * DRAIN_SHARE)
        if b <= a or done[b] <= done[a]:
            return 0.0
        rates.append((b - a) / (done[b] - done[a]) * 1e3)
    return min(rates)


@dataclass(frozen=True)
class RateAtSlo:
    """The highest request rate (requests/s) one replica serves within the P99 SLOs.

    `low`..`high`: where the bisection left it (the SLO is met at `low`, missed at `high`;
    both equal `rate` at the ceiling, 0 where even a trickle misses). `tails`: the steady
    estimate at `rate` (None at 0), with its seed-to-seed range and run length."""

    rate: float
    low: float
    high: float
    tails: TailEstimate | None


def max_rate_at_slo(
    scenario: dict,
    prompt: Lengths,
    output: Lengths,
    *,
    speculative: bool,
    slo_ttft_ms: float,
    slo_tpot_ms: float,
    acceptance_spread: float = 0.0,
    seed: int = 0,
    iterations: int = 10,
    start: int = START_REQUESTS,
    cap: int = MAX_TAIL_REQUESTS,
    defaults: ModelDefaults = DEFAULTS,
    calibration=None,
) -> RateAtSlo:
    """Bisection on the log of the rate between a trickle (0.01/s, or 1% of the ceiling)
    and the ceiling (the batch of `max_num_seqs` at its step time), each step judged on
    steady-state P99s (`steady_tails`), until the bracket is within `TOLERANCE`. More than
    1% of requests refused misses at any rate. The ceiling is the lower of the decode
    batch's bound and `sustained_rate` less `TOLERANCE`: above it the queue grows."""
    model = step_model(
        {**scenario, "prompt_len": prompt.mean, "output_len": output.mean},
        speculative=speculative,
        defaults=defaults,
        calibration=calibration,
    )
    tau = 1.0 + float(np.cumprod(model.conditional).sum()) if model.k else 1.0
    seqs = len(model.decode_ms) - 1
    ceiling = seqs * tau * 1e3 / model.decode_ms[seqs] / output.mean
    sustained = sustained_rate(
        model, prompt, output, acceptance_spread=acceptance_spread, seed=seed, defaults=defaults
    )
    if sustained > 0:
        ceiling = min(ceiling, sustained * (1 - TOLERANCE))
    slos = {"ttft": slo_ttft_ms, "tpot": slo_tpot_ms}
    seen: dict[float, TailEstimate] = {}

    def meets(rate: float) -> bool:
        t = steady_tails(
            model,
            Load(requests=1, rate=rate, seed=seed),
            prompt,
            output,
            acceptance_spread=acceptance_spread,
            slos=slos,
            start=start,
            cap=cap,
            defaults=defaults,
        )
        seen[rate] = t
        within = t.ttft_p99_ms <= slo_ttft_ms and t.tpot_p99_ms <= slo_tpot_ms
        return within and t.refused_share <= 0.01

    lo, hi = min(0.01, ceiling / 100), ceiling
    if not meets(lo):
        return RateAtSlo(0.0, 0.0, lo, None)
    if meets(hi):
        return RateAtSlo(hi, hi, hi, seen[hi])
    for _ in range(iterations):
        if hi <= lo * (1 + TOLERANCE):
            break  # finer than a P99 known to 5% can tell apart
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if meets(mid) else (lo, mid)
    return RateAtSlo(lo, lo, hi, seen[lo])
