"""Which silicon_sample runs ran MTP: the join to the InferenceX sweeps they came from."""

import pandas as pd

from simulator.validation import inferencemax
from simulator.validation.serving_runs import bundled_runs_path, score


def _table(*rows):
    cols = [
        "run_utc",
        "config_key",
        "model_prefix",
        "precision",
        "gpu",
        "framework",
        "spec_decoding",
    ]
    t = pd.DataFrame([dict(zip(cols, r, strict=True)) for r in rows])
    t["run_utc"] = pd.to_datetime(t["run_utc"], utc=True)
    return t


TABLE = _table(
    ("2026-01-14T22:26:18Z", "dsr1-fp8-b200-trt-mtp", "dsr1", "fp8", "b200", "trt", "mtp"),
    ("2026-01-29T15:27:25Z", "dsr1-fp8-b200-trt", "dsr1", "fp8", "b200", "trt", "none"),
    ("2026-03-25T16:34:10Z", "dsr1-fp8-b200-sglang", "dsr1", "fp8", "b200", "sglang", "none"),
    ("2026-03-25T16:34:10Z", "dsr1-fp8-b200-sglang-mtp", "dsr1", "fp8", "b200", "sglang", "mtp"),
)


def _raw(*stamps, backend="trtllm"):
    return pd.DataFrame(
        {
            "silicon_data_source": [f"db-dump; config=201; measured={s}" for s in stamps],
            "precision": "fp8",
            "system": "b200_sxm",
            "backend": backend,
        }
    )


def _spec(raw, target="deepseek-r1"):
    out = inferencemax.spec_decoding(raw, pd.Series(target, index=raw.index), TABLE)
    return list(out["spec_decoding"]), list(out["inferencemax_run"])


def test_a_run_stamped_seconds_after_an_mtp_sweep_ran_mtp():
    spec, run = _spec(_raw("2026-01-14T22:26:21Z"))
    assert spec == ["mtp"]
    assert run == ["dsr1-fp8-b200-trt-mtp 2026-01-14T22:26:18Z"]


def test_a_stamp_before_the_merge_or_long_after_matches_nothing():
    spec, _ = _spec(_raw("2026-01-14T22:26:10Z", "2026-01-14T23:26:21Z"))
    assert spec == ["", ""]


def test_a_date_only_twin_is_matched_by_its_day():
    spec, _ = _spec(_raw("2026-01-14T00:00:00.000Z", "2026-01-29T00:00:00.000Z"))
    assert spec == ["mtp", "none"]


def test_a_sweep_without_mtp_is_none_and_one_with_both_is_both():
    assert _spec(_raw("2026-01-29T15:27:29Z"))[0] == ["none"]
    assert _spec(_raw("2026-03-25T16:34:14Z", backend="sglang"))[0] == ["both"]


def test_another_engine_model_or_gpu_matches_nothing():
    assert _spec(_raw("2026-01-14T22:26:21Z", backend="vllm"))[0] == [""]
    assert _spec(_raw("2026-01-14T22:26:21Z"), target="llama-3.1-8b")[0] == [""]
    raw = _raw("2026-01-14T22:26:21Z").assign(system="h200_sxm")
    assert _spec(raw)[0] == [""]


def test_a_row_without_a_stamp_matches_nothing():
    raw = _raw("x").assign(silicon_data_source="aiconfigurator sweep")
    assert _spec(raw)[0] == [""]
    assert _spec(raw.drop(columns="silicon_data_source"))[0] == [""]


def test_the_bundled_table_reads_the_trtllm_release_each_run_used():
    """Every DeepSeek-R1 B200 TensorRT-LLM sweep on 1.2.0rc6.post3 ran MTP, every one on
    rc6.post2 did not (the -mtp keys alone moved to post3 in February 2026)."""
    t = inferencemax.load_table()
    trt = t[(t["model_prefix"] == "dsr1") & (t["gpu"] == "b200") & (t["framework"] == "trt")]
    post3 = trt[trt["image"].str.endswith("rc6.post3")]
    post2 = trt[trt["image"].str.endswith("rc6.post2")]
    assert len(post3) and set(post3["spec_decoding"]) == {"mtp"}
    assert len(post2) and set(post2["spec_decoding"]) == {"none"}
    assert (t["source"].str.startswith("SemiAnalysisAI/InferenceX@")).all()


def test_score_leaves_out_the_runs_that_ran_mtp():
    runs = pd.DataFrame(
        {
            "target": "llama-3.1-8b",
            "gpu": "h100-sxm",
            "num_gpus": 1,
            "engine": "vllm",
            "weight_dtype": "fp8",
            "kv_dtype": "fp8",
            "method": "none",
            "serving": "steady",
            "batch_size": 8,
            "prompt_len": 1024,
            "output_len": 1024,
            "measured_tpot_ms": 10.0,
            "measured_ttft_ms": 100.0,
            "spec_decoding": ["mtp", "none", "both", ""],
            "inferencemax_run": ["k-mtp 2026-01-14T22:26:18Z", "k", "k; k-mtp", ""],
        }
    )
    res = score(runs)
    assert res["excluded"].iloc[0].startswith("ran with MTP speculative decoding")
    assert "k-mtp 2026-01-14T22:26:18Z" in res["excluded"].iloc[0]
    assert list(res["excluded"].iloc[1:]) == ["", "", ""]


def test_the_bundled_runs_name_their_sweep():
    raw = pd.read_csv(bundled_runs_path())
    r1 = raw[raw["model_path"].astype(str).str.contains("DeepSeek-R1", case=False)]
    out = inferencemax.spec_decoding(r1, pd.Series("deepseek-r1", index=r1.index))
    stamped = r1["silicon_data_source"].str.contains("measured=2026-01-14T22:26:21Z")
    b200_trt = stamped & (r1["system"] == "b200_sxm") & (r1["backend"] == "trtllm")
    assert b200_trt.any()
    assert set(out.loc[b200_trt, "spec_decoding"]) == {"mtp"}


def test_both_config_layouts_of_nvidia_master_are_read():
    """Until spring 2026 a key's search spaces sit under `seq-len-configs`, later under
    `scenarios: fixed-seq-len`; a key with neither is unknown, not a baseline."""
    space = [{"isl": 1024, "osl": 1024, "search-space": [{"tp": 8, "spec-decoding": "mtp"}]}]
    assert inferencemax._spec_of({"seq-len-configs": space}) == "mtp"
    assert inferencemax._spec_of({"scenarios": {"fixed-seq-len": space}}) == "mtp"
    plain = [{"isl": 1024, "osl": 1024, "search-space": [{"tp": 8}]}]
    assert inferencemax._spec_of({"scenarios": {"fixed-seq-len": plain}}) == "none"
    assert inferencemax._spec_of({"image": "x"}) == ""


def test_nvfp4_sweeps_match_fp4_rows():
    table = _table(
        (
            "2026-03-29T03:54:25Z",
            "glm5-nvfp4-b200-sglang",
            "glm5",
            "nvfp4",
            "b200",
            "sglang",
            "none",
        ),
    )
    raw = _raw("2026-03-29T00:00:00.000Z", backend="sglang").assign(precision="fp4")
    out = inferencemax.spec_decoding(raw, pd.Series("glm-5", index=raw.index), table)
    assert list(out["spec_decoding"]) == ["none"]


def test_a_key_of_unknown_search_space_does_not_make_a_sweep_both():
    table = _table(
        ("2026-01-29T15:27:25Z", "dsr1-fp8-b200-trt", "dsr1", "fp8", "b200", "trt", "none"),
        ("2026-01-29T15:27:25Z", "dsr1-fp8-b200-trt-x", "dsr1", "fp8", "b200", "trt", ""),
    )
    raw = _raw("2026-01-29T15:27:29Z")
    out = inferencemax.spec_decoding(raw, pd.Series("deepseek-r1", index=raw.index), table)
    assert list(out["spec_decoding"]) == ["none"]


SGLANG_H200 = """python3 -m sglang.launch_server --model-path $MODEL \\
    --tensor-parallel-size=$TP --attention-backend flashinfer --stream-interval 10 \\
    > $SERVER_LOG 2>&1 &
"""
SGLANG_B200 = "python3 -m sglang.launch_server --model-path $MODEL --kv-cache-dtype fp8_e4m3 \\\n"
VLLM_YAML = "cat > config.yaml << EOF\nasync-scheduling: true\nkv-cache-dtype: fp8\nEOF\n"
TRT_AUTO = "cat > $F << EOF\nprint_iter_log: true\nkv_cache_config:\n  enable_block_reuse: false\n  dtype: auto\nEOF\n"
TRT_FP8 = "kv_cache_config:\n    dtype: fp8\n    free_gpu_memory_fraction: 0.85\n"
VARIABLE = 'vllm serve $MODEL --kv-cache-dtype "$KV_DTYPE" \\\n'


def test_the_kv_dtype_a_benchmark_script_serves_with(monkeypatch):
    """InferenceX's scripts: SGLang's DeepSeek-R1 fp8 on H200 names no KV dtype (the
    engine's default, bf16); B200's names fp8_e4m3; vLLM takes it from a YAML config;
    TensorRT-LLM from kv_cache_config."""
    config = {"model-prefix": "dsr1", "precision": "fp8", "runner": "h200-cw"}
    for text, want in (
        (SGLANG_H200, "auto"),
        (SGLANG_B200, "fp8"),
        (VLLM_YAML, "fp8"),
        (TRT_AUTO, "auto"),
        (TRT_FP8, "fp8"),
        (VARIABLE, ""),
    ):
        monkeypatch.setattr(inferencemax, "_git", lambda repo, *a, t=text: t)
        assert inferencemax._kv_of(None, "c0ffee", config, inferencemax._spec_of(config)) == want, (
            text
        )
    monkeypatch.setattr(inferencemax, "_git", lambda repo, *a: "")
    assert inferencemax._kv_of(None, "c0ffee", config, inferencemax._spec_of(config)) == ""


def test_the_script_is_the_one_the_runners_launch(monkeypatch):
    asked = []
    monkeypatch.setattr(inferencemax, "_git", lambda repo, *a: asked.append(a[-1]) or "")
    config = {
        "model-prefix": "dsr1",
        "precision": "fp8",
        "runner": "h200-dgxc-slurm",
        "framework": "trt",
        "seq-len-configs": [{"search-space": [{"tp": 8, "spec-decoding": "mtp"}]}],
    }
    inferencemax._kv_of(None, "c0ffee", config, inferencemax._spec_of(config))
    assert asked == [
        "c0ffee:benchmarks/single_node/dsr1_fp8_h200_trt_mtp.sh",
        "c0ffee:benchmarks/single_node/fixed_seq_len/dsr1_fp8_h200_trt_mtp.sh",
        "c0ffee:benchmarks/dsr1_fp8_h200_trt_mtp.sh",
        "c0ffee:benchmarks/dsr1_fp8_h200_trt_mtp_docker.sh",
        "c0ffee:benchmarks/dsr1_fp8_h200_trt_mtp_slurm.sh",
    ]


def test_scripts_that_disagree_leave_the_kv_dtype_unknown(monkeypatch):
    """Before 2026-02 a key had a _docker and a _slurm script, one per runner kind."""
    texts = {"docker": SGLANG_H200, "slurm": SGLANG_B200}
    monkeypatch.setattr(
        inferencemax,
        "_git",
        lambda repo, *a: next((t for k, t in texts.items() if a[-1].endswith(f"_{k}.sh")), ""),
    )
    assert inferencemax._kv_of(None, "c0ffee", {"model-prefix": "dsr1"}, "none") == ""
    texts["slurm"] = SGLANG_H200
    assert inferencemax._kv_of(None, "c0ffee", {"model-prefix": "dsr1"}, "none") == "auto"


def test_a_run_whose_script_serves_the_default_kv_is_scored_at_bf16():
    """DeepSeek-R1 fp8 on H200 with SGLang (InferenceMAX, 2026-03-25) names no KV dtype:
    its 15 runs are priced with a bf16 KV cache, not the fp8 the precision suggests."""
    from simulator.inputs.catalog import default_models
    from simulator.validation.serving_runs import load_runs

    runs = load_runs(bundled_runs_path(), default_models())
    h200 = runs[
        (runs["target"] == "deepseek-r1") & (runs["gpu"] == "h200") & (runs["engine"] == "sglang")
    ]
    assert len(h200) >= 15 and set(h200["kv_cache_dtype_run"]) == {"bf16"}
    assert set(h200["kv_dtype"]) == {"bf16"}
    b200 = runs[(runs["target"] == "deepseek-r1") & (runs["gpu"] == "b200")]
    assert (b200["kv_dtype"] == "fp8").all()


def test_auto_kv_is_the_checkpoints_own_kv_quantisation():
    """vLLM resolves `--kv-cache-dtype auto` to fp8 where a ModelOpt checkpoint names
    kv_cache_quant_algo FP8 (NVIDIA's nvidia/ exports do), else the model's bf16."""
    assert inferencemax.served_kv("auto", "nvidia/Kimi-K2.5-NVFP4") == "fp8"
    assert inferencemax.served_kv("auto", "moonshotai/Kimi-K2.5") == "bf16"
    assert inferencemax.served_kv("auto", "openai/gpt-oss-120b") == "bf16"
    assert inferencemax.served_kv("fp8", "openai/gpt-oss-120b") == "fp8"
    assert inferencemax.served_kv("", "nvidia/DeepSeek-R1-0528-FP4-V2") == ""
