"""`python -m simulator`: predictions written whole, bad input refused with status 2."""

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from simulator.__main__ import main
from simulator.predict import OUTPUT_COLUMNS
from simulator.scenarios import INPUT_COLUMNS

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
        (lambda s: s.replace("llama-3.1-8b,eagle", "llama-9-8b,eagle"), "row 2, field 'target'"),
        (lambda s: s.replace("target,method", "model,method"), "field 'target'"),
        (lambda s: s.replace(",5,0.7,8", ",-5,0.7,8"), "row 1, field 'k'"),
        (lambda s: s.replace(",3,0.75,1", ",3,1.5,1"), "row 2, field 'acceptance_rate'"),
        (lambda s: s.replace(",3,0.75,1", ",3,nan,1"), "row 2, field 'acceptance_rate'"),
        (lambda s: s.replace(",3,0.75,1", ",40,0.75,1"), "row 2, field 'k'"),
        (lambda s: s.replace(",3,0.75,1", ",3,0.75,-2"), "row 2, field 'batch_size'"),
        (lambda s: s.replace("h100-sxm,1", "tpu-v9,1"), "row 2, field 'gpu'"),
        (lambda s: s.replace(",3,0.75,1", ",3,abc,1"), "row 2, field 'acceptance_rate'"),
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
