"""Fuzz `library import` of an export: a valid export of each kind with one field, its
content's inner JSON or its whole text mutated (another kind's content, bad JSON, deep
nesting, huge integers, NaN, wrong types). Each case is refused naming what is wrong, or
imported and read back as every page and `library export` read it; an entry kept before
stays as it was."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from library import open_library
from library.export import entry_json, entry_table, read_export, restore
from library.kinds import (
    load_profile_entry,
    load_report,
    load_scenario,
    save_benchmark,
    save_profile,
    save_report,
    save_scenario,
    save_validation,
)
from library.schema import KINDS
from simulator.errors import InputError
from tests.fuzz.harness import FUZZ, mutate_doc, nasty_value, paths, run_case, warm
from tests.library.test_store import PROFILE, profile_bytes

PEAK_BYTES = 64 * 1024 * 1024
LIB = open_library(f"sqlite:///{Path(tempfile.mkdtemp(prefix='specplan-fuzz-')) / 'lib.db'}")
KEEPER = save_profile(LIB, "keeper", PROFILE.read_bytes()).entry
"""Kept before any case: every case, refused or not, leaves it as it was."""


def _bases() -> dict[str, dict]:
    """A JSON export of each kind the CLI imports, each entry then deleted."""
    rows = pd.DataFrame({"target": ["llama-3.3-70b"], "k": [4], "batch_size": [8]})
    saved = [
        save_profile(LIB, "profile", profile_bytes("Fuzz GPU")),
        save_scenario(LIB, "scenario", "roi", {"target": "llama-3.3-70b", "k": "4"}),
        save_report(LIB, "report", rows, rows.assign(speedup=[1.9])),
        save_validation(
            LIB, "validation", pd.DataFrame({"case": ["a"], "error": [0.1]}), {"mae": 0.1}
        ),
        save_benchmark(
            LIB,
            "benchmark",
            b'[{"concurrency": 8, "output_throughput": 1234.5}]',
            device="H100",
            engine="vllm",
            engine_version="0.11.0",
        ),
    ]
    out = {s.entry.kind: entry_json(LIB, s.entry) for s in saved}
    for s in saved:
        LIB.delete(s.entry.kind, s.entry.name)
    return out


BASES = _bases()
BASE_PATHS = {kind: paths(doc) for kind, doc in BASES.items()}
INNER = {k: json.loads(BASES[k]["content"]) for k in ("profile", "scenario", "report")}
INNER_PATHS = {kind: paths(doc) for kind, doc in INNER.items()}


def _read_back(saved) -> None:
    """What the pages and `library export` read of an imported entry: each reads, or a
    table that cannot be written as CSV is refused naming the content."""
    e = saved.entry
    entry_json(LIB, e)
    if e.kind == "scenario":
        load_scenario(LIB, e.name)
    elif e.kind == "report":
        load_report(LIB, e.name)
    elif e.kind == "profile":
        load_profile_entry(LIB, e.name)
    try:
        entry_table(LIB, e)
    except InputError as exc:
        assert e.kind == "benchmark" and exc.field == "content", exc


def _import(data: bytes):
    """`library import` of `data`: the entry read back, then removed (unless it was
    kept before)."""
    saved = restore(LIB, read_export(data, "fuzz.json"))
    try:
        _read_back(saved)
    finally:
        if not saved.existed:
            LIB.delete(saved.entry.kind, saved.entry.name)
    return saved


def _run(data: bytes) -> None:
    run_case("library_import", lambda: _import(data), max_peak_bytes=PEAK_BYTES)
    assert LIB.get("profile", "keeper") == KEEPER
    assert LIB.content("profile", "keeper") == PROFILE.read_bytes()


for _doc in BASES.values():
    warm(lambda d=_doc: _import(json.dumps(d).encode()))


@FUZZ
@given(
    kind=st.sampled_from(sorted(BASES)),
    data=st.data(),
    how=st.sampled_from(["replace", "replace", "replace", "delete", "unknown"]),
    value=nasty_value() | st.sampled_from(KINDS),
)
def test_library_export_fields(kind, data, how, value):
    """One field of the export: its kind, name, facts, figures, encoding or content."""
    path = data.draw(st.sampled_from(BASE_PATHS[kind]), label="path")
    doc = mutate_doc(BASES[kind], path, how, value)
    _run(json.dumps(doc, allow_nan=True).encode())


@FUZZ
@given(
    kind=st.sampled_from(sorted(INNER)),
    data=st.data(),
    how=st.sampled_from(["replace", "replace", "delete", "unknown"]),
    value=nasty_value(),
)
def test_library_export_content(kind, data, how, value):
    """One field inside the content (a scenario's, report's or profile's own JSON)."""
    path = data.draw(st.sampled_from(INNER_PATHS[kind]), label="path")
    inner = mutate_doc(INNER[kind], path, how, value)
    doc = {**BASES[kind], "content": json.dumps(inner, allow_nan=True)}
    _run(json.dumps(doc, allow_nan=True).encode())


@FUZZ
@given(
    kind=st.sampled_from(sorted(BASES)),
    other=st.sampled_from(sorted(BASES)),
    how=st.sampled_from(["swap", "cut", "deep", "deep_content", "bigint", "nan", "bytes"]),
    size=st.integers(min_value=1, max_value=200_000),
)
def test_library_export_text(kind, other, how, size):
    """The whole file: another kind's content, truncation, deep nesting, a 400-digit or
    5,000-digit integer, NaN literals, bytes that are not UTF-8."""
    doc = dict(BASES[kind])
    if how == "swap":
        doc["content"] = BASES[other]["content"]
    if how == "deep_content":
        doc["content"] = "[" * size + "]" * size
    text = json.dumps(doc).encode()
    if how == "cut":
        text = text[: size % len(text)]
    elif how == "deep":
        text = text[:-1] + b', "facts": ' + b"[" * size + b"]" * size + b"}"
    elif how == "bigint":
        digits = b"1" * (400 if size % 2 else 5000)
        text = text[:-1] + b', "figures": {"mae": ' + digits + b'}, "facts": {"n": ' + digits
        text += b"}}"
    elif how == "nan":
        text = text[:-1] + b', "figures": {"mae": NaN}, "facts": {"x": Infinity}}'
    elif how == "bytes":
        text = text[: size % len(text)] + b"\xff\xfe" + text[size % len(text) :]
    _run(text)
