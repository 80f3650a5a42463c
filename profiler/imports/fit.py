"""Measured serving points against the simulator: the engine's per-step host cost fitted.

Each serving point becomes a scenario (target, GPU, load, prompt and output lengths, the
server's method and acceptance when it speculated) and `simulator.model.predict` gives its TPOT.
One term is fitted, `engine_step_ms` (the host cost of one engine step: scheduling, input
preparation, sampling, output processing; `simulator.model.defaults`), minimising the squared log
error of predicted against measured TPOT over the plain (non-speculative) points, or over
every point when there is no plain one, save the speculative points whose acceptance the
user gave (`Setup.acceptance`): fitted on, a guessed acceptance would turn into host cost.
The host cost of a step does not depend on
speculation, so the speculative points then test the model out of sample: their error
after the fit is the error of a predicted speedup's TPOT. TPOT grows with the term
at every point, so the error has one minimum, found by golden-section search. The other
engine terms stay at their defaults: a handful of serving points cannot tell them apart
(SERVING-NOTES: fitted overhead coefficients are not identifiable).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from profiler.imports.common import MAX_ACCEPTANCE_LENGTH
from simulator.errors import InputError
from simulator.model.defaults import DEFAULTS, ModelDefaults

TERM = "engine_step_ms"
SEARCH_MS = (0.0, 50.0)
"""Bounds of the fitted term, ms per step: a V1 engine's gap is 0.2-6 ms (SERVING-NOTES)."""
_ITERATIONS = 40
METHODS = {
    "none": "none",
    "eagle": "eagle",
    "eagle3": "eagle3",
    "medusa": "medusa",
    "mtp": "mtp",
    "ngram": "ngram",
    "draft_model": "draft_model",
    "drafttarget": "draft_model",
    "draft_target": "draft_model",
}
"""Method names as engines write them (lower case, '-' dropped) -> the simulator's."""


@dataclass(frozen=True)
class EngineFit:
    """The fit and, per serving point, measured TPOT against predicted before and after
    (ms; NaN where a point could not be priced, `reason` says why)."""

    term: str
    default_ms: float
    fitted_ms: float | None
    points: int
    table: pd.DataFrame
    median_abs_error_before: float | None
    median_abs_error_after: float | None
    worse: bool = False
    """The fit would have made its own points worse: the default was kept."""

    @property
    def speculative_error(self) -> float | None:
        """Median |TPOT error| after the fit over the speculative points it was not fitted
        on: the out-of-sample figure a speculative plan rests on (None without any)."""
        t = self.table
        held = t["speculative"].astype(bool) & ~t["fitted_on"].astype(bool)
        errors = t.loc[held, "error_after"].abs().dropna()
        return float(errors.median()) if len(errors) else None

    def summary(self) -> dict:
        """The fit as the profile's `engine.fit` object (no NaN: JSON has none)."""

        def plain(v):
            return None if v is None or (isinstance(v, float) and math.isnan(v)) else v

        return {
            "term": self.term,
            "default_ms": self.default_ms,
            "fitted_ms": plain(self.fitted_ms),
            "points": self.points,
            "median_abs_error_before": plain(self.median_abs_error_before),
            "median_abs_error_after": plain(self.median_abs_error_after),
        }

    def lines(self) -> list[str]:
        """The fit, then each serving point left unpriced with the reason."""
        return self._fit_lines() + [
            f"not priced: {r['source']}: {r['reason']}"
            for _, r in self.table.iterrows()
            if r["reason"]
        ]

    def _fit_lines(self) -> list[str]:
        if self.fitted_ms is None:
            if self.table["predicted_before_ms"].notna().any():
                return [
                    f"{self.term}: not fitted (no plain point, and the speculative points' "
                    f"acceptance was given, not measured): {self.default_ms:g} ms (default)"
                ]
            return [f"{self.term}: not fitted (no serving point could be priced)"]
        if self.worse:
            return [
                f"{self.term}: kept at {self.default_ms:g} ms (default): a fit would have made "
                f"its {self.points} plain point(s) worse (median |TPOT error| "
                f"{self.median_abs_error_before:.1%} before)"
            ]
        lines = [
            f"{self.term}: {self.default_ms:g} ms (default) -> {self.fitted_ms:.3f} ms fitted "
            f"on {self.points} serving point(s); their median |TPOT error| "
            f"{self.median_abs_error_before:.1%} before, {self.median_abs_error_after:.1%} after"
        ]
        if self.fitted_ms <= SEARCH_MS[0] + 1e-3:
            lines.append(
                f"{self.term} ended at 0: the model prices these points slower than the engine "
                "ran them even without host cost; the rest of the gap is in the step times"
            )
        elif self.fitted_ms >= SEARCH_MS[1] - 1e-3:
            lines.append(f"{self.term} ended at its bound, {SEARCH_MS[1]:g} ms: check the units")
        return lines


def method_name(raw: str) -> str:
    """The simulator's method for an engine's name of it ('Eagle3' -> 'eagle3'); '' when
    unknown."""
    key = raw.strip().lower().replace("-", "").replace(" ", "")
    return METHODS.get(key, "")


@dataclass(frozen=True)
class Setup:
    """What the serving points ran: the catalog target and GPU, tensor-parallel GPUs, weight
    dtype, and for speculative points the draft model ("" for a head), K and the mean
    acceptance length (tokens per verify step) where the files do not record them. The fit
    records it (`record`) so that it can be redone (`of`)."""

    target: str
    gpu: str
    num_gpus: int = 1
    weight_dtype: str = "bf16"
    draft: str = ""
    k: int | None = None
    acceptance: float | None = None

    def record(self) -> dict:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}

    @classmethod
    def of(cls, fit: dict) -> Setup:
        """The setup a profile's `engine.fit` records (its defaults where it gives none)."""
        return cls(
            str(fit["target"]),
            str(fit["gpu"]),
            num_gpus=int(fit.get("num_gpus") or 1),
            weight_dtype=str(fit.get("weight_dtype") or "bf16"),
            draft=str(fit.get("draft") or ""),
            k=fit.get("k"),
            acceptance=check_acceptance(fit.get("acceptance"), "engine.fit.acceptance"),
        )


def check_acceptance(value, field: str) -> float | None:
    """A given mean acceptance length: a finite number of tokens per verify step, 1 to
    `MAX_ACCEPTANCE_LENGTH`;
    None when not given."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"expected a number, got {type(value).__name__}", field=field)
    if not 1.0 <= value <= MAX_ACCEPTANCE_LENGTH:
        raise InputError(
            f"{value:g} is not a mean acceptance length: tokens per verify step, 1 to K + 1 "
            f"= {MAX_ACCEPTANCE_LENGTH:g} at most (vLLM's spec_decode_acceptance_length)",
            field=field,
        )
    return float(value)


def scenarios(points: pd.DataFrame, setup: Setup):
    """(scenario rows, the index of `points` each row prices, reasons for the others)."""
    draft, k = setup.draft, setup.k
    rows, index, reasons = [], [], {}
    for i, p in points.iterrows():
        why = _unpriced(p, setup)
        if why:
            reasons[i] = why
            continue
        row = {
            "target": setup.target,
            "gpu": setup.gpu,
            "num_gpus": setup.num_gpus,
            "weight_dtype": setup.weight_dtype,
            "prompt_len": max(1, round(p["prompt_tokens"])),
            "output_len": max(2, round(p["output_tokens"])),
            "method": "none",
            "k": 0,
        }
        if not math.isnan(p["concurrency"]):
            row["batch_size"] = max(1, round(p["concurrency"]))
        else:
            row["request_rate"] = float(p["request_rate"])
        if p["speculative"]:
            method = method_name(p["method"])
            row["method"] = method
            row["draft"] = draft if method == "draft_model" else ""
            if p["acceptance_per_position"]:
                row["acceptance_per_position"] = p["acceptance_per_position"]
                row["k"] = len(p["acceptance_per_position"].split(";"))
            else:
                kk = int(p["k"]) if not pd.isna(p["k"]) else k
                length = _acceptance(p, setup)
                row["k"] = max(int(kk), math.ceil(length - 1))
                row["mean_accepted_tokens"] = length
        rows.append(row)
        index.append(i)
    return pd.DataFrame(rows), index, reasons


def _acceptance(p: pd.Series, setup: Setup) -> float:
    """The point's measured mean acceptance length, else the one the user gave."""
    return setup.acceptance if pd.isna(p["acceptance_length"]) else p["acceptance_length"]


def given_acceptance(points: pd.DataFrame) -> np.ndarray:
    """Speculative points that record no acceptance (priced, if at all, with the user's)."""
    return (
        points["speculative"].to_numpy(bool)
        & points["acceptance_length"].isna().to_numpy()
        & (points["acceptance_per_position"] == "").to_numpy()
    )


def _unpriced(p: pd.Series, setup: Setup) -> str:
    if math.isnan(p["tpot_ms"]):
        return "no TPOT measured"
    if math.isnan(p["concurrency"]) and math.isnan(p["request_rate"]):
        return "no concurrency or request rate recorded"
    if math.isnan(p["prompt_tokens"]) or math.isnan(p["output_tokens"]):
        return "no prompt or output length recorded"
    if not p["speculative"]:
        return ""
    method = method_name(p["method"])
    if not method or method == "none":
        return "the server speculated but the method is not recorded: give --method"
    if method == "draft_model" and not setup.draft:
        return "a draft model speculated: give --draft"
    if not p["acceptance_per_position"] and pd.isna(_acceptance(p, setup)):
        return (
            "the server speculated but its acceptance is not recorded: give --acceptance "
            "(mean tokens per verify step) to price it"
        )
    if not p["acceptance_per_position"] and pd.isna(p["k"]) and setup.k is None:
        return "K is not recorded: give --k"
    return ""


def _tpot(sc: pd.DataFrame, step_ms: float, d: ModelDefaults) -> np.ndarray:
    from simulator.model.predict import predict

    # kernels=False: a GPU with a fitted host cost is priced on the roofline, not the kernel
    # tables (simulator.model.predict), so the cost is fitted on the prices it will be added to.
    out = predict(sc, defaults=d.replace(**{TERM: step_ms}), break_even=False, kernels=False)
    spec = (sc["method"] != "none").to_numpy()
    return np.where(spec, out["spec_tpot_ms"], out["baseline_tpot_ms"]).astype(float)


def _golden(score, lo: float, hi: float) -> float:
    ratio = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = score(c), score(d)
    for _ in range(_ITERATIONS):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = score(c)
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = score(d)
    return (a + b) / 2


def fit_engine_step(
    points: pd.DataFrame, setup: Setup, defaults: ModelDefaults = DEFAULTS
) -> EngineFit:
    """Fit `engine_step_ms` to the serving points' TPOT (see the module docstring)."""
    sc, index, reasons = scenarios(points, setup)
    table = pd.DataFrame(
        {
            "source": points["source"],
            "concurrency": points["concurrency"],
            "request_rate": points["request_rate"],
            "speculative": points["speculative"],
            "acceptance_length": points["acceptance_length"],
            "measured_tpot_ms": points["tpot_ms"],
            "predicted_before_ms": np.nan,
            "predicted_after_ms": np.nan,
            "reason": pd.Series(reasons, dtype=object).reindex(points.index).fillna(""),
            "fitted_on": False,
            "error_before": np.nan,
            "error_after": np.nan,
        }
    )
    default = float(getattr(defaults, TERM))
    if sc.empty:
        return EngineFit(TERM, default, None, 0, table, None, None)
    measured = points.loc[index, "tpot_ms"].to_numpy(float)
    try:
        before = _tpot(sc, default, defaults)
    except InputError as exc:
        raise InputError(
            f"a serving point cannot be priced: {exc.bare_message}", field=exc.field
        ) from None
    usable = np.isfinite(before)
    plain = usable & (sc["method"] == "none").to_numpy()
    fit_on = plain if plain.any() else usable & ~given_acceptance(points.loc[index])

    def score(x: float) -> float:
        pred = _tpot(sc, x, defaults)[fit_on]
        return float(np.sum(np.log(pred / measured[fit_on]) ** 2))

    fitted = _golden(score, *SEARCH_MS) if fit_on.any() else None
    after = _tpot(sc, fitted, defaults) if fitted is not None else np.full(len(sc), np.nan)
    table.loc[index, "predicted_before_ms"] = before
    table.loc[index, "predicted_after_ms"] = after
    table.loc[index, "fitted_on"] = fit_on
    table["error_before"] = table["predicted_before_ms"] / table["measured_tpot_ms"] - 1
    table["error_after"] = table["predicted_after_ms"] / table["measured_tpot_ms"] - 1
    for i, ok in zip(index, usable, strict=True):
        if not ok:
            table.loc[i, "reason"] = "the simulator gives no TPOT here (see its status)"
    n = int(fit_on.sum())
    before_err, after_err = (
        float(table.loc[table["fitted_on"], col].abs().median()) if n else None
        for col in ("error_before", "error_after")
    )
    if n and after_err > before_err + 1e-9:
        table["predicted_after_ms"] = table["predicted_before_ms"]
        table["error_after"] = table["error_before"]
        return EngineFit(TERM, default, default, n, table, before_err, before_err, worse=True)
    return EngineFit(TERM, default, fitted, n, table, before_err, after_err)
