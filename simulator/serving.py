"""Request-level simulation of a continuous-batching engine, with and without speculation.

The steady-state model (`simulator.steady`) gives the mean step; users feel the tails.
This module runs the requests themselves through an engine that follows vLLM V1's
scheduler: one token budget per step (`max_num_batched_tokens`), running requests first,
then waiting ones in arrival order while `max_num_seqs` and the KV blocks allow; prompts
prefill in chunks inside the same forward as the decodes; when the KV cache runs out, the
newest running request is preempted (its blocks freed, its prompt and output recomputed
later). An event loop over engine steps, numpy over the requests of a step.

Step time. Every step is priced by the simulator's own step model (`predict`, with a
profile's calibration where given): a table of the decode (or draft + verify) step in ms
by the number of decoding requests, engine host costs included, plus the prompt tokens
prefilled in that step at the model's prefill cost per token. The table is computed once,
at the scenario's mean context (prompt_len + output_len / 2).

Speculation. Each request gets its own acceptance level: its first-position rate is drawn
from a Beta distribution with the scenario's mean and `acceptance_spread` (standard
deviation), and its conditional rates at deeper positions scale with it. Each round a
decoding request draws a Bernoulli per drafted position from those conditional rates and
stops at the first rejection, so tails come from heterogeneity between requests, not only
from sampling noise; with spread 0 every request accepts alike.

A K schedule (`Schedule`, vLLM's `num_speculative_tokens_per_batch_size`) drafts each step
the K of the batch-size range its running requests fall in; a measured sample of
per-request acceptance (`acceptance_levels`) can replace the Beta.

Metrics per request (vLLM bench conventions): TTFT = first token - arrival; TPOT =
(finish - first token) / (output - 1); ITL per streamed chunk (all the tokens one step
emitted for the request) and per token (a chunk of n tokens gives n samples of its ITL / n);
end-to-end latency. Times in ms, rates in requests per second.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from simulator import acceptance
from simulator.catalog import method_decay
from simulator.defaults import DEFAULTS, ModelDefaults
from simulator.errors import InputError
from simulator.predict import predict

LENGTH_KINDS = ("fixed", "uniform", "lognormal")
BLOCK_SIZE = 16
"""Tokens per KV block (vLLM's default block size)."""


@dataclass(frozen=True)
class Lengths:
    """A distribution of token counts: fixed, uniform on mean +- spread, or lognormal with
    the given mean and `spread` the standard deviation of the log. Values are at least 1."""

    mean: float
    kind: str = "fixed"
    spread: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in LENGTH_KINDS:
            raise InputError(f"'{self.kind}' is not one of {', '.join(LENGTH_KINDS)}", field="kind")
        if not (np.isfinite(self.mean) and self.mean >= 1):
            raise InputError(f"{self.mean} must be at least 1", field="mean")
        if not (np.isfinite(self.spread) and self.spread >= 0):
            raise InputError(f"{self.spread} must be >= 0", field="spread")

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "uniform":
            x = rng.uniform(self.mean - self.spread, self.mean + self.spread, n)
        elif self.kind == "lognormal":
            sigma = self.spread
            x = rng.lognormal(np.log(self.mean) - sigma**2 / 2.0, sigma, n)
        else:
            x = np.full(n, self.mean)
        return np.maximum(np.round(x), 1).astype(np.int64)


@dataclass(frozen=True)
class Load:
    """Open loop (`rate`: Poisson arrivals, requests per second) or closed loop
    (`concurrency`: that many requests in flight, a new one as each finishes)."""

    requests: int = 1000
    rate: float | None = None
    concurrency: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if (self.rate is None) == (self.concurrency is None):
            raise InputError("give a rate or a concurrency, not both", field="rate")
        if self.rate is not None and not (np.isfinite(self.rate) and self.rate > 0):
            raise InputError(f"{self.rate} must be above 0", field="rate")
        if self.concurrency is not None and self.concurrency < 1:
            raise InputError(f"{self.concurrency} must be at least 1", field="concurrency")
        if self.requests < 1:
            raise InputError(f"{self.requests} must be at least 1", field="requests")


@dataclass(frozen=True)
class StepModel:
    """What one engine step costs, from the analytic model."""

    decode_ms: np.ndarray
    """ms of a step with b decoding requests at index b (index 0: a prefill-only step)."""
    prefill_ms_per_token: float
    kv_blocks: int
    lookahead: int
    k: int
    conditional: np.ndarray
    """Conditional acceptance of draft positions 1..K (position 1 is p_1)."""


def _positions(row: pd.Series, k: int) -> np.ndarray:
    """The scenario's per-position acceptance p_1..p_K, shape (K,)."""
    text = row.get("acceptance_per_position")
    if isinstance(text, str) and text.strip() and text.strip().lower() != "nan":
        p = np.array([float(x) for x in text.replace(",", ";").split(";") if x.strip()])
        return np.ravel(acceptance.extend_measured(p, k, method_decay(str(row["method"])))[0])
    if pd.notna(row.get("mean_accepted_tokens")):
        decay = method_decay(str(row["method"]), float(row.get("mtp_depth", 1) or 1))
        return np.ravel(
            acceptance.positions_from_tau(float(row["mean_accepted_tokens"]), k, k, decay)
        )
    return np.ravel(acceptance.positions_iid(float(row["alpha"]), k))


def step_model(
    scenario: dict,
    *,
    speculative: bool,
    defaults: ModelDefaults = DEFAULTS,
    calibration=None,
    gpus=None,
    models=None,
) -> StepModel:
    """Price an engine step by the number of decoding requests, for one arm."""
    row = dict(scenario)
    for col in ("batch_size", "request_rate", "serving"):
        row.pop(col, None)
    if not speculative:
        row.update(method="none", draft="", k=0)
        for col in ("acceptance_rate", "mean_accepted_tokens", "acceptance_per_position"):
            row.pop(col, None)
    seqs = defaults.max_num_seqs
    grid = pd.DataFrame(
        [{**row, "batch_size": b, "serving": "decode_only"} for b in range(1, seqs + 1)]
    )
    pred = predict(grid, defaults=defaults, calibration=calibration, gpus=gpus, models=models)
    status = pred["status"].iloc[0]
    if status != "ok":
        raise InputError(status, field="scenario")
    ran = pred["effective_batch_spec"].to_numpy()
    step = pred["spec_step_ms"].to_numpy()
    # Past what the KV cache sustains the table is flat in predict; extend it linearly.
    decode = np.empty(seqs + 1)
    decode[1:] = step
    sustained = int(ran.max())
    if sustained < seqs and sustained >= 2:
        slope = step[sustained - 1] - step[sustained - 2]
        decode[sustained + 1 :] = step[sustained - 1] + slope * np.arange(1, seqs - sustained + 1)
    steady = predict(
        pd.DataFrame([{**row, "batch_size": 8, "serving": "steady"}]),
        defaults=defaults,
        calibration=calibration,
        gpus=gpus,
        models=models,
    ).iloc[0]
    tokens = steady["prefill_tokens_per_step_spec"]
    per_token = steady["prefill_ms_spec"] / tokens if tokens > 0 else 0.0
    base_first = predict(
        pd.DataFrame(
            [
                {
                    **row,
                    "method": "none",
                    "draft": "",
                    "k": 0,
                    "batch_size": 1,
                    "serving": "decode_only",
                    "acceptance_rate": None,
                    "mean_accepted_tokens": None,
                    "acceptance_per_position": None,
                }
            ]
        ).dropna(axis=1, how="all"),
        defaults=defaults,
        calibration=calibration,
        gpus=gpus,
        models=models,
    ).iloc[0]
    decode[0] = base_first["baseline_step_ms"]
    k = int(pred["k"].iloc[0]) if speculative else 0
    cond = np.zeros(k)
    if speculative and k:
        p = _positions(pred.iloc[0], k)
        prev = np.concatenate([[1.0], p[:-1]])
        cond = np.where(prev > 0, p / np.where(prev > 0, prev, 1.0), 0.0)
    method = str(pred["method"].iloc[0])
    lookahead = k if method in ("draft_model", "eagle", "eagle3", "mtp") else 0
    capacity = pred["kv_capacity_tokens_spec" if speculative else "kv_capacity_tokens_baseline"]
    return StepModel(
        decode_ms=decode,
        prefill_ms_per_token=float(per_token),
        kv_blocks=int(capacity.iloc[0] // BLOCK_SIZE),
        lookahead=lookahead,
        k=k,
        conditional=np.clip(cond, 0.0, 1.0),
    )


@dataclass(frozen=True)
class Schedule:
    """K by batch size, as vLLM's `num_speculative_tokens_per_batch_size` sets it: each
    step drafts the K of the range its number of running requests falls in."""

    models: dict[int, StepModel]
    """A step model per K of the schedule (K = 0: no speculation in that range)."""
    ranges: tuple[tuple[int, int, int], ...]
    """(lo, hi, k) batch-size ranges, inclusive; sizes past the last use its K."""

    def pick(self, running: int) -> StepModel:
        for lo, hi, k in self.ranges:
            if lo <= running <= hi:
                return self.models[k]
        return self.models[self.ranges[-1][2]]


@dataclass
class RunResult:
    """One arm's run: a row per request and the queue over time."""

    requests: pd.DataFrame
    queue: pd.DataFrame
    itl_chunk_ms: tuple[np.ndarray, np.ndarray]
    """(values, weights): inter-token latency per streamed chunk."""
    itl_token_ms: tuple[np.ndarray, np.ndarray]
    """(values, weights): inter-token latency per token."""
    preemptions: int
    steps: int
    extra: dict = field(default_factory=dict)


def _beta_levels(rng, mean: float, spread: float, n: int) -> np.ndarray:
    """First-position acceptance per request: Beta with this mean and standard deviation."""
    if spread <= 0 or mean <= 0 or mean >= 1:
        return np.full(n, mean)
    var = min(spread**2, mean * (1 - mean) * 0.999)
    common = mean * (1 - mean) / var - 1.0
    return rng.beta(mean * common, (1 - mean) * common, n)


def _cat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0)


def _quiet_rounds(step_ms, clock, next_arrival, free_blocks, decoding, growth) -> int:
    """Steps that can run unchanged: no arrival due and the KV cache cannot run out even if
    every decoding request emits its most tokens each step (at most 256 at once)."""
    by_arrival = 256 if next_arrival == np.inf else math.floor((next_arrival - clock) / step_ms)
    by_kv = math.floor(free_blocks * BLOCK_SIZE / max(decoding * growth, 1))
    return max(1, min(256, by_arrival, by_kv))


def _draw(rng, cond: np.ndarray, rounds: int, k: int) -> np.ndarray:
    """Tokens each decoding request emits in each of `rounds` steps, shape (rounds, n):
    1, plus with K drafts the run of accepted positions before the first rejection."""
    emit = np.ones((rounds, len(cond)), np.int64)
    if k:
        ok = rng.random((rounds, len(cond), k)) < cond[None, :, :]
        emit += np.cumprod(ok, axis=2).sum(axis=2)
    return emit


def _record(itl_v, itl_w, tok_v, tok_w, gap, first_emit, step_ms, later) -> None:
    """Add one step's chunks (gap ms since each request's last tokens, `first_emit` tokens
    each) and, optionally, `later` steps of `step_ms` each, to the weighted ITL samples.

    A step's own chunks go in as (gaps, tokens) pairs, weighted when the run ends; the
    repeated steps as one value with its count."""
    itl_v.append(gap)
    itl_w.append(first_emit)
    if later is not None and later.size:
        counts = np.bincount(later.ravel())
        sizes = np.flatnonzero(counts)
        itl_v.append(np.array([step_ms]))
        itl_w.append(np.array([float(later.size)]))
        tok_v.append(step_ms / sizes)
        tok_w.append((sizes * counts[sizes]).astype(float))


def weighted_percentile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The q-th percentile (0..100) of values with integer-like weights (lower rank)."""
    ok = np.isfinite(values) & (weights > 0)
    if not ok.any():
        return float("nan")
    order = np.argsort(values[ok])
    v, w = values[ok][order], weights[ok][order]
    cum = np.cumsum(w)
    return float(v[np.searchsorted(cum, q / 100.0 * cum[-1], side="left")])


def schedule_model(
    scenario: dict,
    ranges,
    *,
    defaults: ModelDefaults = DEFAULTS,
    calibration=None,
    gpus=None,
    models=None,
) -> Schedule:
    """A `Schedule` of step models, one per K of `ranges` ((lo, hi, k) batch sizes)."""
    ranges = tuple((int(lo), int(hi), int(k)) for lo, hi, k in ranges)
    if not ranges:
        raise InputError("holds no range", field="k_schedule")
    table = {}
    for k in sorted({r[2] for r in ranges}):
        table[k] = step_model(
            {**scenario, "k": max(k, 1)},
            speculative=k > 0,
            defaults=defaults,
            calibration=calibration,
            gpus=gpus,
            models=models,
        )
    return Schedule(models=table, ranges=ranges)


def run(
    model: StepModel | Schedule,
    load: Load,
    prompt: Lengths,
    output: Lengths,
    *,
    acceptance_spread: float = 0.0,
    acceptance_levels=None,
    max_num_batched_tokens: int = DEFAULTS.max_num_batched_tokens,
    max_num_seqs: int = DEFAULTS.max_num_seqs,
) -> RunResult:
    """Simulate `load.requests` requests through the engine; seeded, reproducible.

    `acceptance_levels`, when given, is a measured sample of per-request acceptance (each
    request's share of accepted drafts at position 1, e.g. from vLLM's per-request
    acceptance histogram): requests draw their level from it, with replacement, instead of
    from the Beta of `acceptance_spread`; its mean replaces the scenario's position-1 rate.
    """
    seeds = np.random.SeedSequence(load.seed).spawn(3)
    rng_arrival, rng_lengths, rng_accept = (np.random.default_rng(s) for s in seeds)
    schedule = model if isinstance(model, Schedule) else None
    deepest = max(schedule.models.values(), key=lambda m: m.k) if schedule else model
    n, k = load.requests, deepest.k
    p_len = prompt.sample(rng_lengths, n)
    o_len = output.sample(rng_lengths, n)
    if load.rate is not None:
        arrival = np.cumsum(rng_arrival.exponential(1e3 / load.rate, n))
    else:
        arrival = np.full(n, np.inf)
        arrival[: min(load.concurrency, n)] = 0.0
    levels = np.zeros(n)
    cond = np.zeros((n, k))
    if k:
        p1 = float(deepest.conditional[0])
        if acceptance_levels is not None:
            sample = np.asarray(acceptance_levels, dtype=float)
            sample = sample[np.isfinite(sample) & (sample >= 0) & (sample <= 1)]
            if not len(sample):
                raise InputError("holds no rate in [0, 1]", field="acceptance_levels")
            levels = rng_accept.choice(sample, n, replace=True)
        else:
            levels = _beta_levels(rng_accept, p1, acceptance_spread, n)
        scale = levels / p1 if p1 > 0 else np.zeros(n)
        cond = np.clip(deepest.conditional[None, :] * scale[:, None], 0.0, 1.0)
        cond[:, 0] = levels

    kv = np.zeros(n, np.int64)  # tokens in the KV cache
    target = p_len.copy()  # tokens to prefill before the request decodes
    generated = np.zeros(n, np.int64)
    first = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    last_emit = np.full(n, np.nan)
    chunk = np.zeros(n, np.int64)
    itl_v: list[np.ndarray] = []
    itl_w: list[np.ndarray] = []
    tok_v: list[np.ndarray] = []
    tok_w: list[np.ndarray] = []
    queue_t: list[float] = []
    queue_n: list[int] = []
    waiting: deque[int] = deque()
    running: list[int] = []
    clock, done, arrived, preemptions, steps = 0.0, 0, 0, 0, 0
    area = 0.0  # requests in the engine x ms, for the time-average (Little's law)
    next_closed = min(load.concurrency or 0, n)
    per_decode = 1 + k

    def blocks_needed(idx: np.ndarray) -> float:
        decoding = kv[idx] >= target[idx]
        tokens = kv[idx] + chunk[idx] + np.where(decoding, per_decode + model.lookahead - 1, 0)
        return float(np.ceil(tokens / BLOCK_SIZE).sum())

    while done < n:
        if schedule is not None:
            model = schedule.pick(len(running) + (1 if waiting else 0))
            k, per_decode = model.k, 1 + model.k
        while arrived < n and arrival[arrived] <= clock:
            waiting.append(arrived)
            arrived += 1
        if not running and not waiting:
            if arrived >= n or not np.isfinite(arrival[arrived]):
                break
            clock = float(arrival[arrived])
            continue
        idx = np.array(running, dtype=np.int64)
        chunk[idx] = 0
        left = max_num_batched_tokens - np.count_nonzero(kv[idx] >= target[idx]) * per_decode
        for r in idx[kv[idx] < target[idx]]:
            chunk[r] = max(0, min(int(target[r] - kv[r]), left))
            left -= chunk[r]
        used = blocks_needed(idx)
        while running and used > model.kv_blocks:
            victim = running.pop()
            preemptions += 1
            left += chunk[victim]
            chunk[victim] = 0
            target[victim] = p_len[victim] + generated[victim]
            kv[victim] = 0
            waiting.appendleft(victim)
            used = blocks_needed(np.array(running, dtype=np.int64))
        while waiting and len(running) < max_num_seqs and left > 0:
            r = waiting[0]
            take = min(int(target[r] - kv[r]), left)
            extra = np.ceil((kv[r] + take) / BLOCK_SIZE)
            if used + extra > model.kv_blocks:
                break
            waiting.popleft()
            running.append(r)
            chunk[r] = take
            left -= take
            used += extra
        idx = np.array(running, dtype=np.int64)
        if not len(idx):
            if arrived < n and np.isfinite(arrival[arrived]):
                clock = max(clock, float(arrival[arrived]))
                continue
            break
        decoding = idx[(kv[idx] >= target[idx]) & (chunk[idx] == 0)]
        prefill_tokens = int(chunk[idx].sum())
        step_ms = float(
            model.decode_ms[min(len(decoding), len(model.decode_ms) - 1)]
            + model.prefill_ms_per_token * prefill_tokens
        )
        # Nothing prefills and every waiting request is blocked (seats, blocks or budget
        # free up only when a request finishes): the next steps repeat until an event.
        rounds = 1
        if prefill_tokens == 0 and len(decoding) == len(idx):
            rounds = _quiet_rounds(
                step_ms,
                clock,
                arrival[arrived] if arrived < n else np.inf,
                model.kv_blocks - used,
                len(decoding),
                per_decode + model.lookahead,
            )
            remaining = o_len[decoding] - generated[decoding]
            # Every step emits at least one token: no request outlasts its remaining count.
            rounds = min(rounds, int(remaining.min()))
        if rounds > 1:
            emit = _draw(rng_accept, cond[decoding, :k], rounds, k)
            done_by = np.cumsum(emit, axis=0) >= remaining[None, :]
            if done_by.any():
                rounds = int(np.argmax(done_by.any(axis=1))) + 1
                emit = emit[:rounds]
            total = np.minimum(emit.sum(axis=0), remaining)
            emit[-1] -= emit.sum(axis=0) - total
            first_gap = clock + step_ms - last_emit[decoding]
            _record(itl_v, itl_w, tok_v, tok_w, first_gap, emit[0], step_ms, emit[1:])
        else:
            kv[idx] += chunk[idx]
            filled = idx[(chunk[idx] > 0) & (kv[idx] >= target[idx])]
            fresh = filled[generated[filled] == 0]
            first[fresh] = clock + step_ms
            last_emit[fresh] = clock + step_ms
            generated[fresh] = 1
            total = _draw(rng_accept, cond[decoding, :k], 1, k)[0]
            total = np.minimum(total, o_len[decoding] - generated[decoding])
            if len(decoding):
                gap = clock + step_ms - last_emit[decoding]
                _record(itl_v, itl_w, tok_v, tok_w, gap, total, 0.0, None)
        clock += rounds * step_ms
        area += (len(waiting) + len(running)) * rounds * step_ms
        steps += rounds
        queue_t.append(clock)
        queue_n.append(len(waiting))
        generated[decoding] += total
        kv[decoding] += total
        target[decoding] = kv[decoding]
        last_emit[decoding] = clock
        over = idx[generated[idx] >= o_len[idx]]
        if len(over):
            finish[over] = clock
            done += len(over)
            gone = set(over.tolist())
            running = [r for r in running if r not in gone]
            if load.concurrency is not None:
                for _ in range(len(over)):
                    if next_closed < n:
                        arrival[next_closed] = clock
                        waiting.append(next_closed)
                        next_closed += 1
                arrived = next_closed

    gaps = [g for g, w in zip(itl_v, itl_w, strict=True) if w.dtype.kind == "i"]
    emits = [w for w in itl_w if w.dtype.kind == "i"]
    bulk_v = [v for v, w in zip(itl_v, itl_w, strict=True) if w.dtype.kind != "i"]
    bulk_w = [w for w in itl_w if w.dtype.kind != "i"]
    gap, emit = _cat(gaps), np.maximum(_cat(emits), 1)
    itl_chunk = (np.concatenate([gap, *bulk_v]), np.concatenate([np.ones(len(gap)), *bulk_w]))
    itl_token = (np.concatenate([gap / emit, *tok_v]), np.concatenate([emit.astype(float), *tok_w]))
    table = pd.DataFrame(
        {
            "arrival_ms": arrival,
            "prompt_len": p_len,
            "output_len": o_len,
            "ttft_ms": first - arrival,
            "tpot_ms": np.where(o_len > 1, (finish - first) / np.maximum(o_len - 1, 1), np.nan),
            "e2e_ms": finish - arrival,
            "first_position_acceptance": levels,
        }
    )
    return RunResult(
        requests=table,
        queue=pd.DataFrame({"time_ms": queue_t, "waiting": queue_n}),
        itl_chunk_ms=itl_chunk,
        itl_token_ms=itl_token,
        preemptions=preemptions,
        steps=steps,
        extra={"time_average_in_system": area / clock if clock > 0 else 0.0},
    )


PERCENTILES = (50, 90, 99)


def summarise(result: RunResult, *, slo_ttft_ms: float, slo_tpot_ms: float) -> dict:
    """P50/P90/P99 of TTFT, TPOT, ITL (per chunk and per token) and end-to-end latency;
    output tokens per second; goodput = requests per second meeting both SLOs."""
    req = result.requests
    span_s = (np.nanmax(req["arrival_ms"] + req["e2e_ms"]) - np.nanmin(req["arrival_ms"])) / 1e3
    out: dict = {}
    for name, (values, weights) in (
        ("ttft", (req["ttft_ms"].to_numpy(), np.ones(len(req)))),
        ("tpot", (req["tpot_ms"].to_numpy(), np.ones(len(req)))),
        ("itl", result.itl_chunk_ms),
        ("itl_token", result.itl_token_ms),
        ("e2e", (req["e2e_ms"].to_numpy(), np.ones(len(req)))),
    ):
        ok = np.isfinite(values) & (weights > 0)
        for q in PERCENTILES:
            out[f"{name}_p{q}_ms"] = weighted_percentile(values, weights, q)
        total = weights[ok].sum()
        out[f"{name}_mean_ms"] = (
            float((values[ok] * weights[ok]).sum() / total) if total else np.nan
        )
    good = (req["ttft_ms"] <= slo_ttft_ms) & (req["tpot_ms"].fillna(0) <= slo_tpot_ms)
    out["throughput_tok_s"] = float(req["output_len"].sum() / span_s) if span_s > 0 else np.nan
    out["request_throughput_rps"] = float(len(req) / span_s) if span_s > 0 else np.nan
    out["goodput_rps"] = float(good.sum() / span_s) if span_s > 0 else np.nan
    out["slo_attainment"] = float(good.mean())
    out["mean_in_system"] = result.extra.get("time_average_in_system", np.nan)
    out["max_waiting"] = int(result.queue["waiting"].max()) if len(result.queue) else 0
    out["preemptions"] = result.preemptions
    out["steps"] = result.steps
    return out


def simulate(
    scenario: dict,
    load: Load,
    prompt: Lengths,
    output: Lengths,
    *,
    acceptance_spread: float = 0.1,
    slo_ttft_ms: float = 2000.0,
    slo_tpot_ms: float = 100.0,
    k_schedule=None,
    defaults: ModelDefaults = DEFAULTS,
    calibration=None,
    gpus=None,
    models=None,
) -> pd.DataFrame:
    """Both arms of one scenario under one load: a summary row per arm (`baseline`,
    `spec`), with the same arrivals, lengths and seed in each. `k_schedule`, (lo, hi, k)
    batch-size ranges, makes the speculative arm draft K by batch size."""
    rows = []
    speculative = str(scenario.get("method", "none")) != "none"
    arms = (("baseline", False), ("spec", True)) if speculative else (("baseline", False),)
    for arm, spec in arms:
        sized = {**scenario, "prompt_len": prompt.mean, "output_len": output.mean}
        if spec and k_schedule:
            model = schedule_model(
                sized,
                k_schedule,
                defaults=defaults,
                calibration=calibration,
                gpus=gpus,
                models=models,
            )
        else:
            model = step_model(
                sized,
                speculative=spec,
                defaults=defaults,
                calibration=calibration,
                gpus=gpus,
                models=models,
            )
        result = run(
            model,
            load,
            prompt,
            output,
            acceptance_spread=acceptance_spread,
            max_num_batched_tokens=defaults.max_num_batched_tokens,
            max_num_seqs=defaults.max_num_seqs,
        )
        rows.append(
            {
                "arm": arm,
                "rate": load.rate,
                "concurrency": load.concurrency,
                "requests": load.requests,
                "k": model.k if isinstance(model, StepModel) else "schedule",
                **summarise(result, slo_ttft_ms=slo_ttft_ms, slo_tpot_ms=slo_tpot_ms),
            }
        )
    return pd.DataFrame(rows)


def max_rate_at_slo(
    scenario: dict,
    prompt: Lengths,
    output: Lengths,
    *,
    speculative: bool,
    slo_ttft_ms: float,
    slo_tpot_ms: float,
    requests: int = 300,
    acceptance_spread: float = 0.1,
    seed: int = 0,
    iterations: int = 8,
    defaults: ModelDefaults = DEFAULTS,
    calibration=None,
) -> float:
    """The highest request rate (requests/s) one replica serves with P99 TTFT and P99 TPOT
    within the SLOs: bisection on the rate, one simulation per step, between 0 and the
    rate the batch of `max_num_seqs` could sustain at its step time. 0 when even a lone
    request misses the SLO."""
    model = step_model(
        {**scenario, "prompt_len": prompt.mean, "output_len": output.mean},
        speculative=speculative,
        defaults=defaults,
        calibration=calibration,
    )
    tau = 1.0 + float(np.cumprod(model.conditional).sum()) if model.k else 1.0
    seqs = len(model.decode_ms) - 1
    ceiling = seqs * tau * 1e3 / model.decode_ms[seqs] / output.mean

    def meets(rate: float) -> bool:
        result = run(
            model,
            Load(requests=requests, rate=rate, seed=seed),
            prompt,
            output,
            acceptance_spread=acceptance_spread,
            max_num_batched_tokens=defaults.max_num_batched_tokens,
            max_num_seqs=defaults.max_num_seqs,
        )
        s = summarise(result, slo_ttft_ms=slo_ttft_ms, slo_tpot_ms=slo_tpot_ms)
        return s["ttft_p99_ms"] <= slo_ttft_ms and s["tpot_p99_ms"] <= slo_tpot_ms

    lo, hi = 0.0, ceiling
    if not meets(min(0.01, ceiling / 100)):
        return 0.0
    if meets(hi):
        return hi
    for _ in range(iterations):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if meets(mid) else (lo, mid)
    return lo
