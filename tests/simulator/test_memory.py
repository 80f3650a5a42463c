"""Memory against a real vLLM start-up log, and the catalog loaders' errors."""

import csv

import pandas as pd
import pytest

from simulator import predict
from simulator.errors import InputError
from simulator.inputs.catalog import GPUS_CSV, MODELS_CSV, load_gpus, load_models
from simulator.inputs.specs import GPUSpec
from simulator.model.defaults import DEFAULTS


def test_kv_capacity_matches_vllm_startup_log():
    # vllm-project/vllm issue #10517 (RTX 3090, meta-llama/Llama-3.1-8B-Instruct, vLLM V0):
    #   total_gpu_memory=23.58GiB non_torch_memory=0.35GiB gpu_memory_utilization=0.90
    #   kv_cache_size=3.81GiB  # GPU blocks: 1952  (x 16 tokens per block = 31,232 tokens)
    #   Maximum concurrency for 20000 tokens per request: 1.56x
    # V0 profiled one max_model_len (20000-token) prefill and captured CUDA graphs after
    # sizing the cache, so the reserves here are the log's, not our defaults.
    gpu = GPUSpec(
        id="rtx-3090",
        name="RTX 3090 (as the log reports it)",
        memory_gb=23.58,
        hbm_bandwidth_gbps=936.0,
        bf16_tflops=71.0,
        interconnect_gbps=64.0,
    )
    d = DEFAULTS.replace(
        max_num_batched_tokens=20000, non_torch_reserve_gb=0.35, cuda_graph_reserve_gb=0.0
    )
    row = predict(
        pd.DataFrame([dict(target="llama-3.1-8b", gpu="rtx-3090", prompt_len=19999, output_len=1)]),
        gpus={"rtx-3090": gpu},
        defaults=d,
    ).iloc[0]
    assert row["kv_capacity_tokens_baseline"] == pytest.approx(31_232, rel=0.05)
    assert row["kv_capacity_tokens_baseline"] / 20000 == pytest.approx(1.56, rel=0.05)


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_bad_gpu_row_names_file_row_field(tmp_path):
    good = GPUS_CSV.read_text().splitlines()
    header, first = good[0], good[1]
    bad = first.replace(",80,3350,", ",80,-3350,")
    path = _write(tmp_path, "g.csv", header + "\n" + first.replace("h100-sxm", "x") + "\n" + bad)
    with pytest.raises(InputError) as exc:
        load_gpus(path)
    assert str(path) in str(exc.value) and "row 3" in str(exc.value)
    assert "hbm_bandwidth_gbps" in str(exc.value)


@pytest.mark.parametrize(
    "column", ["hbm_bandwidth_gbps", "bf16_tflops", "fp8_tflops", "interconnect_gbps"]
)
@pytest.mark.parametrize("tiny", ["1e-310", "5e-324", "1e-300", "0.0009"])
def test_a_rate_too_small_to_divide_by_is_refused(tmp_path, column, tiny):
    """A subnormal rate passed `> 0`, and bytes or FLOPs divided by it made every step
    time infinite (found by the fuzz suite): refused, naming the row and column."""
    header, first = GPUS_CSV.read_text().splitlines()[:2]
    cells = next(csv.reader([first]))
    cells[header.split(",").index(column)] = tiny
    row = ",".join(f'"{c}"' for c in cells)
    path = _write(tmp_path, "g.csv", header + "\n" + row)
    with pytest.raises(InputError, match=r"must be at least 0\.001") as exc:
        load_gpus(path)
    assert exc.value.row == 2 and exc.value.field == column


def test_the_smallest_rates_price_finite_figures(tmp_path):
    header, first = GPUS_CSV.read_text().splitlines()[:2]
    cells = next(csv.reader([first]))
    names = header.split(",")
    for column in ("hbm_bandwidth_gbps", "bf16_tflops", "interconnect_gbps"):
        cells[names.index(column)] = "0.001"
    cells[names.index("fp8_tflops")] = "0"  # 0 in an optional rate: not given
    path = _write(tmp_path, "g.csv", header + "\n" + ",".join(f'"{c}"' for c in cells))
    gpus = load_gpus(path)
    assert gpus["h100-sxm"].tflops_for("fp8") == 0.001
    out = predict(
        pd.DataFrame(
            [
                dict(
                    target="llama-3.1-8b",
                    gpu="h100-sxm",
                    num_gpus=2,
                    method="ngram",
                    k=3,
                    acceptance_rate=0.7,
                    weight_dtype="fp8",
                )
            ]
        ),
        gpus=gpus,
    )
    for col in ("baseline_tpot_ms", "spec_tpot_ms", "speedup"):
        assert out[col].map(float).between(0, 1e300).all(), out[col]


def test_bad_model_row(tmp_path):
    lines = MODELS_CSV.read_text().splitlines()
    row = next(line for line in lines if line.startswith("llama-3.1-8b,"))
    broken = row.replace(",32,4096,32,8,", ",32,4096,32,7,")
    path = _write(tmp_path, "m.csv", lines[0] + "\n" + broken)
    with pytest.raises(InputError, match="row 2, field 'num_kv_heads'"):
        load_models(path)
    path = _write(tmp_path, "m2.csv", lines[0] + "\n" + row.replace("8030261248", "many", 1))
    with pytest.raises(InputError, match="not a number"):
        load_models(path)


def test_duplicate_and_missing(tmp_path):
    lines = MODELS_CSV.read_text().splitlines()
    path = _write(tmp_path, "m.csv", "\n".join([lines[0], lines[1], lines[1]]))
    with pytest.raises(InputError, match="duplicate id"):
        load_models(path)
    with pytest.raises(InputError, match="file not found"):
        load_models(tmp_path / "nope.csv")


def test_a_catalog_figure_with_a_decimal_comma_names_the_fix(tmp_path):
    header, first = GPUS_CSV.read_text().splitlines()[:2]
    cells = next(csv.reader([first]))
    cells[header.split(",").index("memory_gb")] = "79,5"
    path = _write(tmp_path, "g.csv", header + "\n" + ",".join(f'"{c}"' for c in cells))
    with pytest.raises(
        InputError, match=r"'79,5' is not a number \(write decimals with '\.': 79\.5\)"
    ):
        load_gpus(path)


def test_a_checkpoint_dtype_outside_the_weight_dtypes_is_refused_naming_it(tmp_path):
    header, first = MODELS_CSV.read_text().splitlines()[:2]
    cells = next(csv.reader([first]))
    cells[header.split(",").index("checkpoint_dtype")] = "fp6"
    path = _write(tmp_path, "m.csv", header + "\n" + ",".join(f'"{c}"' for c in cells))
    with pytest.raises(InputError, match="'fp6' is not one of bf16") as err:
        load_models(path)
    assert err.value.field == "checkpoint_dtype" and err.value.row == 2
    assert load_models(MODELS_CSV)["deepseek-v3"].checkpoint_dtype == "fp8"
    assert load_models(MODELS_CSV)["llama-3.1-8b"].checkpoint_dtype == "bf16"
