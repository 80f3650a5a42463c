"""Fixtures for the dashboard tests: an AppTest factory, a decoder for the plotly figures a
page drew, and a small valid profile (JSON and CSV) to upload."""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path

import numpy as np
import pytest
from streamlit.elements.lib import policies
from streamlit.testing.v1 import AppTest

from simulator.inputs.profile import SCHEMA, profile_from_dict, profile_to_csv, profile_to_json

ROOT = Path(__file__).resolve().parents[2]
ENTRY = ROOT / "app" / "streamlit_app.py"
TIMEOUT = 60
"""Seconds per AppTest run: a first run imports pandas and plotly, slow on 2 CI cores."""


@pytest.fixture
def app():
    """`app(page=None, query=None, state=None)`: a run AppTest of the dashboard, opened on
    `views/<page>.py` when given (the default page otherwise); `query` and `state` are set
    before that first run, as a link and a session would set them."""

    def make(page: str | None = None, *, query: dict | None = None, state: dict | None = None):
        at = AppTest.from_file(str(ENTRY), default_timeout=TIMEOUT)
        for key, value in (query or {}).items():
            at.query_params[key] = str(value)
        for key, value in (state or {}).items():
            at.session_state[key] = value
        if page is not None:
            at.switch_page(f"views/{page}.py")
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        return at

    return make


@pytest.fixture
def state_warnings(monkeypatch):
    """Streamlit's 'created with a default value but also had its value set via the
    Session State API' log lines (Streamlit logs the first one per process only)."""
    monkeypatch.setattr(policies, "_shown_default_value_warning", False)
    records: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    logger = logging.getLogger(policies.__name__)
    handler = Collect(level=logging.WARNING)
    logger.addHandler(handler)
    yield records
    logger.removeHandler(handler)


def visit_and_return(at, page: str, via: str = "roi") -> None:
    """Open `via`, then `page` again, as a user moving between pages; the return must run
    cleanly."""
    for view in (via, page):
        at.switch_page(f"views/{view}.py")
        at.run()
    assert not at.exception, [e.value for e in at.exception]


def _decode(value):
    """Plotly >= 6 packs numeric arrays as {'dtype', 'bdata'(, 'shape')}; lists pass."""
    if isinstance(value, dict) and "bdata" in value:
        arr = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        if "shape" in value:
            shape = value["shape"]
            arr = arr.reshape(
                [int(s) for s in shape.split(",")] if isinstance(shape, str) else shape
            )
        return arr
    return value


@pytest.fixture
def charts():
    """`charts(at)`: {chart key: figure dict with x/y arrays decoded} for every plotly chart
    the page drew."""

    def read(at) -> dict[str, dict]:
        out = {}
        for el in at.get("plotly_chart"):
            spec = json.loads(el.proto.spec)
            for trace in spec["data"]:
                for axis in ("x", "y"):
                    if axis in trace:
                        trace[axis] = _decode(trace[axis])
            key = el.proto.id.rsplit("-", 1)[-1]
            out[key] = spec
        return out

    return read


def sample_profile_doc() -> dict:
    """A CPU profile of the catalog's `tiny` model: 7 batches x 2 query lengths x 2
    contexts, latency growing with tokens and context as a roofline would."""
    rows = []
    for context in (128, 512):
        for q in (1, 4):
            for b in (1, 2, 4, 8, 16, 32, 64):
                ms = 0.25 + 0.01 * b * q * (1 + context / 512)
                rows.append(
                    {
                        "model": "tiny",
                        "batch": b,
                        "query_len": q,
                        "context_len": context,
                        "median_ms": round(ms, 6),
                        "p10_ms": round(ms * 0.95, 6),
                        "p90_ms": round(ms * 1.1, 6),
                        "repeats": 20,
                        "peak_bytes": 1_000_000 + 1000 * b * q,
                        "status": "ok",
                        "extrapolated": False,
                    }
                )
    return {
        "schema": SCHEMA,
        "created": "2026-12-02T12:00:00+00:00",
        "command": "python -m profiler run --target tiny",
        "device": {
            "name": "Test CPU",
            "kind": "cpu",
            "memory_bytes": 8_000_000_000,
            "driver": None,
            "torch_version": "2.13.0+cpu",
            "cpu_threads": 2,
            "nvml": None,
            "reason_no_gpu": "no CUDA device",
        },
        "settings": {
            "dtype": "bf16",
            "warmup": 3,
            "repeats": 20,
            "min_time_s": 0.05,
            "cuda_graphs": False,
        },
        "models": [
            {
                "id": "tiny",
                "architecture": {"hidden_size": 64, "num_layers": 2},
                "layers_run": [2],
                "num_layers": 2,
                "extrapolated": False,
                "weight_bytes": 427264,
                "kv_bytes_per_token": 512,
                "kv_bytes_per_token_formula": 512,
            }
        ],
        "measurements": rows,
    }


@pytest.fixture
def profile_doc() -> dict:
    return sample_profile_doc()


@pytest.fixture
def profile_json() -> bytes:
    return profile_to_json(profile_from_dict(sample_profile_doc(), "cpu.json")).encode()


@pytest.fixture
def profile_csv() -> bytes:
    return profile_to_csv(profile_from_dict(sample_profile_doc(), "cpu.csv")).encode()


def default_positions() -> str:
    """The dashboard's default acceptance: the chat x EAGLE prior for Llama-3.3-70B
    (tau 2.94 at K=3, acceptance_priors.csv), by position along the EAGLE decay."""
    from app.presets import pick_prior
    from simulator.inputs.catalog import default_models, load_acceptance_priors

    prior = pick_prior(load_acceptance_priors(), "chat", "eagle", default_models()["llama-3.3-70b"])
    assert prior.tau == 2.94 and prior.k == 3
    return prior.positions_text


def shown(markdown: str) -> str:
    """What a Markdown element shows: its text without backslash escapes and without the
    invisible word joiners `widgets.plain` puts where Markdown would make a link."""
    import re

    from app.text import WORD_JOINER

    return re.sub(r"\\(.)", r"\1", markdown).replace(WORD_JOINER, "")
