"""Acceptance measured in production: vLLM's `/metrics` scrape (Prometheus text format).

Reads the speculative-decoding counters of vLLM's V1 engine
(`vllm:spec_decode_num_drafts`, `..._num_draft_tokens`, `..._num_accepted_tokens`,
`..._num_accepted_tokens_per_pos{position="i"}`, each with or without the `_total`
suffix Prometheus adds to counters) and of the V0 engine (`..._num_emitted_tokens`,
which needs K to be given). Counters are summed over label sets (engines, models) except
`position`. Parsed as text only.

A scrape is checked before it is trusted: counts must be finite and >= 0, positions plain
integers below `MAX_POSITIONS`, at least one draft counted, and the counters must agree
with each other (`InconsistentScrape` names each contradiction).

Notation in the docstrings: R = num_drafts (rounds), D = num_draft_tokens,
A = num_accepted_tokens, a_j = accepted_per_pos at position j (1-based; vLLM's label is
j - 1), n = the number of per-position counters, r_j = rounds that drafted at least j tokens.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from simulator.errors import InputError
from simulator.model.acceptance import alpha_from_tau

MAX_SCRAPE_BYTES = 5 * 1024 * 1024
"""A full vLLM scrape is tens of kilobytes; 5 MB leaves room for many engines."""
MAX_POSITIONS = 64
"""Per-position counters a scrape may hold: servers draft at most a few tens of tokens, and
a larger position label would only make us allocate for it."""
INTEGER_TOLERANCE = 1e-6
"""Relative distance from an integer under which drafts per round (D / R) counts as a fixed K."""
_SUM_TOLERANCE = 1e-9
"""Relative slack when comparing sums of float counters, for their rounding only."""

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?\s*$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?\s*')
_DIGITS = re.compile(r"[0-9]+")
_PREFIX = "vllm:spec_decode_"
_PER_POS = "num_accepted_tokens_per_pos"
_COUNTERS = (
    "num_drafts",
    "num_draft_tokens",
    "num_accepted_tokens",
    "num_emitted_tokens",
    _PER_POS,
)
FROM_DRAFTS = "drafts per round"
FROM_POSITIONS = "per-position counters"
FROM_GIVEN = "K given"


class InconsistentScrape(InputError):
    """Counters that contradict each other; `problems` holds one message per contradiction."""

    def __init__(self, problems: list[str], *, file: str = ""):
        self.problems = tuple(problems)
        super().__init__("; ".join(self.problems), file=file)


@dataclass(frozen=True)
class SpecDecodeMetrics:
    """Counters read from a scrape and the acceptance figures derived from them."""

    num_drafts: float
    num_draft_tokens: float
    num_accepted_tokens: float
    num_emitted_tokens: float | None
    accepted_per_position: list[float] | None
    k: int
    """Draft tokens per round the figures are for: D / R under a fixed K; the deepest
    counted position n under a per-batch schedule; the given K for a V0 scrape."""
    mean_accepted_tokens: float
    """tau: tokens per target step incl. the bonus = 1 + accepted / drafts."""
    draft_acceptance_rate: float
    """vLLM's accepted / drafted = (tau - 1) / mean K; not alpha."""
    alpha: float
    """The i.i.d. per-token acceptance that gives this tau at this K; under a per-batch
    schedule the first position's rate a_1 / R (what alpha is in the i.i.d. model)."""
    per_position_rates: list[float] | None
    """P(position j accepted | position j drafted), j = 1..n: a_j / R under a fixed K;
    lower bounds for j >= 2 under a per-batch schedule (see `per_batch_position_bounds`)."""
    k_source: str = FROM_DRAFTS
    """Where k comes from: FROM_DRAFTS, FROM_POSITIONS or FROM_GIVEN."""
    mean_k: float = 0.0
    """D / R, draft tokens per round; not an integer under a per-batch schedule."""
    per_batch_k: bool = False
    """True when the scrape was taken under a K that varied from round to round."""
    per_position_upper: list[float] | None = None
    """Under a per-batch schedule, upper bounds matching `per_position_rates`."""
    notes: tuple[str, ...] = ()
    model_names: tuple[str, ...] = ()
    """The served models the counters name (`model_name` labels), sorted."""
    """What the reader should know about how the figures were derived."""

    @property
    def acceptance_per_position(self) -> str:
        """Per-position rates in the scenario table's `p1;p2;...` form ('' if absent)."""
        if not self.per_position_rates:
            return ""
        return ";".join(f"{p:.4f}" for p in self.per_position_rates)


def _parse_labels(text: str, line_no: int) -> dict[str, str]:
    labels: dict[str, str] = {}
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _LABEL.match(text, pos)
        if not m:
            raise InputError(f"cannot read the labels '{{{text}}}'", row=line_no, field="metrics")
        labels[m.group(1)] = m.group(2)
        pos = m.end()
    return labels


def _as_text(text: str | bytes, source: str) -> str:
    """The scrape as a str, refused when over MAX_SCRAPE_BYTES or not UTF-8."""
    if isinstance(text, bytes):
        if len(text) > MAX_SCRAPE_BYTES:
            raise InputError(
                f"is {len(text):,} bytes; the limit is {MAX_SCRAPE_BYTES:,}", file=source
            )
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError("is not UTF-8 text", file=source) from None
    if len(text) > MAX_SCRAPE_BYTES:
        raise InputError(f"is over {MAX_SCRAPE_BYTES:,} characters", file=source)
    return text


def _count(raw: str, name: str, line_no: int, source: str) -> float:
    """A sample's value as a count: a finite number >= 0."""
    try:
        value = float(raw)
    except ValueError:
        raise InputError(f"'{raw}' is not a number", file=source, row=line_no, field=name) from None
    if not math.isfinite(value) or value < 0:
        raise InputError(
            f"{value} must be a finite count >= 0", file=source, row=line_no, field=name
        )
    return value


def _position(labels: dict[str, str], name: str, line_no: int, source: str) -> int:
    """vLLM's 0-based `position` label, a plain ASCII integer below MAX_POSITIONS."""
    label = labels.get("position")
    if label is None or not _DIGITS.fullmatch(label):
        shown = "no position label" if label is None else f'position="{label[:20]}"'
        raise InputError(
            f"needs a position label that is a plain integer >= 0; found {shown}",
            file=source,
            row=line_no,
            field=name,
        )
    digits = label.lstrip("0") or "0"
    if len(digits) > len(str(MAX_POSITIONS)) or int(digits) >= MAX_POSITIONS:
        raise InputError(
            f'position="{label[:20]}" is beyond the {MAX_POSITIONS} positions a scrape may count',
            file=source,
            row=line_no,
            field=name,
        )
    return int(digits)


def model_names(text: str | bytes, source: str = "metrics") -> tuple[str, ...]:
    """The `model_name` labels on a scrape's speculative-decoding counters (vLLM labels
    every sample with the served model), sorted; () where none carries one."""
    names = set()
    for line_no, raw in enumerate(_as_text(text, source).splitlines(), start=1):
        m = _LINE.match(raw.strip())
        if m and m.group(1).startswith(_PREFIX):
            name = _parse_labels(m.group(3) or "", line_no).get("model_name", "").strip()
            if name:
                names.add(name[:200])
    return tuple(sorted(names))


def _read_counters(text: str, source: str) -> tuple[dict[str, float], dict[int, float]]:
    """Speculative-decoding counters summed over label sets: totals by short name, and the
    per-position accepted counts by 0-based position."""
    totals: dict[str, float] = {}
    per_pos: dict[int, float] = {}
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if not m:
            raise InputError(
                f"'{line[:80]}' is not a Prometheus sample line",
                file=source,
                row=line_no,
                field="metrics",
            )
        name = m.group(1)
        short = name.removeprefix(_PREFIX).removesuffix("_total")
        if not name.startswith(_PREFIX) or short not in _COUNTERS:
            continue
        value = _count(m.group(4), name, line_no, source)
        if short == _PER_POS:
            i = _position(_parse_labels(m.group(3) or "", line_no), name, line_no, source)
            per_pos[i] = per_pos.get(i, 0.0) + value
        else:
            totals[short] = totals.get(short, 0.0) + value
    _check_finite_sums(totals, per_pos, source)
    return totals, per_pos


def _check_finite_sums(totals: dict[str, float], per_pos: dict[int, float], source: str):
    """Finite samples can still add up to inf (two of 1e308)."""
    sums = {_PREFIX + k: v for k, v in totals.items()}
    sums[_PREFIX + _PER_POS] = math.fsum(per_pos.values())
    for name, value in sums.items():
        if not math.isfinite(value):
            raise InputError("adds up to an infinite count", file=source, field=name)


def _required(totals: dict[str, float], source: str) -> tuple[float, float]:
    """num_draft_tokens and num_accepted_tokens, which every scrape must have."""
    if not totals:
        raise InputError(
            "no speculative-decoding counters found (expected "
            "vllm:spec_decode_num_drafts, vllm:spec_decode_num_draft_tokens and "
            "vllm:spec_decode_num_accepted_tokens): was speculative decoding on?",
            file=source,
        )
    for short in ("num_draft_tokens", "num_accepted_tokens"):
        if short not in totals:
            name = _PREFIX + short
            raise InputError(f"the scrape has no {name} counter", file=source, field=name)
    return totals["num_draft_tokens"], totals["num_accepted_tokens"]


def _drafts(
    totals: dict[str, float], counts: list[float] | None, k: int | None, source: str
) -> tuple[float, int | None, str]:
    """R and, when the scrape has no drafts counter (V0), the K that gives R = D / K.

    Returns (R, K or None, where K comes from). With a drafts counter K is left to the
    counters (None); without one, the per-position counters give K = n, and only a scrape
    with neither uses the K given.
    """
    draft_tokens = totals["num_draft_tokens"]
    if "num_drafts" in totals:
        return totals["num_drafts"], None, FROM_DRAFTS
    if counts:
        fixed_k, where = len(counts), FROM_POSITIONS
    elif k:
        fixed_k, where = int(k), FROM_GIVEN
    else:
        raise InputError(
            "this scrape (vLLM V0) does not count drafts: give K, the "
            "num_speculative_tokens the server ran with",
            file=source,
            field="k",
        )
    if not _is_integer(draft_tokens / fixed_k):
        raise InputError(
            f"num_draft_tokens {draft_tokens:g} is not a multiple of K = {fixed_k} "
            f"({where}): a fixed-K server drafts K tokens per round. Was it run with "
            "another K?",
            file=source,
            field="k" if where == FROM_GIVEN else _PREFIX + "num_draft_tokens",
        )
    return draft_tokens / fixed_k, fixed_k, where


def _check_drafts(drafts: float, draft_tokens: float, source: str) -> None:
    """At least one whole draft: R below 1 would make tau = 1 + A / R unbounded."""
    field = _PREFIX + "num_drafts"
    if drafts == 0 and draft_tokens == 0:
        raise InputError(
            "the counters are zero: no speculative step has run yet", file=source, field=field
        )
    if drafts < 1:
        raise InputError(
            f"counts {drafts:g} drafts; a scrape needs at least 1 to measure acceptance",
            file=source,
            field=field,
        )


def _is_integer(x: float) -> bool:
    return abs(x - round(x)) <= INTEGER_TOLERANCE * max(1.0, abs(x))


def _exceeds(a: float, b: float) -> bool:
    return a > b * (1.0 + _SUM_TOLERANCE)


def _position_counts(per_pos: dict[int, float]) -> list[float] | None:
    """a_1..a_n, positions the scrape skipped counted as 0 (None without the counters)."""
    if not per_pos:
        return None
    return [per_pos.get(i, 0.0) for i in range(max(per_pos) + 1)]


def _rising(counts: list[float]) -> str | None:
    """Message for the first position accepted more often than the one before it."""
    for i in range(1, len(counts)):
        if counts[i] > counts[i - 1]:
            return (
                "per-position counters rise with position: "
                f'position="{i}" counts {counts[i]:g} accepted tokens, more than '
                f'position="{i - 1}" with {counts[i - 1]:g}; a draft token is accepted only '
                "after every token before it, so the counts cannot rise"
            )
    return None


def _total_problems(drafts: float, draft_tokens: float, accepted: float) -> list[str]:
    """Contradictions among R, D and A."""
    problems = []
    if _exceeds(accepted, draft_tokens):
        problems.append(
            f"more accepted than drafted: num_accepted_tokens {accepted:g} > "
            f"num_draft_tokens {draft_tokens:g}"
        )
    if draft_tokens < drafts:
        problems.append(
            f"fewer draft tokens than drafts: num_draft_tokens {draft_tokens:g} < "
            f"num_drafts {drafts:g}; every draft holds at least one token"
        )
    return problems


def _position_problems(
    counts: list[float], drafts: float, draft_tokens: float, accepted: float
) -> list[str]:
    """Contradictions between a_1..a_n and R, D, A (valid under any K schedule)."""
    rising = _rising(counts)
    problems = [rising] if rising else []
    if _exceeds(counts[0], drafts):
        problems.append(
            f'position="0" counts {counts[0]:g} accepted tokens in {drafts:g} drafts: a '
            "draft's first token is accepted at most once"
        )
    total = math.fsum(counts)
    if _exceeds(total, accepted):
        problems.append(
            "per-position sum above the accepted total: the num_accepted_tokens_per_pos "
            f"counters add up to {total:g} > num_accepted_tokens {accepted:g}"
        )
    needed = drafts + math.fsum(counts[1:])
    if draft_tokens >= drafts and _exceeds(needed, draft_tokens):
        problems.append(
            f"the per-position counters need at least {needed:g} draft tokens (one per "
            "draft plus one per token accepted past the first position), more than "
            f"num_draft_tokens {draft_tokens:g}"
        )
    return problems


def _schedule_problems(mean_k: float, counts: list[float] | None) -> list[str]:
    """A non-integer D / R is a per-batch K schedule, readable only from per-position counts."""
    if counts is None and not _is_integer(mean_k):
        return [
            f"non-integer drafts per round: num_draft_tokens / num_drafts = {mean_k:.4f}, "
            "so K varied from round to round (a per-batch K schedule); without the "
            "per-position counters (num_accepted_tokens_per_pos) the acceptance per "
            "position cannot be recovered, and rounding K would misstate alpha"
        ]
    if counts is not None and _exceeds(mean_k, len(counts)):
        return [
            f"drafts per round {mean_k:.4f} exceed the {len(counts)} per-position counters: "
            "the scrape drafted positions it does not count"
        ]
    return []


def _check_consistency(
    drafts: float,
    draft_tokens: float,
    accepted: float,
    counts: list[float] | None,
    source: str,
) -> None:
    """Raise InconsistentScrape naming every contradiction among the counters."""
    problems = _total_problems(drafts, draft_tokens, accepted)
    if counts is not None:
        problems += _position_problems(counts, drafts, draft_tokens, accepted)
    if draft_tokens >= drafts:
        problems += _schedule_problems(draft_tokens / drafts, counts)
    if problems:
        raise InconsistentScrape(problems, file=source)


def per_batch_position_bounds(
    counts: list[float], drafts: float, draft_tokens: float
) -> tuple[list[float], list[float]]:
    """Bounds on p_j = a_j / r_j, per-position acceptance of a scrape taken under a per-batch
    K schedule, from what the scrape holds. Returns (lower, upper), j = 1..n, each in [0, 1].

    The scrape does not say r_j, the rounds that drafted at least j tokens, for j >= 2; it
    says r_1 = R, that r_j never rises with j, that r_j >= a_j (a token is accepted only
    where drafted) and that sum_j r_j = D. Hence, for j >= 2:

    - r_j <= min(R, (D - R - sum_{i>j} a_i) / (j - 1)), so p_j >= a_j / that. This is at
      least a_j / R (the rate with num_drafts as denominator); the lower bounds are then
      made non-increasing (a running minimum, still a lower bound of each p_j), as the
      planning pages require.
    - r_j >= max(a_j, (D - (j - 1) R) / (n - j + 1)) when no round drafted past the n
      counted positions, so p_j <= a_j / that (1 where nothing bounds r_j away from 0).

    p_1 = a_1 / R exactly: every round drafts position 1.
    """
    a = np.asarray(counts, dtype=float)
    n = len(a)
    j = np.arange(1, n + 1, dtype=float)
    accepted_deeper = np.concatenate([np.cumsum(a[::-1])[::-1][1:], [0.0]])
    deeper = j >= 2
    r_max = np.full(n, drafts)
    r_max[deeper] = np.minimum(
        drafts, (draft_tokens - drafts - accepted_deeper[deeper]) / (j[deeper] - 1)
    )
    r_min = np.full(n, drafts)
    r_min[deeper] = np.maximum(
        a[deeper], (draft_tokens - (j[deeper] - 1) * drafts) / (n - j[deeper] + 1)
    )
    lower = np.minimum.accumulate(_ratio(a, r_max, 0.0))
    upper = np.maximum(_ratio(a, r_min, 1.0), lower)
    return lower.tolist(), upper.tolist()


def _ratio(accepted: np.ndarray, rounds: np.ndarray, unknown: float) -> np.ndarray:
    """accepted / rounds clipped to [0, 1]; `unknown` where rounds is 0 (nothing accepted)."""
    safe = np.where(rounds > 0, rounds, 1.0)
    return np.where(rounds > 0, np.clip(accepted / safe, 0.0, 1.0), unknown)


def _fixed_k_figures(
    counts: list[float] | None, drafts: float, tau: float, k: int
) -> tuple[float, list[float] | None, list[str]]:
    """alpha, per-position rates a_j / R, and notes for a scrape taken at one K."""
    alpha = float(alpha_from_tau(min(tau, k + 1.0), k))
    if counts is None:
        return alpha, None, []
    notes = []
    if len(counts) < k:
        notes.append(
            f"The per-position counters cover positions 1-{len(counts)} of K = {k}; the "
            "planning pages extend the rates past them."
        )
    return alpha, [c / drafts for c in counts], notes


def _per_batch_note(mean_k: float, n: int) -> str:
    return (
        f"Drafts per round average {mean_k:.3f} with per-position counters up to position "
        f"{n}: the server ran a per-batch K schedule (K up to {n}). K was not rounded: "
        "position 1's rate is exact, deeper positions are lower bounds (the scrape does not "
        "say how many rounds drafted them), and α is position 1's rate."
    )


def _sum_note(counts: list[float] | None, accepted: float, drafts: float) -> list[str]:
    """A per-position sum below the accepted total: the two give different tau."""
    if counts is None or not _exceeds(accepted, math.fsum(counts)):
        return []
    total = math.fsum(counts)
    return [
        f"The per-position counters add up to {total:g}, below num_accepted_tokens "
        f"{accepted:g}: τ from the positions is {1 + total / drafts:.3f}, from the totals "
        f"{1 + accepted / drafts:.3f} (shown)."
    ]


def parse_vllm_metrics(
    text: str | bytes, *, k: int | None = None, source: str = "metrics"
) -> SpecDecodeMetrics:
    """Derive acceptance from a vLLM `/metrics` scrape.

    K comes from the scrape where it can: D / R (a V1 scrape at a fixed K), the
    per-position counters (a per-batch schedule, or a scrape without a drafts counter).
    `k` is used only for a V0 scrape with neither, which cannot tell K; otherwise a
    differing `k` is ignored and a note says so.

    Raises `InputError` when the text is not Prometheus exposition format, a count is
    negative, NaN, infinite or has a bad position label, there are no speculative-decoding
    counters, or fewer than one draft; `InconsistentScrape` (an `InputError`) when the
    counters contradict each other.
    """
    text = _as_text(text, source)
    totals, per_pos = _read_counters(text, source)
    draft_tokens, accepted = _required(totals, source)
    counts = _position_counts(per_pos)
    drafts, fixed_k, k_source = _drafts(totals, counts, k, source)
    _check_drafts(drafts, draft_tokens, source)
    _check_consistency(drafts, draft_tokens, accepted, counts, source)
    mean_k = draft_tokens / drafts
    tau = 1.0 + accepted / drafts
    per_batch = counts is not None and (not _is_integer(mean_k) or len(counts) > round(mean_k))
    upper = None
    if per_batch:
        rates, upper = per_batch_position_bounds(counts, drafts, draft_tokens)
        k_used, k_source, alpha = len(counts), FROM_POSITIONS, rates[0]
        notes = [_per_batch_note(mean_k, len(counts))]
    else:
        k_used = fixed_k or max(1, round(mean_k))
        alpha, rates, notes = _fixed_k_figures(counts, drafts, tau, k_used)
    notes += _sum_note(counts, accepted, drafts)
    if k and k_source != FROM_GIVEN and int(k) != k_used:
        notes.insert(
            0,
            f"The K typed ({int(k)}) was not used: the scrape measures K = {k_used} "
            f"from its {k_source}.",
        )
    return SpecDecodeMetrics(
        num_drafts=drafts,
        num_draft_tokens=draft_tokens,
        num_accepted_tokens=accepted,
        num_emitted_tokens=totals.get("num_emitted_tokens"),
        accepted_per_position=counts,
        k=int(k_used),
        mean_accepted_tokens=tau,
        draft_acceptance_rate=accepted / draft_tokens,
        alpha=float(alpha),
        per_position_rates=rates,
        k_source=k_source,
        mean_k=mean_k,
        per_batch_k=per_batch,
        per_position_upper=upper,
        notes=tuple(notes),
        model_names=model_names(text, source),
    )
