"""`profiler validate` prices each arm of a point at the context its steps ran at.

The engine-grade decoder attends over the valid context only, so a step's cost grows with
the context; the baseline's sequences stay at the prompt plus what they generated, the
speculative ones run ahead. One context for both arms mispriced one of them (issue 25:
16% median error where the committed run had 6.5%). The profile here is the committed
serving run's (the same trained pair, contexts 128 and 256, K up to 3).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from profiler.groundtruth.validate import (
    VALIDATION_DIR,
    ValidationSettings,
    arm_contexts,
    predict,
)
from simulator.inputs.profile import load_profile

PROFILE = VALIDATION_DIR / "cpu_serving_profile.json"


def _points(ar_context: float, spec_context: float) -> pd.DataFrame:
    points = pd.read_csv(VALIDATION_DIR / "cpu_validation.csv")
    points = points[points["k"] == 3].reset_index(drop=True)
    points["ar_context_len"] = ar_context
    points["spec_context_len"] = spec_context
    return points


def _measured_ms(batch: np.ndarray, query_len: int, context: int) -> np.ndarray:
    m = load_profile(PROFILE).measurements
    m = m[(m["model"] == "specplan-byte-target") & (m["query_len"] == query_len)]
    table = m[m["context_len"] == context].set_index("batch")["median_ms"]
    return table.loc[batch].to_numpy(float)


def _draft_ms(batch: np.ndarray, context: int) -> np.ndarray:
    """The draft's in-loop time of a K = 3 round: its positions 1..3 summed."""
    loop = load_profile(PROFILE).draft_in_loop
    loop = loop[loop["context_len"] == context]
    return loop.groupby("batch")["median_ms"].sum().loc[batch].to_numpy(float)


def test_each_arm_is_priced_at_its_own_context():
    settings = ValidationSettings()
    same = predict(_points(128, 128), PROFILE, settings)
    ahead = predict(_points(128, 256), PROFILE, settings)
    batch = same["batch"].to_numpy(int)
    # The baseline step is the profile's measured step at the baseline's context ...
    np.testing.assert_allclose(same["target_step_ms"], _measured_ms(batch, 1, 128), rtol=1e-6)
    np.testing.assert_allclose(ahead["target_step_ms"], same["target_step_ms"], rtol=1e-12)
    # ... the verification at the speculative arm's, K + 1 = 4 tokens.
    np.testing.assert_allclose(same["verify_step_ms"], _measured_ms(batch, 4, 128), rtol=1e-6)
    np.testing.assert_allclose(ahead["verify_step_ms"], _measured_ms(batch, 4, 256), rtol=1e-6)
    for df, context in ((same, 128), (ahead, 256)):
        np.testing.assert_allclose(df["draft_time_in_loop_ms"], _draft_ms(batch, context))
        parts = df["draft_time_in_loop_ms"] + df["verify_step_ms"] + df["verify_overhead_ms"]
        np.testing.assert_allclose(df["predicted_spec_step_ms"], parts, rtol=1e-9)
        formula = df["tau_predicted"] * df["target_step_ms"] / df["predicted_spec_step_ms"]
        np.testing.assert_allclose(df["predicted_speedup"], formula, rtol=1e-9)
        assert df["latency_source"].str.contains("draft:in-loop").all()


def test_contexts_are_kept_inside_the_profiled_grid():
    profile = load_profile(PROFILE)
    base, spec = arm_contexts(_points(100, 300), profile)
    assert (base == 128).all() and (spec == 256).all()
    base, spec = arm_contexts(_points(160.5, 200), profile)
    assert (base == 160.5).all() and (spec == 200).all()


def test_a_run_without_contexts_needs_a_profile_of_one_context():
    points = _points(128, 128).drop(columns=["ar_context_len", "spec_context_len"])
    with pytest.raises(ValueError, match="ar_context_len"):
        predict(points, PROFILE, ValidationSettings())
