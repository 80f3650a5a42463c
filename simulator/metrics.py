"""Acceptance measured in production: vLLM's `/metrics` scrape (Prometheus text format).

Reads the speculative-decoding counters of vLLM's V1 engine
(`vllm:spec_decode_num_drafts`, `..._num_draft_tokens`, `..._num_accepted_tokens`,
`..._num_accepted_tokens_per_pos{position="i"}`, each with or without the `_total`
suffix Prometheus adds to counters) and of the V0 engine (`..._num_emitted_tokens`,
which needs K to be given). Counters are summed over label sets (engines, models) except
`position`. Parsed as text only.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from simulator.acceptance import alpha_from_tau
from simulator.errors import InputError

MAX_SCRAPE_BYTES = 5 * 1024 * 1024
"""A full vLLM scrape is tens of kilobytes; 5 MB leaves room for many engines."""

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?\s*$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?\s*')
_PREFIX = "vllm:spec_decode_"
_COUNTERS = (
    "num_drafts",
    "num_draft_tokens",
    "num_accepted_tokens",
    "num_emitted_tokens",
    "num_accepted_tokens_per_pos",
)


@dataclass(frozen=True)
class SpecDecodeMetrics:
    """Counters read from a scrape and the acceptance figures derived from them."""

    num_drafts: float
    num_draft_tokens: float
    num_accepted_tokens: float
    num_emitted_tokens: float | None
    accepted_per_position: list[float] | None
    k: int
    mean_accepted_tokens: float
    """tau: tokens per target step incl. the bonus = 1 + accepted / drafts."""
    draft_acceptance_rate: float
    """vLLM's accepted / drafted = (tau - 1) / K; not alpha."""
    alpha: float
    """The i.i.d. per-token acceptance that gives this tau at this K."""
    per_position_rates: list[float] | None
    """accepted_per_pos[i] / drafts: probability that position i+1 is accepted."""

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


def parse_vllm_metrics(
    text: str | bytes, *, k: int | None = None, source: str = "metrics"
) -> SpecDecodeMetrics:
    """Derive acceptance from a vLLM `/metrics` scrape.

    `k` is needed only for V0 scrapes, which do not count drafts. Raises `InputError`
    when the text is not Prometheus exposition format, has no speculative-decoding
    counters, or the counters are zero.
    """
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
        if not name.startswith(_PREFIX):
            continue
        short = name[len(_PREFIX) :].removesuffix("_total")
        if short not in _COUNTERS:
            continue
        try:
            value = float(m.group(4))
        except ValueError:
            raise InputError(
                f"'{m.group(4)}' is not a number", file=source, row=line_no, field=name
            ) from None
        if not math.isfinite(value) or value < 0:
            raise InputError(
                f"{value} must be a finite count >= 0", file=source, row=line_no, field=name
            )
        if short == "num_accepted_tokens_per_pos":
            labels = _parse_labels(m.group(3) or "", line_no)
            if "position" not in labels or not labels["position"].isdigit():
                raise InputError(
                    "needs a numeric position label", file=source, row=line_no, field=name
                )
            i = int(labels["position"])
            per_pos[i] = per_pos.get(i, 0.0) + value
        else:
            totals[short] = totals.get(short, 0.0) + value
    if not totals:
        raise InputError(
            "no speculative-decoding counters found (expected "
            "vllm:spec_decode_num_drafts, vllm:spec_decode_num_draft_tokens and "
            "vllm:spec_decode_num_accepted_tokens): was speculative decoding on?",
            file=source,
        )
    draft_tokens = totals.get("num_draft_tokens")
    accepted = totals.get("num_accepted_tokens")
    if draft_tokens is None or accepted is None:
        missing = (
            "vllm:spec_decode_num_draft_tokens"
            if draft_tokens is None
            else "vllm:spec_decode_num_accepted_tokens"
        )
        raise InputError(f"the scrape has no {missing} counter", file=source, field=missing)
    drafts = totals.get("num_drafts")
    emitted = totals.get("num_emitted_tokens")
    if drafts is None:
        if not k:
            raise InputError(
                "this scrape (vLLM V0) does not count drafts: give K, the "
                "num_speculative_tokens the server ran with",
                file=source,
                field="k",
            )
        drafts = draft_tokens / k
    if drafts <= 0 or draft_tokens <= 0:
        raise InputError(
            "the counters are zero: no speculative step has run yet",
            file=source,
            field="vllm:spec_decode_num_drafts",
        )
    if accepted > draft_tokens:
        raise InputError(
            "accepted tokens exceed drafted tokens",
            file=source,
            field="vllm:spec_decode_num_accepted_tokens",
        )
    k_measured = draft_tokens / drafts
    k_int = k or max(1, round(k_measured))
    tau = 1.0 + accepted / drafts
    positions = None
    counts = None
    if per_pos:
        n = max(per_pos) + 1
        counts = [per_pos.get(i, 0.0) for i in range(n)]
        positions = [min(1.0, c / drafts) for c in counts]
    return SpecDecodeMetrics(
        num_drafts=drafts,
        num_draft_tokens=draft_tokens,
        num_accepted_tokens=accepted,
        num_emitted_tokens=emitted,
        accepted_per_position=counts,
        k=int(k_int),
        mean_accepted_tokens=tau,
        draft_acceptance_rate=accepted / draft_tokens,
        alpha=float(alpha_from_tau(min(tau, k_int + 1), k_int)),
        per_position_rates=positions,
    )
