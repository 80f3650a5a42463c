"""The profile file: round trips through JSON and CSV, and clear errors for bad files."""

from __future__ import annotations

import copy
import json
import math

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.errors import InputError
from simulator.inputs.profile import (
    MAX_PROFILE_BYTES,
    MEASUREMENT_COLUMNS,
    SCHEMA,
    load_profile,
    profile_from_dict,
    profile_to_csv,
    profile_to_json,
)


def _row(batch, q, context, median, *, status="ok", model="tiny"):
    if status == "oom":
        return {
            "model": model,
            "batch": batch,
            "query_len": q,
            "context_len": context,
            "median_ms": None,
            "p10_ms": None,
            "p90_ms": None,
            "repeats": 0,
            "peak_bytes": 0,
            "status": "oom",
            "extrapolated": False,
        }
    return {
        "model": model,
        "batch": batch,
        "query_len": q,
        "context_len": context,
        "median_ms": median,
        "p10_ms": median * 0.9,
        "p90_ms": median * 1.2,
        "repeats": 20,
        "peak_bytes": 123456,
        "status": status,
        "extrapolated": False,
    }


def _doc() -> dict:
    return {
        "schema": SCHEMA,
        "created": "2026-12-02T12:00:00+00:00",
        "command": "python -m profiler run --target tiny",
        "device": {
            "name": "AMD EPYC",
            "kind": "cpu",
            "memory_bytes": 25_000_000_000,
            "driver": None,
            "torch_version": "2.13.0+cpu",
            "cpu_threads": 2,
            "nvml": None,
            "reason_no_gpu": "NVML Shared Library Not Found",
        },
        "settings": {
            "dtype": "bf16",
            "warmup": 5,
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
                "weight_bytes": 213632,
                "kv_bytes_per_token": 256,
                "kv_bytes_per_token_formula": 256,
            }
        ],
        "measurements": [
            _row(1, 1, 64, 1.0),
            _row(4, 1, 64, 1.5),
            _row(1, 3, 64, 1.25),
            _row(64, 3, 64, 0.0, status="oom"),
        ],
    }


def _error(doc: dict) -> InputError:
    with pytest.raises(InputError) as info:
        load_profile(json.dumps(doc).encode(), name="bad.json")
    return info.value


def test_json_round_trip_keeps_every_field():
    p = profile_from_dict(_doc(), "x.json")
    again = load_profile(profile_to_json(p).encode(), name="again.json")
    assert again.device == p.device
    assert again.settings == p.settings
    assert again.models == p.models
    pd.testing.assert_frame_equal(again.measurements, p.measurements)
    assert list(p.measurements.columns) == list(MEASUREMENT_COLUMNS)


def test_csv_round_trip_and_pandas_reads_the_table(tmp_path):
    p = profile_from_dict(_doc(), "x.json")
    path = tmp_path / "tiny.csv"
    path.write_text(profile_to_csv(p), encoding="utf-8")
    again = load_profile(path)
    assert again.models == p.models
    assert again.device == p.device
    pd.testing.assert_frame_equal(again.measurements, p.measurements)
    table = pd.read_csv(path, comment="#")
    assert list(table.columns) == list(MEASUREMENT_COLUMNS)
    assert len(table) == len(p.measurements)


def test_oom_rows_have_nan_latencies():
    p = profile_from_dict(_doc())
    oom = p.measurements[p.measurements["status"] == "oom"]
    assert len(oom) == 1
    assert math.isnan(oom["median_ms"].iloc[0])
    ok = p.measurements_for("tiny")
    assert (ok["status"] == "ok").all()
    assert ok["batch"].tolist() == [1, 1, 4]


def test_rejects_another_schema_version():
    doc = _doc()
    doc["schema"] = "specplan.profile/v2"
    err = _error(doc)
    assert err.field == "schema"
    assert "specplan.profile/v2" in str(err) and SCHEMA in str(err)


def test_negative_latency_names_the_row_and_field():
    doc = _doc()
    doc["measurements"][3] = _row(64, 3, 64, 1.0)
    doc["measurements"][3]["median_ms"] = -1.0
    err = _error(doc)
    assert err.field == "measurements[3].median_ms"
    assert "measurements[3].median_ms" in str(err)
    assert "-1.0 must be >= 1e-06" in str(err)


def test_nan_latency_in_an_ok_row_is_rejected():
    text = json.dumps(_doc()).replace('"median_ms": 1.5', '"median_ms": NaN')
    with pytest.raises(InputError) as info:
        load_profile(text.encode())
    assert info.value.field == "measurements[1].median_ms"
    assert "nan" in str(info.value).lower()


def test_null_latency_in_an_ok_row_is_rejected():
    doc = _doc()
    doc["measurements"][0]["p90_ms"] = None
    assert _error(doc).field == "measurements[0].p90_ms"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (("device", "name"), "device.name"),
        (("settings", "cuda_graphs"), "settings.cuda_graphs"),
        (("models", 0, "weight_bytes"), "models[0].weight_bytes"),
        (("measurements", 2, "peak_bytes"), "measurements[2].peak_bytes"),
        (("command",), "command"),
    ],
)
def test_missing_field_is_named(path, expected):
    doc = _doc()
    target = doc
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    err = _error(doc)
    assert err.field == expected
    assert "missing" in str(err)


@pytest.mark.parametrize(
    ("mutate", "field", "words"),
    [
        (lambda d: d["measurements"][0].update(model="other"), "measurements[0].model", "other"),
        (lambda d: d["measurements"][0].update(status="done"), "measurements[0].status", "done"),
        (lambda d: d["measurements"][1].update(batch=0), "measurements[1].batch", "in 1.."),
        (lambda d: d["measurements"][1].update(batch=1.5), "measurements[1].batch", "whole"),
        (lambda d: d["measurements"][0].update(p10_ms=9.0), "measurements[0].median_ms", "p10"),
        (lambda d: d["measurements"][0].update(extra=1), "measurements[0].extra", "not a"),
        (lambda d: d["measurements"].append(_row(1, 1, 64, 2.0)), "measurements[4]", "repeats"),
        (lambda d: d["device"].update(kind="tpu"), "device.kind", "tpu"),
        (lambda d: d["settings"].update(dtype="int3"), "settings.dtype", "int3"),
        (lambda d: d["models"][0].update(layers_run=[]), "models[0].layers_run", "non-empty"),
        (lambda d: d["models"][0].update(layers_run=[9]), "models[0].layers_run", "exceeds"),
        (lambda d: d.update(created="yesterday"), "created", "ISO"),
        (lambda d: d.update(models=[]), "models", "non-empty"),
    ],
)
def test_bad_values_are_named(mutate, field, words):
    doc = copy.deepcopy(_doc())
    mutate(doc)
    err = _error(doc)
    assert err.field == field
    assert words in str(err)


def test_not_json_and_empty_and_binary():
    with pytest.raises(InputError, match="not valid JSON"):
        load_profile(b"{not json", name="x.json")
    with pytest.raises(InputError, match="empty"):
        load_profile(b"  ", name="x.json")
    with pytest.raises(InputError, match="UTF-8"):
        load_profile(b"\xff\xfe\x00garbage", name="x.bin")
    with pytest.raises(InputError, match="a profile is a JSON object"):
        load_profile(b"[1, 2]", name="x.json")


def test_too_large_is_rejected_before_parsing(tmp_path):
    with pytest.raises(InputError, match="larger than"):
        load_profile(b" " * (MAX_PROFILE_BYTES + 1), name="big.json")
    path = tmp_path / "big.json"
    with open(path, "wb") as fh:
        fh.truncate(MAX_PROFILE_BYTES + 1)
    with pytest.raises(InputError, match="larger than"):
        load_profile(path)


def test_missing_file():
    with pytest.raises(InputError, match="file not found"):
        load_profile("/nonexistent/profile.json")


def test_csv_errors_name_the_line_and_field():
    p = profile_from_dict(_doc())
    text = profile_to_csv(p)
    lines = text.splitlines()
    header_lines = sum(1 for line in lines if line.startswith("#"))
    # The second data row sits on line header_lines + 3 (header row, then rows 1, 2).
    bad = text.replace("tiny,4,1,64,1.5,", "tiny,4,1,64,-2.0,")
    with pytest.raises(InputError) as info:
        load_profile(bad.encode(), name="p.csv")
    assert info.value.field == "measurements[1].median_ms"
    assert info.value.row == header_lines + 3
    with pytest.raises(InputError, match="schema"):
        load_profile(b"model,batch\ntiny,1\n", name="p.csv")
    no_col = "\n".join(
        line if line.startswith("#") else line.replace(",peak_bytes", "") for line in lines
    )
    with pytest.raises(InputError) as info:
        load_profile(no_col.encode(), name="p.csv")
    assert info.value.field == "peak_bytes"


_latency = st.floats(min_value=1e-3, max_value=1e5, allow_nan=False, allow_infinity=False)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 512), st.integers(1, 16), st.integers(0, 1 << 17), _latency),
        min_size=1,
        max_size=12,
        unique_by=lambda t: t[:3],
    )
)
def test_round_trip_property(points):
    doc = _doc()
    doc["measurements"] = [_row(b, q, c, m) for b, q, c, m in points]
    p = profile_from_dict(doc)
    for text in (profile_to_json(p), profile_to_csv(p)):
        again = load_profile(text.encode())
        pd.testing.assert_frame_equal(again.measurements, p.measurements, atol=1e-6)


def _loop_rows():
    return [
        {
            "draft": "tiny-draft",
            "target": "tiny",
            "batch": 1,
            "context_len": 64,
            "position": i,
            "query_len": 2 if i == 1 else 1,
            "median_ms": 0.5 / i,
            "p10_ms": 0.4 / i,
            "p90_ms": 0.6 / i,
            "repeats": 30,
        }
        for i in (1, 2, 3)
    ]


def _doc_with_loop() -> dict:
    doc = _doc()
    draft = copy.deepcopy(doc["models"][0])
    draft["id"] = "tiny-draft"
    doc["models"].append(draft)
    doc["draft_in_loop"] = _loop_rows()
    return doc


def test_draft_in_loop_round_trips_through_json_and_csv(tmp_path):
    p = profile_from_dict(_doc_with_loop(), "loop.json")
    assert list(p.draft_in_loop["position"]) == [1, 2, 3]
    for text, suffix in ((profile_to_json(p), "json"), (profile_to_csv(p), "csv")):
        path = tmp_path / f"p.{suffix}"
        path.write_text(text)
        back = load_profile(path)
        pd.testing.assert_frame_equal(back.draft_in_loop, p.draft_in_loop)
    # A profile without the table writes none and reads back an empty one.
    plain = profile_from_dict(_doc(), "plain.json")
    assert "draft_in_loop" not in profile_to_json(plain)
    assert load_profile(profile_to_csv(plain).encode(), name="p.csv").draft_in_loop.empty


@pytest.mark.parametrize(
    ("mutate", "field", "words"),
    [
        (lambda r: r.update(draft="nope"), "draft_in_loop[1].draft", "not one of the profile"),
        (lambda r: r.update(draft="tiny"), "draft_in_loop[1].draft", "must differ"),
        (lambda r: r.update(median_ms=-1.0), "draft_in_loop[1].median_ms", ">= 1e-06"),
        (lambda r: r.update(median_ms=9.0), "draft_in_loop[1].median_ms", "between"),
        (lambda r: r.update(position=0), "draft_in_loop[1].position", "in 1..64"),
        (lambda r: r.pop("query_len"), "draft_in_loop[1].query_len", "missing"),
        (lambda r: r.update(position=1), "draft_in_loop[1]", "repeats"),
    ],
)
def test_bad_draft_in_loop_rows_are_named(mutate, field, words):
    doc = _doc_with_loop()
    mutate(doc["draft_in_loop"][1])
    err = _error(doc)
    assert err.field == field
    assert words in str(err)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d["measurements"][0].update(model=[]), "measurements[0].model"),
        (lambda d: d["measurements"][0].update(batch=1e20), "measurements[0].batch"),
        (lambda d: d["measurements"][0].update(batch=2**63), "measurements[0].batch"),
        (lambda d: d["measurements"][0].update(context_len=10**300), "measurements[0].context_len"),
        (lambda d: d["measurements"][0].update(median_ms=0, p10_ms=0), "measurements[0].median_ms"),
        (lambda d: d["models"][0].update(id="a after b"), "models[0].id"),
        (lambda d: d["models"][0]["architecture"].update(hidden_size=1e30), "hidden_size"),
        (lambda d: d["device"].update(nvml={"a": [[[[[[[[[[1]]]]]]]]]]}), "device.nvml"),
    ],
    ids=[
        "model-list",
        "batch-1e20",
        "batch-2^63",
        "context-1e300",
        "median-0",
        "id",
        "arch",
        "nvml",
    ],
)
def test_fuzz_findings_are_refused_by_field(mutate, field):
    """Inputs the fuzz suite found breaking the loader (issue 11): each refused, by field."""
    doc = _doc()
    mutate(doc)
    with pytest.raises(InputError) as err:
        load_profile(json.dumps(doc).encode(), name="bad.json")
    assert field in err.value.field


@pytest.mark.parametrize(
    "data",
    [
        b"[" * 100_000,
        b'{"schema": "specplan.profile/v1", "schema": "specplan.profile/v1"}',
    ],
)
def test_deep_nesting_and_repeated_keys_are_refused(data):
    with pytest.raises(InputError):
        load_profile(data, name="bad.json")


def test_csv_repeated_column_and_extra_value_are_refused(tmp_path):
    p = profile_from_dict(_doc())
    text = profile_to_csv(p)
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    doubled = [*lines[:at], lines[at] + ",batch", *(line + ",1" for line in lines[at + 1 :])]
    with pytest.raises(InputError, match="twice"):
        load_profile("\n".join(doubled).encode(), name="bad.csv")
    extra = [*lines[: at + 1], lines[at + 1] + ",1", *lines[at + 2 :]]
    with pytest.raises(InputError, match="more values"):
        load_profile("\n".join(extra).encode(), name="bad.csv")
    with pytest.raises(InputError, match="folder"):
        load_profile(tmp_path)
