"""Request-level simulation of a continuous-batching engine, with and without speculation.

The steady-state model (`simulator.model.steady`) gives the mean step; users feel the tails.
This module runs the requests themselves through an engine that follows vLLM V1's
scheduler: one token budget per step (`max_num_batched_tokens`), running requests first,
then waiting ones in arrival order while `max_num_seqs` and the KV blocks allow; prompts
prefill in chunks inside the same forward as the decodes; when the KV cache runs out, the
newest running request is preempted (its blocks freed, its prompt and output recomputed
later). A request longer (prompt and output) than the models' context window, or than
the whole KV cache holds, is refused on arrival (NaN latencies, counted in `refused`). An
event loop over engine steps, numpy over the requests of a step.

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

from simulator.errors import InputError
from simulator.inputs.catalog import default_models, method_decay
from simulator.inputs.scenarios import ACCEPTANCE_COLUMNS
from simulator.model import acceptance, admission
from simulator.model.defaults import DEFAULTS, ModelDefaults
from simulator.model.predict import WINDOW_REASONS, predict, status_reasons

LENGTH_KINDS = ("fixed", "uniform", "lognormal")
MAX_LOG_SPREAD = 3.0
"""Largest standard deviation of log length a lognormal takes: at 3 its mean already sits
90x above its median (e^(3^2/2)), carried by a few requests."""
MAX_REQUESTS = 100_000
"""Most requests (and requests in flight) one run simulates. Measured on the 2-core
development machine, an EAGLE-3 arm of 100,000 requests (256 output tokens, 40/s) took
3.9 s and 1.1 GB at peak, about 10 kB a request; `MAX_DECODE_ROUNDS` bounds longer
outputs."""
MAX_ACCEPTANCE_SPREAD = 0.5
"""Largest standard deviation of per-request acceptance: no distribution on [0, 1] has a
wider one."""
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
        object.__setattr__(self, "spread", abs(float(self.spread)))  # -0.0: numpy refuses it
        if self.kind == "lognormal" and self.spread > MAX_LOG_SPREAD:
            raise InputError(
                f"{self.spread:g} is above {MAX_LOG_SPREAD:g}, the most a lognormal's log "
                "standard deviation may be",
                field="spread",
            )
        if self.kind == "uniform" and self.spread > self.mean:
            raise InputError(
                f"{self.spread:g} is more than the mean {self.mean:g}: uniform lengths run "
                "from mean - spread to mean + spread",
                field="spread",
            )

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
        if self.concurrency is not None and not 1 <= self.concurrency <= MAX_REQUESTS:
            raise InputError(
                f"{self.concurrency} is outside 1..{MAX_REQUESTS:,} requests in flight",
                field="concurrency",
            )
        if not 1 <= self.requests <= MAX_REQUESTS:
            raise InputError(
                f"{self.requests} is outside 1..{MAX_REQUESTS:,} requests per run", field="requests"
            )
        if self.seed < 0:
            raise InputError(f"{self.seed} must be a whole number >= 0", field="seed")


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
    max_len: int | None = None
    """Tokens a request may hold, prompt and output: the target's context window, or the
    draft model's where shorter (vLLM's max_model_len at most); None: no limit known."""

    @property
    def max_num_seqs(self) -> int:
        """Requests the engine runs at once: the batch sizes the table was priced at."""
        return len(self.decode_ms) - 1


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


LOAD_COLUMNS = ("batch_size", "request_rate", "serving")
"""Scenario columns the load decides in a request-level run (the batch each step forms),
not the scenario: a step model leaves them out."""

SPECULATIVE_COLUMNS = (
    "draft",
    "verify_tokens",
    "draft_context_len",
    "medusa_heads",
    "mtp_depth",
    *ACCEPTANCE_COLUMNS,
)
"""Scenario columns only speculation reads (with `method` and `k`): the baseline arm's
step model leaves them out."""


def arm_scenario(scenario: dict, speculative: bool) -> dict:
    """The scenario as one arm's step model reads it: without the load's columns, and for
    the baseline with method none, K 0 and no speculative column. Two scenarios that differ
    only in what speculation reads (the method, K, the acceptance) have one baseline."""
    row = {c: v for c, v in scenario.items() if c not in LOAD_COLUMNS}
    if not speculative:
        row = {c: v for c, v in row.items() if c not in SPECULATIVE_COLUMNS}
        row.update(method="none", k=0)
    return row


def arm_key(arm: dict) -> str:
    """An `arm_scenario` as text, equal for equal scenarios whatever their column order:
    the key a cache of runs holds them under (the Load page's and `serve`'s)."""
    return repr(sorted(arm.items()))


def step_model(
    scenario: dict,
    *,
    speculative: bool,
    defaults: ModelDefaults = DEFAULTS,
    calibration=None,
    gpus=None,
    models=None,
) -> StepModel:
    """Price an engine step by the number of decoding requests, for one arm
    (`arm_scenario` says what of the scenario it reads)."""
    row = arm_scenario(scenario, speculative)
    seqs = defaults.max_num_seqs or admission.cap_for_row(row, speculative, gpus)
    # One table, one predict: the decode steps at every batch size, then one steady-state
    # step (its prefill per token), then the baseline's step at batch 1.
    base_first = arm_scenario(row, False)
    rows = [{**row, "serving": "decode_only"}] * seqs + [
        {**row, "serving": "steady"},
        {**base_first, "serving": "decode_only"},
    ]
    table = pd.DataFrame(rows)
    table["batch_size"] = [*range(1, seqs + 1), 8, 1]
    priced = predict(table, defaults=defaults, calibration=calibration, gpus=gpus, models=models)
    pred = priced.iloc[:seqs]
    status = pred["status"].iloc[0]
    if status != "ok":
        raise InputError(status, field="scenario")
    steady = priced.iloc[seqs]
    # The decode rows price steps, not requests: the steady row says whether a request of
    # the scenario's mean lengths fits the models' context windows.
    too_long = [r for r in status_reasons(steady["status"]) if r in WINDOW_REASONS]
    if too_long:
        raise InputError("; ".join(too_long), field="scenario")
    ran = pred["effective_batch_spec"].to_numpy()
    step = pred["spec_step_ms"].to_numpy()
    # Past what the KV cache sustains the table is flat in predict; extend it linearly.
    decode = np.empty(seqs + 1)
    decode[1:] = step
    sustained = int(ran.max())
    if sustained < seqs and sustained >= 2:
        slope = step[sustained - 1] - step[sustained - 2]
        decode[sustained + 1 :] = step[sustained - 1] + slope * np.arange(1, seqs - sustained + 1)
    tokens = steady["prefill_tokens_per_step_spec"]
    per_token = steady["prefill_ms_spec"] / tokens if tokens > 0 else 0.0
    base_first = priced.iloc[seqs + 1]
    decode[0] = base_first["baseline_step_ms"]
    k = int(pred["k"].iloc[0]) if speculative else 0
    cond = np.zeros(k)
    if speculative and k:
        p = _positions(pred.iloc[0], k)
        prev = np.concatenate([[1.0], p[:-1]])
        cond = np.where(prev > 0, p / np.where(prev > 0, prev, 1.0), 0.0)
    method = str(pred["method"].iloc[0])
    lookahead = k if method in ("draft_model", "eagle", "eagle3", "mtp") else 0
    catalog = default_models() if models is None else models
    windows = [catalog[str(pred["target"].iloc[0])].max_position_embeddings]
    if method == "draft_model":
        windows.append(catalog[str(pred["draft"].iloc[0])].max_position_embeddings)
    known = [int(w) for w in windows if w]
    capacity = pred["kv_capacity_tokens_spec" if speculative else "kv_capacity_tokens_baseline"]
    return StepModel(
        decode_ms=decode,
        prefill_ms_per_token=float(per_token),
        kv_blocks=int(capacity.iloc[0] // BLOCK_SIZE),
        lookahead=lookahead,
        k=k,
        conditional=np.clip(cond, 0.0, 1.0),
        max_len=min(known) if known else None,
    )


@dataclass(frozen=True)
class Schedule:
    """K by batch size, as vLLM's `num_speculative_tokens_per_batch_size` sets it: each
    step drafts the K of the range its number of running requests falls in."""

    models: dict[int, StepModel]
    """A step model per K of the schedule (K = 0: no speculation in that range)."""
    ranges: tuple[tuple[int, int, int], ...]
    """(lo, hi, k) batch-size ranges, inclusive; sizes past the last use its K."""

    @property
    def max_num_seqs(self) -> int:
        return min(m.max_num_seqs for m in self.models.values())

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


def max_acceptance_spread(mean: float) -> float:
    """The widest standard deviation of per-request acceptance around `mean` whose Beta
    keeps one peak: both parameters at least 1, i.e. variance at most
    mean (1 - mean) / (1 + 1 / min(mean, 1 - mean)). Wider, the Beta piles its mass at 0
    and 1 (s.d. 0.1 around 0.987 gave Beta(0.31, 0.004): 1% of requests accepting almost
    nothing), a tail no workload shows."""
    if not 0 < mean < 1:
        return 0.0
    return math.sqrt(mean * (1 - mean) / (1 + 1 / min(mean, 1 - mean)))


def _beta_levels(rng, mean: float, spread: float, n: int) -> np.ndarray:
    """First-position acceptance per request: Beta with this mean and standard deviation,
    the deviation capped by `max_acceptance_spread` (the mean's distance to 0 and 1)."""
    if not 0 < mean < 1:
        return np.full(n, mean)
    bound = mean * (1 - mean)
    var = min(spread**2, max_acceptance_spread(mean) ** 2)
    # A spread a millionth of the widest is none (1e-162 squared would make the Beta's
    # parameters infinite, and 1e-310 squares to 0).
    if var <= bound * 1e-12:
        return np.full(n, mean)
    common = bound / var - 1.0
    a, b = mean * common, (1 - mean) * common
    if not (0 < a < np.inf and 0 < b < np.inf):  # a mean of 5e-324 underflows a to 0
        return np.full(n, mean)
    return rng.beta(a, b, n)


MAX_DECODE_ROUNDS = 12_000_000
"""Most decode rounds one run draws ahead. Drawing them and rebuilding the inter-token
latencies from them costs about 90 bytes a round at peak: 25,000 requests of 1,024
output tokens at K = 3 (12 million rounds) peaked at 1.1 GB."""


class _Paths:
    """Each request's tokens per decode round, drawn before the run starts.

    A request's acceptance does not depend on what else is in the batch, so its whole
    path can be drawn up front: one uniform u per round, and with K drafts the round emits
    1 + #{j <= K : u < S_j}, S_j = c_1 ... c_j the chance that positions 1..j are all
    accepted. That is exactly the draw of a Bernoulli per position up to the first
    rejection, with one number instead of K, and it serves every K of a schedule at once.

    Rounds of request i sit at flat[off_i : off_i + length_i]; `cum[k]` is the running
    total of tokens over the flat rounds, so tokens in rounds [a, b) of request i are
    cum[off_i + b] - cum[off_i + a]. K = 0 emits one token a round and stores nothing."""

    def __init__(self, rng, survival: np.ndarray, o_len: np.ndarray, ks) -> None:
        self.ks = tuple(sorted(set(int(k) for k in ks)))
        self.cum: dict[int, np.ndarray] = {}
        self.o_len = o_len
        self._fresh: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        need = np.maximum(o_len - 1, 1)
        positive = [k for k in self.ks if k > 0]
        n = len(o_len)
        self.off = np.zeros(n, np.int64)
        if not positive:
            return
        kmin = min(self.ks)
        if kmin == 0:
            length = need.copy()
        else:
            tau = 1.0 + survival[:, :kmin].sum(axis=1)
            length = np.ceil(need / tau * 1.3).astype(np.int64) + 8
        u = self._uniforms(rng, length)
        if kmin > 0:
            # The few requests that the first draw leaves short get a path long enough
            # even if every round emits one token.
            reach = self._totals(u, survival, length, kmin)
            short = reach < need
            if short.any():
                parts = np.split(u, np.cumsum(length)[:-1])
                fresh = iter(
                    np.split(self._uniforms(rng, need[short]), np.cumsum(need[short])[:-1])
                )
                u = np.concatenate(
                    [next(fresh) if s else p for p, s in zip(parts, short, strict=True)]
                )
                length = np.where(short, need, length)
        self.off[1:] = np.cumsum(length)[:-1]
        owner = np.repeat(np.arange(n), length)
        for k in positive:
            emit = np.ones(len(u), np.int32)
            for j in range(k):
                emit += u < survival[owner, j]
            cum = np.zeros(len(u) + 1, np.int64)
            np.cumsum(emit, out=cum[1:])
            self.cum[k] = cum

    @staticmethod
    def _uniforms(rng, length: np.ndarray) -> np.ndarray:
        total = int(length.sum())
        if total > MAX_DECODE_ROUNDS:
            raise InputError(
                f"needs {total:,} decode rounds drawn ahead, above the limit of "
                f"{MAX_DECODE_ROUNDS:,}: simulate fewer requests or shorter outputs",
                field="requests",
            )
        return rng.random(total, dtype=np.float32)

    @staticmethod
    def _totals(u, survival, length, k) -> np.ndarray:
        owner = np.repeat(np.arange(len(length)), length)
        emit = np.ones(len(u), np.int32)
        for j in range(k):
            emit += u < survival[owner, j]
        return np.add.reduceat(emit, np.concatenate([[0], np.cumsum(length)[:-1]]))

    def fresh(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """For every request at its first decode round at K = k: the cumulative total at
        its path's start and the rounds it needs to reach its output length."""
        if k not in self._fresh:
            n = len(self.o_len)
            ids = np.arange(n)
            start = self.cum[k][self.off] if k else self.off
            rounds = self.rounds_to(k, ids, np.zeros(n, np.int64), np.maximum(self.o_len - 1, 1))
            self._fresh[k] = (start, rounds)
        return self._fresh[k]

    def tokens(self, k: int, req, start, stop):
        """Tokens request(s) `req` emit over their rounds [start, stop) at K = k."""
        if k == 0:
            return stop - start
        cum, off = self.cum[k], self.off[req]
        return cum[off + stop] - cum[off + start]

    def rounds_to(self, k: int, req, start, tokens):
        """Rounds from `start` until request(s) `req` have emitted `tokens` more (>= 1)."""
        if k == 0:
            return tokens
        cum, off = self.cum[k], self.off[req]
        return np.searchsorted(cum, cum[off + start] + tokens, side="left") - off - start


def weighted_percentile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The q-th percentile (0..100) of values with integer-like weights (lower rank)."""
    return weighted_percentiles(values, weights, (q,))[0]


def weighted_percentiles(values: np.ndarray, weights: np.ndarray, qs) -> list[float]:
    """`weighted_percentile` for each q of `qs`, sorting the values once."""
    ok = np.isfinite(values) & (weights > 0)
    if not ok.any():
        return [float("nan")] * len(qs)
    order = np.argsort(values[ok])
    v, w = values[ok][order], weights[ok][order]
    cum = np.cumsum(w)
    at = np.searchsorted(cum, np.asarray(qs, dtype=float) / 100.0 * cum[-1], side="left")
    return [float(x) for x in v[at]]


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
    max_num_seqs: int | None = None,
) -> RunResult:
    """Simulate `load.requests` requests through the engine; seeded, reproducible.

    `acceptance_levels`, when given, is a measured sample of per-request acceptance (each
    request's share of accepted drafts at position 1, e.g. from vLLM's per-request
    acceptance histogram): requests draw their level from it, with replacement, instead of
    from the Beta of `acceptance_spread`; its mean replaces the scenario's position-1 rate.

    The loop visits events, not steps: while nothing arrives, prefills or finishes, every
    decoding request advances one round per step along its drawn path (`_Paths`), so a run
    of such steps is one visit; so is a run of steps in which nothing decodes and one
    prompt takes the whole token budget, up to its last chunk. Each request's decode rounds are kept as segments (from
    the step it started or resumed decoding to the step it stopped), from which the
    inter-token latencies are rebuilt at the end.
    """
    if not (np.isfinite(acceptance_spread) and 0 <= acceptance_spread <= MAX_ACCEPTANCE_SPREAD):
        raise InputError(
            f"{acceptance_spread} is outside 0..{MAX_ACCEPTANCE_SPREAD:g}",
            field="acceptance_spread",
        )
    seeds = np.random.SeedSequence(load.seed).spawn(3)
    rng_arrival, rng_lengths, rng_accept = (np.random.default_rng(s) for s in seeds)
    schedule = model if isinstance(model, Schedule) else None
    by_k = schedule.models if schedule else {model.k: model}
    deepest = max(by_k.values(), key=lambda m: m.k)
    n, kmax = load.requests, deepest.k
    p_len = prompt.sample(rng_lengths, n)
    o_len = output.sample(rng_lengths, n)
    if load.rate is not None:
        arrival = np.cumsum(rng_arrival.exponential(1e3 / load.rate, n))
    else:
        arrival = np.full(n, np.inf)
        arrival[: min(load.concurrency, n)] = 0.0
    levels = np.zeros(n)
    cond = np.zeros((n, kmax))
    if kmax:
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
    seqs = model.max_num_seqs if max_num_seqs is None else max_num_seqs
    limits = dict(max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=seqs)
    return _run_admitted(model, load, rng_accept, p_len, o_len, arrival, levels, cond, limits)


def _run_admitted(model, load, rng_accept, p_len, o_len, arrival, levels, cond, limits):
    """`run` once the requests are drawn: the ones that can never run are refused, the
    rest go through the engine, and the table gets a row for every request."""
    by_k = model.models if isinstance(model, Schedule) else {model.k: model}
    n = len(p_len)
    # A request longer than the context window is refused on arrival, as vLLM's server
    # refuses one past max_model_len (a prompt plus max_tokens above it); so is one longer
    # than the whole KV cache holds, which could never finish (it would preempt itself for
    # ever), and which vLLM keeps max_model_len within. It never enters the engine (in a
    # closed loop its client sends the next request at once) and its latencies are NaN.
    capacity = min(m.kv_blocks for m in by_k.values()) * BLOCK_SIZE
    refused = p_len + o_len + max(m.k + m.lookahead for m in by_k.values()) > capacity
    window = min((m.max_len for m in by_k.values() if m.max_len), default=None)
    if window is not None:
        refused |= p_len + o_len > window
    if not refused.any():
        return _Scheduler(
            model, load, rng_accept, p_len, o_len, arrival, levels, cond, limits
        ).run()
    keep = np.flatnonzero(~refused)
    if load.rate is not None:
        arrival_kept = arrival[keep]
    else:
        arrival_kept = np.full(len(keep), np.inf)
        arrival_kept[: min(load.concurrency, len(keep))] = 0.0
        arrival = np.full(n, np.nan)  # a refused request of a closed loop takes no turn
    if len(keep):
        inner = _Scheduler(
            model,
            load,
            rng_accept,
            p_len[keep],
            o_len[keep],
            arrival_kept,
            levels[keep],
            cond[keep],
            limits,
        ).run()
    else:
        no_itl = (np.zeros(0), np.zeros(0))
        inner = RunResult(
            requests=pd.DataFrame({c: np.zeros(0) for c in ("arrival_ms", *_LATENCIES)}),
            queue=pd.DataFrame({"time_ms": np.zeros(0), "waiting": np.zeros(0, np.int64)}),
            itl_chunk_ms=no_itl,
            itl_token_ms=no_itl,
            preemptions=0,
            steps=0,
            extra={"time_average_in_system": 0.0},
        )
    columns = {"arrival_ms": arrival, **dict.fromkeys(_LATENCIES)}
    for c, values in columns.items():
        full = np.full(n, np.nan) if values is None else values.copy()
        full[keep] = inner.requests[c].to_numpy()
        columns[c] = full
    inner.requests = pd.DataFrame(
        {
            "arrival_ms": columns["arrival_ms"],
            "prompt_len": p_len,
            "output_len": o_len,
            "ttft_ms": columns["ttft_ms"],
            "tpot_ms": columns["tpot_ms"],
            "e2e_ms": columns["e2e_ms"],
            "first_position_acceptance": levels,
        }
    )
    inner.extra["refused"] = int(refused.sum())
    return inner


_LATENCIES = ("ttft_ms", "tpot_ms", "e2e_ms")


class _Scheduler:
    """`run`'s engine over the requests drawn (every one of which fits the KV cache): a
    vLLM V1 step scheduler over a struct of per-request arrays.

    One pass of `run` reads top to bottom: `follow_schedule` (a K schedule's K for this
    batch), `admit_arrivals`, `schedule_step` (running requests first: prefill chunks and
    decode blocks; `preempt` the newest while the KV cache overflows; then admit waiting
    requests in arrival order), `advance` (price the step and move the clock, over a run
    of identical steps where nothing can change), `finish_prefills` (requests whose prompt
    is in start or resume decoding) and `finish` (requests that emitted their last token
    leave; a closed loop sends the next). Decode progress is not stepped token by token:
    a decoding request's rounds are a segment along its drawn path (`_Paths`), opened
    when it starts decoding and closed when it stops (`open_segments`, `close_segments`).
    """

    def __init__(
        self, model, load, rng_accept, p_len, o_len, arrival, levels, cond, limits
    ) -> None:
        schedule = model if isinstance(model, Schedule) else None
        self.schedule = schedule
        by_k = schedule.models if schedule else {model.k: model}
        n, kmax = len(p_len), max(by_k)
        self.n, self.load, self.levels = n, load, levels
        self.max_tokens = limits["max_num_batched_tokens"]
        self.max_seqs = limits["max_num_seqs"]
        self.paths = _Paths(rng_accept, np.cumprod(cond, axis=1), o_len, by_k)
        self.p_len, self.o_len, self.arrival = p_len, o_len, arrival
        self.arrival_at = arrival.tolist()  # the same, for reading one at a time
        # Scalar per-request state lives in lists (a list item costs a fraction of a numpy
        # scalar's access); what segments read and write in bulk stays in arrays.
        self.p_list = p_len.tolist()
        self.o_list = o_len.tolist()
        self.filled = [0] * n  # prompt tokens (recomputed ones after a preemption) in KV
        self.target = list(self.p_list)  # tokens to prefill before the request decodes
        self.chunk = [0] * n
        self.generated = np.zeros(n, np.int64)  # as of the start of the current segment
        self.done_rounds = np.zeros(n, np.int64)  # decode rounds, as of the same
        self.kv_off = np.zeros(n, np.int64)  # KV tokens minus generated ones, decoding
        self.seg_step = np.zeros(n, np.int64)  # engine step the current segment starts at
        self.seg_prev = np.full(n, np.nan)  # the emission before the segment's first round
        self.seg_k = np.zeros(n, np.int64)
        self.flat_at = np.zeros(n, np.int64)  # flat round index - step, while decoding
        self.kv_at = np.zeros(n, np.int64)  # KV tokens - cum[flat round], while decoding
        self.finish_step = np.zeros(n, np.int64)
        self.first = np.full(n, np.nan)
        self.finish_ms = np.full(n, np.nan)
        self.last_emit = np.full(n, np.nan)
        self.closed: list[tuple[np.ndarray, ...]] = []
        self.log: list[tuple[int, int, float, float]] = []  # (first step, steps, clock, ms)
        self.queue_t: list[float] = []
        self.queue_n: list[int] = []
        self.waiting: deque[int] = deque()
        # Insertion-ordered sets (dicts): removing a finished request costs O(1), and the
        # order is the order of a list the finished ones were filtered out of.
        self.running: dict[int, None] = {}
        self.prefilling: list[int] = []
        self.decoding: dict[int, None] = {}
        self.dec = self.dec_flat = self.dec_reserve = self.dec_finish = np.zeros(0, np.int64)
        self.dec_first = 0
        self.changed = False
        self.step, self.clock, self.done, self.arrived, self.preemptions = 0, 0.0, 0, 0, 0
        self.area = 0.0  # requests in the engine x ms, for the time-average (Little's law)
        self.next_closed = min(load.concurrency or 0, n)
        self.model = by_k[kmax] if schedule is None else model
        self.k = self.model.k if schedule is None else -1
        self.decode_ms = [] if schedule is not None else self.model.decode_ms.tolist()

    def run(self) -> RunResult:
        """Step the engine until every request has finished (or nothing more arrives)."""
        n, arrival, running, waiting = self.n, self.arrival_at, self.running, self.waiting
        view, admit_arrivals, schedule_step = self.view, self.admit_arrivals, self.schedule_step
        advance, finish_prefills, finish = self.advance, self.finish_prefills, self.finish
        follow = self.follow_schedule if self.schedule is not None else None
        while self.done < n:
            if self.changed:
                view()
            if follow is not None:
                follow()
            if self.arrived < n and arrival[self.arrived] <= self.clock:
                admit_arrivals()
            if not running and not waiting:
                if self.arrived >= n or not math.isfinite(arrival[self.arrived]):
                    break
                self.clock = float(arrival[self.arrived])
                continue
            used, prefill_tokens = schedule_step()
            if self.changed:
                view()
            if not running:
                if self.arrived < n and math.isfinite(arrival[self.arrived]):
                    self.clock = max(self.clock, float(arrival[self.arrived]))
                    continue
                break
            rounds = advance(used, prefill_tokens)
            ended = finish_prefills(rounds) if self.prefilling else []
            if ended or (self.dec_first <= self.step and len(self.dec)):
                finish(ended)
        return self.result()

    def view(self) -> None:
        """The decoding requests as arrays: ids, path offsets, finish steps, the first
        finish, and `reserve`, which with the path's tokens gives each one's KV blocks
        this step, `(cum[flat + step] + reserve) // BLOCK_SIZE` (with K = 0, `reserve`
        already holds `flat`: `(reserve + step) // BLOCK_SIZE`)."""
        dec = np.fromiter(self.decoding, np.int64, len(self.decoding))
        finish = self.finish_step[dec]
        flat = self.flat_at[dec]
        # vLLM reserves the step's new tokens and the draft's lookahead slots.
        reserve = self.kv_at[dec] + (self.k + self.model.lookahead + BLOCK_SIZE - 1)
        if not self.k:
            reserve += flat
        self.dec, self.dec_flat, self.dec_reserve, self.dec_finish = dec, flat, reserve, finish
        self.dec_first = int(finish.min()) if len(dec) else 0
        self.changed = False

    def open_segments(self, ids: np.ndarray) -> None:
        """Start decode segments for requests `ids` at this step and K."""
        paths, step, k = self.paths, self.step, self.k
        done_rounds, generated = self.done_rounds[ids], self.generated[ids]
        self.seg_step[ids] = step
        self.seg_prev[ids] = self.last_emit[ids]
        self.seg_k[ids] = k
        start = paths.off[ids] + done_rounds
        cum = paths.cum.get(k)
        base = cum[start] if k else start
        self.flat_at[ids] = start - step
        self.kv_at[ids] = generated + self.kv_off[ids] - base
        self.finish_step[ids] = step + paths.rounds_to(
            k, ids, done_rounds, self.o_len[ids] - generated
        )

    def close_segments(self, ids: np.ndarray) -> None:
        """End the decode segments of requests `ids` at this step: their tokens so far."""
        rounds = self.step - self.seg_step[ids]
        ran = rounds > 0
        ids, rounds = ids[ran], rounds[ran]
        if not len(ids):
            return
        done_rounds, generated = self.done_rounds[ids], self.generated[ids]
        self.closed.append(
            (ids, self.seg_step[ids], done_rounds, rounds, generated, self.seg_prev[ids],
             self.seg_k[ids])
        )  # fmt: skip
        got = self.paths.tokens(self.k, ids, done_rounds, done_rounds + rounds)
        self.generated[ids] = np.minimum(generated + got, self.o_len[ids])
        self.done_rounds[ids] += rounds
        self.last_emit[ids] = self.clock

    def follow_schedule(self) -> None:
        """Switch to the K the schedule gives this batch, re-opening decode segments."""
        picked = self.schedule.pick(len(self.running) + (1 if self.waiting else 0))
        if picked.k == self.k:
            return
        if len(self.dec):
            self.close_segments(self.dec)
            self.model, self.k = picked, picked.k
            self.open_segments(self.dec)
        self.model, self.k = picked, picked.k
        self.decode_ms = picked.decode_ms.tolist()
        self.view()

    def admit_arrivals(self) -> None:
        """Requests that have arrived by now join the waiting queue."""
        arrival, waiting, n, clock = self.arrival_at, self.waiting, self.n, self.clock
        arrived = self.arrived
        while arrived < n and arrival[arrived] <= clock:
            waiting.append(arrived)
            arrived += 1
        self.arrived = arrived

    def schedule_step(self) -> tuple[int, int]:
        """This step's batch, vLLM V1's way: running requests first (their prefill chunks
        within the token budget, every decode's 1 + K tokens), preempting the newest while
        the KV blocks overflow; then waiting requests in arrival order while seats, budget
        and blocks last. Returns (KV blocks used, prefill tokens)."""
        filled, target, chunk, dec, k = self.filled, self.target, self.chunk, self.dec, self.k
        left = self.max_tokens - len(dec) * (1 + k)
        used = 0
        prefill_tokens = 0
        for r in self.prefilling:
            c = max(0, min(target[r] - filled[r], left))
            chunk[r] = c
            left -= c
            prefill_tokens += c
            used += -(-(filled[r] + c) // BLOCK_SIZE)
        blocks = None
        if len(dec):
            step = self.step
            if k:
                blocks = (self.paths.cum[k][self.dec_flat + step] + self.dec_reserve) // BLOCK_SIZE
            else:
                blocks = (self.dec_reserve + step) // BLOCK_SIZE
            used += int(blocks.sum())
        if used > self.model.kv_blocks and self.running:
            left, used, prefill_tokens = self.preempt(left, used, prefill_tokens, blocks)
        if self.waiting:
            left, used, prefill_tokens = self.admit(left, used, prefill_tokens)
        return used, prefill_tokens

    def preempt(self, left, used, prefill_tokens, blocks) -> tuple[int, int, int]:
        """Free the newest running request while the KV blocks overflow: its blocks go,
        its prompt and output are recomputed later, it waits at the queue's front."""
        running, chunk, filled = self.running, self.chunk, self.filled
        while running and used > self.model.kv_blocks:
            victim = running.popitem()[0]
            self.preemptions += 1
            if victim in self.prefilling:
                self.prefilling.remove(victim)
                left += chunk[victim]
                prefill_tokens -= chunk[victim]
                used -= -(-(filled[victim] + chunk[victim]) // BLOCK_SIZE)
            else:
                where = list(self.decoding).index(victim)
                used -= int(blocks[where])
                self.close_segments(np.array([victim]))
                del self.decoding[victim]
                blocks = np.delete(blocks, where)
                self.changed = True
            chunk[victim] = 0
            self.target[victim] = self.p_list[victim] + int(self.generated[victim])
            filled[victim] = 0
            self.waiting.appendleft(victim)
        return left, used, prefill_tokens

    def admit(self, left, used, prefill_tokens) -> tuple[int, int, int]:
        """Waiting requests start prefilling in arrival order, FCFS: the first that lacks
        a seat (`max_num_seqs`), budget or blocks stops the queue."""
        waiting, running, target, kv_blocks = (
            self.waiting,
            self.running,
            self.target,
            self.model.kv_blocks,
        )
        while waiting and len(running) < self.max_seqs and left > 0:
            r = waiting[0]
            take = min(target[r], left)
            extra = -(-take // BLOCK_SIZE)
            if used + extra > kv_blocks:
                break
            waiting.popleft()
            running[r] = None
            self.prefilling.append(r)
            self.chunk[r] = take
            left -= take
            prefill_tokens += take
            used += extra
        return left, used, prefill_tokens

    def advance(self, used: int, prefill_tokens: int) -> int:
        """Price the step and move the clock over it, or over a run of identical steps
        where nothing can change; returns the steps taken."""
        model, decode_ms, n_dec = self.model, self.decode_ms, len(self.dec)
        step_ms = float(
            decode_ms[min(n_dec, len(decode_ms) - 1)] + model.prefill_ms_per_token * prefill_tokens
        )
        rounds = self.repeats(used, step_ms)
        self.log.append((self.step, rounds, self.clock, step_ms))
        self.area += (len(self.waiting) + len(self.running)) * rounds * step_ms
        self.clock += rounds * step_ms
        self.step += rounds
        self.queue_t.append(self.clock)
        self.queue_n.append(len(self.waiting))
        return rounds

    def repeats(self, used: int, step_ms: float) -> int:
        """How many identical steps run before anything can change."""
        model, prefilling = self.model, self.prefilling
        next_arrival = None
        if self.arrived < self.n and math.isfinite(self.arrival_at[self.arrived]):
            next_arrival = self.arrival_at[self.arrived]
        if not prefilling:
            # Nothing prefills and every waiting request is blocked (seats, blocks or budget
            # free up only when a request finishes): steps repeat until the next arrival,
            # the first finish, or the point where the KV cache could run out.
            rounds = self.dec_first - self.step
            if next_arrival is not None:
                rounds = min(rounds, math.floor((next_arrival - self.clock) / step_ms))
            growth = len(self.dec) * (1 + self.k + model.lookahead)
            return max(1, min(rounds, (model.kv_blocks - used) * BLOCK_SIZE // growth))
        if (
            not len(self.dec)
            and self.chunk[prefilling[0]] == self.max_tokens
            and (
                self.schedule is None
                or self.schedule.pick(len(self.running) + (1 if self.waiting else 0)) is model
            )
        ):
            # Nothing decodes and the first prompt takes the whole token budget, so no one
            # else prefills or is admitted (and a K schedule keeps its K): steps repeat
            # until the step before its last chunk, the next arrival, or the point where
            # its blocks would not fit.
            r = prefilling[0]
            c, filled = self.chunk[r], self.filled[r]
            rounds = (self.target[r] - filled - 1) // c
            if next_arrival is not None:
                rounds = min(rounds, math.floor((next_arrival - self.clock) / step_ms))
            others = used - -(-(filled + c) // BLOCK_SIZE)
            return max(1, min(rounds, ((model.kv_blocks - others) * BLOCK_SIZE - filled) // c))
        return 1

    def finish_prefills(self, rounds: int) -> list[int]:
        """Prefill chunks land; a request whose prompt is in emits its first token and
        starts decoding (or resumes after a preemption). Returns requests that ended
        (an output of one token ends at its first)."""
        chunk, filled, target, generated = self.chunk, self.filled, self.target, self.generated
        ended: list[int] = []
        if not self.prefilling:
            return ended
        fresh, resumed = [], []
        clock = self.clock
        for r in list(self.prefilling):
            if chunk[r] == 0:
                continue
            filled[r] += chunk[r] * rounds
            if filled[r] < target[r]:
                continue
            self.prefilling.remove(r)
            if generated[r] == 0:
                self.first[r] = self.last_emit[r] = clock
                generated[r] = 1
                (ended if self.o_list[r] <= 1 else fresh).append(r)
            else:
                self.kv_off[r] = filled[r] - generated[r]
                resumed.append(r)
        if fresh:
            self.start_decoding(fresh)
        if resumed:
            self.open_segments(np.array(resumed, dtype=np.int64))
            self.decoding.update(dict.fromkeys(resumed))
        if fresh or resumed:
            self.changed = True
        return ended

    def start_decoding(self, fresh: list[int]) -> None:
        """First decode segments, from each request's path start at this K."""
        paths, step, k, clock, p_list = self.paths, self.step, self.k, self.clock, self.p_list
        base, need = paths.fresh(k)
        kv_off, seg_step, seg_prev, seg_k = self.kv_off, self.seg_step, self.seg_prev, self.seg_k
        flat_at, kv_at, finish_step, off = self.flat_at, self.kv_at, self.finish_step, paths.off
        for r in fresh:
            kv_off[r] = p_list[r] - 1
            seg_step[r], seg_prev[r], seg_k[r] = step, clock, k
            flat_at[r] = off[r] - step
            kv_at[r] = p_list[r] - base[r]
            finish_step[r] = step + need[r]
        self.decoding.update(dict.fromkeys(fresh))

    def finish(self, ended: list[int]) -> None:
        """Requests past their last token leave; a closed loop sends the next ones."""
        dec = self.dec
        if len(dec) and self.dec_first <= self.step:
            # A finished request's last segment stays in the per-request arrays.
            over = dec[self.dec_finish <= self.step].tolist()
            for r in over:
                del self.decoding[r]
            ended.extend(over)
            self.changed = True
        if not ended:
            return
        self.finish_ms[ended] = self.clock
        self.done += len(ended)
        for r in ended:
            del self.running[r]
        if self.load.concurrency is not None:
            for _ in range(len(ended)):
                if self.next_closed < self.n:
                    self.arrival[self.next_closed] = self.arrival_at[self.next_closed] = self.clock
                    self.waiting.append(self.next_closed)
                    self.next_closed += 1
            self.arrived = self.next_closed

    def result(self) -> RunResult:
        """The run: a row per request, the queue over time, the inter-token latencies."""
        o_len, first, finish, arrival = self.o_len, self.first, self.finish_ms, self.arrival
        last = np.flatnonzero(o_len > 1)
        seg_step = self.seg_step[last]
        self.closed.append(
            (last, seg_step, self.done_rounds[last], self.finish_step[last] - seg_step,
             self.generated[last], self.seg_prev[last], self.seg_k[last])
        )  # fmt: skip
        itl_chunk, itl_token = _itl(self.paths, self.log, self.closed, o_len)
        table = pd.DataFrame(
            {
                "arrival_ms": arrival,
                "prompt_len": self.p_len,
                "output_len": o_len,
                "ttft_ms": first - arrival,
                "tpot_ms": np.where(o_len > 1, (finish - first) / np.maximum(o_len - 1, 1), np.nan),
                "e2e_ms": finish - arrival,
                "first_position_acceptance": self.levels,
            }
        )
        clock = self.clock
        return RunResult(
            requests=table,
            queue=pd.DataFrame({"time_ms": self.queue_t, "waiting": self.queue_n}),
            itl_chunk_ms=itl_chunk,
            itl_token_ms=itl_token,
            preemptions=self.preemptions,
            steps=self.step,
            extra={"time_average_in_system": self.area / clock if clock > 0 else 0.0},
        )


def _itl(paths: _Paths, log, segments, o_len):
    """Inter-token latencies per chunk and per token, as weighted samples, rebuilt from the
    decode segments. A segment's first chunk runs from the request's previous emission to
    the end of its first step; every later chunk lasts one step, so those are counted per
    run of equal steps (`log`) rather than listed one by one."""
    empty = (np.zeros(0), np.zeros(0))
    if not log:
        return empty, empty
    table = np.array(log, dtype=float)  # exact: step counts stay far below 2**53
    first_step, steps = table[:, 0].astype(np.int64), table[:, 1].astype(np.int64)
    clock, step_ms = table[:, 2], table[:, 3]
    total = int(steps.sum())
    entry = np.repeat(np.arange(len(steps)), steps)
    ends = np.repeat(clock, steps) + (np.arange(total) - first_step[entry] + 1) * step_ms[entry]
    req, start, done, rounds, before, prev, ks = (
        np.concatenate(c) for c in zip(*segments, strict=True)
    )
    o = o_len[req]
    head = ends[start] - prev
    head_tokens = np.ones(len(req), np.int64)
    for k in np.unique(ks[ks > 0]):
        m = ks == k
        got = paths.tokens(int(k), req[m], done[m], done[m] + 1)
        head_tokens[m] = np.minimum(before[m] + got, o[m]) - before[m]
    # Later rounds of one-token segments: a count per step, summed per run of steps.
    single = ks == 0
    diff = np.bincount(start[single] + 1, minlength=total + 1)[: total + 1]
    diff -= np.bincount(start[single] + rounds[single], minlength=total + 1)[: total + 1]
    per_entry = np.add.reduceat(np.cumsum(diff)[:total], first_step).astype(float)
    chunk_v, chunk_w = [head, step_ms], [np.ones(len(head)), per_entry]
    token_v, token_w = [head / head_tokens, step_ms], [head_tokens.astype(float), per_entry]
    many = np.flatnonzero(~single & (rounds > 1))
    if len(many):
        later = rounds[many] - 1
        seg = np.repeat(many, later)
        j = np.arange(int(later.sum())) - np.repeat(np.cumsum(later) - later, later) + 1
        at = start[seg] + j
        tokens = np.empty(len(seg), np.int64)
        kinds = np.unique(ks[many])
        for k in kinds:
            m = ks[seg] == k if len(kinds) > 1 else slice(None)
            r, d, b, jm = req[seg][m], done[seg][m], before[seg][m], j[m]
            upto = paths.tokens(int(k), r, d, d + jm + 1)
            prior = paths.tokens(int(k), r, d, d + jm)
            tokens[m] = np.minimum(b + upto, o_len[r]) - np.minimum(b + prior, o_len[r])
        width = int(tokens.max()) + 1
        counts = np.bincount(entry[at] * width + tokens, minlength=len(steps) * width)
        counts = counts.reshape(len(steps), width)
        chunk_v.append(step_ms)
        chunk_w.append(counts.sum(axis=1).astype(float))
        e, size = np.nonzero(counts)
        token_v.append(step_ms[e] / size)
        token_w.append((counts[e, size] * size).astype(float))
    keep = [w > 0 for w in chunk_w]
    chunk = (
        np.concatenate([v[m] for v, m in zip(chunk_v, keep, strict=True)]),
        np.concatenate([w[m] for w, m in zip(chunk_w, keep, strict=True)]),
    )
    keep = [w > 0 for w in token_w]
    token = (
        np.concatenate([v[m] for v, m in zip(token_v, keep, strict=True)]),
        np.concatenate([w[m] for w, m in zip(token_w, keep, strict=True)]),
    )
    return chunk, token


PERCENTILES = (50, 90, 99)


def latency_summary(result: RunResult) -> dict:
    """The part of `summarise` no SLO enters: P50/P90/P99 and mean of TTFT, TPOT, ITL (per
    chunk and per token) and end-to-end latency, throughput (of the requests that finished),
    queue and engine counts (`refused`: requests longer than the context window or than
    the KV cache holds), and `span_s`, the seconds from the first arrival to the last
    finish (goodput's divisor)."""
    req = result.requests
    finished = np.isfinite(req["e2e_ms"].to_numpy())
    span_s = 0.0
    if finished.any():
        end = np.nanmax(req["arrival_ms"] + req["e2e_ms"])
        span_s = (end - np.nanmin(req["arrival_ms"])) / 1e3
    out: dict = {}
    for name, (values, weights) in (
        ("ttft", (req["ttft_ms"].to_numpy(), np.ones(len(req)))),
        ("tpot", (req["tpot_ms"].to_numpy(), np.ones(len(req)))),
        ("itl", result.itl_chunk_ms),
        ("itl_token", result.itl_token_ms),
        ("e2e", (req["e2e_ms"].to_numpy(), np.ones(len(req)))),
    ):
        ok = np.isfinite(values) & (weights > 0)
        for q, v in zip(
            PERCENTILES, weighted_percentiles(values, weights, PERCENTILES), strict=True
        ):
            out[f"{name}_p{q}_ms"] = v
        total = weights[ok].sum()
        out[f"{name}_mean_ms"] = (
            float((values[ok] * weights[ok]).sum() / total) if total else np.nan
        )
    tokens = req["output_len"].to_numpy()[finished].sum()
    out["throughput_tok_s"] = float(tokens / span_s) if span_s > 0 else np.nan
    out["request_throughput_rps"] = float(finished.sum() / span_s) if span_s > 0 else np.nan
    out["span_s"] = float(span_s)
    out["mean_in_system"] = result.extra.get("time_average_in_system", np.nan)
    out["max_waiting"] = int(result.queue["waiting"].max()) if len(result.queue) else 0
    out["refused"] = result.extra.get("refused", 0)
    out["preemptions"] = result.preemptions
    out["steps"] = result.steps
    return out


def summarise(
    result: RunResult, *, slo_ttft_ms: float, slo_tpot_ms: float, latency: dict | None = None
) -> dict:
    """P50/P90/P99 of TTFT, TPOT, ITL (per chunk and per token) and end-to-end latency;
    output tokens per second; goodput = requests per second meeting both SLOs.
    `latency`, what `latency_summary` gave for this run, saves computing it again (a
    caller that varies only the SLOs)."""
    lat = latency_summary(result) if latency is None else latency
    req = result.requests
    good = (req["ttft_ms"] <= slo_ttft_ms) & (req["tpot_ms"].fillna(0) <= slo_tpot_ms)
    span_s = lat["span_s"]
    out: dict = {}
    for key, value in lat.items():
        if key == "span_s":
            continue
        out[key] = value
        if key == "request_throughput_rps":
            out["goodput_rps"] = float(good.sum() / span_s) if span_s > 0 else np.nan
            out["slo_attainment"] = float(good.mean())
    return out


def arms(scenario: dict) -> tuple[tuple[str, bool], ...]:
    """(arm, speculative) of each arm `run_arms` runs: the baseline, and the speculative
    arm unless the method is none."""
    if str(scenario.get("method", "none")) != "none":
        return (("baseline", False), ("spec", True))
    return (("baseline", False),)


def price_arms(
    scenario: dict,
    prompt_mean: float,
    output_mean: float,
    *,
    k_schedule=None,
    defaults: ModelDefaults = DEFAULTS,
    calibration=None,
    gpus=None,
    models=None,
) -> list[tuple[str, StepModel | Schedule]]:
    """The step model of each arm of `run_arms`, (arm, model): the baseline, and the
    speculative arm unless the method is none. They depend on the scenario and the mean
    lengths, not on the load, so a caller that sweeps the load prices them once."""
    sized = {**scenario, "prompt_len": prompt_mean, "output_len": output_mean}
    priced = dict(defaults=defaults, calibration=calibration, gpus=gpus, models=models)
    out = []
    for arm, spec in arms(scenario):
        if spec and k_schedule:
            out.append((arm, schedule_model(sized, k_schedule, **priced)))
        else:
            out.append((arm, step_model(sized, speculative=spec, **priced)))
    return out


def run_arms(
    scenario: dict,
    load: Load,
    prompt: Lengths,
    output: Lengths,
    *,
    acceptance_spread: float = 0.1,
    k_schedule=None,
    defaults: ModelDefaults = DEFAULTS,
    calibration=None,
    gpus=None,
    models=None,
    arm_models=None,
) -> list[tuple[str, int | str, RunResult]]:
    """Both arms of one scenario under one load, with the same arrivals, lengths and seed
    in each: (arm, K or "schedule", run). `k_schedule`, (lo, hi, k) batch-size ranges,
    makes the speculative arm draft K by batch size. `arm_models`, what `price_arms` gave
    for this scenario and these mean lengths, saves pricing the steps again. The SLOs
    only enter `summarise`, so a caller that varies them can keep these runs."""
    if arm_models is None:
        arm_models = price_arms(
            scenario,
            prompt.mean,
            output.mean,
            k_schedule=k_schedule,
            defaults=defaults,
            calibration=calibration,
            gpus=gpus,
            models=models,
        )
    out = []
    for arm, model in arm_models:
        result = run(
            model,
            load,
            prompt,
            output,
            acceptance_spread=acceptance_spread,
            max_num_batched_tokens=defaults.max_num_batched_tokens,
            max_num_seqs=defaults.max_num_seqs,
        )
        out.append((arm, model.k if isinstance(model, StepModel) else "schedule", result))
    return out


def summarise_arms(
    arms: list[tuple[str, int | str, RunResult]],
    load: Load,
    *,
    slo_ttft_ms: float,
    slo_tpot_ms: float,
    latencies: list[dict] | None = None,
) -> pd.DataFrame:
    """A summary row per arm of `run_arms`, against these SLOs; `latencies`, each arm's
    `latency_summary` in the same order, saves computing them again."""
    latencies = [None] * len(arms) if latencies is None else latencies
    return pd.DataFrame(
        [
            {
                "arm": arm,
                "rate": load.rate,
                "concurrency": load.concurrency,
                "requests": load.requests,
                "k": k,
                **summarise(
                    result, slo_ttft_ms=slo_ttft_ms, slo_tpot_ms=slo_tpot_ms, latency=latency
                ),
            }
            for (arm, k, result), latency in zip(arms, latencies, strict=True)
        ]
    )


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
    arm_models=None,
) -> pd.DataFrame:
    """Both arms of one scenario under one load (`run_arms`, which takes `arm_models`), a
    summary row per arm (`baseline`, `spec`)."""
    arms = run_arms(
        scenario,
        load,
        prompt,
        output,
        acceptance_spread=acceptance_spread,
        k_schedule=k_schedule,
        defaults=defaults,
        calibration=calibration,
        gpus=gpus,
        models=models,
        arm_models=arm_models,
    )
    return summarise_arms(arms, load, slo_ttft_ms=slo_ttft_ms, slo_tpot_ms=slo_tpot_ms)
