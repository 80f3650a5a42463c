"""The app's view of the simulator: cached catalog loads, profile parsing, calibration and
prediction calls, and the calibration every page shares (kept in `st.session_state`).

The simulator stays free of Streamlit; the caching lives here.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from app import own_models
from app.library_open import library
from app.presets import Prior, pick_prior
from library.errors import LibraryError
from simulator.errors import InputError
from simulator.inputs.catalog import (
    DATA_DIR,
    PRIORS_CSV,
    default_gpus,
    default_models,
    load_acceptance_priors,
)
from simulator.inputs.profile import Profile, load_profile
from simulator.inputs.specs import GPUSpec, ModelSpec
from simulator.model.calibration import Calibration, match_gpu_id
from simulator.model.predict import MEMORY_REASONS, predict, status_reasons
from simulator.planning.sizer import SizingResult, price_grid, size

PROFILES_DIR = DATA_DIR / "profiles"
NO_PROFILE = "none: kernel tables where they cover the GPU, else the roofline"
CALIBRATE_KEY = "calibrate_with"
UPLOADS_KEY = "uploaded_profiles"
MEASURED_KEY = "measured_acceptance"
BUNDLED = "bundled: "
UPLOADED = "uploaded: "
"""Label prefixes of the calibration choices: a bundled profile's label is BUNDLED plus its
path under data/profiles/ (what a link carries); an upload's is UPLOADED plus its name."""


def models() -> dict[str, ModelSpec]:
    """The catalog's models, then the library's and this session's own (`app.own_models`,
    ids 'user:NAME')."""
    own, _ = own_models.own_models()
    return {**default_models(), **own} if own else default_models()


def models_for(ids) -> tuple[str, dict[str, ModelSpec] | None]:
    """(cache key, models to predict with) for the target and draft ids a table names:
    ("", None) when they are all catalog models (predict's default), else the own
    models' content digests and every model, so two sessions' different uploads under
    one name never share a cached result."""
    own, digests = own_models.own_models()
    named = sorted({str(i) for i in ids if str(i) in digests})
    if not named:
        return "", None
    return ";".join(f"{i}={digests[i][:16]}" for i in named), {**default_models(), **own}


def _ids(table) -> list:
    ids = []
    for column in ("target", "draft"):
        if isinstance(table, pd.DataFrame):
            if column in table:
                ids.extend(pd.unique(table[column].astype(str)))
        elif table.get(column):
            ids.append(table[column])
    return ids


def catalog_gpus() -> dict[str, GPUSpec]:
    return default_gpus()


def modified_ns(path: Path) -> int:
    """A file's modification time in ns, the key that lets a cache see the file change
    (0 where it cannot be read: the loader then reports why)."""
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


@st.cache_data(show_spinner=False, max_entries=4)
def _priors(path: str, mtime: int) -> list[dict[str, str]]:
    return load_acceptance_priors(path)


def priors() -> list[dict[str, str]]:
    """The rows of data/acceptance_priors.csv, read again only when the file changes."""
    return _priors(str(PRIORS_CSV), modified_ns(PRIORS_CSV))


@st.cache_data(show_spinner=False, max_entries=256)
def _prior(
    workload: str,
    method: str,
    target: str,
    path: str,
    mtime: int,
    draft: str | None = None,
    models_key: str = "",
) -> Prior | None:
    return pick_prior(
        _priors(path, mtime),
        workload,
        method,
        models().get(target),
        draft=models().get(draft) if draft else None,
    )


def chain_prior(workload: str, method: str, target: str) -> Prior | None:
    """The published chain figure for the workload and method (a chain of K tokens, as the
    launch commands run), the target's own first; None where none is published."""
    rows = [r for r in _priors(str(PRIORS_CSV), modified_ns(PRIORS_CSV)) if _chain(r)]
    return pick_prior(rows, workload, method, models().get(target))


def _chain(row: dict) -> bool:
    hint = str(row.get("draft_hint", "")).lower()
    return "chain" in hint and "tree" not in hint


def prior(workload: str, method: str, target: str, draft: str | None = None) -> Prior | None:
    """`presets.pick_prior` for a workload, method, target id and (a draft model's) draft
    id: the published figure the acceptance input fills in (cached: extending a prior's
    rates takes ~20 ms)."""
    draft = draft if method == "draft_model" else None
    key, _ = models_for([target, draft or ""])
    return _prior(workload, method, target, str(PRIORS_CSV), modified_ns(PRIORS_CSV), draft, key)


def _folders_key(root: Path) -> tuple[tuple[str, int], ...]:
    """The modification time of `root` and of every folder below it: adding, removing or
    renaming a file changes its folder's, so a listing keyed on this is never stale."""
    out, stack = [], [str(root)]
    while stack:
        folder = stack.pop()
        try:
            out.append((folder, os.stat(folder).st_mtime_ns))
            with os.scandir(folder) as entries:
                stack.extend(e.path for e in entries if e.is_dir())
        except OSError:
            continue
    return tuple(sorted(out))


@st.cache_data(show_spinner=False, max_entries=8)
def _bundled_profile_paths(key: tuple) -> dict[str, Path]:
    if not PROFILES_DIR.is_dir():
        return {}
    found = sorted(
        p for p in PROFILES_DIR.rglob("*") if p.suffix.lower() in (".json", ".csv") and p.is_file()
    )
    # The profiler writes each profile as JSON and as CSV; list the pair once.
    found = [
        p for p in found if not (p.suffix.lower() == ".csv" and p.with_suffix(".json").exists())
    ]
    return {p.relative_to(PROFILES_DIR).as_posix(): p for p in found}


def bundled_profile_paths() -> dict[str, Path]:
    """Reference profiles shipped in data/profiles/<device>/, keyed by their relative path
    (listed again only when a folder under data/profiles/ changes)."""
    return _bundled_profile_paths(_folders_key(PROFILES_DIR))


@st.cache_data(show_spinner=False, max_entries=64)
def _read_file(path: str, mtime: int) -> bytes:
    return Path(path).read_bytes()


def file_bytes(path: Path) -> bytes:
    """A bundled data file's bytes, read again only when the file changes."""
    return _read_file(str(path), path.stat().st_mtime_ns)


def bundled_profile_bytes(name: str) -> bytes:
    return file_bytes(bundled_profile_paths()[name])


@st.cache_data(show_spinner=False, max_entries=64)
def parse_profile(data: bytes, name: str) -> Profile:
    """`load_profile` on the bytes of a file (data only: JSON or CSV text, size-capped)."""
    return load_profile(data, name=name)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def uploaded_profiles() -> dict[str, bytes]:
    """Uploads that passed validation this session, by file name."""
    return st.session_state.setdefault(UPLOADS_KEY, {})


def profile_options() -> dict[str, tuple[str, bytes]]:
    """Every profile a page may calibrate with: label -> (file name, bytes)."""
    labels = [BUNDLED + name for name in bundled_profile_paths()]
    labels += [UPLOADED + name for name in uploaded_profiles()]
    chosen = st.session_state.get(CALIBRATE_KEY, "")
    if chosen.startswith("library: "):
        # Only the kept profile in use: the library may hold thousands (Profiles page).
        labels.append(chosen)
    out = {label: profile_option(label) for label in labels}
    return {label: option for label, option in out.items() if option is not None}


def profile_option(label: str) -> tuple[str, bytes] | None:
    """`profile_options()[label]`, reading that file only; None when there is none."""
    if label.startswith(BUNDLED):
        name = label.removeprefix(BUNDLED)
        if name not in bundled_profile_paths():
            return None
        try:
            return name, bundled_profile_bytes(name)
        except OSError:
            return None
    if label.startswith(UPLOADED):
        name = label.removeprefix(UPLOADED)
        data = uploaded_profiles().get(name)
        return None if data is None else (name, data)
    if label.startswith(LIBRARY):
        return kept_profile(label.removeprefix(LIBRARY))
    return None


@st.cache_data(show_spinner=False, max_entries=16)
def _calibration(key: str, _profiles: tuple[Profile, ...]) -> Calibration:
    return Calibration.from_profiles(list(_profiles))


@dataclass(frozen=True)
class CalibrationState:
    label: str
    """What the sidebar shows: NO_PROFILE or 'bundled: ...' / 'uploaded: ...'."""
    key: str
    """Hashable identity of the calibration's content, for the caches."""
    calibration: Calibration | None
    profile: Profile | None
    error: str = ""


def current_calibration() -> CalibrationState:
    """The calibration the user chose on the Profiles page (none by default)."""
    label = st.session_state.get(CALIBRATE_KEY, NO_PROFILE)
    option = profile_option(label)
    if option is None:
        return CalibrationState(NO_PROFILE, "", None, None)
    name, data = option
    try:
        profile = parse_profile(data, name)
        key = f"{label}:{digest(data)}"
        return CalibrationState(label, key, _calibration(key, (profile,)), profile)
    except InputError as exc:
        return CalibrationState(NO_PROFILE, "", None, None, error=str(exc))


def gpus() -> dict[str, GPUSpec]:
    """Catalog GPUs plus devices a calibrating profile adds (a CPU, an unlisted GPU)."""
    cal = current_calibration().calibration
    return {**catalog_gpus(), **(cal.gpus if cal is not None else {})}


@st.cache_data(show_spinner=False, max_entries=512)
def _predict(
    scenarios: pd.DataFrame,
    cal_key: str,
    _cal: Calibration | None,
    models_key: str = "",
    _models: dict | None = None,
) -> pd.DataFrame:
    return predict(scenarios, calibration=_cal, source="scenario", models=_models)


def run_predict(scenarios: pd.DataFrame) -> pd.DataFrame:
    """`simulator.model.predict` under the current calibration, with the own models the
    table names. Raises `InputError`."""
    state = current_calibration()
    key, own = models_for(_ids(scenarios))
    return _predict(scenarios, state.key, state.calibration, key, own)


_GRID_ARGS = ("k_max", "batches")
"""The `size` arguments its (K, batch) grid depends on; the SLOs and demand only filter
and price the grid, so a change to them reuses it."""


@st.cache_data(show_spinner=False, max_entries=64)
def _grid(
    base: dict, grid_args: dict, cal_key: str, _cal: Calibration | None, models_key: str, _models
) -> pd.DataFrame:
    return price_grid(base, calibration=_cal, models=_models, **grid_args)


@st.cache_data(show_spinner=False, max_entries=128)
def _size(
    base: dict, kwargs: dict, cal_key: str, _cal: Calibration | None, models_key: str, _models
) -> SizingResult:
    grid_args = {k: v for k, v in kwargs.items() if k in _GRID_ARGS}
    grid = _grid(base, grid_args, cal_key, _cal, models_key, _models)
    return size(base, grid=grid, **kwargs)


def run_size(base: dict, **kwargs) -> SizingResult:
    """`simulator.planning.sizer.size` under the current calibration, with the own models
    the scenario names. Raises `InputError`."""
    state = current_calibration()
    key, own = models_for(_ids(base))
    return _size(dict(base), dict(kwargs), state.key, state.calibration, key, own)


def profile_prediction(
    key: str, profile: Profile, model_id: str, context_len: float, batches, query_lens
) -> pd.DataFrame:
    """The roofline's step time for a profiled model at the given points, to draw against
    the measurements: 'fitted roofline' (fitted to this profile, what calibration uses
    where nothing was measured) and, for a catalog GPU, 'catalog roofline' (datasheet
    specs and default efficiencies, what the pages use without a profile).

    `key` identifies the profile's content (see `profile_options`). Columns: query_len,
    batch, ms, curve. Empty when the model is not in the catalog.
    """
    spec = models().get(model_id)
    empty = pd.DataFrame(columns=["query_len", "batch", "ms", "curve"])
    if spec is None:
        return empty
    cal = _calibration(key, (profile,))
    gpu_id = match_gpu_id(profile.device.name, profile.device.kind)
    b, q = (a.ravel() for a in np.meshgrid(np.asarray(batches, float), np.asarray(query_lens)))
    frames = []
    fitted = cal.fitted_step_ms(gpu_id, spec, profile.settings.dtype, b, q, context_len)
    if fitted is not None:
        frames.append(
            pd.DataFrame({"query_len": q, "batch": b, "ms": fitted, "curve": "fitted roofline"})
        )
    if gpu_id in catalog_gpus():
        # One forward of q tokens per sequence is the verify step of an n-gram row with
        # K = q - 1 (and the decode step at q = 1); context = prompt + output / 2.
        dtype = profile.settings.dtype
        rows = pd.DataFrame(
            {
                "target": model_id,
                "gpu": gpu_id,
                "batch_size": b.astype(int),
                "method": np.where(q > 1, "ngram", "none"),
                "k": q - 1,
                "acceptance_rate": np.where(q > 1, 0.5, np.nan),
                "prompt_len": int(context_len) - 1,
                "output_len": 2,
                "weight_dtype": dtype if dtype != "fp32" else "bf16",
                "kv_dtype": dtype if dtype != "fp32" else "bf16",
            }
        )
        out = predict(rows, gpus=catalog_gpus(), models=models())
        ms = np.where(q > 1, out["verify_step_ms"], out["target_step_ms"])
        frames.append(
            pd.DataFrame({"query_len": q, "batch": b, "ms": ms, "curve": "catalog roofline"})
        )
    return pd.concat(frames, ignore_index=True) if frames else empty


def best_k(scenario_base: dict, batch: int, k_values) -> int:
    """The K with the highest speedup at this batch (one predict call); the first of
    `k_values` where no K can run (its row then says why). Raises InputError."""
    rows = pd.DataFrame([{**scenario_base, "k": k, "batch_size": batch} for k in k_values])
    speedup = run_predict(rows)["speedup"]
    return int(rows["k"][speedup.idxmax()]) if speedup.notna().any() else int(rows["k"][0])


def memory_fix(row: dict, gpu_counts) -> str:
    """For a scenario row whose setup does not fit in memory, the sentence naming the
    changes to it that make it run ('It runs with fp8 weights or with 16 GPUs per
    replica.'), or '' where none does. Each change is checked by predicting it (one
    predict call): fp8 weights, and the fewest GPUs per replica among `gpu_counts`.
    Raises InputError."""
    tries = []
    if str(row.get("weight_dtype") or "bf16") != "fp8":
        tries.append(("fp8 weights", {"weight_dtype": "fp8"}))
    for count in sorted(int(g) for g in gpu_counts if int(g) > int(row.get("num_gpus") or 1)):
        tries.append((f"{count} GPUs per replica", {"num_gpus": count}))
    if not tries:
        return ""
    from simulator.inputs.scenarios import on_gpus

    changed = [on_gpus(row, c["num_gpus"]) if "num_gpus" in c else {**row, **c} for _, c in tries]
    status = run_predict(pd.DataFrame(changed))["status"]
    runs = [what for (what, _), s in zip(tries, status.astype(str), strict=True) if s == "ok"]
    gpus = [what for what in runs if what.endswith("per replica")]
    remedies = [what for what in runs if what == "fp8 weights"] + gpus[:1]
    return f"It runs with {' or with '.join(remedies)}." if remedies else ""


def fewest_gpus(row: Mapping, gpu_counts) -> int | None:
    """For a prediction row that does not fit in memory, the fewest GPUs per replica among
    `gpu_counts` (tensor parallel, the row's GPU) with which it runs: 0 when none does,
    None when the row fits or is not a memory failure. One predict call."""
    from simulator.inputs.scenarios import INPUT_COLUMNS, on_gpus

    if not any(r in MEMORY_REASONS for r in status_reasons(str(row.get("status", "ok")))):
        return None
    scenario = {
        c: v
        for c, v in row.items()
        if c in INPUT_COLUMNS and not (isinstance(v, float) and np.isnan(v)) and v != ""
    }
    counts = sorted(int(g) for g in gpu_counts if int(g) > int(scenario.get("num_gpus") or 1))
    if not counts:
        return 0
    try:
        status = run_predict(pd.DataFrame([on_gpus(scenario, n) for n in counts]))["status"]
    except InputError:
        return None
    runs = [n for n, s in zip(counts, status.astype(str), strict=True) if s == "ok"]
    return runs[0] if runs else 0


PUBLISHED_CSV = DATA_DIR / "validation" / "published.csv"


@st.cache_data(show_spinner=False, max_entries=2)
def _published_errors(path: str, mtime: int) -> pd.DataFrame:
    from simulator.validation.published import load_published, score

    return score(load_published(path), source=path)


def published_errors() -> pd.DataFrame:
    """The model scored against the published development set (`simulator.validation.published`),
    scored again only when the file changes."""
    return _published_errors(str(PUBLISHED_CSV), modified_ns(PUBLISHED_CSV))


def speedup_error(batches) -> np.ndarray | None:
    """The model's validated relative error of the speedup at each batch
    (`simulator.planning.uncertainty.get_speedup_error_by_batch` on the published set), or None
    where the set cannot be scored."""
    from simulator.planning.uncertainty import get_speedup_error_by_batch

    try:
        errors = published_errors()
    except (InputError, OSError):
        return None
    width = get_speedup_error_by_batch(batches, errors)
    return None if np.isnan(width).all() else width


def published_error_band(batches, speedups) -> pd.DataFrame | None:
    """speedup x (1 -/+ the median |error| of the published cases in each batch's bucket);
    a bucket without scored cases uses the median over all of them."""
    width = speedup_error(batches)
    if width is None:
        return None
    b = np.asarray(batches, dtype=float)
    s = np.asarray(speedups, dtype=float)
    return pd.DataFrame({"batch_size": b, "low": s * (1 - width), "high": s * (1 + width)})


# ------------------------------------------------------------ profiles kept in the library
LIBRARY = "library: "
"""Calibration label prefix of a kept profile: LIBRARY plus its name."""
LINK_PREFIX = "library:"
"""A link's `profile=library:NAME` names a kept profile."""


@st.cache_data(show_spinner=False, max_entries=32)
def _kept_bytes(url_key: str, name: str, content_hash: str) -> bytes:
    lib, _ = library()
    return lib.content("profile", name)


def kept_profile(name: str) -> tuple[str, bytes] | None:
    """(name, bytes) of the kept profile `name`, or None (no library, or no such entry)."""
    lib, _ = library()
    if lib is None:
        return None
    try:
        entry = lib.get("profile", name)
        return name, _kept_bytes(lib.where, name, entry.content_hash)
    except LibraryError:
        return None


def link_profile(label: str) -> str | None:
    """The link's `profile` value for a kept profile's calibration label, else None."""
    return LINK_PREFIX + label.removeprefix(LIBRARY) if label.startswith(LIBRARY) else None


def label_from_link(value: str) -> str | None:
    """The calibration label a link's `profile=library:NAME` stands for, if it is kept."""
    if not value.startswith(LINK_PREFIX):
        return None
    name = value.removeprefix(LINK_PREFIX)
    return LIBRARY + name if kept_profile(name) is not None else None
