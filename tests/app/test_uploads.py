"""Uploads are size-capped twice: by the server (`.streamlit/config.toml` maxUploadSize and
each uploader's own `max_upload_size`) and by the parser behind each uploader, which
refuses a larger file with a message naming it."""

from __future__ import annotations

import tomllib

import pytest

from app.figures_validation import MAX_CSV_BYTES
from simulator.inputs.metrics import MAX_SCRAPE_BYTES
from simulator.inputs.profile import MAX_PROFILE_BYTES
from tests.app.conftest import ROOT, visit_and_return

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


SCRAPE = (
    b'vllm:spec_decode_num_drafts_total{engine="0"} 1000.0\n'
    b'vllm:spec_decode_num_draft_tokens_total{engine="0"} 3000.0\n'
    b'vllm:spec_decode_num_accepted_tokens_total{engine="0"} 1900.0\n'
)


def _validation_csv() -> bytes:
    lines = (ROOT / "data" / "validation" / "cpu_validation.csv").read_bytes().splitlines()
    return b"\n".join(lines[:6]) + b"\n"  # five points, against the bundled file's 160


KEPT = {
    # page: (uploader key, file name, bytes, what the page shows of that file)
    "acceptance": ("scrape_upload", "prod.prom", SCRAPE, lambda at: [m.value for m in at.metric]),
    "validation": (
        "validation_upload",
        "mine.csv",
        _validation_csv(),
        lambda at: next(m.value for m in at.metric if m.label == "points"),  # machine tab
    ),
}


@pytest.mark.parametrize("page", list(KEPT))
def test_an_uploaded_file_outlives_a_visit_to_another_page(app, page):
    """Streamlit empties an uploader whose page is left: the page must still show the
    uploaded file on return, say so, and forget it only when asked."""
    key, name, data, shown = KEPT[page]
    at = app(page)
    default = shown(at)
    at.file_uploader(key=key).set_value((name, data, "text/plain")).run()
    uploaded = shown(at)
    assert uploaded != default
    visit_and_return(at, page)
    assert shown(at) == uploaded
    assert any(name in c.value and "earlier in this session" in c.value for c in at.caption)
    at.button(key=f"{key}:forget").click().run()
    assert shown(at) == default
    visit_and_return(at, page)
    assert shown(at) == default


@pytest.mark.parametrize("page", list(KEPT))
def test_removing_the_file_in_the_uploader_forgets_it(app, page):
    key, name, data, shown = KEPT[page]
    at = app(page)
    default = shown(at)
    at.file_uploader(key=key).set_value((name, data, "text/plain")).run()
    at.file_uploader(key=key).set_value(None).run()
    assert shown(at) == default
    visit_and_return(at, page)
    assert shown(at) == default


def test_the_example_scrape_replaces_a_file_kept_from_earlier(app):
    """A scrape uploaded earlier in the session was read before the text box, so 'Load an
    example scrape' filled the box and the page went on showing the file."""
    key, name, data, shown = KEPT["acceptance"]
    at = app("acceptance")
    at.file_uploader(key=key).set_value((name, data, "text/plain")).run()
    from_file = shown(at)
    visit_and_return(at, "acceptance")
    assert shown(at) == from_file
    at.button(key="load_example").click().run()
    assert shown(at) != from_file
    assert any("pasted scrape" in s.value for s in at.subheader)


def test_text_beside_an_uploaded_file_is_said_to_be_unused(app):
    key, name, data, _ = KEPT["acceptance"]
    at = app("acceptance")
    at.text_area(key="scrape_text").input(data.decode().replace("1900.0", "2500.0")).run()
    at.file_uploader(key=key).set_value((name, data, "text/plain")).run()
    assert any("the pasted text is not used while a file is uploaded" in i.value for i in at.info)
