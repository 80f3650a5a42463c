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
from dataclasses import dataclass, fields, replace
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
"""Every engine's host costs, one row per (engine, engine_version, term), each with its
basis ("public", "fitted", "assumed", "none"), source and derivation. A row with a blank
`engine_version` holds the engine's figure for every version without its own; a row with
one overrides that term for that version alone (a version with figures of its own need
list only the terms that differ)."""

BASES = ("public", "fitted", "assumed", "none")


def version_key(engine: str, version: str) -> str:
    """The key of an engine's host costs at `version` ("" = every version without its
    own): "sglang", "sglang@0.4.4"."""
    return f"{engine}@{version}" if version else engine


def load_host_costs(path: Path = HOST_COSTS_CSV) -> tuple[dict[str, EngineHost], dict]:
    """The host costs per `version_key` (each version's figures over its engine's) and, per
    (key, term), its basis, source and derivation: only the terms a version gives itself.
    Raises ValueError naming the row when a term is missing, unknown, given twice or not a
    number, or a version's engine has no figures of its own."""
    terms = {f.name for f in fields(EngineHost)}
    values: dict[str, dict[str, float]] = {}
    notes: dict[tuple[str, str], dict[str, str]] = {}
    with open(path, newline="", encoding="utf-8") as fh:
        for i, row in enumerate(csv.DictReader(fh), start=2):
            key = version_key(row["engine"], (row.get("engine_version") or "").strip())
            term = row["term"]
            if term not in terms or row["basis"] not in BASES:
                raise ValueError(f"{path.name} line {i}: unknown term or basis {term!r}")
            if term in values.get(key, {}):
                raise ValueError(f"{path.name} line {i}: {key} gives {term} twice")
            try:
                values.setdefault(key, {})[term] = float(row["value_ms"])
            except ValueError:
                raise ValueError(f"{path.name} line {i}: value_ms is not a number") from None
            notes[(key, term)] = {k: row[k] for k in ("basis", "source", "derivation")}
    hosts = {}
    for key, got in sorted(values.items(), key=lambda kv: "@" in kv[0]):
        engine = key.split("@")[0]
        if "@" in key:
            if engine not in hosts:
                raise ValueError(f"{path.name}: {key} has no {engine} figures to go over")
            hosts[key] = replace(hosts[engine], **got)
        elif set(got) != terms:
            raise ValueError(f"{path.name}: {engine} lacks {sorted(terms - set(got))}")
        else:
            hosts[key] = EngineHost(**got)
    return hosts, notes


HOSTS, SOURCES = load_host_costs()
ENGINE_HOST = {k: v for k, v in HOSTS.items() if "@" not in k}
"""Each engine's host costs for every version without figures of its own."""
VERSION_HOST = {k: v for k, v in HOSTS.items() if "@" in k}
"""The versions with figures of their own, by `version_key`, merged over their engine's."""


def host_for(engine: str, version: str = "") -> EngineHost:
    """The host costs `engine` pays at `version` ("" or one without figures of its own:
    the engine's)."""
    return VERSION_HOST.get(version_key(engine, version)) or ENGINE_HOST[engine]


def host_versions(engine: str) -> tuple[str, ...]:
    """The versions of `engine` with host figures of their own."""
    return tuple(k.split("@", 1)[1] for k in VERSION_HOST if k.split("@")[0] == engine)


def own_terms(key: str) -> tuple[str, ...]:
    """The terms a `version_key` gives itself (every term, for an engine's own key)."""
    return tuple(t for (k, t) in SOURCES if k == key)


TERM_MEANINGS = {
    "step_ms": "per engine step",
    "per_seq_ms": "per running request per step",
    "round_ms": "per speculative round",
    "draft_forward_ms": "per draft-model forward",
    "head_forward_ms": "per head forward",
    "head_per_seq_ms": "per head forward per running request",
}
"""What each host-cost term is charged for, in words a page can show."""


def terms_for(method: str) -> tuple[str, ...]:
    """The host-cost terms a row of `method` pays on the kernel path (Medusa pays its head
    term once per round, the EAGLE family once per head forward)."""
    if method == "none":
        return ("step_ms", "per_seq_ms")
    spec = ("step_ms", "per_seq_ms", "round_ms")
    if method == "draft_model":
        return (*spec, "draft_forward_ms")
    if method in ("eagle", "eagle3", "mtp"):
        return (*spec, "head_forward_ms", "head_per_seq_ms")
    if method == "medusa":
        return (*spec, "head_forward_ms")
    return spec


@dataclass(frozen=True)
class Assumption:
    """One host-cost term as a page shows it: its value in ms and where it comes from."""

    term: str
    meaning: str
    value_ms: float
    basis: str
    source: str
    derivation: str
    version: str
    """The engine version the figure is its own for; "" for the engine's every version."""


def assumptions(engine: str, version: str = "", method: str = "none") -> tuple[Assumption, ...]:
    """The host costs a row of `engine` at `version` with `method` pays, each with its
    basis (public, fitted, assumed, none), source and derivation. Values are the ones in
    force (a cross-validation fold's, inside `refit.applied`)."""
    host = host_for(engine, version)
    own = version_key(engine, version)
    out = []
    for term in terms_for(method):
        key = own if (own, term) in SOURCES else engine
        note = SOURCES[(key, term)]
        out.append(
            Assumption(
                term=term,
                meaning=TERM_MEANINGS[term],
                value_ms=float(getattr(host, term)),
                basis=note["basis"],
                source=note["source"],
                derivation=note["derivation"],
                version=key.split("@", 1)[1] if "@" in key else "",
            )
        )
    return tuple(out)
