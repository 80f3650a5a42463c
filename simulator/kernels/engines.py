"""Host-side costs of each serving engine on top of its measured kernels, in ms.

The kernel tables time the GPU work of a forward (GEMMs, attention, all-reduce, the
element-wise ops priced as aiconfigurator prices them); a served step also pays what the
tables leave out: scheduling and input preparation, sampling, detokenisation and output
processing, launch gaps between CUDA graphs, and under speculation the proposer's own
launches and bookkeeping. One set of these figures per engine, for every model, GPU and
source (no factor per source, model or GPU). The figures live in
data/engine_host_costs.csv, each with its basis (a public figure, a fit, an assumption),
source and derivation (`SOURCES`); docs/model.md has the tables before and after.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, fields
from pathlib import Path


@dataclass(frozen=True)
class EngineHost:
    """Per-engine host costs in ms."""

    step_ms: float
    """Per engine step (one target forward), whatever the batch."""
    per_seq_ms: float
    """Per running sequence per step (input preparation, sampling, output processing)."""
    round_ms: float
    """Per speculative round: rejection sampling, draft-token bookkeeping (SGLang: the
    draft-extend pass over the accepted tokens)."""
    draft_forward_ms: float
    """Per forward of a separate draft model (its own graph launch and synchronisation)."""
    head_forward_ms: float
    """Per EAGLE/EAGLE-3/MTP/Medusa head forward beyond its kernels."""
    head_per_seq_ms: float = 0.0
    """Per head forward per running sequence (a proposer's per-request work on the host)."""


HOST_COSTS_CSV = Path(__file__).resolve().parents[2] / "data" / "engine_host_costs.csv"
"""Every engine's host costs, one row per (engine, term), each with its basis ("public",
"fitted", "assumed", "none"), source and derivation."""

BASES = ("public", "fitted", "assumed", "none")


def load_host_costs(path: Path = HOST_COSTS_CSV) -> tuple[dict[str, EngineHost], dict]:
    """The engines' host costs and, per (engine, term), its basis, source and derivation.
    Raises ValueError naming the row when a term is missing, unknown or not a number."""
    terms = {f.name for f in fields(EngineHost)}
    values: dict[str, dict[str, float]] = {}
    notes: dict[tuple[str, str], dict[str, str]] = {}
    with open(path, newline="", encoding="utf-8") as fh:
        for i, row in enumerate(csv.DictReader(fh), start=2):
            engine, term = row["engine"], row["term"]
            if term not in terms or row["basis"] not in BASES:
                raise ValueError(f"{path.name} line {i}: unknown term or basis {term!r}")
            values.setdefault(engine, {})[term] = float(row["value_ms"])
            notes[(engine, term)] = {k: row[k] for k in ("basis", "source", "derivation")}
    for engine, got in values.items():
        if set(got) != terms:
            raise ValueError(f"{path.name}: {engine} lacks {sorted(terms - set(got))}")
    return {e: EngineHost(**v) for e, v in values.items()}, notes


ENGINE_HOST, SOURCES = load_host_costs()
