"""The app's view of the simulator: cached catalog loads, profile parsing, calibration and
prediction calls, and the calibration every page shares (kept in `st.session_state`).

The simulator stays free of Streamlit; the caching lives here.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from simulator.calibration import Calibration, match_gpu_id
from simulator.catalog import (
    DATA_DIR,
    default_gpus,
    default_models,
    load_acceptance_priors,
)
from simulator.errors import InputError
from simulator.predict import predict
from simulator.profile import Profile, load_profile
from simulator.sizer import SizingResult, size
from simulator.specs import GPUSpec, ModelSpec

PROFILES_DIR = DATA_DIR / "profiles"
NO_PROFILE = "none: catalog roofline"
CALIBRATE_KEY = "calibrate_with"
UPLOADS_KEY = "uploaded_profiles"
MEASURED_KEY = "measured_acceptance"
BUNDLED = "bundled: "
UPLOADED = "uploaded: "
"""Label prefixes of the calibration choices: a bundled profile's label is BUNDLED plus its
path under data/profiles/ (what a link carries); an upload's is UPLOADED plus its name."""


def models() -> dict[str, ModelSpec]:
    return default_models()


def catalog_gpus() -> dict[str, GPUSpec]:
    return default_gpus()


@st.cache_data(show_spinner=False)
def priors() -> list[dict[str, str]]:
    return load_acceptance_priors()


def bundled_profile_paths() -> dict[str, Path]:
    """Reference profiles shipped in data/profiles/<device>/, keyed by their relative path."""
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


@st.cache_data(show_spinner=False, max_entries=64)
def _read_file(path: str, mtime: float) -> bytes:
    return Path(path).read_bytes()


def bundled_profile_bytes(name: str) -> bytes:
    path = bundled_profile_paths()[name]
    return _read_file(str(path), path.stat().st_mtime)


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
    out: dict[str, tuple[str, bytes]] = {}
    for name in bundled_profile_paths():
        try:
            out[BUNDLED + name] = (name, bundled_profile_bytes(name))
        except OSError:
            continue
    for name, data in uploaded_profiles().items():
        out[UPLOADED + name] = (name, data)
    return out


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
    options = profile_options()
    if label not in options:
        return CalibrationState(NO_PROFILE, "", None, None)
    name, data = options[label]
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
def _predict(scenarios: pd.DataFrame, cal_key: str, _cal: Calibration | None) -> pd.DataFrame:
    return predict(scenarios, calibration=_cal, source="scenario")


def run_predict(scenarios: pd.DataFrame) -> pd.DataFrame:
    """`simulator.predict` under the current calibration. Raises `InputError`."""
    state = current_calibration()
    return _predict(scenarios, state.key, state.calibration)


@st.cache_data(show_spinner=False, max_entries=128)
def _size(base: dict, kwargs: dict, cal_key: str, _cal: Calibration | None) -> SizingResult:
    return size(base, calibration=_cal, **kwargs)


def run_size(base: dict, **kwargs) -> SizingResult:
    """`simulator.sizer.size` under the current calibration. Raises `InputError`."""
    state = current_calibration()
    return _size(dict(base), dict(kwargs), state.key, state.calibration)


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
    """The K with the highest speedup at this batch (one predict call). Raises InputError."""
    rows = pd.DataFrame([{**scenario_base, "k": k, "batch_size": batch} for k in k_values])
    grid = run_predict(rows)
    return int(grid.loc[grid["speedup"].idxmax(), "k"])


PUBLISHED_CSV = DATA_DIR / "validation" / "published.csv"


@st.cache_data(show_spinner=False)
def published_errors() -> pd.DataFrame:
    """The model scored against the published development set (`simulator.published`)."""
    from simulator.published import load_published, score

    return score(load_published(PUBLISHED_CSV), source=str(PUBLISHED_CSV))


def published_error_band(batches, speedups) -> pd.DataFrame | None:
    """speedup x (1 -/+ the median |error| of the published cases in each batch's bucket);
    a bucket without scored cases uses the median over all of them."""
    from simulator.published import BATCH_BUCKETS

    try:
        errors = published_errors()
    except (InputError, OSError):
        return None
    ok = errors[errors["predicted_speedup"].notna()]
    if not len(ok):
        return None
    overall = float(ok["abs_error"].median())
    by_bucket = ok.groupby("batch_bucket")["abs_error"].median().to_dict()
    b = np.asarray(batches, dtype=float)
    width = np.full(b.shape, overall)
    for lo, hi, label in BATCH_BUCKETS:
        if label in by_bucket:
            width[(b >= lo) & (b <= hi)] = by_bucket[label]
    s = np.asarray(speedups, dtype=float)
    return pd.DataFrame({"batch_size": b, "low": s * (1 - width), "high": s * (1 + width)})
