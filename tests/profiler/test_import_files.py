"""`profiler import` of several files at once (each good file kept, each bad one named with
its reason) and `--num-gpus`, the replica's GPU count where the files do not record it
(issue 34, "Real files in")."""

from __future__ import annotations

import json

import pytest

from profiler.cli import main
from profiler.imports import parse_file
from profiler.imports.build import build
from profiler.imports.files import parse_each
from simulator.errors import InputError
from simulator.inputs.profile import load_profile
from tests.profiler.test_imports import FIXTURES, SERVE, parsed

TRT = "trtllm_bench_report.json"


def _reader(data: bytes):
    return lambda: data


def test_each_good_file_is_kept_and_each_bad_one_named():
    files = [
        (SERVE[0], _reader((FIXTURES / SERVE[0]).read_bytes())),
        ("cut.json", _reader(b'{"mean_tpot_ms": 8')),
        ("empty.json", _reader(b"")),
    ]
    out = parse_each(files)
    assert [p.source for p in out.parsed] == [SERVE[0]]
    assert [name for name, _ in out.refused] == ["cut.json", "empty.json"]
    assert "empty" in out.refused[1][1]


def test_none_readable_is_refused_with_every_reason():
    with pytest.raises(InputError) as err:
        parse_each([("a.json", _reader(b"")), ("b.json", _reader(b"{}"))])
    assert "none of the 2 files" in str(err.value)
    assert "a.json" in str(err.value) and "b.json" in str(err.value)


def test_the_cli_writes_the_good_files_and_warns_of_the_others(tmp_path, capsys):
    good = tmp_path / SERVE[0]
    good.write_bytes((FIXTURES / SERVE[0]).read_bytes())
    bad = tmp_path / "cut.json"
    bad.write_text('{"mean_tpot_ms": 8')
    out = tmp_path / "p.json"
    args = ["import", str(good), str(bad), str(tmp_path / "gone.json"), "--gpu", "h200"]
    assert main([*args, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "warning: cut.json not imported" in text and "gone.json not imported" in text
    profile = load_profile(out)
    assert profile.engine["files"] == [SERVE[0]]
    assert "cut.json not imported" in profile.engine["notes"]


def test_num_gpus_prices_the_replica_it_names():
    one = build([parsed(SERVE[0])], gpu="h200")
    two = build([parsed(SERVE[0])], gpu="h200", num_gpus=2)
    assert one.profile.engine["fit"]["num_gpus"] == 1
    assert two.profile.engine["fit"]["num_gpus"] == 2
    before = two.fit.table["predicted_before_ms"].iloc[0]
    assert before < one.fit.table["predicted_before_ms"].iloc[0]


def test_num_gpus_against_a_recorded_tensor_parallel_size_is_refused(tmp_path, capsys):
    doc = json.loads((FIXTURES / TRT).read_bytes())
    doc["world_info"]["tp_size"] = doc["world_info"]["world_size"] = 8
    path = tmp_path / TRT
    path.write_text(json.dumps(doc))
    with pytest.raises(SystemExit) as exit_:
        main(
            ["import", str(path), "--num-gpus", "4", "--k", "3", "--out", str(tmp_path / "p.json")]
        )
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "field '--num-gpus'" in err and "records 8" in err


@pytest.mark.parametrize("value", [0, -1, 2000])
def test_a_gpu_count_out_of_range_is_refused_naming_the_flag(value):
    with pytest.raises(InputError) as err:
        build([parsed(SERVE[0])], gpu="h200", num_gpus=value)
    assert err.value.field == "--num-gpus"


def test_a_fit_that_makes_its_own_points_worse_keeps_the_default(monkeypatch):
    """Issue 34, Real files in: the tab offered a host cost that made the plain points
    worse."""
    from profiler.imports import fit

    monkeypatch.setattr(fit, "_golden", lambda score, lo, hi: hi)
    imported = build([parsed(n) for n in SERVE], gpu="h200", method="eagle3")
    f = imported.fit
    assert f.worse and f.fitted_ms == f.default_ms
    assert f.median_abs_error_after == f.median_abs_error_before
    assert "kept at" in f.lines()[0] and "worse" in f.lines()[0]


DISAGGREGATED = [
    # TensorRT-LLM's disaggregated benchmark scripts (examples/disaggregated/slurm) pass the
    # context and generation pools' sizes; vLLM's disaggregated prefill, its roles.
    ({"num_ctx_servers": 2, "ctx_tp_size": 4, "num_gen_servers": 1, "gen_tp_size": 8}, 16),
    ({"prefill_tp": 2, "decode_tp": 4}, 6),
    ({"disaggregation_mode": "pd"}, None),
    ({"disaggregated": "true"}, None),
]


@pytest.mark.parametrize(("metadata", "gpus"), DISAGGREGATED)
def test_a_disaggregated_serving_run_is_refused_as_such(metadata, gpus):
    """Issue 34, Real files in: a `vllm bench serve` result (which TensorRT-LLM's
    `benchmark_serving.py` also writes) of a prefill/decode split, its pools recorded with
    `--metadata`, was priced as one aggregated replica."""
    doc = json.loads((FIXTURES / SERVE[0]).read_bytes())
    doc.update(metadata)
    with pytest.raises(InputError) as err:
        parse_file(json.dumps(doc).encode(), SERVE[0])
    message = err.value.bare_message
    assert err.value.field in metadata, err.value.field
    assert "prefill/decode split" in message and "not what the model simulates" in message
    if gpus is not None:
        assert f"over {gpus} GPUs" in message, message


def test_an_aggregated_run_with_pool_words_in_its_metadata_is_kept():
    doc = json.loads((FIXTURES / SERVE[0]).read_bytes())
    doc.update({"disaggregation_mode": "null", "prefill_tp": 0, "gpu": "h100-sxm"})
    assert len(parse_file(json.dumps(doc).encode(), SERVE[0]).serving) == 1
