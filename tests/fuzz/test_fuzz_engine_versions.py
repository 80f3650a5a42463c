"""Fuzz the scenario table's `engine` and `engine_version` columns: rows of catalog
targets on GPUs with and without kernel tables, each engine (and text that is none) with
every bundled version (and text that is none), in tables of one to four rows.

Each case is refused naming `engine_version` (or `engine`), or priced with every figure
sane and its version honoured: a row on the kernel tables is priced from the version it
names, and a row whose version has no tables for its GPU says so in its warnings (and
only such a row: silent or spurious otherwise)."""

from __future__ import annotations

import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from simulator.kernels import tables
from simulator.model.predict import predict
from tests.fuzz.harness import FUZZ, check_predictions, nasty_text, run_case, warm

TARGETS = ["llama-3.1-8b", "qwen3-32b", "deepseek-v3"]
GPUS = ["h100-sxm", "h200", "b200", "a100-80gb", "l40s", "mi300x", "l4"]
ENGINES = [*tables.ENGINE_CHOICES, "VLLM", " sglang "]
VERSIONS = ["", *tables.engine_versions(), "0.24", "v0.24.0", "1.3.0rc20 "]
NO_TABLES = "engine_version has no kernel tables for this GPU"
HOST_ONLY = "engine_version has no kernel tables of its own"


def _refused_at(exc) -> None:
    assert exc.field in ("engine_version", "engine"), f"names {exc.field!r}: {exc}"
    assert exc.bare_message.strip()


def _honoured(frame: pd.DataFrame):
    def check(out: pd.DataFrame) -> None:
        check_predictions(out)
        for i, row in frame.iterrows():
            version = str(row["engine_version"]).strip()
            source = str(out["latency_source"].iloc[i])
            warned = NO_TABLES in str(out["warnings"].iloc[i])
            if source.startswith("kernels:"):
                assert not warned, f"row {i}: warned yet priced from {source}"
                engine = str(row["engine"]).strip().lower()
                borrowed = HOST_ONLY in str(out["warnings"].iloc[i])
                assert borrowed == bool(version and tables.host_only(engine, version)), i
                if version and not borrowed:
                    assert f"-{version}/" in source, f"row {i}: {version} ignored: {source}"
            elif version:
                # Roofline for want of the version's tables on this GPU must say so; for
                # want of a kernel the tables lack (an MoE on A100), latency_source says it.
                engine = str(row["engine"]).strip().lower()
                lacks = not tables.prices_version(str(row["gpu"]), engine, version)
                assert warned == lacks, f"row {i}: {version} on {source}, warned {warned}"

    return check


def _mostly(values: list[str]) -> st.SearchStrategy:
    """One of `values` nine times in ten, else nasty text: a table of four rows still
    reaches the pricing more often than not."""
    return st.integers(0, 9).flatmap(lambda i: nasty_text() if i == 0 else st.sampled_from(values))


@st.composite
def rows(draw) -> dict:
    """A row whose version is, half the time, one its engine has (on some GPU)."""
    engine = draw(_mostly(ENGINES))
    own = list(tables.engine_versions_of(engine.strip().lower()))
    version = draw(st.sampled_from(own) if own and draw(st.booleans()) else _mostly(VERSIONS))
    return {
        "target": draw(st.sampled_from(TARGETS)),
        "gpu": draw(st.sampled_from(GPUS)),
        "engine": engine,
        "engine_version": version,
        "batch_size": draw(st.sampled_from([1, 16])),
    }


warm(lambda: predict(pd.DataFrame([{"target": "llama-3.1-8b", "gpu": "h200"}])))


@FUZZ
@given(table=st.lists(rows(), min_size=1, max_size=4))
def test_engine_versions(table):
    frame = pd.DataFrame(table).assign(num_gpus=8)
    frame.loc[frame["target"] != "deepseek-v3", "num_gpus"] = 1
    run_case(
        "engine_version",
        lambda: predict(frame),
        _honoured(frame),
        refusal_check=_refused_at,
    )
