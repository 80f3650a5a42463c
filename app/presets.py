"""Workload presets: which published acceptance figure (data/acceptance_priors.csv) fills
the acceptance input for a workload, a method and a target. Never invents a figure: a
workload without a published row for the method returns None.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

import numpy as np

from simulator.inputs.catalog import method_decay
from simulator.inputs.scenarios import K_LIMIT
from simulator.inputs.specs import ModelSpec
from simulator.model.acceptance import IID, alpha_from_tau, extend_measured, positions_from_tau

PAIRS_CSV = Path(__file__).resolve().parent.parent / "data" / "draft_pairs.csv"
"""The sizes and family of each published draft-model pair in acceptance_priors.csv."""
WORKLOADS = ("chat", "code", "summarisation", "creative")
MEASURED = "measured"
"""The workload option that takes acceptance from a vLLM /metrics scrape."""


@dataclass(frozen=True)
class Prior:
    alpha: float
    tau: float | None
    k: int | None
    hint: str
    source: str
    derived_alpha: bool
    """True when the row gives tau at k and alpha comes from the i.i.d. inversion."""
    positions: tuple[float, ...] = ()
    """Per-position rates p_1..p_16 the pages plan with (see `how`)."""
    how: str = ""
    """Where the per-position rates come from: measured, or extended along a decay."""
    pair: str = ""
    """For a draft model: how near the published pair is to the scenario's."""

    def describe(self) -> str:
        what = f"tau {self.tau:g} at K={self.k}" if self.tau and self.k else ""
        tree = (
            "a dynamic tree's figure: a chain of K tokens, as the launch commands run, accepts less"
            if "tree" in self.hint.lower()
            else ""
        )
        parts = [self.hint, self.pair, what, tree, self.how]
        return "; ".join(p for p in parts if p)

    @property
    def positions_text(self) -> str:
        """The rates as the scenario column `acceptance_per_position` takes them."""
        return ";".join(f"{p:.6f}" for p in self.positions)


def _number(text: str | None) -> float | None:
    try:
        value = float(str(text).strip())
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower())


def _alpha(row: dict[str, str]) -> tuple[float, float | None, int | None, bool] | None:
    alpha = _number(row.get("acceptance_rate"))
    tau = _number(row.get("mean_accepted_tokens"))
    k = _number(row.get("k"))
    k_int = int(k) if k is not None and k >= 1 else None
    measured = [_number(v) for v in str(row.get("acceptance_per_position", "")).split(";")]
    if alpha is None and tau is None and measured and None not in measured:
        tau, k_int = 1.0 + sum(measured), len(measured)
    if alpha is not None and 0 <= alpha <= 1:
        return alpha, tau, k_int, False
    if tau is not None and k_int is not None and 1 <= tau <= k_int + 1:
        return float(alpha_from_tau(tau, k_int)), tau, k_int, True
    return None


def _positions(row: dict[str, str], method: str, value) -> tuple[tuple[float, ...], str]:
    """Per-position rates for a prior row, and how they were obtained."""
    measured = [_number(v) for v in str(row.get("acceptance_per_position", "")).split(";")]
    measured = [v for v in measured if v is not None]
    if measured and all(0 <= v <= 1 for v in measured):
        ext = extend_measured(np.array(measured, dtype=float), K_LIMIT, method_decay(method))
        return tuple(float(p) for p in ext[0]), (
            f"measured per position to K={len(measured)}, extended along the measured rates"
        )
    alpha, tau, k, _ = value
    decay = method_decay(method)
    if tau is not None and k is not None:
        pos = np.ravel(positions_from_tau(tau, k, K_LIMIT, decay))
        if decay == IID:
            return tuple(float(p) for p in pos), f"extended past K={k} as i.i.d."
        return tuple(float(p) for p in pos), (
            f"extended past K={k} along the {method} decay fitted on public per-position "
            "curves (not i.i.d.)"
        )
    return tuple(float(alpha) ** i for i in range(1, K_LIMIT + 1)), "only α published: i.i.d."


@cache
def _pairs() -> dict[str, dict[str, str]]:
    with open(PAIRS_CSV, newline="") as f:
        return {row["draft_hint"].strip(): row for row in csv.DictReader(f)}


def _ratio(x: float) -> str:
    return f"1:{1 / x:,.0f}" if x < 0.1 else f"1:{1 / x:.1f}"


def _pair_distance(hint: str, target: ModelSpec, draft: ModelSpec) -> tuple[float, str] | None:
    """How far a published draft-model pair is from the scenario's: the distance of the
    log size ratios, plus 0.5 when the family differs; and the words that say it."""
    pub = _pairs().get(hint)
    if pub is None or not target.total_params or not draft.total_params:
        return None
    theirs = float(pub["draft_params"]) / float(pub["target_params"])
    yours = draft.total_params / target.total_params
    same = pub["family"] == target.tokenizer
    distance = abs(math.log(yours / theirs)) + (0.0 if same else 0.5)
    words = (
        f"nearest published pair: size ratio {_ratio(theirs)} against your "
        f"{_ratio(yours)}, {'same' if same else 'another'} family"
    )
    return distance, words


def pick_prior(
    rows: list[dict[str, str]],
    workload: str,
    method: str,
    target: ModelSpec | None,
    *,
    draft: ModelSpec | None = None,
) -> Prior | None:
    """The published row for (workload, method) that best fits the target.

    A row whose draft hint names the target comes first, then a chain draft (engines verify
    a chain, and a tree's tau overstates a chain's), then file order. For a draft model
    with `draft` given, the published pair nearest to (target, draft) wins: nearest log
    size ratio, the same family counting half a log unit (data/draft_pairs.csv).
    """
    if method == "draft_model" and draft is not None and target is not None:
        by_pair = _pick_pair(rows, workload, target, draft)
        if by_pair is not None:
            return by_pair
    best: tuple[int, Prior] | None = None
    target_slugs = {slug(target.id), slug(target.name)} if target is not None else set()
    for row in rows:
        if row.get("workload", "").strip() != workload or row.get("method", "").strip() != method:
            continue
        value = _alpha(row)
        if value is None:
            continue
        hint = row.get("draft_hint", "").strip()
        hint_slug = slug(hint)
        score = 2 * any(s and s in hint_slug for s in target_slugs) + ("chain" in hint.lower())
        positions, how = _positions(row, method, value)
        prior = Prior(
            alpha=round(value[0], 3),
            tau=value[1],
            k=value[2],
            hint=hint,
            source=row.get("source", "").split("|")[0].strip(),
            derived_alpha=value[3],
            positions=positions,
            how=how,
        )
        if best is None or score > best[0]:
            best = (score, prior)
    return None if best is None else best[1]


def _pick_pair(rows, workload: str, target: ModelSpec, draft: ModelSpec) -> Prior | None:
    """The draft-model row for `workload` whose published pair is nearest the scenario's."""
    best: tuple[float, Prior] | None = None
    for row in rows:
        if row.get("workload", "").strip() != workload or row.get("method", "").strip() != (
            "draft_model"
        ):
            continue
        hint = row.get("draft_hint", "").strip()
        near = _pair_distance(hint, target, draft)
        value = _alpha(row)
        if near is None or value is None:
            continue
        prior = pick_prior([row], workload, "draft_model", None)
        if best is None or near[0] < best[0]:
            best = (near[0], replace(prior, pair=near[1]))
    return None if best is None else best[1]
