"""A mean acceptance length too long to price is refused naming the file's own field
(issue 36 D2): a speculators CSV's `acceptance_length` of 65 was refused naming `k`, a
field the file does not have, once the import turned it into K = 64."""

from __future__ import annotations

import pytest

from profiler.cli import main
from profiler.imports import parse_file
from profiler.imports.common import MAX_ACCEPTANCE_LENGTH
from profiler.imports.fit import check_acceptance
from simulator.errors import InputError
from tests.profiler.test_imports import SERVE, _csv_edit, _json_edit, _set

CASES = [
    ("speculators_throughput_interactivity.csv", ("acceptance_length",), "acceptance_length"),
    (SERVE[1], ("spec_decode_acceptance_length",), "spec_decode_acceptance_length"),
    (
        "trtllm_bench_report.json",
        ("decoding_stats", "acceptance_length_percentiles", "average"),
        "decoding_stats.acceptance_length_percentiles.average",
    ),
]


def _edited(name: str, path: tuple, value: float) -> bytes:
    edit = _set(value, *path)
    return _csv_edit(name, edit) if name.endswith(".csv") else _json_edit(name, edit)


@pytest.mark.parametrize("name,path,field", CASES, ids=[c[2] for c in CASES])
@pytest.mark.parametrize("value", [65.0, MAX_ACCEPTANCE_LENGTH + 0.5])
def test_a_length_past_the_largest_k_is_refused_naming_the_files_field(name, path, field, value):
    with pytest.raises(InputError) as err:
        parse_file(_edited(name, path, value), name)
    assert err.value.field == field
    assert err.value.file == name
    assert "K up to 16" in err.value.bare_message


def test_the_cli_names_the_csv_field_not_k(tmp_path, capsys):
    name = "speculators_throughput_interactivity.csv"
    path = tmp_path / name
    path.write_bytes(_edited(name, ("acceptance_length",), 65.0))
    args = ["import", str(path), "--target", "llama-3.1-8b", "--gpu", "h100-sxm"]
    with pytest.raises(SystemExit) as exit_:
        main([*args, "--method", "eagle3", "--k", "3", "--out", str(tmp_path / "p.json")])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "field 'acceptance_length'" in err and "field 'k'" not in err
    assert not (tmp_path / "p.json").exists()


def test_the_longest_length_priced_is_kept():
    name = "speculators_throughput_interactivity.csv"
    parsed = parse_file(_edited(name, ("acceptance_length",), MAX_ACCEPTANCE_LENGTH), name)
    assert parsed.serving[0].acceptance_length == MAX_ACCEPTANCE_LENGTH


def test_a_given_acceptance_past_the_largest_k_is_refused_naming_the_flag():
    with pytest.raises(InputError) as err:
        check_acceptance(30.0, "acceptance")
    assert err.value.field == "acceptance"
