"""The published development set and its scoring command."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simulator.errors import InputError
from simulator.validation.published import load_published, score, summarise

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "data/validation/published.csv"


def test_every_row_cites_a_source_and_every_excluded_row_says_why():
    table = load_published(PUBLISHED)
    assert table["case_id"].is_unique
    assert table["source_url"].str.startswith("http").all()
    assert table["citation"].str.len().gt(5).all()
    excluded = table[~table["scored"]]
    assert excluded["excluded_reason"].str.len().gt(10).all()
    assert table["scored"].sum() >= 100


def test_the_fitted_defaults_meet_the_issue_of_record():
    # One set of defaults for every row: median |error| <= 12%, no batch bucket above
    # 20%, no systematic optimism, and every published reversal predicted below 1.1.
    s = summarise(score(load_published(PUBLISHED)))
    assert s.median_abs_error <= 0.12
    assert (s.by_batch["median_abs_error"] <= 0.20).all()
    assert abs(s.signed_median) <= 0.05
    assert len(s.reversals) > 0
    assert (s.reversals["predicted_speedup"] < 1.1).all()


def test_cli_writes_one_row_per_case_and_prints_the_medians(tmp_path):
    out = tmp_path / "errors.csv"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "simulator",
            "validate",
            "--published",
            str(PUBLISHED),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr
    errors = pd.read_csv(out)
    needed = {"predicted_speedup", "published_speedup", "batch_size", "method", "source_id"}
    assert needed <= set(errors.columns)
    assert len(errors) == load_published(PUBLISHED)["scored"].sum()
    np.testing.assert_allclose(
        errors["error"], errors["predicted_speedup"] / errors["published_speedup"] - 1
    )
    for text in ("median |error|", "signed median", "by batch", "by method", "by source"):
        assert text in run.stdout


def test_a_scored_row_without_a_speedup_is_refused(tmp_path):
    table = pd.read_csv(PUBLISHED, dtype=str, keep_default_na=False)
    first = table.index[table["scored"] == "true"][0]
    table.loc[first, "published_speedup"] = ""
    bad = tmp_path / "bad.csv"
    table.to_csv(bad, index=False)
    with pytest.raises(InputError, match="published_speedup"):
        load_published(bad)


@pytest.mark.parametrize(
    ("column", "value", "field"),
    [
        ("published_speedup", "inf", "published_speedup"),
        ("published_speedup", "1e19", "published_speedup"),
        ("case_id", "", "case_id"),
        ("citation", " ", "citation"),
    ],
)
def test_a_case_no_measurement_could_give_is_refused(tmp_path, column, value, field):
    # An infinite speedup scored as an error of -100%, exit 0.
    table = pd.read_csv(PUBLISHED, dtype=str, keep_default_na=False)
    first = table.index[table["scored"] == "true"][0]
    table.loc[first, column] = value
    bad = tmp_path / "bad.csv"
    table.to_csv(bad, index=False)
    with pytest.raises(InputError) as exc:
        load_published(bad)
    assert exc.value.field == field and exc.value.row == first + 2  # header = row 1


def test_a_case_id_given_twice_is_refused(tmp_path):
    table = pd.read_csv(PUBLISHED, dtype=str, keep_default_na=False)
    table = pd.concat([table, table.iloc[[3]]], ignore_index=True)
    bad = tmp_path / "bad.csv"
    table.to_csv(bad, index=False)
    with pytest.raises(InputError, match="row 5 too") as exc:  # header = row 1
        load_published(bad)
    assert exc.value.field == "case_id" and exc.value.row == len(table) + 1


def test_a_bad_scenario_cell_names_its_row_of_the_file(tmp_path):
    # Rows that are not scored are not predicted, so the error's row was counted among the
    # scored rows alone.
    table = pd.read_csv(PUBLISHED, dtype=str, keep_default_na=False)
    unscored = table.index[table["scored"] == "false"]
    assert len(unscored), "the bundled set has no unscored row to stand above the bad one"
    bad_row = int(table.index[(table["scored"] == "true") & (table.index > unscored[0])][0])
    table.loc[bad_row, "gpu"] = "tpu-v9"
    bad = tmp_path / "bad.csv"
    table.to_csv(bad, index=False)
    with pytest.raises(InputError) as exc:
        score(load_published(bad), source=str(bad))
    assert exc.value.field == "gpu" and exc.value.row == bad_row + 2


def test_rows_one_field_longer_than_the_header_are_refused(tmp_path):
    # pandas took each row's first field as the index and shifted the rest one column left.
    table = pd.read_csv(PUBLISHED, dtype=str, keep_default_na=False)
    text = table.to_csv(index=False).splitlines()
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join([text[0], *(line + ",x" for line in text[1:])]) + "\n")
    with pytest.raises(InputError, match="row 2: has"):
        load_published(bad)
