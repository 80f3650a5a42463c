"""The development set's fit reproduced by code and scored leave-one-source-out (issue 35
item 1): which constants count as fitted, the host costs set and restored, a source that
alone sets a term scored without it, and the bundled table the Validation page shows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from simulator.kernels import engines
from simulator.validation import refit
from simulator.validation.published import load_published, score

PUBLISHED = load_published(refit.DEV_SET)


def _sources(*ids: str) -> pd.DataFrame:
    return PUBLISHED[PUBLISHED["source_id"].isin(ids)].reset_index(drop=True)


def test_the_fitted_terms_are_those_documented_as_fitted_on_the_development_set():
    labels = {t.label for t in refit.fitted_terms()}
    assert {"bandwidth_efficiency", "roofline_sharpness", "sglang@0.4.4.head_per_seq_ms"} <= labels
    assert {"sglang.round_ms", "sglang@0.4.4.round_ms", "vllm.round_ms"} <= labels
    # SGLang's current versions have no per-request head cost: no figure, nothing to fit.
    assert "sglang.head_per_seq_ms" not in labels
    # Public, derived or assumed figures are not refitted.
    assert "vllm.head_forward_ms" not in labels and "vllm.step_ms" not in labels
    assert "trtllm.round_ms" not in labels and "prefill_compute_efficiency" not in labels


def test_host_costs_are_set_inside_and_restored_after_even_on_error():
    """A version's own term is set on that version alone; an engine's term reaches its
    versions that do not give it themselves."""
    terms = (refit.Term("head_per_seq_ms", "sglang@0.4.4"), refit.Term("step_ms", "sglang"))
    values = {"sglang@0.4.4.head_per_seq_ms": 0.5, "sglang.step_ms": 2.0}
    before, before_old = engines.ENGINE_HOST["sglang"], engines.VERSION_HOST["sglang@0.4.4"]
    rows = _sources("eagle3_paper")
    sglang = rows["engine"][rows["scored"].astype(bool)].to_numpy() == "sglang"
    plain = score(rows)["predicted_speedup"].to_numpy()
    with refit.applied(terms, values):
        old = engines.host_for("sglang", "0.4.4")
        assert old.head_per_seq_ms == 0.5 and old.step_ms == 2.0
        assert engines.host_for("sglang").head_per_seq_ms == 0.0
        assert old.round_ms == before_old.round_ms
        slower = score(rows)["predicted_speedup"].to_numpy()
    assert (slower[sglang] < plain[sglang]).all()
    with pytest.raises(RuntimeError), refit.applied(terms, values):
        raise RuntimeError
    assert engines.ENGINE_HOST["sglang"] is before
    assert engines.VERSION_HOST["sglang@0.4.4"] is before_old


def test_a_term_one_source_sets_is_scored_from_its_fallback_without_that_source():
    """The EAGLE-3 paper's SGLang rows (v0.4.4) alone set 0.4.4's per-sequence head cost:
    left out, the fold starts it from SGLang's current value (0) instead of 0.06 ms."""
    terms = (refit.Term("head_per_seq_ms", "sglang@0.4.4", 0.0, 1.0, 0.01),)
    rows = _sources("eagle3_paper", "vllm_pr_16035")
    cv = refit.cross_validate(rows, passes=1, terms=terms)
    assert cv.owned["eagle3_paper"] == "sglang@0.4.4.head_per_seq_ms"
    assert cv.folds.loc["eagle3_paper", "sglang@0.4.4.head_per_seq_ms"] == 0.0
    assert cv.shipped["sglang@0.4.4.head_per_seq_ms"] == pytest.approx(0.06)
    paper = cv.errors[cv.errors["source_id"] == "eagle3_paper"]
    sglang = paper["engine"] == "sglang"
    # Without the per-sequence cost the paper's reversals at large batch turn optimistic.
    assert (paper.loc[sglang, "cv_error"] > paper.loc[sglang, "error"]).all()
    # vLLM rows do not respond to SGLang's term: the same error in and out of sample.
    assert np.allclose(paper.loc[~sglang, "cv_error"], paper.loc[~sglang, "error"])


def test_a_fold_whose_values_do_not_move_scores_as_in_sample():
    terms = (refit.Term("round_ms", "vllm", 0.0, 5.0, 0.1),)
    rows = _sources("vllm_pr_16035", "vllm_pr_16937")
    cv = refit.cross_validate(rows, passes=1, terms=terms)
    for source, values in cv.folds.iterrows():
        held = cv.errors[cv.errors["source_id"] == source]
        if values["vllm.round_ms"] == cv.shipped["vllm.round_ms"]:
            assert np.allclose(held["cv_error"], held["error"])
        else:
            assert not np.allclose(held["cv_error"], held["error"])


def test_the_objective_penalises_a_reversal_predicted_as_a_speedup():
    errors = pd.DataFrame(
        {
            "error": [0.0, 0.0],
            "batch_bucket": ["1", "1"],
            "source_id": ["a", "a"],
            "published_speedup": [0.9, 1.5],
            "predicted_speedup": [0.9, 1.5],
        }
    )
    flipped = errors.assign(predicted_speedup=[1.2, 1.5])
    assert refit.objective(flipped) > refit.objective(errors)


def test_the_bundled_cross_validated_table_is_of_this_model():
    """Fails when the model changes and the table is not written again (the command is in
    `refit.CV_CSV`'s docstring); the page then shows a warning, not stale figures."""
    table = refit.read_cv(refit.CV_CSV, score(PUBLISHED))
    assert table is not None, "run the command in refit.CV_CSV's docstring"
    assert table["cv_error"].notna().sum() >= 0.95 * len(table)


def test_a_stale_or_missing_table_is_not_shown(tmp_path):
    current = score(PUBLISHED)
    assert refit.read_cv(tmp_path / "none.csv", current) is None
    stale = pd.read_csv(refit.CV_CSV)
    stale.loc[0, "error"] += 0.01
    stale.to_csv(tmp_path / "stale.csv", index=False)
    assert refit.read_cv(tmp_path / "stale.csv", current) is None
