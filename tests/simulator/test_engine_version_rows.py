"""A scenario row's `engine_version` checked against its engine and GPU (issue 36 C1):
another engine's version, or any version with engine `other`, is refused naming the
field; a version the engine has, but not on the row's GPU, is priced on the roofline and
the row's warnings say so."""

from __future__ import annotations

import pandas as pd
import pytest

from simulator.errors import InputError
from simulator.kernels import tables
from simulator.model.predict import predict

NO_TABLES = "engine_version has no kernel tables for this GPU: priced on the roofline"


def _row(engine: str, version: str, gpu: str = "h200") -> pd.DataFrame:
    return pd.DataFrame(
        {"target": ["llama-3.1-8b"], "gpu": [gpu], "engine": [engine], "engine_version": [version]}
    )


@pytest.mark.parametrize(
    "engine,version,words",
    [
        ("sglang", "0.24.0", "not a version of sglang"),
        ("trtllm", "0.5.14", "not a version of trtllm"),
        ("vllm", "1.3.0rc20", "not a version of vllm"),
        ("other", "0.24.0", "engine other, which has no kernel tables"),
    ],
)
def test_a_version_the_engine_does_not_have_is_refused(engine, version, words):
    with pytest.raises(InputError) as exc:
        predict(_row(engine, version))
    assert exc.value.field == "engine_version"
    assert words in exc.value.bare_message


def test_the_refusal_lists_the_engines_own_versions():
    with pytest.raises(InputError) as exc:
        predict(_row("sglang", "0.24.0"))
    assert all(v in exc.value.bare_message for v in tables.engine_versions_of("sglang"))
    assert "0.24.0" not in exc.value.bare_message.split("versions:")[1]


@pytest.mark.parametrize(
    "gpu,version",
    [
        ("h200", "0.14.0"),  # vLLM's A100 version: no H200 tables
        ("mi300x", "0.24.0"),  # a GPU without tables
    ],
)
def test_a_version_without_tables_for_the_gpu_warns_of_the_roofline(gpu, version):
    out = predict(_row("vllm", version, gpu))
    assert out["latency_source"].astype(str).tolist() == ["roofline"]
    assert NO_TABLES in str(out["warnings"].iloc[0])


def test_a_version_with_tables_for_the_gpu_prices_without_a_warning():
    out = predict(_row("vllm", "0.24.0"))
    assert out["latency_source"].astype(str).iloc[0].startswith("kernels:vllm-0.24.0")
    assert NO_TABLES not in str(out["warnings"].iloc[0])


def test_each_row_is_judged_on_its_own_gpu():
    rows = pd.concat([_row("vllm", "0.14.0", "a100-80gb"), _row("vllm", "0.14.0", "h200")])
    out = predict(rows.reset_index(drop=True))
    assert [NO_TABLES in str(w) for w in out["warnings"]] == [False, True]
