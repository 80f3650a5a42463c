"""The analytic model against hand-computed answers, physical limits and the crossover."""

import numpy as np
import pandas as pd
import pytest

from simulator import InputError, predict
from simulator.inputs.catalog import default_gpus, default_models
from simulator.inputs.specs import DTYPE_BYTES
from simulator.model.defaults import DEFAULTS
from simulator.model.memory import get_kv_bytes_per_token


def _one(**row):
    return predict(pd.DataFrame([row])).iloc[0]


def test_kv_bytes_llama_3_3_70b_bf16():
    # 2 (K and V) * 80 layers * 8 KV heads * 128 head dim * 2 bytes = 327,680
    m = default_models()["llama-3.3-70b"]
    assert get_kv_bytes_per_token(m, "bf16") == 327_680
    assert _one(target="llama-3.3-70b", gpu="h100-sxm", num_gpus=4)["kv_bytes_per_token"] == 327_680


def test_kv_bytes_deepseek_v3_mla():
    # MLA caches kv_lora_rank 512 + rope dim 64 per layer: 61 * 576 * 2 bytes = 70,272
    m = default_models()["deepseek-v3"]
    assert get_kv_bytes_per_token(m, "bf16") == 61 * 576 * 2


def test_speedup_approaches_but_never_exceeds_tau_at_batch_1():
    # n-gram drafts cost nothing on the GPU; at batch 1 verifying K+1 tokens is still
    # memory-bound, so the speedup comes within a few percent of tau and never above.
    # (The isolated decode step of a bare loop: no engine costs, no prefill.)
    row = predict(
        pd.DataFrame(
            [
                dict(
                    target="llama-3.1-8b",
                    gpu="h100-sxm",
                    method="ngram",
                    k=4,
                    acceptance_rate=0.8,
                    batch_size=1,
                    serving="decode_only",
                )
            ]
        ),
        defaults=DEFAULTS.without_engine(),
    ).iloc[0]
    assert row["tau"] == pytest.approx(3.3616)
    assert row["speedup"] <= row["tau"]
    assert row["speedup"] > 0.9 * row["tau"]


def test_baseline_never_beats_bandwidth_over_weights():
    gpus, models = default_gpus(), default_models()
    rows = [
        dict(target=t, gpu=g, batch_size=1, weight_dtype=w)
        for t in ("llama-3.2-1b", "llama-3.1-8b", "qwen2.5-32b", "mistral-nemo-12b")
        for g in ("h100-sxm", "a100-80gb", "l40s", "h200")
        for w in ("bf16", "fp8")
    ]
    out = predict(pd.DataFrame(rows))
    assert out["baseline_tok_s"].notna().sum() > 20
    for _, r in out[out["status"] == "ok"].iterrows():
        limit = (
            gpus[r["gpu"]].hbm_bandwidth_gbps
            * 1e9
            / (models[r["target"]].total_params * DTYPE_BYTES[r["weight_dtype"]])
        )
        assert r["baseline_tok_s"] <= limit


def test_70b_tp4_speedup_falls_with_batch_and_crosses_below_one():
    batches = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    table = pd.DataFrame(
        [
            dict(
                target="llama-3.3-70b",
                gpu="h100-sxm",
                num_gpus=4,
                method="draft_model",
                draft="llama-3.2-1b",
                k=5,
                acceptance_rate=0.7,
                batch_size=b,
                prompt_len=512,
                output_len=256,
                engine="other",  # the roofline (kernel tables: test_kernels)
            )
            for b in batches
        ]
    )
    out = predict(table)
    speedup = out["speedup"].to_numpy()
    assert speedup[0] > 1.5
    # Falls with every doubling until max_num_seqs (256) caps the batch that runs.
    assert np.all(np.diff(speedup[:-1]) < 0), speedup
    assert out["effective_batch_spec"].iloc[-1] == 256 and speedup[-1] == speedup[-2]
    assert speedup[-1] < 1.0
    crossover = int(out.loc[out["speedup"] < 1.0, "batch_size"].iloc[0])
    print(f"crossover batch for 70B/1B K=5 alpha=0.7 on 4xH100: {crossover}")
    assert 8 <= crossover <= 512
    assert "slower than the baseline" in out["warnings"].iloc[-1]


def test_moe_verification_reads_more_experts():
    base = dict(
        target="deepseek-v3",
        gpu="h200",
        num_gpus=8,
        weight_dtype="fp8",
        method="mtp",
        acceptance_rate=0.85,
        batch_size=4,
    )
    k1 = _one(**base, k=1)
    k4 = _one(**base, k=4)
    # More verify tokens touch more of the 256 experts: the verify step costs more.
    assert k4["verify_step_ms"] > k1["verify_step_ms"]


def test_draft_costs_memory_and_concurrency():
    row = _one(
        target="llama-3.1-8b",
        gpu="l4",
        method="draft_model",
        draft="llama-3.2-1b",
        k=4,
        acceptance_rate=0.7,
    )
    assert row["draft_weights_gb"] > 2.0
    assert row["max_concurrency_spec"] < row["max_concurrency_baseline"]


def test_warnings():
    row = _one(
        target="llama-3.1-8b",
        gpu="h100-sxm",
        method="draft_model",
        draft="qwen2.5-0.5b",
        k=10,
        acceptance_rate=0.4,
    )
    w = row["warnings"]
    assert "K above 8" in w and "acceptance below" in w
    assert "tokenizers differ" in row["status"] and np.isnan(row["speedup"])


def test_three_acceptance_forms_agree():
    base = dict(target="llama-3.1-8b", gpu="h100-sxm", method="eagle", k=4, batch_size=8)
    a = _one(**base, acceptance_rate=0.8)
    b = _one(**base, mean_accepted_tokens=3.3616)
    c = _one(**base, acceptance_per_position="0.8;0.64;0.512;0.4096")
    for r in (b, c):
        assert r["speedup"] == pytest.approx(a["speedup"], rel=1e-6)
        assert r["alpha"] == pytest.approx(0.8, abs=1e-6)


def test_blocks_agree_with_one_pass_and_report_global_rows(monkeypatch):
    import sys

    predict_module = sys.modules["simulator.model.predict"]

    rows = [
        dict(
            target="llama-3.1-8b",
            gpu="h100-sxm",
            method="eagle",
            k=1 + i % 6,
            acceptance_rate=0.5 + (i % 40) / 100,
            batch_size=1 + i % 64,
        )
        for i in range(120)
    ]
    table = pd.DataFrame(rows)
    whole = predict(table)
    monkeypatch.setattr(predict_module, "BLOCK_ROWS", 50)
    blocked = predict(table)
    pd.testing.assert_frame_equal(whole, blocked, check_categorical=False)
    table.loc[110, "k"] = -1
    with pytest.raises(InputError, match="row 111, field 'k'"):
        predict(table)
    table.loc[30, "acceptance_rate"] = 2.0  # an earlier block's error wins
    with pytest.raises(InputError, match="row 31, field 'acceptance_rate'"):
        predict(table)


def test_values_a_method_does_not_use_are_ignored_with_a_warning():
    base = dict(target="llama-3.1-8b", gpu="h100-sxm", batch_size=4)
    rows = pd.DataFrame(
        [
            {**base, "method": "none", "k": 4},
            {**base, "method": "none", "acceptance_rate": 0.7},
            {**base, "method": "none", "draft": "llama-3.2-1b"},
            {**base, "method": "none", "k": 0},
            {**base, "method": "eagle", "k": 3, "acceptance_rate": 0.7, "draft": "llama-3.2-1b"},
            {**base, "method": "eagle", "k": 3, "acceptance_rate": 0.7, "medusa_heads": 5},
            {**base, "method": "medusa", "k": 3, "acceptance_rate": 0.7, "medusa_heads": 5},
            {**base, "method": "mtp", "k": 1, "acceptance_rate": 0.7, "mtp_depth": 2},
            {**base, "method": "ngram", "k": 3, "acceptance_rate": 0.7, "draft_context_len": 512},
            {**base, "method": "eagle", "k": 3, "acceptance_rate": 0.7, "draft_context_len": 512},
        ]
    )
    out = predict(rows)
    w = out["warnings"].astype(str).tolist()
    for i in (0, 1, 2):
        assert "method none uses no k" in w[i], w[i]
    assert out["k"].iloc[0] == 0 and out["speedup"].iloc[0] == 1.0
    assert "draft is used only by method draft_model" in w[4]
    assert "medusa_heads (method medusa only)" in w[5]
    assert "draft_context_len (methods whose draft keeps a KV cache)" in w[8]
    # What a row's method uses is not ignored: k = 0 on none, heads on Medusa, depth on
    # MTP, a draft window on EAGLE.
    for i in (3, 6, 7, 9):
        assert "ignored" not in w[i], w[i]
    # The warning does not change the figures: the same rows without the unused values.
    clean = rows.drop(columns=["draft", "medusa_heads", "draft_context_len"]).assign(
        k=rows["k"].where(rows["method"] != "none"),
        acceptance_rate=rows["acceptance_rate"].where(rows["method"] != "none"),
    )
    clean["medusa_heads"] = rows["medusa_heads"].where(rows["method"] == "medusa")
    clean["draft_context_len"] = rows["draft_context_len"].where(rows["method"] == "eagle")
    clean.loc[rows["method"] == "mtp", "mtp_depth"] = 2
    again = predict(clean)
    assert np.allclose(out["speedup"], again["speedup"], equal_nan=True)
    assert not again["warnings"].astype(str).str.contains("ignored").any()


def test_ignored_warning_follows_its_row_through_reordering():
    # Rows of many combinations are priced out of order; the warning must come back to
    # the row that earned it.
    rng = np.random.default_rng(3)
    n = 3000
    methods = rng.choice(["none", "eagle", "ngram"], n)
    rows = pd.DataFrame(
        {
            "target": rng.choice(["llama-3.1-8b", "qwen2.5-32b"], n),
            "gpu": rng.choice(["h100-sxm", "h200", "a100-80gb"], n),
            "method": methods,
            "k": np.where(methods == "none", rng.choice([0, 3], n), 3),
            "acceptance_rate": np.where(methods == "none", np.nan, 0.7),
        }
    )
    w = predict(rows)["warnings"].astype(str)
    expect = (methods == "none") & (rows["k"].to_numpy() == 3)
    assert (w.str.contains("method none uses no k").to_numpy() == expect).all()


_EAGLE = {"target": ["llama-3.1-8b"] * 2, "method": ["eagle"] * 2, "gpu": ["h100-sxm"] * 2}


@pytest.mark.parametrize(
    ("column", "cells", "needle"),
    [
        # Each was taken before: True as K = 1, a date as nanoseconds, a duration of 3 ns as
        # K = 3; a list or a mapping raised TypeError from pandas.
        ("k", [True, False], "field 'k': holds true/false values"),
        ("k", pd.to_datetime(["2026-01-01"] * 2), "field 'k': holds dates or times"),
        ("k", pd.to_timedelta([3, 3]), "field 'k': holds dates or times"),
        ("k", pd.Series([3, [1, 2]], dtype=object), "row 2, field 'k': a list is neither"),
        ("target", pd.Series([{"a": 1}, "x"], dtype=object), "row 1, field 'target': a mapping"),
        ("k", pd.Series([b"3", 3], dtype=object), "row 1, field 'k': a bytes value"),
        ("k", pd.Series([3, True], dtype=object), "row 2, field 'k': a true/false value"),
        ("k", pd.Categorical(["3", (1, 2)]), "row 2, field 'k': a list is neither"),
    ],
)
def test_cells_that_are_neither_text_nor_numbers_are_refused(column, cells, needle):
    frame = pd.DataFrame({**_EAGLE, "acceptance_rate": [0.7, 0.7], column: cells})
    with pytest.raises(InputError) as exc:
        predict(frame)
    assert needle in str(exc.value)


def test_numbers_of_any_plain_type_are_taken():
    import decimal

    cells = pd.Series([decimal.Decimal("3"), np.int8(4)], dtype=object)
    frame = pd.DataFrame({**_EAGLE, "acceptance_rate": [0.7, 0.7], "k": cells})
    assert list(predict(frame)["k"]) == [3, 4]


def test_a_blank_weight_dtype_is_the_one_the_target_is_released_in():
    """DeepSeek-V3 ships fp8 weights (data/models.csv checkpoint_dtype); the others 16-bit.
    A blank or absent weight_dtype prices each row's target in its own, in one table and
    in the grouped path of a large one; a given dtype still wins."""
    rows = [
        dict(target="deepseek-v3", method="mtp", gpu="h200", num_gpus=8, k=1, acceptance_rate=0.85),
        dict(target="llama-3.1-8b", gpu="h100-sxm"),
    ]
    absent = predict(pd.DataFrame(rows))
    assert absent["weight_dtype"].astype(str).tolist() == ["fp8", "bf16"]
    assert absent["status"].astype(str).tolist() == ["ok", "ok"]
    blank = predict(pd.DataFrame([{**r, "weight_dtype": ""} for r in rows]))
    assert blank["weights_gb"].tolist() == absent["weights_gb"].tolist()
    given = predict(pd.DataFrame([{**r, "weight_dtype": "bf16"} for r in rows]))
    assert given["weights_gb"].iloc[0] == pytest.approx(2 * absent["weights_gb"].iloc[0])
    assert given["status"].astype(str).iloc[0].startswith("cannot run")
    big = predict(pd.DataFrame(rows * 3000))  # rows grouped by target and dtype
    for target, weights in zip(("deepseek-v3", "llama-3.1-8b"), absent["weights_gb"], strict=True):
        assert (big.loc[big["target"] == target, "weights_gb"] == weights).all()
