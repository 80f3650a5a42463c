"""Inputs a fuzz pass found still breaking the command line (issue 24, "Hardening"): each
is refused at its boundary with exit 2 and a message naming the flag, file or column, or
taken as what it says. One test per cause; the fuzz families that found them are in
tests/fuzz."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pandas as pd
import pytest

from simulator.cli.main import main
from simulator.errors import InputError
from simulator.inputs.sweep import parse_range

ROOT = Path(__file__).resolve().parents[2]
SWEEP = ["sweep", "--target", "llama-3.1-8b", "--gpu", "h100-sxm", "--method", "ngram"]
SCENARIO = """target,method,draft,gpu,num_gpus,k,acceptance_rate,batch_size,prompt_len,output_len
llama-3.1-8b,eagle,,h100-sxm,1,3,0.75,1,512,128
"""


def _serve_input(tmp_path: Path, output_len: int = 32) -> Path:
    src = tmp_path / "serve.csv"
    src.write_text(
        "target,gpu,method,k,mean_accepted_tokens,prompt_len,output_len\n"
        f"llama-3.1-8b,h100-sxm,eagle3,3,2.8,256,{output_len}\n"
    )
    return src


# ------------------------------------------------------------ 1. the range parser


@pytest.mark.parametrize(
    ("command", "flag", "value"),
    [
        ("sweep", "--alpha", "0:1:1e-320"),
        ("sweep", "--k", "0:1e308:1e-308"),
        ("sweep", "--batch", "1:1e308:1e-300"),
        ("serve", "--rate", "1:2:1e-320"),
        ("serve", "--concurrency", "-1e308:1e308:1"),
    ],
)
def test_a_range_of_too_many_values_exits_2_naming_the_flag_and_the_count(
    tmp_path, capsys, command, flag, value
):
    if command == "sweep":
        argv = [*SWEEP, f"{flag}={value}", "--out", str(tmp_path / "o.csv")]
    else:
        argv = ["serve", "--in", str(_serve_input(tmp_path)), "--out", str(tmp_path / "o.csv")]
        argv.append(f"{flag}={value}")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"field '{flag}'" in err and "values" in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "o.csv").exists()


def test_the_count_of_a_huge_range_is_said_in_the_message():
    with pytest.raises(InputError) as exc:
        parse_range("0:1:1e-320", name="--alpha")
    assert exc.value.field == "--alpha"
    assert "1e+320" in str(exc.value).lower() or "1.00e+320" in str(exc.value).lower()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1e-3", [0.001]),
        ("7e-1", [0.7]),
        ("1E-2", [0.01]),
        ("5e-1,7e-1", [0.5, 0.7]),
        ("1-3", [1.0, 2.0, 3.0]),
        ("2e0-4", [2.0, 3.0, 4.0]),
    ],
)
def test_a_number_with_a_negative_exponent_is_one_value_not_a_range(text, expected):
    assert parse_range(text, name="--rate") == pytest.approx(expected)


def test_sweep_takes_an_alpha_written_with_an_exponent(tmp_path, capsys):
    out = tmp_path / "o.csv"
    argv = [*SWEEP, "--k", "2", "--batch", "4", "--alpha", "7e-1", "--out", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    assert pd.read_csv(out)["acceptance_rate"].tolist() == [0.7]


# ------------------------------------------------------------ 3. an empty Parquet table


@pytest.mark.parametrize("shape", ["columns-no-rows", "no-columns"])
@pytest.mark.parametrize("command", ["predict", "serve"])
def test_an_empty_parquet_table_is_refused_as_the_same_csv_is(tmp_path, capsys, shape, command):
    import pyarrow as pa
    import pyarrow.parquet as pq

    src = tmp_path / "empty.parquet"
    if shape == "columns-no-rows":
        names = SCENARIO.splitlines()[0].split(",")
        table = pa.table({n: pa.array([], pa.string()) for n in names})
    else:
        table = pa.table({})
    pq.write_table(table, src)
    out = tmp_path / "o.csv"
    argv = [command, "--in", str(src), "--out", str(out)]
    if command == "serve":
        argv += ["--rate", "1", "--requests", "10"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "holds no scenario rows" in err and str(src) in err, err
    assert not out.exists()


# ----------------------------------------------- 4. a misspelt column of a published table


def _published_with(tmp_path: Path, rename: dict[str, str]) -> Path:
    rows = list(csv.reader(io.StringIO((ROOT / "data/validation/published.csv").read_text())))
    rows[0] = [rename.get(name, name) for name in rows[0]]
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows[:6])
    path = tmp_path / "published.csv"
    path.write_text(buf.getvalue())
    return path


@pytest.mark.parametrize(
    ("wrong", "right"),
    [("batchsize", "batch_size"), ("Prompt_Len", "prompt_len"), ("alpha", "acceptance_rate")],
)
def test_validate_refuses_a_misspelt_scenario_column(tmp_path, capsys, wrong, right):
    path = _published_with(tmp_path, {right: wrong})
    out = tmp_path / "errors.csv"
    assert main(["validate", "--published", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"'{wrong}'" in err and f"'{right}'" in err, err
    assert not out.exists()


def test_validate_keeps_its_own_columns_and_unrelated_notes(tmp_path, capsys):
    path = _published_with(tmp_path, {"quote": "reviewer_note"})
    out = tmp_path / "errors.csv"
    assert main(["validate", "--published", str(path), "--out", str(out)]) == 0
    assert len(pd.read_csv(out)) > 0


# -------------------------------------------- 5. refused input leaves no folders behind


def test_refused_predict_leaves_no_output_folders(tmp_path):
    src = tmp_path / "bad.csv"
    src.write_text(SCENARIO.replace(",0.75,", ",1.5,"))
    out = tmp_path / "new" / "sub" / "out.csv"
    assert main(["predict", "--in", str(src), "--out", str(out)]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv"]


def test_refused_sweep_leaves_no_output_folders(tmp_path):
    out = tmp_path / "new" / "sub" / "out.csv"
    argv = ["sweep", "--target", "no-such-model", "--gpu", "h100-sxm", "--method", "ngram"]
    assert main([*argv, "--out", str(out)]) == 2
    assert list(tmp_path.iterdir()) == []


def test_a_written_output_still_gets_its_folders(tmp_path):
    src = tmp_path / "good.csv"
    src.write_text(SCENARIO)
    out = tmp_path / "new" / "sub" / "out.csv"
    assert main(["predict", "--in", str(src), "--out", str(out)]) == 0
    assert len(pd.read_csv(out)) == 1


# ------------------------------------------------------------ 6. an --out that takes no file


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
@pytest.mark.parametrize("command", ["predict", "validate"])
def test_an_out_in_a_folder_that_accepts_no_files_exits_2(tmp_path, capsys, command):
    # /proc takes no new file, even from root, whom os.access lets write anywhere.
    out = "/proc/specplan-out.csv"
    if command == "predict":
        src = tmp_path / "good.csv"
        src.write_text(SCENARIO)
        argv = ["predict", "--in", str(src), "--out", out]
    else:
        argv = ["validate", "--published", str(ROOT / "data/validation/published.csv")]
        argv += ["--out", out]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "field '--out'" in err and "/proc" in err, err


# ------------------------------------------------------------ 7. blank header columns


def test_a_header_wider_than_a_spreadsheet_is_refused_before_its_columns_are_built(
    tmp_path, capsys
):
    from simulator.inputs.io import MAX_COLUMNS

    header, row = SCENARIO.splitlines()
    blank = MAX_COLUMNS - header.count(",")  # one column more than the limit
    src = tmp_path / "wide.csv"
    src.write_text(header + "," * blank + "\n" + row + "," * blank + "\n")
    out = tmp_path / "o.csv"
    assert main(["predict", "--in", str(src), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{MAX_COLUMNS + 1:,} columns" in err and str(src) in err, err
    assert not out.exists()


def test_a_few_empty_blank_columns_are_still_dropped(tmp_path):
    header, row = SCENARIO.splitlines()
    src = tmp_path / "trailing.csv"
    src.write_text(header + ",,,\n" + row + ",,,\n")
    out = tmp_path / "o.csv"
    assert main(["predict", "--in", str(src), "--out", str(out)]) == 0
    assert len(pd.read_csv(out)) == 1


def test_a_wide_parquet_table_and_a_wide_upload_are_refused_too(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from simulator.inputs.io import MAX_COLUMNS, csv_frame, read_blocks

    names = ["target", *(f"c{i}" for i in range(MAX_COLUMNS))]
    src = tmp_path / "wide.parquet"
    pq.write_table(pa.table({n: pa.array([None], pa.string()) for n in names}), src)
    with pytest.raises(InputError, match="columns"):
        next(read_blocks(str(src), 10))
    with pytest.raises(InputError, match="columns"):
        csv_frame(("a" + "," * MAX_COLUMNS + "\n").encode(), "up.csv")


# -------------------------------------------------- 8. serve --requests within its range


def test_serve_requests_past_what_the_lengths_allow_is_refused_up_front(tmp_path, capsys):
    src = _serve_input(tmp_path, output_len=256)
    out = tmp_path / "o.csv"
    argv = ["serve", "--in", str(src), "--out", str(out), "--rate", "2", "--requests", "100000"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "field '--requests'" in err and "field 'requests'" not in err, err
    assert "output_len 256" in err and "fewer requests" in err, err
    # Nothing was simulated first: no scenario's progress line precedes the refusal.
    assert "requests per arm" not in err
    assert not out.exists()


def test_serve_requests_bound_is_checked_against_each_rows_lengths(tmp_path, capsys):
    src = _serve_input(tmp_path, output_len=100_000)
    out = tmp_path / "o.csv"
    argv = ["serve", "--in", str(src), "--out", str(out), "--rate", "2", "--requests", "300"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "field '--requests'" in err and "requests per arm" not in err, err


# ------------------- found by the new Parquet family: a load column of lists in serve


def test_serve_sets_aside_a_load_column_of_any_type(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    src = tmp_path / "lists.parquet"
    table = pa.table(
        {
            "target": ["llama-3.1-8b"],
            "gpu": ["h100-sxm"],
            "method": ["eagle3"],
            "k": ["3"],
            "mean_accepted_tokens": ["2.8"],
            "batch_size": pa.array([[1, 2]]),
            "output_len": ["16"],
        }
    )
    pq.write_table(table, src)
    out = tmp_path / "o.csv"
    argv = ["serve", "--in", str(src), "--out", str(out), "--rate", "2", "--requests", "10"]
    assert main(argv) == 0, capsys.readouterr().err
    assert "batch_size set aside" in capsys.readouterr().err
    assert set(pd.read_csv(out)["arm"]) == {"baseline", "spec"}
