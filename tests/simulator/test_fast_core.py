"""The grouped, vectorised core against the same rows priced one at a time, and the
limits that keep every row's answer finite."""

import numpy as np
import pandas as pd
import pytest

from simulator import predict
from simulator.errors import InputError
from simulator.inputs.catalog import default_gpus, default_models
from simulator.inputs.specs import METHODS


def _diverse(n: int, seed: int = 3, models=None, gpus=None) -> pd.DataFrame:
    """Valid rows over every method, dtype, acceptance form and mode, and every catalog
    entry (or the `models` and `gpus` given)."""
    rng = np.random.default_rng(seed)
    models, gpus = list(models or default_models()), list(gpus or default_gpus())
    method = np.array(METHODS)[rng.integers(0, len(METHODS), n)]
    spec = method != "none"
    k = np.where(spec, rng.integers(1, 11, n), 0).astype(float)
    form = rng.integers(0, 3, n)
    positions = [
        ";".join(f"{p:.3f}" for p in np.sort(rng.uniform(0, 1, rng.integers(1, 6)))[::-1])
        if spec[i] and form[i] == 2
        else None
        for i in range(n)
    ]
    draft_model = method == "draft_model"
    small = np.array(["llama-3.2-1b", "qwen2.5-0.5b", "tiny", "qwen3-0.6b"])
    open_loop = rng.random(n) < 0.1
    return pd.DataFrame(
        {
            "target": np.array(models)[rng.integers(0, len(models), n)],
            "method": method,
            "draft": np.where(draft_model, small[rng.integers(0, len(small), n)], ""),
            "gpu": np.array(gpus)[rng.integers(0, len(gpus), n)],
            "num_gpus": rng.choice([1, 2, 4, 8], n),
            "weight_dtype": np.array(["bf16", "fp8", "int4"])[rng.integers(0, 3, n)],
            "kv_dtype": np.array(["bf16", "fp8"])[rng.integers(0, 2, n)],
            "k": k,
            "acceptance_rate": np.where(spec & (form == 0), rng.uniform(0, 1, n), np.nan),
            "mean_accepted_tokens": np.where(
                spec & (form == 1), 1 + rng.uniform(0, 1, n) * k, np.nan
            ),
            "acceptance_per_position": positions,
            "verify_tokens": np.where(rng.random(n) < 0.2, k + 1 + rng.integers(0, 30, n), np.nan),
            "batch_size": np.where(open_loop, np.nan, rng.choice([1, 8, 64, 256, 1024], n)),
            "request_rate": np.where(open_loop, rng.uniform(0.1, 50, n), np.nan),
            "prompt_len": rng.integers(1, 20000, n),
            "output_len": rng.integers(1, 4096, n),
            "temperature": rng.choice([0.0, 0.7], n),
            "serving": np.array(["steady", "decode_only"])[rng.integers(0, 2, n)],
        }
    )


def _assert_same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    assert list(a.columns) == list(b.columns)
    for c in a.columns:
        x, y = a[c], b[c]
        if x.dtype.kind in "fiub":
            assert np.allclose(
                x.to_numpy(float), y.to_numpy(float), rtol=1e-12, atol=0, equal_nan=True
            ), c
        else:
            xs = x.astype(object).fillna("<NA>").astype(str).to_numpy()
            ys = y.astype(object).fillna("<NA>").astype(str).to_numpy()
            assert (xs == ys).all(), c


def test_a_table_gives_what_its_rows_give_one_at_a_time():
    table = _diverse(240)
    whole = predict(table)
    rows = pd.concat([predict(table.iloc[[i]]) for i in range(len(table))], ignore_index=True)
    _assert_same(whole, rows)


GROUPING_MODELS = (
    "llama-3.1-8b",
    "llama-3.3-70b",
    "qwen3-32b",
    "qwen2.5-0.5b",
    "tiny",
    "qwen3-30b-a3b",
    "deepseek-v3",
)
GROUPING_GPUS = ("h100-sxm", "h200", "a100-80gb", "mi300x", "rtx-4090")


def test_rows_grouped_by_catalog_entry_give_the_same_answers(monkeypatch):
    # With a low GROUP_ROWS every combination of (method, target, draft, dtypes) is priced
    # with its model figures as scalars and its GPUs' per row; with a huge one, per method
    # with figures per row. Either way the rows are reordered and their outputs put back.
    import sys

    module = sys.modules["simulator.model.predict"]
    # Dense, MoE, MLA and tiny targets on kernel-table and roofline GPUs: the same
    # grouping paths as the whole catalog (the test above covers every entry) with far
    # fewer MoE surfaces to build (the whole catalog took four minutes on a cold cache).
    table = _diverse(3000, seed=4, models=GROUPING_MODELS, gpus=GROUPING_GPUS)
    monkeypatch.setattr(module, "GROUP_ROWS", 4)
    grouped = predict(table)
    monkeypatch.setattr(module, "GROUP_ROWS", 10**9)
    per_row = predict(table)
    _assert_same(grouped, per_row)
    monkeypatch.setattr(module, "GROUP_ROWS", 4)
    ordered = table.sort_values(["target", "method", "gpu", "draft", "weight_dtype", "kv_dtype"])
    in_order = predict(ordered.reset_index(drop=True))
    _assert_same(in_order, grouped.loc[ordered.index].reset_index(drop=True))


def test_a_calibrated_table_in_any_order_gives_the_same_rows():
    from simulator.inputs.profile import load_profile
    from simulator.model.calibration import Calibration

    cal = Calibration.from_profiles([load_profile("data/profiles/cpu/specplan-byte-pair.json")])
    rng = np.random.default_rng(6)
    n = 400
    method = np.array(["none", "draft_model", "eagle", "ngram"])[rng.integers(0, 4, n)]
    table = pd.DataFrame(
        {
            "target": np.where(rng.random(n) < 0.5, "specplan-byte-target", "llama-3.1-8b"),
            "gpu": np.where(rng.random(n) < 0.7, "cpu", "h100-sxm"),
            "method": method,
            "draft": np.where(method == "draft_model", "specplan-byte-draft", ""),
            "k": np.where(method == "none", 0, rng.integers(1, 6, n)),
            "acceptance_rate": rng.uniform(0.3, 0.9, n),
            "batch_size": rng.choice([1, 2, 4, 8], n),
            "prompt_len": rng.integers(16, 200, n),
            "output_len": rng.integers(16, 200, n),
        }
    )
    table.loc[table["target"] == "llama-3.1-8b", "draft"] = np.where(
        table.loc[table["target"] == "llama-3.1-8b", "method"] == "draft_model", "llama-3.2-1b", ""
    )
    out = predict(table, calibration=cal)
    assert set(out["latency_source"]) - {"roofline"}  # some rows are calibrated
    shuffled = rng.permutation(n)
    again = predict(table.iloc[shuffled].reset_index(drop=True), calibration=cal)
    _assert_same(again, out.iloc[shuffled].reset_index(drop=True))


def test_break_even_is_computed_only_where_asked():
    table = _diverse(200, seed=5)
    full = predict(table)
    lean = predict(table, break_even=False)
    assert lean["break_even_alpha"].isna().all()
    _assert_same(full.drop(columns="break_even_alpha"), lean.drop(columns="break_even_alpha"))


def _row(**cells) -> pd.DataFrame:
    base = dict(target="llama-3.1-8b", gpu="h100-sxm", method="eagle", k=3, acceptance_rate=0.7)
    return pd.DataFrame([{**base, **cells}])


@pytest.mark.parametrize(
    ("cells", "field"),
    [
        (dict(prompt_len=9223372036854775807), "prompt_len"),
        (dict(prompt_len=2**63), "prompt_len"),
        (dict(output_len=10**12), "output_len"),
        (dict(batch_size=10**19), "batch_size"),
        (dict(num_gpus=10**9), "num_gpus"),
        (dict(verify_tokens=1e300), "verify_tokens"),
        (dict(draft_context_len=1e30), "draft_context_len"),
        (dict(medusa_heads=10**6, method="medusa"), "medusa_heads"),
    ],
)
def test_numbers_past_the_limits_are_refused_naming_the_column(cells, field):
    with pytest.raises(InputError, match=f"field '{field}': .* is above"):
        predict(_row(**cells))


def test_text_nan_is_not_a_missing_acceptance_curve():
    row = _row(acceptance_rate=None, acceptance_per_position="nan")
    with pytest.raises(InputError, match="field 'acceptance_per_position'"):
        predict(row)


def test_a_column_repeated_after_stripping_is_refused():
    table = pd.DataFrame(
        [["llama-3.1-8b", "h100-sxm", "h100-sxm"]], columns=["target", "gpu", " gpu"]
    )
    with pytest.raises(InputError, match="field 'gpu': column 'gpu' appears twice"):
        predict(table)


def test_rows_at_the_limits_give_finite_sane_answers():
    rows = pd.concat(
        [
            _row(prompt_len=100_000_000, serving="decode_only"),
            _row(verify_tokens=65_536),
            _row(batch_size=1_000_000),
            _row(num_gpus=4096),
            _row(method="medusa", medusa_heads=64, k=16),
        ],
        ignore_index=True,
    )
    out = predict(rows)
    ok = out["status"].astype(str) == "ok"
    figures = out.loc[ok, ["speedup", "spec_tpot_ms", "baseline_tpot_ms", "spec_tok_s"]]
    assert np.isfinite(figures.to_numpy()).all() and (figures.to_numpy() >= 0).all()
    assert (out.loc[ok, "speedup"] <= out.loc[ok, "k"] + 1).all()


def test_a_short_measured_curve_is_extended_whatever_the_other_rows_measured():
    # The second row measured one position; the first row's five once made the table five
    # positions wide, and the second row's unmeasured positions then counted as 0.
    table = pd.concat(
        [
            _row(acceptance_rate=None, acceptance_per_position="0.9;0.8;0.7;0.6;0.5"),
            _row(acceptance_rate=None, acceptance_per_position="0.8"),
        ],
        ignore_index=True,
    )
    together = predict(table)["tau"].to_numpy()
    alone = predict(table.iloc[[1]])["tau"].to_numpy()
    assert together[1] == pytest.approx(alone[0], rel=1e-12) and alone[0] > 1.8 + 0.1


def test_whole_powers_by_products_match_pow_and_fall_back_where_they_cannot():
    from simulator.model.acceptance import WHOLE_POWER_MAX, WholePower

    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, 500)
    k = rng.integers(0, WHOLE_POWER_MAX + 1, 500).astype(float)
    fast = WholePower(k)
    assert fast.pick is not None
    np.testing.assert_allclose(fast(x), x**k, rtol=1e-14, atol=0)
    # a row's answer does not depend on its neighbours
    np.testing.assert_array_equal(WholePower(k[:100])(x[:100]), fast(x)[:100])
    for exponents in (k + 0.5, np.where(k > 3, WHOLE_POWER_MAX + 1.0, k), np.full(500, np.nan)):
        slow = WholePower(exponents)
        assert slow.pick is None
        np.testing.assert_array_equal(slow(x), x**exponents)


def test_newton_stops_early_at_the_same_answer():
    from simulator.model.acceptance import alpha_from_tau, tau_iid

    rng = np.random.default_rng(1)
    k = rng.integers(1, 17, 4000).astype(float)
    alpha = rng.uniform(0, 1, 4000)
    alpha[:10] = [0.0, 1.0, 1 - 1e-9, 1 - 1e-5, 0.5, 0.999, 1e-9, 0.3, 0.99999, 0.9]
    tau = tau_iid(alpha, k)
    np.testing.assert_allclose(alpha_from_tau(tau, k), alpha, atol=2e-6)
    np.testing.assert_allclose(alpha_from_tau(tau, k)[10:], alpha[10:], atol=1e-9)


def test_the_default_roofline_adds_memory_and_compute_time():
    from simulator.model.latency import get_roofline_ms

    rng = np.random.default_rng(2)
    nbytes, flops = rng.uniform(1e6, 1e11, 300), rng.uniform(1e9, 1e15, 300)
    fast = get_roofline_ms(nbytes, flops, 3350.0, 989.0, sharpness=1.0)
    general = get_roofline_ms(nbytes, flops, 3350.0, 989.0, sharpness=np.ones(300))
    np.testing.assert_allclose(fast, general, rtol=1e-12)
