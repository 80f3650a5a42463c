"""`python -m simulator`: predictions written whole, bad input refused with status 2."""

import datetime
import io
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from simulator.cli import common
from simulator.cli import predict as predict_command
from simulator.cli import sweep as sweep_command
from simulator.cli.main import main
from simulator.inputs.scenarios import INPUT_COLUMNS
from simulator.model.predict import OUTPUT_COLUMNS, predict
from simulator.planning.reports import ECONOMICS_COLUMNS, add_economics, read_report_csv

ROOT = Path(__file__).resolve().parents[2]

GOOD = """target,method,draft,gpu,num_gpus,k,acceptance_rate,batch_size
llama-3.3-70b,draft_model,llama-3.2-1b,h100-sxm,4,5,0.7,8
llama-3.1-8b,eagle,,h100-sxm,1,3,0.75,1
llama-3.1-8b,none,,l4,1,,,4
"""


def test_predict_writes_inputs_and_outputs(tmp_path):
    src = tmp_path / "s.csv"
    src.write_text(GOOD)
    out = tmp_path / "p.csv"
    assert main(["predict", "--in", str(src), "--out", str(out)]) == 0
    table = pd.read_csv(out)
    assert len(table) == 3
    assert set(INPUT_COLUMNS) <= set(table.columns)
    assert set(OUTPUT_COLUMNS) <= set(table.columns)
    assert table.loc[2, "speedup"] == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda s: s.replace("llama-3.1-8b,eagle", "llama-9-8b,eagle"), "row 3, field 'target'"),
        (lambda s: s.replace("target,method", "model,method"), "did you mean 'target'?"),
        (lambda s: s.replace(",5,0.7,8", ",-5,0.7,8"), "row 2, field 'k'"),
        (lambda s: s.replace(",3,0.75,1", ",3,1.5,1"), "row 3, field 'acceptance_rate'"),
        (lambda s: s.replace(",3,0.75,1", ",3,nan,1"), "row 3, field 'acceptance_rate'"),
        (lambda s: s.replace(",3,0.75,1", ",40,0.75,1"), "row 3, field 'k'"),
        (lambda s: s.replace(",3,0.75,1", ",3,0.75,-2"), "row 3, field 'batch_size'"),
        (lambda s: s.replace("h100-sxm,1", "tpu-v9,1"), "row 3, field 'gpu'"),
        (lambda s: s.replace(",3,0.75,1", ",3,abc,1"), "row 3, field 'acceptance_rate'"),
    ],
    ids=[
        "unknown-target",
        "missing-column",
        "negative-k",
        "alpha-above-1",
        "alpha-nan",
        "k-too-large",
        "negative-batch",
        "unknown-gpu",
        "alpha-text",
    ],
)
def test_bad_input_exits_2_and_leaves_nothing(tmp_path, capsys, edit, needle):
    src = tmp_path / "s.csv"
    src.write_text(edit(GOOD))
    out = tmp_path / "p.csv"
    assert main(["predict", "--in", str(src), "--out", str(out)]) == 2
    assert needle in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == [src]


def test_missing_file_exits_2(tmp_path, capsys):
    assert (
        main(["predict", "--in", str(tmp_path / "nope.csv"), "--out", str(tmp_path / "o.csv")]) == 2
    )
    assert "file not found" in capsys.readouterr().err


def test_sweep_grid(tmp_path):
    out = tmp_path / "g.csv"
    code = main(
        [
            "sweep",
            "--target",
            "llama-3.1-8b",
            "--method",
            "eagle",
            "--gpu",
            "h100-sxm",
            "--k",
            "1-4",
            "--alpha",
            "0.6:0.8:0.1",
            "--batch",
            "1,8,64",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    assert len(pd.read_csv(out)) == 4 * 3 * 3


def test_module_entry_point_runs(tmp_path):
    src = tmp_path / "s.csv"
    src.write_text(GOOD)
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "simulator",
            "predict",
            "--in",
            str(src),
            "--out",
            str(tmp_path / "o.csv"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stderr


def _predict_exit(tmp_path, text: str, *extra: str) -> int:
    src = tmp_path / "s.csv"
    src.write_text(text)
    return main(["predict", "--in", str(src), "--out", str(tmp_path / "p.csv"), *extra])


@pytest.mark.parametrize(
    ("header", "needle"),
    [
        ("num_gpus", "unknown column 'num_gpu'; did you mean 'num_gpus'?"),
        ("batch_size", "unknown column 'batch'; did you mean 'batch_size'?"),
        ("acceptance_rate", "unknown column 'acceptanse_rate'; did you mean 'acceptance_rate'?"),
        ("k", "unknown column 'K'; did you mean 'k'?"),
    ],
)
def test_unknown_column_exits_2_with_the_nearest_name(tmp_path, capsys, header, needle):
    typo = needle.split("'")[1]
    text = GOOD.replace(f",{header},", f", {typo} ,").replace(f",{header}\n", f",{typo}\n")
    assert _predict_exit(tmp_path, text) == 2
    assert needle in capsys.readouterr().err
    assert not (tmp_path / "p.csv").exists()


def test_output_columns_are_refused_as_outputs(tmp_path, capsys):
    src = tmp_path / "s.csv"
    src.write_text(GOOD)
    first = tmp_path / "p.csv"
    assert main(["predict", "--in", str(src), "--out", str(first)]) == 0
    again = tmp_path / "again.csv"
    assert main(["predict", "--in", str(first), "--out", str(again)]) == 2
    assert "'alpha' is an output column, not an input" in capsys.readouterr().err
    assert _predict_exit(tmp_path, GOOD.replace("batch_size", "batch_size,speedup")) == 2
    assert "'speedup' is an output column, not an input" in capsys.readouterr().err


def test_blank_trailing_header_is_dropped_and_named_when_it_holds_data(tmp_path, capsys):
    trailing = GOOD.replace("\n", ",\n")
    assert _predict_exit(tmp_path, trailing) == 0
    filled = trailing.replace(",4,\n", ",4,x\n")
    assert _predict_exit(tmp_path, filled) == 2
    assert "column 9 has a blank header" in capsys.readouterr().err


def test_python_api_still_accepts_extra_columns():
    table = pd.read_csv(io.StringIO(GOOD)).assign(note="kept", num_gpu=8)
    result = predict(table)
    assert len(result) == 3 and (result["num_gpus"] == [4, 1, 1]).all()


def _sweep_argv(out, *extra) -> list[str]:
    """A 36-row sweep: K 1-4 x alpha 0.6-0.8 x batch 1, 8, 64."""
    flags = "--target llama-3.1-8b --method eagle --gpu h100-sxm --k 1-4 --alpha 0.6:0.8:0.1"
    return ["sweep", *flags.split(), "--batch", "1,8,64", "--out", str(out), *extra]


def _validate_argv(out) -> list[str]:
    published = ROOT / "data/validation/published.csv"
    return ["validate", "--published", str(published), "--out", str(out)]


@pytest.mark.parametrize("command", ["predict", "sweep", "validate"])
@pytest.mark.parametrize("where", ["folder", "below-a-file"])
def test_bad_out_exits_2_before_any_work(tmp_path, capsys, monkeypatch, command, where):
    def no_work(*args, **kwargs):
        raise AssertionError("work started before --out was checked")

    monkeypatch.setattr(common, "predict_blocks", no_work)
    monkeypatch.setattr(common, "load_gpus", no_work)
    (tmp_path / "afile").write_text("")
    out = tmp_path if where == "folder" else tmp_path / "afile" / "sub" / "o.csv"
    argv = {
        "predict": ["predict", "--in", str(tmp_path / "missing.csv"), "--out", str(out)],
        "sweep": _sweep_argv(out),
        "validate": _validate_argv(out),
    }[command]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "'--out'" in err and ("is a folder" in err or "is a file" in err)


def test_out_in_a_read_only_folder_exits_2(tmp_path, capsys, monkeypatch):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    if os.geteuid() == 0:  # root may write anywhere: deny as a read-only mount would
        allowed = os.access
        monkeypatch.setattr(os, "access", lambda p, mode: Path(p) != locked and allowed(p, mode))
    try:
        assert main(_sweep_argv(locked / "new" / "g.csv")) == 2
    finally:
        locked.chmod(0o755)
    assert f"field '--out': no permission to write in '{locked}'" in capsys.readouterr().err
    assert list(locked.iterdir()) == []


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_output_gets_the_umask_permissions(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        assert main(_sweep_argv(tmp_path / "g.csv")) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "g.csv").stat().st_mode) == mode


def test_sweep_above_the_limit_asks_for_force(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sweep_command, "SWEEP_LIMIT", 30)
    out = tmp_path / "g.csv"
    assert main(_sweep_argv(out)) == 2
    assert "36 scenarios, more than 30" in capsys.readouterr().err and not out.exists()
    assert main(_sweep_argv(out, "--force")) == 0
    assert len(pd.read_csv(out)) == 36


def test_a_huge_axis_is_refused_before_it_is_listed(tmp_path, capsys):
    argv = _sweep_argv(tmp_path / "g.csv")
    argv[argv.index("--batch") + 1] = "1-1000000000000"
    t0 = time.monotonic()
    assert main(argv) == 2
    assert time.monotonic() - t0 < 5
    err = capsys.readouterr().err
    assert "--batch" in err and "1,000,000,000,000 values" in err and "--force" in err


def test_sweep_help_states_the_limit(capsys):
    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    assert f"{sweep_command.SWEEP_LIMIT:,}" in capsys.readouterr().out


def test_large_tables_report_progress(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(common, "PROGRESS_ROWS", 10)
    monkeypatch.setattr(common, "WRITE_BLOCK_ROWS", 16)
    out = tmp_path / "g.csv"
    assert main(_sweep_argv(out)) == 0
    err = capsys.readouterr().err
    assert "predicting 36 scenarios" in err
    assert f"writing {out}: 16 of 36 rows" in err and f"writing {out}: 36 of 36 rows" in err
    assert len(pd.read_csv(out)) == 36


def test_small_tables_are_quiet(tmp_path, capsys):
    assert main(_sweep_argv(tmp_path / "g.csv")) == 0
    assert capsys.readouterr().err.count("\n") == 1


def test_sigterm_leaves_no_temporary_file(tmp_path):
    out = tmp_path / "big.csv"
    argv = [sys.executable, "-m", "simulator", *_sweep_argv(out)]
    argv[argv.index("--batch") + 1] = "1-2000"
    argv[argv.index("--alpha") + 1] = "0.5:0.9:0.01"  # 2000 x 4 x 41 = 328,000 rows
    proc = subprocess.Popen(argv, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".big.csv.*")) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.02)
    assert list(tmp_path.glob(".big.csv.*")), "the sweep never started writing"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    proc.stderr.close()
    assert list(tmp_path.iterdir()) == []


REPORT = (
    GOOD.replace("batch_size\n", "batch_size,requests_per_day\n")
    .replace(",0.7,8\n", ",0.7,8,5000\n")
    .replace(",0.75,1\n", ",0.75,1,\n")
    .replace(",,4\n", ",,4,\n")
)


def test_report_has_units_and_the_dashboards_economics(tmp_path):
    src, out = tmp_path / "s.csv", tmp_path / "r.csv"
    src.write_text(REPORT)
    argv = ["predict", "--in", str(src), "--out", str(out), "--report"]
    assert main([*argv, "--requests-per-day", "1e6"]) == 0
    text = out.read_text()
    header = text.splitlines()[0].split(",")
    assert "speedup [x]" in header and "monthly_cost_spec_usd [$/month]" in header
    assert header[-1] == "preflight"
    report = read_report_csv(text)
    assert set(ECONOMICS_COLUMNS) <= set(report.columns)
    assert list(report["requests_per_day"]) == [5000, 1e6, 1e6]
    plain = tmp_path / "p.csv"
    src.write_text(GOOD)
    assert main(["predict", "--in", str(src), "--out", str(plain)]) == 0
    expected = add_economics(pd.read_csv(plain), [5000, 1e6, 1e6])
    assert report["monthly_saving_usd"].to_numpy() == pytest.approx(
        expected["monthly_saving_usd"].to_numpy()
    )


def test_demand_column_without_report_is_refused(tmp_path, capsys):
    assert _predict_exit(tmp_path, REPORT) == 2
    assert "field 'requests_per_day': is read only with --report" in capsys.readouterr().err


def test_report_default_demand_is_the_dashboards(tmp_path):
    widgets = pytest.importorskip("app.widgets")
    assert predict_command.REQUESTS_PER_DAY == widgets.DEFAULT_REQUESTS_PER_DAY
    src, out = tmp_path / "s.csv", tmp_path / "r.csv"
    src.write_text(GOOD)
    assert main(["predict", "--in", str(src), "--out", str(out), "--report"]) == 0
    assert (
        read_report_csv(out.read_text())["requests_per_day"] == predict_command.REQUESTS_PER_DAY
    ).all()


def test_report_refuses_a_bad_demand(tmp_path, capsys):
    assert _predict_exit(tmp_path, REPORT.replace(",0.7,8,5000", ",0.7,8,lots"), "--report") == 2
    assert "row 2, field 'requests_per_day': 'lots'" in capsys.readouterr().err
    assert _predict_exit(tmp_path, REPORT.replace(",0.7,8,5000", ",0.7,8,-1"), "--report") == 2
    assert "row 2, field 'requests_per_day'" in capsys.readouterr().err
    # 1e300 priced to an infinite demand and a NaN saving, exit 0.
    assert _predict_exit(tmp_path, REPORT.replace(",0.7,8,5000", ",0.7,8,1e300"), "--report") == 2
    assert "row 2, field 'requests_per_day': '1e300'" in capsys.readouterr().err
    src, out = tmp_path / "s.csv", tmp_path / "r.csv"
    src.write_text(GOOD)
    argv = ["predict", "--in", str(src), "--out", str(out), "--report"]
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--requests-per-day", "1e308"])
    assert exc.value.code == 2 and "--requests-per-day" in capsys.readouterr().err


def test_report_names_the_row_of_a_bad_demand_past_the_first_block(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(common, "WRITE_BLOCK_ROWS", 2)
    rows = REPORT.splitlines()
    text = "\n".join([rows[0], *rows[1:] * 3, ""])  # nine rows, in blocks of two
    text = text.replace(",0.7,8,5000\n", ",0.7,8,lots\n")
    lines = text.splitlines()
    last = max(i for i, line in enumerate(lines) if line.endswith(",lots"))
    for i in range(1, last):
        lines[i] = lines[i].replace(",lots", ",5000")
    assert _predict_exit(tmp_path, "\n".join(lines) + "\n", "--report") == 2
    # Numbered as a spreadsheet numbers the file's lines: the header is row 1.
    assert f"row {last + 1}, field 'requests_per_day': 'lots'" in capsys.readouterr().err


PROFILE = ROOT / "data/profiles/cpu/tiny.json"


def test_profile_that_matches_no_row_is_reported(tmp_path, capsys):
    assert _predict_exit(tmp_path, GOOD, "--profile", str(PROFILE)) == 0
    err = capsys.readouterr().err
    assert f"warning: profile {PROFILE} (device 'cpu') matches no row" in err
    assert "rows use gpu h100-sxm, l4" in err and "--profile-gpu" in err


def test_profile_that_matches_a_row_is_quiet(tmp_path, capsys):
    rows = "target,method,gpu,batch_size,weight_dtype\ntiny,none,cpu,2,bf16\n"
    assert _predict_exit(tmp_path, rows, "--profile", str(PROFILE)) == 0
    assert "warning" not in capsys.readouterr().err
    assert pd.read_csv(tmp_path / "p.csv")["latency_source"][0] != "roofline"


def test_parquet_in_and_out_give_what_csv_gives(tmp_path):
    src = tmp_path / "s.csv"
    src.write_text(GOOD)
    assert main(["predict", "--in", str(src), "--out", str(tmp_path / "p.csv")]) == 0
    assert main(["predict", "--in", str(src), "--out", str(tmp_path / "p.parquet")]) == 0
    from_csv = pd.read_csv(tmp_path / "p.csv")
    from_parquet = pd.read_parquet(tmp_path / "p.parquet")
    assert list(from_parquet.columns) == list(from_csv.columns)
    expected = predict(pd.read_csv(io.StringIO(GOOD)))
    for col in ("speedup", "spec_tpot_ms", "max_concurrency_spec", "break_even_alpha"):
        assert from_parquet[col].to_numpy() == pytest.approx(expected[col].to_numpy(), nan_ok=True)
        assert from_csv[col].to_numpy() == pytest.approx(expected[col].to_numpy(), nan_ok=True)
    assert list(from_parquet["status"].astype(str)) == list(expected["status"].astype(str))
    # A scenario table in Parquet reads as the CSV does.
    pd.read_csv(io.StringIO(GOOD)).to_parquet(tmp_path / "s.parquet")
    again = tmp_path / "again.parquet"
    assert main(["predict", "--in", str(tmp_path / "s.parquet"), "--out", str(again)]) == 0
    assert pd.read_parquet(again)["speedup"].to_numpy() == pytest.approx(
        expected["speedup"].to_numpy(), nan_ok=True
    )


def _parquet_with(tmp_path, column: str, array) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(pd.read_csv(io.StringIO(GOOD)), preserve_index=False)
    table = table.set_column(table.column_names.index(column), column, array)
    pq.write_table(table, tmp_path / "s.parquet")
    return str(tmp_path / "s.parquet")


def test_parquet_text_stored_as_bytes_is_read_as_text(tmp_path):
    import pyarrow as pa

    targets = pd.read_csv(io.StringIO(GOOD))["target"]
    src = _parquet_with(tmp_path, "target", pa.array([t.encode() for t in targets], pa.binary()))
    assert main(["predict", "--in", src, "--out", str(tmp_path / "p.csv")]) == 0
    assert list(pd.read_csv(tmp_path / "p.csv")["target"]) == list(targets)


@pytest.mark.parametrize(
    ("column", "array", "needle"),
    [
        ("target", [b"\xff", b"x", b"y"], "field 'target': holds bytes that are not UTF-8 text"),
        ("k", [[1, 2], [3], [4]], "row 1, field 'k': a list is neither a number nor text"),
        ("k", [{"a": 1}] * 3, "row 1, field 'k': a mapping is neither"),
        ("batch_size", [datetime.datetime(2026, 1, 1)] * 3, "field 'batch_size': holds dates"),
        ("k", [datetime.timedelta(seconds=3)] * 3, "field 'k': holds dates or times"),
        ("k", [True, False, True], "field 'k': holds true/false values"),
    ],
)
def test_parquet_columns_of_other_types_are_refused(tmp_path, capsys, column, array, needle):
    import pyarrow as pa

    src = _parquet_with(tmp_path, column, pa.array(array))
    assert main(["predict", "--in", src, "--out", str(tmp_path / "p.csv")]) == 2
    assert needle in capsys.readouterr().err


def test_sweep_writes_parquet(tmp_path):
    assert main(_sweep_argv(tmp_path / "g.parquet")) == 0
    assert len(pd.read_parquet(tmp_path / "g.parquet")) == 36


@pytest.mark.parametrize(
    ("flag", "name"),
    [("--out", "p.txt"), ("--out", "p"), ("--in", "s.json"), ("--out", "p.CSV.gz")],
)
def test_an_unknown_suffix_is_refused_naming_the_flag(tmp_path, capsys, flag, name):
    src = tmp_path / "s.csv"
    src.write_text(GOOD)
    paths = {"--in": str(src), "--out": str(tmp_path / "p.csv")}
    paths[flag] = str(tmp_path / name)
    assert main(["predict", "--in", paths["--in"], "--out", paths["--out"]]) == 2
    err = capsys.readouterr().err
    assert f"field '{flag}'" in err and ".csv or .parquet" in err
    assert not (tmp_path / "p.csv").exists()


def test_report_refuses_parquet(tmp_path, capsys):
    assert _predict_exit(tmp_path, GOOD, "--report") == 0
    src = tmp_path / "s.csv"
    argv = ["predict", "--in", str(src), "--out", str(tmp_path / "r.parquet"), "--report"]
    assert main(argv) == 2
    assert "--report writes CSV" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flag", "value", "needle"),
    [
        ("--k", "inf", "not a finite number"),
        ("--k", "1.5", "1.5 is not a whole number"),
        ("--k", "0-3", "0 is outside 1..16"),
        ("--k", "1-1000000000", "1,000,000,000 values"),
        ("--batch", "1e400", "not a finite number"),
        ("--batch", "nan", "not a finite number"),
        ("--batch", "0", "0 is outside 1..1e+06"),
        ("--batch", "2000000", "2e+06 is outside 1..1e+06"),
        ("--alpha", "0.5:1.5:0.5", "1.5 is outside 0..1"),
        ("--alpha", "0.9:0.5:0.1", "stops before it starts"),
        ("--alpha", "abc", "not a number"),
    ],
)
def test_sweep_refuses_absurd_flags_naming_flag_and_limit(tmp_path, capsys, flag, value, needle):
    argv = _sweep_argv(tmp_path / "g.csv")
    argv[argv.index(flag) + 1] = value
    t0 = time.monotonic()
    assert main(argv) == 2
    assert main([*argv, "--force"]) == 2
    assert time.monotonic() - t0 < 5
    err = capsys.readouterr().err
    assert f"field '{flag}'" in err and needle in err
    assert not (tmp_path / "g.csv").exists()


def test_a_forced_sweep_still_has_a_ceiling(tmp_path, capsys):
    argv = _sweep_argv(tmp_path / "g.csv", "--force")
    argv[argv.index("--alpha") + 1] = "0:1:0.0000000001"
    t0 = time.monotonic()
    assert main(argv) == 2
    assert time.monotonic() - t0 < 5
    err = capsys.readouterr().err
    assert "field '--alpha'" in err and "at all" in err


@pytest.mark.parametrize(
    ("cell", "needle"),
    [
        ("prompt_len=9223372036854775807", "field 'prompt_len': 9.22337e+18 is above 1e+08"),
        ("prompt_len=99999999999999999999999", "field 'prompt_len'"),
        ("verify_tokens=1e300", "field 'verify_tokens': 1e+300 is above"),
        ("batch_size=1e19", "field 'batch_size'"),
        ("acceptance_per_position=nan", "field 'acceptance_per_position': 'nan'"),
        ("k=1e400", "field 'k': must be finite"),
        ("k=nan", "field 'k': 'nan' is not a number"),
    ],
)
def test_scenario_cells_that_once_broke_the_model_are_refused(tmp_path, capsys, cell, needle):
    column, value = cell.split("=")
    base = {"target": "llama-3.1-8b", "gpu": "h100-sxm", "method": "eagle", "k": "3"}
    if column != "acceptance_per_position":
        base["acceptance_rate"] = "0.7"
    base[column] = value
    text = ",".join(base) + "\n" + ",".join(base.values()) + "\n"
    assert _predict_exit(tmp_path, text) == 2
    assert needle in capsys.readouterr().err
    assert not (tmp_path / "p.csv").exists()


def test_a_column_repeated_after_stripping_is_refused(tmp_path, capsys):
    text = "target,gpu, gpu\nllama-3.1-8b,h100-sxm,h100-sxm\n"
    assert _predict_exit(tmp_path, text) == 2
    assert "field 'gpu': column 'gpu' appears twice (columns 2 and 3)" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--in", "--gpus", "--models", "--profile"])
def test_a_folder_given_for_a_file_is_refused_naming_the_flag(tmp_path, capsys, flag):
    src = tmp_path / "s.csv"
    src.write_text(GOOD)
    folder = tmp_path / "folder.csv"
    folder.mkdir()
    argv = ["predict", "--in", str(src), "--out", str(tmp_path / "p.csv")]
    if flag == "--in":
        argv[argv.index("--in") + 1] = str(folder)
    else:
        argv += [flag, str(folder)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"field '{flag}'" in err and "is a folder" in err


@pytest.mark.parametrize(
    ("method", "flags", "field"),
    [
        ("none", ["--k", "1-4"], "--k"),
        ("None", ["--alpha", "0.6"], "--alpha"),
        ("", ["--k", "2"], "--k"),
        ("eagle", ["--draft", "llama-3.2-1b"], "--draft"),
        ("ngram", ["--draft", "llama-3.2-1b"], "--draft"),
    ],
)
def test_sweep_refuses_a_flag_its_method_would_ignore(tmp_path, capsys, method, flags, field):
    out = tmp_path / "g.csv"
    argv = ["sweep", "--target", "llama-3.1-8b", "--gpu", "h100-sxm", "--method", method]
    assert main([*argv, *flags, "--batch", "1,2", "--out", str(out)]) == 2
    assert f"field '{field}'" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("flag", ["--k", "--alpha"])
def test_an_empty_sweep_axis_is_refused_not_replaced_by_the_default(tmp_path, capsys, flag):
    out = tmp_path / "g.csv"
    argv = ["sweep", "--target", "llama-3.1-8b", "--gpu", "h100-sxm", "--method", "ngram"]
    assert main([*argv, flag, "", "--batch", "1", "--out", str(out)]) == 2
    assert f"field '{flag}': is empty" in capsys.readouterr().err
    assert not out.exists()


def test_a_sweep_without_speculation_runs_one_row_per_batch(tmp_path):
    out = tmp_path / "g.csv"
    argv = ["sweep", "--target", "llama-3.1-8b", "--gpu", "h100-sxm", "--method", "NONE"]
    assert main([*argv, "--batch", "1,4,16", "--out", str(out)]) == 0
    table = pd.read_csv(out)
    assert list(table["batch_size"]) == [1, 4, 16]
    assert (table["k"] == 0).all() and (table["speedup"] == 1.0).all()


@pytest.mark.parametrize(
    ("flags", "field"),
    [
        (["--requests-per-day", "5"], "--requests-per-day"),
        (["--profile-gpu", "h100-sxm"], "--profile-gpu"),
    ],
)
def test_predict_refuses_a_flag_that_would_be_ignored(tmp_path, capsys, flags, field):
    assert _predict_exit(tmp_path, GOOD, *flags) == 2
    assert f"field '{field}'" in capsys.readouterr().err
    assert not (tmp_path / "p.csv").exists()


def test_requests_per_day_prices_the_report(tmp_path):
    src = tmp_path / "s.csv"
    src.write_text(GOOD)
    costs = []
    for demand in ("1000", "4000000"):
        out = tmp_path / f"r{demand}.csv"
        argv = ["predict", "--in", str(src), "--out", str(out), "--report"]
        assert main([*argv, "--requests-per-day", demand]) == 0
        table = pd.read_csv(out)
        costs.append(table["requests_per_day [requests/day]"].tolist())
    assert costs[0] == [1000.0] * 3 and costs[1] == [4_000_000.0] * 3


def test_a_table_saved_with_semicolons_and_decimal_commas_says_how_to_fix_it(tmp_path, capsys):
    semicolons = GOOD.replace(",", ";").replace("0.7", "0,7")
    assert _predict_exit(tmp_path, semicolons) == 2
    err = capsys.readouterr().err
    assert "row 1: the header's names are separated by semicolons" in err
    decimal_comma = GOOD.replace("0.75", '"0,75"')
    assert _predict_exit(tmp_path, decimal_comma) == 2
    err = capsys.readouterr().err
    assert (
        "row 3, field 'acceptance_rate': '0,75' is not a number (write decimals with '.': 0.75)"
        in err
    )
    assert not (tmp_path / "p.csv").exists()


def test_a_column_whole_in_one_block_and_fractional_in_the_next_is_written(tmp_path, monkeypatch):
    """Rows without speculation first (tau 1, whole numbers), speculative ones after: each
    block's text follows its own values (this raised ArrowInvalid once)."""
    monkeypatch.setattr(common, "WRITE_BLOCK_ROWS", 2)
    rows = GOOD.splitlines()
    none_row, eagle_row = rows[3], rows[2]
    src = tmp_path / "s.csv"
    src.write_text("\n".join([rows[0], none_row, none_row, eagle_row, eagle_row, eagle_row]) + "\n")
    for suffix in ("csv", "parquet"):
        out = tmp_path / f"p.{suffix}"
        assert main(["predict", "--in", str(src), "--out", str(out)]) == 0
        got = pd.read_csv(out) if suffix == "csv" else pd.read_parquet(out)
        expected = predict(pd.read_csv(src))
        for col in ("tau", "alpha", "speedup", "spec_step_ms"):
            assert got[col].to_numpy() == pytest.approx(expected[col].to_numpy(), nan_ok=True)


def _prediction_blocks():
    table = pd.read_csv(io.StringIO(GOOD))
    frame = predict(pd.concat([table] * 40, ignore_index=True))
    return [frame.iloc[i : i + 7] for i in range(0, len(frame), 7)]


def test_the_csv_text_is_the_same_on_any_number_of_threads(tmp_path, monkeypatch):
    from simulator.inputs import io as table_io

    monkeypatch.setattr(table_io, "CSV_ROWS", 3)
    texts = []
    for threads in (1, 2, 4):
        path = tmp_path / f"t{threads}.csv"
        seen = []
        writer = table_io.TableWriter(str(path), "csv", threads=threads, on_written=seen.append)
        for block in _prediction_blocks():
            writer.write(block)
        writer.close()
        assert seen == sorted(seen) and seen[-1] == 120 == writer.rows
        texts.append(path.read_bytes())
    assert texts[0] == texts[1] == texts[2]
    assert texts[0].count(b"\n") == 121 and texts[0].startswith(b'"target"')


def test_a_block_that_fails_to_format_is_raised_and_nothing_after_it_is_written(tmp_path):
    from simulator.inputs.io import TableWriter

    blocks = _prediction_blocks()
    bad = blocks[2].copy()
    bad["target"] = [object()] * len(bad)  # pyarrow cannot convert it
    path = tmp_path / "t.csv"
    writer = TableWriter(str(path), "csv", threads=2)
    with pytest.raises(Exception, match="object"):
        for block in (blocks[0], blocks[1], bad, *blocks[3:]):
            writer.write(block)
        writer.close()
    with pytest.raises(RuntimeError, match="earlier block failed"):
        writer.write(blocks[0])
    writer.close()
    assert len(pd.read_csv(path)) == 14  # the two blocks before it, nothing after


def test_a_table_that_fills_its_last_block_exactly_is_read_whole(tmp_path, monkeypatch):
    """65,536 rows (a multiple of the block) were refused as 'holds no scenario rows': an
    empty block was read after the last full one."""
    monkeypatch.setattr(common, "WRITE_BLOCK_ROWS", 3)
    src = tmp_path / "s.csv"
    src.write_text(GOOD + GOOD.split("\n", 1)[1])
    for suffix in ("csv", "parquet"):
        out = tmp_path / f"p.{suffix}"
        assert main(["predict", "--in", str(src), "--out", str(out)]) == 0
        got = pd.read_csv(out) if suffix == "csv" else pd.read_parquet(out)
        assert len(got) == 6


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_columns_writes_only_the_columns_named_in_their_order(tmp_path, suffix):
    src = tmp_path / "s.csv"
    src.write_text(GOOD)
    whole, some = tmp_path / f"whole.{suffix}", tmp_path / f"some.{suffix}"
    assert main(["predict", "--in", str(src), "--out", str(whole)]) == 0
    names = " speedup, target ,k,status,cost_per_mtok_spec"
    assert main(["predict", "--in", str(src), "--out", str(some), "--columns", names]) == 0
    read = pd.read_csv if suffix == "csv" else pd.read_parquet
    full, picked = read(whole), read(some)
    assert list(picked.columns) == ["speedup", "target", "k", "status", "cost_per_mtok_spec"]
    pd.testing.assert_frame_equal(picked, full[list(picked.columns)])


def test_sweep_writes_only_the_columns_named(tmp_path):
    out = tmp_path / "g.csv"
    argv = ["sweep", "--target", "llama-3.1-8b", "--method", "eagle", "--gpu", "h100-sxm"]
    argv += ["--k", "1-3", "--alpha", "0.7", "--batch", "1,8", "--out", str(out)]
    assert main([*argv, "--columns", "k,batch_size,speedup"]) == 0
    table = pd.read_csv(out)
    assert list(table.columns) == ["k", "batch_size", "speedup"] and len(table) == 6
    assert (table["speedup"] > 0).all()


@pytest.mark.parametrize(
    ("names", "needle"),
    [
        (
            "speedup,spek_tok_s",
            "'spek_tok_s' is not a column predict writes; did you mean spec_tok_s",
        ),
        ("speedup,,k", "holds an empty name"),
        ("", "holds an empty name"),
        ("k,speedup,k", "names 'k' twice"),
        ("requests_per_day", "'requests_per_day' is not a column predict writes"),
    ],
    ids=["misspelt", "two-commas", "empty", "twice", "report-only"],
)
def test_bad_columns_are_refused_naming_the_flag_and_nothing_is_written(
    tmp_path, capsys, names, needle
):
    src = tmp_path / "s.csv"
    src.write_text(GOOD)
    out = tmp_path / "p.parquet"
    assert main(["predict", "--in", str(src), "--out", str(out), "--columns", names]) == 2
    err = capsys.readouterr().err
    assert "field '--columns'" in err and needle in err
    assert not out.exists()


def test_columns_with_report_is_refused(tmp_path, capsys):
    src = tmp_path / "s.csv"
    src.write_text(GOOD)
    out = tmp_path / "r.csv"
    argv = ["predict", "--in", str(src), "--out", str(out), "--report", "--columns", "speedup"]
    assert main(argv) == 2
    assert "columns are fixed" in capsys.readouterr().err and not out.exists()


def test_the_columns_command_lists_every_output_a_columns_flag_may_name(capsys):
    assert main(["columns"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for name in OUTPUT_COLUMNS:
        assert name in text


def test_one_empty_column_keeps_its_rows_in_csv(tmp_path):
    src = tmp_path / "s.csv"
    src.write_text(GOOD)
    out = tmp_path / "p.csv"
    assert main(["predict", "--in", str(src), "--out", str(out), "--columns", "draft"]) == 0
    table = pd.read_csv(out, keep_default_na=False)
    assert table["draft"].tolist() == ["llama-3.2-1b", "", ""]
    # Empty on every row (each draft keeps its full context): blank lines, unless quoted.
    argv = ["predict", "--in", str(src), "--out", str(out), "--columns", "draft_context_len"]
    assert main(argv) == 0
    table = pd.read_csv(out)
    assert len(table) == 3 and table["draft_context_len"].isna().all()


def test_a_signal_the_instant_the_temporary_file_exists_leaves_none(tmp_path, monkeypatch):
    """SIGTERM between the temporary file's creation and its name reaching the cleanup
    (inside mkstemp, before) left `.big.csv.xxxx` behind: the test above saw it under load."""
    import os as real_os

    from simulator.inputs import io

    opened = real_os.open

    def open_then_terminate(path, flags, *args):
        fd = opened(path, flags, *args)
        if flags & real_os.O_CREAT:
            real_os.close(fd)
            raise SystemExit(143)
        return fd

    monkeypatch.setattr(real_os, "open", open_then_terminate)
    with pytest.raises(SystemExit), io.atomic_path(str(tmp_path / "big.csv")):
        pass
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []
