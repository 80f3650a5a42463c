"""The development set's fit, reproduced by code, and its leave-one-source-out score.

Every constant whose value was fitted on `data/validation/published.csv` is a `Term`:
the roofline's defaults whose note says so (`simulator.model.defaults.FITTED`) and the
engine host costs whose basis is "fitted" with that file as source
(`data/engine_host_costs.csv`). Public, derived and assumed figures are not refitted.

`fit` is a coordinate search from the shipped values: each term in turn tries a few
steps either way and keeps the one that lowers `objective` (the median |error| plus
penalties for a signed bias, a batch bucket above 15%, a source above 20% and a published
reversal predicted at 1.1 or more), for `passes` rounds. `cross_validate` runs it once per
source without that source's rows and scores the source with the values it found: the
error a new user's source can expect, beside the in-sample one. The search starts from
the shipped values, which saw every source: the held-out score is an optimistic bound
where the search stays near its start.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from simulator.kernels import engines
from simulator.model.defaults import DEFAULT_NOTES, DEFAULTS, FITTED, ModelDefaults
from simulator.validation.published import BATCH_BUCKETS, score

DEV_SET = "data/validation/published.csv"
STEPS = (0.6, 0.8, 1.25, 1.6)
"""Multiplicative steps a term tries each pass (a term at 0 tries `Term.unit` x these)."""


@dataclass(frozen=True)
class Term:
    """One fitted constant: a roofline default (`engine` "") or an engine host cost."""

    name: str
    engine: str = ""
    low: float = 0.0
    high: float = np.inf
    unit: float = 0.1
    """The step scale of a term whose value is 0 (ms, or a fraction)."""

    @property
    def label(self) -> str:
        return f"{self.engine}.{self.name}" if self.engine else self.name


_BOUNDS = {
    "bandwidth_efficiency": (0.3, 1.0, 0.1),
    "compute_efficiency": (0.05, 1.0, 0.1),
    "roofline_sharpness": (0.5, 16.0, 1.0),
    "allreduce_latency_us": (0.0, 100.0, 5.0),
    "engine_per_seq_ms": (0.0, 1.0, 0.01),
    "head_per_seq_ms": (0.0, 1.0, 0.01),
}


def fitted_terms() -> tuple[Term, ...]:
    """The constants the development set set, read from where each value is documented."""
    terms = []
    for name, note in DEFAULT_NOTES.items():
        if FITTED in note:
            low, high, unit = _BOUNDS.get(name, (0.0, 20.0, 0.1))
            terms.append(Term(name, "", low, high, unit))
    for (engine, name), note in sorted(engines.SOURCES.items()):
        if note["basis"] == "fitted" and DEV_SET in note["source"]:
            low, high, unit = _BOUNDS.get(name, (0.0, 20.0, 0.1))
            terms.append(Term(name, engine, low, high, unit))
    return tuple(terms)


Values = dict[str, float]
"""Term label -> value."""


def shipped(terms: tuple[Term, ...]) -> Values:
    """The values the code ships for `terms`."""
    return {t.label: _current(t) for t in terms}


def _current(t: Term) -> float:
    if t.engine:
        return float(getattr(_host(t.engine), t.name))
    return float(getattr(DEFAULTS, t.name))


def _host(key: str):
    """The host costs of an engine ("sglang") or of one version ("sglang@0.4.4")."""
    return engines.VERSION_HOST.get(key) or engines.ENGINE_HOST[key]


@contextlib.contextmanager
def applied(terms: tuple[Term, ...], values: Values) -> Iterator[ModelDefaults]:
    """The roofline defaults with `values`, the engine host costs set to them meanwhile
    (restored on exit): an engine's changes reach its versions' terms they do not give."""
    saved, saved_versions = dict(engines.ENGINE_HOST), dict(engines.VERSION_HOST)
    try:
        by_key: dict[str, dict] = {}
        for t in terms:
            if t.engine:
                by_key.setdefault(t.engine, {})[t.name] = values[t.label]
        for key, changes in by_key.items():
            if key in saved:
                engines.ENGINE_HOST[key] = dataclasses.replace(saved[key], **changes)
        for key, host in saved_versions.items():
            own = {n: getattr(host, n) for n in engines.own_terms(key)}
            base = engines.ENGINE_HOST[key.split("@")[0]]
            engines.VERSION_HOST[key] = dataclasses.replace(base, **{**own, **by_key.get(key, {})})
        roofline = {t.name: values[t.label] for t in terms if not t.engine}
        yield DEFAULTS.replace(**roofline)
    finally:
        engines.ENGINE_HOST.clear()
        engines.ENGINE_HOST.update(saved)
        engines.VERSION_HOST.clear()
        engines.VERSION_HOST.update(saved_versions)


def objective(errors: pd.DataFrame) -> float:
    """What the fit lowers: median |error| + |signed median| / 2, plus each batch bucket's
    median above 15%, each source's above 20% and 2 points per published reversal
    predicted at 1.1 or more. A case the model cannot price counts as a 100% error."""
    e = errors["error"].fillna(1.0)
    a = e.abs()
    cost = float(a.median() + abs(e.median()) / 2)
    for _, _, label in BATCH_BUCKETS:
        m = a[errors["batch_bucket"] == label]
        cost += max(0.0, float(m.median()) - 0.15) if len(m) else 0.0
    cost += float(np.maximum(a.groupby(errors["source_id"]).median() - 0.20, 0).sum())
    wrong = (errors["published_speedup"] < 1) & (errors["predicted_speedup"].fillna(0) >= 1.1)
    return cost + 0.02 * float(wrong.sum())


def _score(published: pd.DataFrame, terms, values: Values) -> pd.DataFrame:
    with applied(terms, values) as defaults:
        return score(published, defaults=defaults)


def _candidates(t: Term, value: float) -> list[float]:
    base = [value * s for s in STEPS] if value > 0 else [t.unit * s for s in STEPS]
    return [float(np.clip(v, t.low, t.high)) for v in base if np.clip(v, t.low, t.high) != value]


def fit(
    published: pd.DataFrame,
    terms: tuple[Term, ...],
    start: Values,
    passes: int = 2,
    free: tuple[Term, ...] | None = None,
) -> Values:
    """Coordinate search from `start` over `free` (default: every term) lowering
    `objective` on `published`."""
    values = dict(start)
    best = objective(_score(published, terms, values))
    for _ in range(passes):
        moved = False
        for t in terms if free is None else free:
            for candidate in _candidates(t, values[t.label]):
                trial = {**values, t.label: candidate}
                cost = objective(_score(published, terms, trial))
                if cost < best - 1e-6:
                    values, best, moved = trial, cost, True
        if not moved:
            break
    return values


@dataclass(frozen=True)
class CrossValidation:
    """In-sample and leave-one-source-out errors, one row per case (`errors`: columns of
    `score` plus `cv_error`), and per source the values its fold refitted (`folds`)."""

    errors: pd.DataFrame
    folds: pd.DataFrame
    shipped: Values
    owned: dict[str, str]
    """Per source, the terms its rows set (restarted from their fallback without it)."""


FALLBACK_ENGINE = "vllm"
"""Whose value an engine term takes in a fold whose rows cannot set it."""


def sensitivity(published: pd.DataFrame, terms: tuple[Term, ...], values: Values) -> pd.DataFrame:
    """Per term (rows) and source (columns), the sum over the source's cases of |change
    in predicted speedup| when the term moves to 1.6x its value (1.6x its unit at 0): which
    source's rows set which term."""
    base = _score(published, terms, values)
    sources = base["source_id"]
    out = {}
    for t in terms:
        value = values[t.label]
        moved = {**values, t.label: float(np.clip(1.6 * (value or t.unit), t.low, t.high))}
        change = _score(published, terms, moved)["predicted_speedup"] - base["predicted_speedup"]
        out[t.label] = change.abs().fillna(0.0).groupby(sources).sum()
    return pd.DataFrame(out).T.fillna(0.0)


OWNED = 0.5
"""Share of a term's sensitivity above which the source holding it owns the term: a fold
without that source restarts the term from its fallback instead of the value that source
set."""


def _fallback(t: Term, values: Values) -> float:
    """A term without data takes the value it would be priced with had its own source not
    been found: a version's, its engine's (`Term.engine` "sglang@0.4.4": sglang's); another
    engine's, vLLM's (`FALLBACK_ENGINE`)."""
    if not t.engine or t.engine == FALLBACK_ENGINE:
        return values[t.label]
    engine = t.engine.split("@")[0]
    donor = engine if "@" in t.engine else FALLBACK_ENGINE
    key = f"{donor}.{t.name}"
    if key in values:
        return values[key]
    return float(getattr(engines.ENGINE_HOST[donor], t.name))


def fold_values(train: pd.DataFrame, terms, start: Values, owned: list[Term], passes: int):
    """The values a fit on `train` gives, from `start` with each term in `owned` (set by
    the rows left out) restarted at its fallback: vLLM's value for another engine's host
    cost, else its start."""
    values = dict(start)
    for t in owned:
        values[t.label] = _fallback(t, start)
    return fit(train, terms, values, passes)


def cross_validate(published: pd.DataFrame, passes: int = 2, terms=None) -> CrossValidation:
    """Each source scored with the constants refitted without it."""
    terms = fitted_terms() if terms is None else terms
    start = shipped(terms)
    inside = score(published)
    scored = published[published["scored"].astype(bool)]
    cv = pd.Series(np.nan, index=inside.index)
    share = sensitivity(published, terms, start)
    share = share.div(share.sum(axis=1).replace(0.0, np.nan), axis=0).fillna(0.0)
    folds, owners = {}, {}
    for source in sorted(inside["source_id"].unique()):
        train = published[published["source_id"] != source]
        owned = [t for t in terms if share.at[t.label, source] > OWNED]
        owners[source] = ", ".join(t.label for t in owned)
        folds[source] = fold_values(train, terms, start, owned, passes)
        held = _score(scored[scored["source_id"] == source], terms, folds[source])
        cv[inside.index[inside["source_id"] == source]] = held["error"].to_numpy()
    errors = inside.assign(cv_error=cv, cv_abs_error=cv.abs())
    return CrossValidation(errors, pd.DataFrame(folds).T, start, owners)


def cv_summary(errors: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """In-sample against leave-one-source-out median |error| and signed median, overall
    and by source, engine and batch bucket (fractions), of `CrossValidation.errors`."""
    ok = errors[errors["predicted_speedup"].notna()]

    def by(key: str | None) -> pd.DataFrame:
        g = ok.groupby(key if key else np.zeros(len(ok)), sort=True)
        return pd.DataFrame(
            {
                "cases": g.size(),
                "in_sample": g["abs_error"].median(),
                "cross_validated": g["cv_abs_error"].median(),
                "signed_in_sample": g["error"].median(),
                "signed_cross_validated": g["cv_error"].median(),
            }
        )

    out = {"all": by(None).rename(index={0.0: "all"}), "source": by("source_id")}
    out["engine"] = by("engine")
    out["batch"] = by("batch_bucket")
    return out


def format_cross_validation(cv: CrossValidation) -> str:
    """The summary and the refitted values as plain text, percentages to one decimal."""

    def table(df: pd.DataFrame) -> str:
        show = df.copy()
        for col in ("in_sample", "cross_validated"):
            show[col] = [f"{100 * v:.1f}%" for v in show[col]]
        for col in ("signed_in_sample", "signed_cross_validated"):
            show[col] = [f"{100 * v:+.1f}%" for v in show[col]]
        show["cases"] = show["cases"].astype(int)
        return show.to_string()

    s = cv_summary(cv.errors)
    lines = ["cross-validated (leave one source out) against in-sample, median |error|:"]
    for name in ("all", "source", "engine", "batch"):
        lines += [f"by {name}:" if name != "all" else "", table(s[name]), ""]
    lines.append("constants each source sets (restarted from their fallback without it):")
    lines += [f"  {source}: {terms}" for source, terms in cv.owned.items() if terms]
    folds = cv.folds.T.assign(shipped=pd.Series(cv.shipped))
    lines.append("constants refitted without each source (columns), beside the shipped value:")
    lines.append(folds.round(3).to_string())
    return "\n".join(lines)


CV_CSV = Path(__file__).resolve().parents[2] / "data" / "validation" / "published_cv.csv"
"""The cross-validated errors per case the dashboard shows, as written by `python -m
simulator validate --published data/validation/published.csv --cross-validate --out
data/validation/published_cv.csv` (a minute: not run by the page)."""
CV_COLUMNS = ("case_id", "source_id", "engine", "batch_bucket", "error", "cv_error")


def read_cv(path: Path, current: pd.DataFrame) -> pd.DataFrame | None:
    """The bundled cross-validated errors, or None when they are missing, unreadable or
    stale: their in-sample errors are not `current`'s (the model changed since they were
    written)."""
    try:
        table = pd.read_csv(path)
    except (OSError, ValueError):
        return None
    if not set(CV_COLUMNS) <= set(table.columns) or len(table) != len(current):
        return None
    merged = current.merge(table[list(CV_COLUMNS)], on="case_id", suffixes=("", "_file"))
    if len(merged) != len(current):
        return None
    now, then = merged["error"].to_numpy(float), merged["error_file"].to_numpy(float)
    if not np.allclose(now, then, rtol=0, atol=1e-9, equal_nan=True):
        return None
    cv = merged["cv_error"].astype(float)
    return merged.assign(cv_error=cv, cv_abs_error=cv.abs())
