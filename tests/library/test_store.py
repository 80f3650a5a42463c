"""The library on SQLite and PostgreSQL alike: what is kept, searched, renamed and deleted,
and what concurrent sessions see."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pandas as pd
import pytest

from library import LibraryError, NameTaken, open_library
from library.entries import content_hash
from library.errors import NotFound
from library.kinds import (
    load_profile_entry,
    load_report,
    load_scenario,
    model_version,
    save_benchmark,
    save_profile,
    save_report,
    save_scenario,
    save_scrape,
    save_validation,
)
from simulator.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "data" / "profiles" / "cpu" / "llama-3.2-1b.json"


def profile_bytes(device: str = "AMD EPYC") -> bytes:
    """The bundled CPU profile, its device renamed (a different file with its own hash)."""
    d = json.loads(PROFILE.read_bytes())
    d["device"]["name"] = device
    return json.dumps(d).encode()


def test_profile_is_kept_with_who_when_and_hash(lib):
    data = PROFILE.read_bytes()
    saved = save_profile(lib, "epyc bf16", data, notes="nightly", who="ana")
    assert not saved.existed
    e = lib.get("profile", "epyc bf16")
    assert (e.created_by, e.notes, e.device, e.model) == (
        "ana",
        "nightly",
        "AMD EPYC",
        "llama-3.2-1b",
    )
    assert e.content_hash == content_hash(data)
    assert e.created_at.tzinfo is not None
    assert lib.content("profile", "epyc bf16") == data
    assert load_profile_entry(lib, "epyc bf16").device.name == "AMD EPYC"


def test_same_file_twice_is_one_entry(lib):
    data = PROFILE.read_bytes()
    save_profile(lib, "first", data)
    again = save_profile(lib, "second", data)
    assert again.existed and again.entry.name == "first"
    assert [e.name for e in lib.entries("profile")] == ["first"]


def test_a_bad_profile_is_refused_and_nothing_kept(lib):
    with pytest.raises(InputError, match="schema"):
        save_profile(lib, "broken", b'{"schema": "other/v9"}')
    assert lib.entries() == []


def test_search_by_device_model_engine(lib):
    save_profile(lib, "h200 run", profile_bytes("NVIDIA H200"))
    save_profile(lib, "epyc run", profile_bytes("AMD EPYC"))
    save_benchmark(
        lib,
        "prod sglang",
        b"a,b\n1,2\n",
        device="NVIDIA H100",
        engine="sglang",
        engine_version="0.5.2",
        model="llama-3.3-70b",
    )
    assert [e.name for e in lib.entries(search="h200")] == ["h200 run"]
    assert [e.name for e in lib.entries(search="SGLANG")] == ["prod sglang"]
    assert {e.name for e in lib.entries(search="llama-3.2")} == {"h200 run", "epyc run"}
    assert lib.get("benchmark", "prod sglang").engine_version == "0.5.2"
    # A search is a bound parameter, never SQL.
    assert lib.entries(search="' OR 1=1 --") == []


def test_rename_annotate_delete(lib):
    save_profile(lib, "a", profile_bytes("A"))
    save_profile(lib, "b", profile_bytes("B"))
    assert lib.rename("profile", "a", "a2").name == "a2"
    assert lib.annotate("profile", "a2", "measured after the driver update").notes.startswith(
        "measured"
    )
    with pytest.raises(NameTaken, match="already kept"):
        lib.rename("profile", "a2", "b")
    assert {e.name for e in lib.entries()} == {"a2", "b"}
    lib.delete("profile", "b")
    with pytest.raises(NotFound):
        lib.get("profile", "b")
    with pytest.raises(NotFound):
        lib.delete("profile", "b")
    assert [e.name for e in lib.entries()] == ["a2"]


def test_long_name_and_markup(lib):
    with pytest.raises(LibraryError, match="10,000 characters long; at most 200"):
        save_profile(lib, "x" * 10_000, PROFILE.read_bytes())
    with pytest.raises(LibraryError, match="control character"):
        save_profile(lib, "bell\x07", PROFILE.read_bytes())
    markup = "<script>alert(1)</script> **bold** [x](http://e.com)"
    save_profile(lib, markup, PROFILE.read_bytes())
    assert lib.entries()[0].name == markup
    assert lib.content("profile", markup) == PROFILE.read_bytes()


def test_twenty_megabyte_upload_is_kept_and_a_larger_one_refused(lib):
    big = bytes(range(256)) * (20_000_000 // 256)
    save_benchmark(lib, "big", big, device="H100", engine="vllm", engine_version="0.11")
    assert lib.content("benchmark", "big") == big
    with pytest.raises(LibraryError, match=r"over the library's .*-byte limit; nothing was saved"):
        save_benchmark(
            lib,
            "huge",
            b"x" * (33 * 1024 * 1024),
            device="H100",
            engine="vllm",
            engine_version="0.11",
        )
    assert [e.name for e in lib.entries()] == ["big"]


def test_scrape_scenario_report_validation(lib):
    from app.samples import EXAMPLE_SCRAPE

    s = save_scrape(lib, "prod scrape", EXAMPLE_SCRAPE).entry
    assert 0 < s.facts["alpha"] < 1 and s.facts["k"] >= 1
    assert lib.content("scrape", "prod scrape").decode() == EXAMPLE_SCRAPE

    params = {"target": "llama-3.3-70b", "gpu": "h100-sxm", "k": "4"}
    save_scenario(lib, "70b on h100", "roi", params)
    assert load_scenario(lib, "70b on h100") == ("roi", params)
    assert lib.get("scenario", "70b on h100").device == "h100-sxm"

    rows = pd.DataFrame({"target": ["llama-3.3-70b"], "gpu": ["h100-sxm"], "k": [4]})
    outputs = rows.assign(speedup=[1.83], warnings=[float("nan")])
    save_report(lib, "q3 plan", rows, outputs)
    got_rows, got_out, version = load_report(lib, "q3 plan")
    assert got_rows.to_dict("records") == rows.to_dict("records")
    assert got_out["speedup"].tolist() == [1.83] and got_out["warnings"].isna().all()
    assert version == model_version() == lib.get("report", "q3 plan").model_version

    errors = pd.DataFrame({"case_id": ["a"], "abs_error": [0.1]})
    save_validation(lib, "run 1", errors, {"median_abs_error": 0.12})
    save_validation(lib, "run 2", errors.assign(abs_error=0.2), {"median_abs_error": 0.2})
    history = lib.figures("median_abs_error")
    assert [(name, value) for name, _, _, value in history] == [("run 1", 0.12), ("run 2", 0.2)]
    lib.delete("validation", "run 1")
    assert [h[0] for h in lib.figures()] == ["run 2"]


def test_two_sessions_see_each_others_saves(db_url):
    one, two = open_library(db_url), open_library(db_url)
    try:
        save_profile(one, "from one", PROFILE.read_bytes())
        assert [e.name for e in two.entries()] == ["from one"]
        two.annotate("profile", "from one", "seen by two")
        assert one.get("profile", "from one").notes == "seen by two"
    finally:
        one.close()
        two.close()


def _together(n: int, work) -> list:
    """Run work(i) for i in 0..n-1 on n threads released at once; results or exceptions."""
    barrier, out = threading.Barrier(n), [None] * n

    def run(i):
        barrier.wait()
        try:
            out[i] = work(i)
        except Exception as exc:
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_twenty_concurrent_saves_lose_none(db_url):
    libs = [open_library(db_url) for _ in range(4)]
    try:
        out = _together(
            20, lambda i: save_profile(libs[i % 4], f"gpu {i}", profile_bytes(f"device {i}"))
        )
        assert [type(o).__name__ for o in out] == ["Saved"] * 20
        assert {e.name for e in libs[0].entries()} == {f"gpu {i}" for i in range(20)}
    finally:
        for library in libs:
            library.close()


def test_same_name_at_once_has_one_winner(db_url):
    libs = [open_library(db_url) for _ in range(2)]
    contents = [profile_bytes("first device"), profile_bytes("second device")]
    try:
        out = _together(2, lambda i: save_profile(libs[i], "shared name", contents[i]))
        winners = [i for i, o in enumerate(out) if not isinstance(o, Exception)]
        losers = [o for o in out if isinstance(o, Exception)]
        assert len(winners) == 1 and len(losers) == 1
        assert isinstance(losers[0], NameTaken)
        assert "a profile named 'shared name' is already kept" in str(losers[0])
        entry = libs[0].get("profile", "shared name")
        won = contents[winners[0]]
        # Never a mixed row: the name, the hash, the device and the content are one save's.
        assert entry.content_hash == content_hash(won)
        assert libs[1].content("profile", "shared name") == won
        assert entry.device == ("first device", "second device")[winners[0]]
        assert len(libs[0].entries()) == 1
    finally:
        for library in libs:
            library.close()
