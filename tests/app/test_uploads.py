"""Uploads are size-capped twice: by the server (`.streamlit/config.toml` maxUploadSize and
each uploader's own `max_upload_size`) and by the parser behind each uploader, which
refuses a larger file with a message naming it."""

from __future__ import annotations

import tomllib

import pytest

from app.figures_validation import MAX_CSV_BYTES
from simulator.metrics import MAX_SCRAPE_BYTES
from simulator.profile import MAX_PROFILE_BYTES
from tests.app.conftest import ROOT

MIB = 1024 * 1024
UPLOADERS = {
    # page: (uploader key, the parser's cap in bytes)
    "profiles": ("profile_upload", MAX_PROFILE_BYTES),
    "acceptance": ("scrape_upload", MAX_SCRAPE_BYTES),
    "validation": ("validation_upload", MAX_CSV_BYTES),
}


def _server_cap_mb() -> int:
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    return int(config["server"]["maxUploadSize"])


def test_the_server_caps_uploads_at_the_largest_parser_cap():
    largest = max(cap for _, cap in UPLOADERS.values())
    assert _server_cap_mb() * MIB == largest


@pytest.mark.parametrize("page", list(UPLOADERS))
def test_each_uploader_is_capped_at_its_parsers_limit(app, page):
    key, cap = UPLOADERS[page]
    at = app(page)
    widget = at.get("file_uploader")
    (uploader,) = [w for w in widget if w.proto.id.endswith(key)]
    assert uploader.proto.max_upload_size_mb * MIB == max(MIB, cap)
    assert uploader.proto.max_upload_size_mb <= _server_cap_mb()


def test_an_oversized_scrape_is_refused_naming_the_file(app):
    at = app("acceptance")
    big = b"# HELP x\n" + b" " * MAX_SCRAPE_BYTES
    at.file_uploader(key="scrape_upload").set_value(("big.prom", big, "text/plain")).run()
    assert not at.exception
    assert any("big.prom" in e.value and f"{MAX_SCRAPE_BYTES:,}" in e.value for e in at.error)
    assert "measured_acceptance" not in at.session_state


def test_an_oversized_validation_csv_is_refused_naming_the_file(app):
    at = app("validation")
    big = b"mode,workload,batch,k,measured_speedup,predicted_speedup\n" + b" " * MAX_CSV_BYTES
    at.file_uploader(key="validation_upload").set_value(("big.csv", big, "text/csv")).run()
    assert not at.exception
    assert any("big.csv" in e.value and "limit" in e.value for e in at.error)
