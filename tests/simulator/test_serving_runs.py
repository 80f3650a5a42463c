"""`validate --serving`: absolute TPOT against measured serving runs."""

from __future__ import annotations

import pandas as pd
import pytest

from simulator.cli.main import main
from simulator.errors import InputError
from simulator.inputs.catalog import default_models
from simulator.validation import serving_runs

RUN = dict(
    backend="vllm",
    backend_version="0.12.0",
    model_path="nvidia/Llama-3.1-8B-Instruct-FP8",
    system="h200_sxm",
    precision="fp8",
    mode="agg",
    isl=1024,
    osl=1024,
    batch_size=16,
    tp_size=1,
    pp_size=1,
    attention_dp_size=float("nan"),
    silicon_ttft_ms=80.0,
    silicon_tpot_ms=7.0,
)


def _csv(tmp_path, rows):
    path = tmp_path / "runs.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_only_runs_the_model_can_price_as_they_were_run_are_kept(tmp_path):
    rows = [
        RUN,
        {**RUN, "mode": "disagg"},
        {**RUN, "precision": "fp4"},
        {**RUN, "model_path": "deepseek-ai/DeepSeek-V3", "silicon_tpot_ms": 30.0},  # MoE
        {**RUN, "pp_size": 2},
        {**RUN, "attention_dp_size": 4},
        {**RUN, "system": "gb300"},  # not in the catalog
    ]
    runs = serving_runs.load_runs(_csv(tmp_path, rows), default_models())
    assert len(runs) == 2  # the dense run and the MoE one; attention DP of a dense model is not
    row = runs.iloc[0]
    assert (row["target"], row["gpu"], row["engine"]) == ("llama-3.1-8b", "h200", "vllm")
    assert (row["weight_dtype"], row["kv_dtype"], row["serving"]) == ("fp8", "fp8", "steady")
    assert runs["family"].tolist() == ["dense", "MoE"]
    assert runs.iloc[1]["target"] == "deepseek-v3"


def test_a_file_without_the_columns_is_refused_naming_them(tmp_path):
    path = _csv(tmp_path, [{"backend": "vllm"}])
    with pytest.raises(InputError, match="missing columns"):
        serving_runs.load_runs(path, default_models())


def test_cli_scores_each_run_and_writes_the_errors(tmp_path, capsys):
    path = _csv(tmp_path, [RUN, {**RUN, "batch_size": 64, "silicon_tpot_ms": 11.0}])
    out = tmp_path / "tpot_errors.csv"
    assert main(["validate", "--serving", str(path), "--out", str(out)]) == 0
    errors = pd.read_csv(out)
    assert len(errors) == 2
    assert errors["latency_source"].str.startswith("kernels:vllm").all()
    expected = errors["predicted_tpot_ms"] / errors["measured_tpot_ms"] - 1
    assert errors["tpot_error"].tolist() == pytest.approx(expected.tolist())
    assert "by model, GPU, engine" in capsys.readouterr().out
    assert main(["validate", "--serving", str(path), "--out", str(out), "--roofline"]) == 0
    assert (pd.read_csv(out)["latency_source"] == "roofline").all()


def test_cli_wants_exactly_one_set(tmp_path):
    assert main(["validate", "--out", str(tmp_path / "x.csv")]) == 2


def test_the_bundled_runs_are_read_from_the_installed_package():
    runs = serving_runs.load_runs(serving_runs.bundled_runs_path(), default_models())
    assert (runs["family"] == "dense").sum() == 559
    moe = runs[runs["family"] != "dense"]
    # the aggregated MoE runs at every layout, each measurement once (db-dump writes 391
    # DeepSeek-R1 measurements a second time as DeepSeek-V3: kept once)
    assert 1450 < len(moe) < 1600
    assert {"deepseek-r1", "kimi-k2.5", "glm-5", "gpt-oss-120b", "qwen3-235b-a22b-fp8"} <= set(
        moe["target"]
    )
    assert (moe["attention_dp_size"] > 1).any() and (moe["moe_ep_size"] > 1).any()
    assert set(runs["engine"]) == {"vllm", "sglang", "trtllm"}


def test_a_run_too_short_to_have_prefilled_its_prompts_is_left_out_of_the_summary(tmp_path):
    # 64 prompts of 8000 tokens take seconds of Llama-3.1-8B prefill on one H200 by the
    # engine's own kernel tables; this run claims each request lived 50 + 99 * 5 ms.
    short = {**RUN, "batch_size": 64, "isl": 8000, "osl": 100, "silicon_ttft_ms": 50.0}
    short["silicon_tpot_ms"] = 5.0
    runs = serving_runs.load_runs(_csv(tmp_path, [RUN, short]), default_models())
    errors = serving_runs.score(runs)
    floor = errors["prefill_floor_ms"]
    lifetime = errors["measured_ttft_ms"] + (errors["output_len"] - 1) * errors["measured_tpot_ms"]
    assert floor.iloc[1] > lifetime.iloc[1] and floor.iloc[0] < lifetime.iloc[0]
    assert errors["excluded"].tolist()[0] == ""
    assert "prefill floor" in errors["excluded"].tolist()[1]
    tables = serving_runs.summarise(errors)
    assert int(tables["overall"]["runs"].iloc[0]) == 1
    text = serving_runs.format_summary(tables, errors)
    assert "1 of 2 runs left out" in text
    # The roofline's pricing leaves out the same runs: the rule reads the data, not the model.
    assert (
        serving_runs.score(runs, kernels=False)["excluded"].tolist() == errors["excluded"].tolist()
    )
