"""Squared layouts in silicon_sample.csv decoded, repeated runs dropped, impossible ones named."""

from __future__ import annotations

import pandas as pd

from simulator.inputs.catalog import default_models
from simulator.validation import serving_runs, silicon_layout

RUN = dict(
    id="",
    backend="trtllm",
    backend_version="1.2.0rc6.post3",
    model_path="deepseek-ai/DeepSeek-R1",
    system="b200_sxm",
    precision="fp4",
    mode="agg",
    isl=1024,
    osl=1024,
    batch_size=8,
    tp_size=8,
    pp_size=1,
    attention_dp_size=1,
    moe_tp_size=1,
    moe_ep_size=8,
    silicon_ttft_ms=1085.45621,
    silicon_tpot_ms=12.28947,
)
EIGHT = pd.Series(8.0, index=range(1))


def _one(**row) -> pd.DataFrame:
    return pd.DataFrame([{**RUN, **row}])


def _layout(frame: pd.DataFrame) -> tuple:
    cols = ["tp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size", "batch_size"]
    return tuple(int(v) for v in frame[cols].iloc[0])


def test_a_squared_tp_row_is_decoded_to_the_gpus_its_id_records():
    raw = _one(id="2026_04_06_deepseek_r1_b200_sxm_trtllm_fp4_agg_1024x1024_c8_tp8_ep8_937")
    raw[["tp_size", "moe_tp_size"]] = [64, 8]
    out, fixed = silicon_layout.decode(raw, EIGHT)
    assert bool(fixed.iloc[0])
    assert _layout(out) == (8, 1, 1, 8, 8)


def test_a_squared_attention_dp_row_keeps_its_concurrency():
    # Written TP1 DP64 with one request a rank; the run was TP1 DP8, 8 requests a rank.
    raw = _one(id="2026_04_06_deepseek_r1_b200_sxm_trtllm_fp4_agg_1024x1024_c64_tp8_ep8_937")
    raw[["tp_size", "attention_dp_size", "moe_tp_size", "batch_size"]] = [1, 64, 8, 1]
    out, _ = silicon_layout.decode(raw, EIGHT)
    assert _layout(out) == (1, 8, 1, 8, 8)


def test_vllms_squared_row_is_decoded_to_tp_with_expert_parallelism():
    raw = _one(id="2026_04_06_kimi_k2_5_b200_sxm_vllm_fp4_agg_1024x1024_c4_tp4_ep4_1294")
    raw[["backend", "tp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size"]] = [
        "vllm",
        4,
        4,
        1,
        16,
    ]
    raw["batch_size"] = 1
    out, _ = silicon_layout.decode(raw, EIGHT)
    assert _layout(out) == (4, 1, 1, 4, 4)


def test_a_row_without_an_id_is_decoded_only_when_its_square_spans_hosts():
    wide = _one(tp_size=64, moe_tp_size=8, moe_ep_size=8)
    out, fixed = silicon_layout.decode(wide, EIGHT)
    assert bool(fixed.iloc[0]) and _layout(out) == (8, 1, 1, 8, 8)
    # TP4 with MoE TP2 x EP2 on one host is a layout engines run: kept as written.
    one_host = _one(tp_size=4, moe_tp_size=2, moe_ep_size=2)
    out, fixed = silicon_layout.decode(one_host, EIGHT)
    assert not bool(fixed.iloc[0]) and _layout(out) == (4, 1, 2, 2, 8)


def test_vllms_squared_tp_ep_without_an_id_is_decoded_like_its_named_twin():
    """db-dump/2026-04-27's MiniMax-M2.5 config 691 writes vLLM's TP4 EP4 on 4 B200s as
    TP4 x DP4 with EP16, the columns of its `..._tp4_ep4_...` twins in 2026-04-06.csv;
    its concurrency 256 and 512 rows have no twin and were scored as 16-GPU replicas."""
    raw = _one(tp_size=4, attention_dp_size=4, moe_tp_size=1, moe_ep_size=16, batch_size=64)
    out, fixed = silicon_layout.decode(raw, EIGHT)
    assert bool(fixed.iloc[0]) and _layout(out) == (4, 1, 1, 4, 256)


def test_an_agreeing_row_is_left_as_written():
    raw = _one(id="2026_03_25_deepseek_r1_b200_sxm_trtllm_fp4_agg_1024x1024_c8_tp8_0_ep8_0_976")
    out, fixed = silicon_layout.decode(raw, EIGHT)
    assert not bool(fixed.iloc[0]) and _layout(out) == _layout(raw)


def test_the_same_measurement_twice_is_kept_once_preferring_the_labelled_row():
    raw = pd.concat(
        [
            _one(tp_size=64, moe_tp_size=8),  # the db-dump's squared copy, no id
            _one(id="2026_03_25_deepseek_r1_b200_sxm_trtllm_fp4_agg_1024x1024_c8_tp8_0_ep8_0_976"),
            _one(silicon_tpot_ms=9.0),  # another measurement
        ],
        ignore_index=True,
    )
    assert silicon_layout.duplicates(raw).tolist() == [True, False, False]


def test_the_same_measurement_under_another_model_name_is_kept_once():
    """db-dump/2026-04-27 writes its `dsr1_` runs (DeepSeek-R1's) as DeepSeek-V3: the
    very TPOT and TTFT of the 2026-03-25 DeepSeek-R1 rows, scored twice before."""
    raw = pd.concat(
        [
            _one(
                id="dsr1_b200_sglang_fp4_agg_1024x1024_c8_cfg81",
                model_path="deepseek-ai/DeepSeek-V3",
            ),
            _one(id="2026_03_25_deepseek_r1_b200_sxm_trtllm_fp4_agg_1024x1024_c8_tp8_0_ep8_0_976"),
        ],
        ignore_index=True,
    )
    assert silicon_layout.duplicates(raw).tolist() == [True, False]


def test_a_tp_that_does_not_divide_the_heads_is_named():
    raw = _one(tp_size=36, moe_tp_size=36, moe_ep_size=1)
    why = silicon_layout.contradictions(raw, pd.Series([128]))
    assert why.iloc[0] == "attention TP 36 does not divide the model's 128 attention heads"


def test_the_bundled_file_scores_each_measurement_once_in_the_layout_it_ran(tmp_path):
    runs = serving_runs.load_runs(serving_runs.bundled_runs_path(), default_models())
    moe = runs[runs["family"] == "MoE"]
    gpus = moe["tp_size"] * moe["attention_dp_size"]
    assert (gpus == moe["moe_tp_size"] * moe["moe_ep_size"]).all()
    assert moe["layout_decoded"].sum() > 100
    key = ["gpu", "engine", "weight_dtype", "prompt_len", "output_len", "batch_size"]
    twice = moe.assign(t=moe["measured_tpot_ms"].round(2), f=moe["measured_ttft_ms"].round(2))
    assert not twice.duplicated([*key, "t", "f"]).any()
    # DeepSeek-R1 on B200 fp4 at TP8 EP8, concurrency 64, 1024/1024: one row, 8 GPUs.
    one = moe[
        (moe["target"] == "deepseek-r1")
        & (moe["measured_tpot_ms"].round(4) == 16.3116)
        & (moe["engine"] == "sglang")
    ]
    assert len(one) == 1 and int(gpus[one.index].iloc[0]) == 8
