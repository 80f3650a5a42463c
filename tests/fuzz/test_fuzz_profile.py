"""Fuzz the profile parsers (JSON, CSV, uploaded bytes) and calibration on what they accept:
valid profiles with one field mutated, end to end through `predict`."""

from __future__ import annotations

import json
import math
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from simulator.errors import InputError
from simulator.inputs.metrics import MAX_SCRAPE_BYTES, parse_vllm_metrics
from simulator.inputs.profile import (
    MAX_MEASUREMENTS,
    MAX_PROFILE_BYTES,
    Profile,
    load_profile,
    profile_from_dict,
    profile_to_csv,
    profile_to_json,
)
from simulator.model.calibration import Calibration, match_gpu_id
from simulator.model.predict import predict
from tests.fuzz.harness import (
    FUZZ,
    check_predictions,
    mutate_doc,
    nasty_text,
    nasty_value,
    paths,
    run_case,
    warm,
)

PROFILES = Path(__file__).resolve().parents[2] / "data" / "profiles" / "cpu"
PEAK_BYTES = 64 * 1024 * 1024
"""Traced memory a profile case may peak at: a small profile calibrates in a few MB."""


def _pair() -> dict:
    """The bundled draft/target pair, cut to batches 1-2 at context 128 (catalog models)."""
    doc = json.loads((PROFILES / "specplan-byte-pair.json").read_text())
    doc["measurements"] = [
        r for r in doc["measurements"] if r["batch"] <= 2 and r["context_len"] == 128
    ]
    doc["draft_in_loop"] = [
        r for r in doc["draft_in_loop"] if r["batch"] <= 2 and r["context_len"] == 128
    ]
    return doc


def _alien() -> dict:
    """The bundled tiny profile under an id the catalog lacks: calibration then reads the
    architecture from the profile."""
    doc = json.loads((PROFILES / "tiny.json").read_text())
    doc["models"][0]["id"] = "fuzz-alien"
    rows = [r for r in doc["measurements"] if r["batch"] <= 4 and r["context_len"] == 128]
    for r in rows:
        r["model"] = "fuzz-alien"
    doc["measurements"] = rows
    return doc


BASES = {"pair": _pair(), "alien": _alien()}
BASE_PATHS = {name: paths(doc) for name, doc in BASES.items()}


def _scenarios(profile: Profile, gpu: str) -> pd.DataFrame:
    rows = []
    ids = [m.id for m in profile.models]
    for target in ids:
        for k in (1, 3):
            for method in ("ngram", "draft_model"):
                draft = next((i for i in ids if i != target), "")
                if method == "draft_model" and not draft:
                    continue
                rows.append(
                    dict(
                        target=target,
                        method=method,
                        draft=draft if method == "draft_model" else "",
                        gpu=gpu,
                        k=k,
                        acceptance_rate=0.95,
                        batch_size=2,
                        prompt_len=127,
                        output_len=2,
                        weight_dtype=profile.settings.dtype
                        if profile.settings.dtype != "fp32"
                        else "bf16",
                        kv_dtype="bf16",
                    )
                )
    return pd.DataFrame(rows)


def _check_profile(p: Profile) -> None:
    m = p.measurements
    assert len(m) <= MAX_MEASUREMENTS
    for col in ("batch", "query_len", "context_len", "repeats", "peak_bytes"):
        assert (m[col] >= 0).all(), col
    ok = m[m["status"] == "ok"]
    for col in ("median_ms", "p10_ms", "p90_ms"):
        assert np.isfinite(ok[col]).all() and (ok[col] >= 0).all(), col
    assert (ok["median_ms"] > 0).all()
    # Written back and read again, the profile is the same.
    again = load_profile(profile_to_json(p).encode(), name="again.json")
    assert len(again.measurements) == len(m)


def _calibrate_and_predict(p: Profile):
    _check_profile(p)
    cal = Calibration.from_profiles([p])
    for fit in cal.fits.values():
        for v in (fit.bandwidth_gbps, fit.tflops, fit.overhead_fixed_ms, fit.overhead_per_layer_ms):
            assert math.isfinite(v) and v >= 0, fit
    gpu = match_gpu_id(p.device.name, p.device.kind)
    scenarios = _scenarios(p, gpu)
    if len(scenarios):
        try:
            out = predict(scenarios, calibration=cal)
        except InputError as exc:
            # A scenario the catalog cannot price (a GPU id the profile invented) is a
            # refusal of the scenario, not of the profile.
            assert exc.field, exc
            return p
        check_predictions(out)
    return p


def _load_and_run(data: bytes, name: str):
    return _calibrate_and_predict(load_profile(data, name=name))


for _doc in BASES.values():
    warm(lambda d=_doc: _load_and_run(json.dumps(d).encode(), "warm.json"))


@FUZZ
@given(
    base=st.sampled_from(sorted(BASES)),
    data=st.data(),
    how=st.sampled_from(["replace", "replace", "replace", "delete", "unknown"]),
    value=nasty_value(),
)
def test_profile_json(base, data, how, value):
    path = data.draw(st.sampled_from(BASE_PATHS[base]), label="path")
    doc = mutate_doc(BASES[base], path, how, value)
    text = json.dumps(doc, allow_nan=True).encode()
    run_case("profile_json", lambda: _load_and_run(text, "fuzz.json"), max_peak_bytes=PEAK_BYTES)


RAW_JSON = [
    b"[" * 100_000,
    b'{"schema": ' + b"[" * 100_000,
    b"{" * 50_000,
    b'{"schema": "specplan.profile/v1", "schema": "specplan.profile/v1"}',
    b"{}",
    b"[]",
    b"null",
    b'"specplan.profile/v1"',
    b'{"schema": NaN}',
    b"\xff\xfe{}",
    b"\xef\xbb\xbf",
    b"   ",
]


@FUZZ
@given(
    raw=st.sampled_from(RAW_JSON) | st.binary(max_size=200),
    cut=st.integers(min_value=0, max_value=4000),
    duplicate=st.booleans(),
    name=st.sampled_from(["p.json", "p.csv", "p", "p.JSON", "p.txt"]),
)
def test_profile_json_text(raw, cut, duplicate, name):
    """Whole-document mutations: deep nesting, truncation, a key given twice."""
    base = json.dumps(BASES["pair"]).encode()
    choice = cut % 3
    if choice == 0:
        data = raw
    elif choice == 1:
        data = base[: cut * 3]
    elif duplicate:
        data = base.replace(b'"command":', b'"command": "dup", "command":', 1)
    else:
        data = base.replace(b'"measurements":', b'"measurements": [], "measurements":', 1)
    run_case("profile_json", lambda: _load_and_run(data, name), max_peak_bytes=PEAK_BYTES)


CSV_BASES = {
    name: profile_to_csv(profile_from_dict(doc, name)).splitlines(keepends=True)
    for name, doc in BASES.items()
}


def _csv_cell(lines: list[str], row: int, col: int, text: str, quote: bool) -> list[str]:
    header_at = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    body = lines[header_at + 1 :]
    i = header_at + 1 + row % max(len(body), 1)
    cells = lines[i].rstrip("\n").split(",")
    cell = '"' + text.replace('"', '""') + '"' if quote else text
    cells[col % len(cells)] = cell
    out = list(lines)
    out[i] = ",".join(cells) + "\n"
    return out


def _csv_header(lines: list[str], col: int, how: str) -> list[str]:
    header_at = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    cols = lines[header_at].rstrip("\n").split(",")
    j = col % len(cols)
    if how == "space":
        cols[j] = " " + cols[j] + " "
    elif how == "duplicate":
        cols.append(" " + cols[j])
    elif how == "typo":
        cols[j] = cols[j][:-1] + "x"
    elif how == "drop":
        del cols[j]
    elif how == "extra":
        cols.append("unexpected")
    out = list(lines)
    out[header_at] = ",".join(cols) + "\n"
    return out


def _csv_meta(lines: list[str], row: int, value, how: str) -> list[str]:
    """Mutate one `# key: <JSON>` header line."""
    metas = [i for i, line in enumerate(lines) if line.startswith("#")]
    i = metas[row % len(metas)]
    key, _, text = lines[i][1:].partition(":")
    out = list(lines)
    if how == "json":
        doc = json.loads(text)
        ps = paths(doc)
        doc = mutate_doc(doc, ps[row % len(ps)], "replace", value) if ps else value
        out[i] = f"#{key}: {json.dumps(doc, allow_nan=True)}\n"
    elif how == "repeat":
        out.insert(i, lines[i])
    elif how == "garble":
        out[i] = f"#{key}: {str(value)[:200]}\n"
    else:
        del out[i]
    return out


@FUZZ
@given(
    base=st.sampled_from(sorted(CSV_BASES)),
    kind=st.sampled_from(["cell", "cell", "cell", "header", "meta", "truncate", "extra_value"]),
    row=st.integers(min_value=0, max_value=10_000),
    col=st.integers(min_value=0, max_value=100),
    text=nasty_text(),
    value=nasty_value(),
    how=st.sampled_from(
        ["space", "duplicate", "typo", "drop", "extra", "json", "repeat", "garble", "delete"]
    ),
    quote=st.booleans(),
)
def test_profile_csv(base, kind, row, col, text, value, how, quote):
    lines = CSV_BASES[base]
    if kind == "cell":
        lines = _csv_cell(lines, row, col, text, quote)
    elif kind == "header":
        lines = _csv_header(lines, col, how)
    elif kind == "meta":
        lines = _csv_meta(lines, row, value, how)
    elif kind == "truncate":
        joined = "".join(lines)
        lines = [joined[: row % len(joined)]]
    else:
        lines = [*lines, lines[-1].rstrip("\n") + ",extra\n"]
    data = "".join(lines).encode("utf-8", "surrogatepass")
    run_case("profile_csv", lambda: _load_and_run(data, "fuzz.csv"), max_peak_bytes=PEAK_BYTES)


@FUZZ
@given(
    kind=st.sampled_from(["random", "utf16", "bom", "oversize", "latin1", "scrape", "swap"]),
    blob=st.binary(max_size=300),
    name=st.sampled_from(["up.json", "up.csv", "up", "up.bin", "a/../up.json", "up.json.csv"]),
    cut=st.integers(min_value=0, max_value=10_000),
)
def test_uploads(kind, blob, name, cut):
    """The bytes an upload hands the parsers: any bytes, other encodings, over the caps."""
    valid = json.dumps(BASES["pair"])
    if kind == "random":
        data = blob
    elif kind == "utf16":
        data = valid.encode("utf-16")
    elif kind == "bom":
        data = b"\xef\xbb\xbf" + valid.encode()
    elif kind == "oversize":
        data = b" " * (MAX_PROFILE_BYTES + 1 + cut)
    elif kind == "latin1":
        data = valid.replace("AMD EPYC", "AMD EPYC \u00e9").encode("latin-1")
    elif kind == "swap":
        data = profile_to_csv(profile_from_dict(BASES["pair"], "x")).encode()
        name = "up.json"
    else:
        data = blob
    if kind == "scrape" or (kind == "oversize" and cut % 2):
        scrape = data if kind == "scrape" else b"#" * (MAX_SCRAPE_BYTES + 1 + cut)

        def case():
            return parse_vllm_metrics(scrape, source=name)

        run_case("uploads", case, max_peak_bytes=3 * MAX_SCRAPE_BYTES)
        return
    run_case("uploads", lambda: _load_and_run(data, name))


def test_size_cap_refuses_before_parsing():
    """A profile one byte over the cap is refused by size, not parsed."""
    data = b"{" + b" " * MAX_PROFILE_BYTES + b"}"
    try:
        load_profile(data, name="big.json")
    except InputError as exc:
        assert "larger than" in str(exc)
    else:
        raise AssertionError("an oversized profile was accepted")


def test_many_rows_are_refused_or_calibrate_quickly():
    """60,000 rows under the size cap: refused by the row cap, and a profile at the cap
    calibrates in time proportional to its rows (the fit scores a bounded subset)."""
    import time

    doc = _alien()
    row = doc["measurements"][0]
    doc["measurements"] = [
        {**row, "batch": 1 + i % 1000, "context_len": 100 + i // 1000} for i in range(60_000)
    ]
    try:
        profile_from_dict(doc, "many.json")
    except InputError as exc:
        assert exc.field == "measurements"
    else:
        raise AssertionError("60,000 rows were accepted")
    doc["measurements"] = doc["measurements"][:MAX_MEASUREMENTS]
    p = profile_from_dict(doc, "cap.json")
    start = time.process_time()
    Calibration.from_profiles([p])
    assert time.process_time() - start < 10


def test_loop_position_does_not_allocate_its_value():
    doc = _pair()
    doc["draft_in_loop"][0]["position"] = 10**9
    tracemalloc.start()
    try:
        profile_from_dict(doc, "p.json")
    except InputError as exc:
        assert exc.field == "draft_in_loop[0].position"
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak < 16 * 1024 * 1024
