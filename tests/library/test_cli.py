"""`python -m simulator library ...` and `predict --profile library:NAME`."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from library import open_library
from library.kinds import save_report, save_scenario
from simulator.cli.main import main
from tests.library.test_store import PROFILE, profile_bytes


@pytest.fixture
def db(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'lib.db'}"
    monkeypatch.setenv("SPECPLAN_DB_URL", url)
    monkeypatch.setenv("SPECPLAN_USER", "cli-user")
    return url


def test_import_list_show_export_delete(db, tmp_path, capsys):
    src = tmp_path / "epyc.json"
    src.write_bytes(PROFILE.read_bytes())
    assert main(["library", "import", str(src), "--notes", "bundled copy"]) == 0
    assert "kept profile 'epyc'" in capsys.readouterr().out
    assert main(["library", "import", str(src), "--name", "again"]) == 0
    assert "already kept as profile 'epyc'" in capsys.readouterr().out

    assert main(["library", "list", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["name"], r["device"], r["saved_by"], r["notes"]) for r in rows] == [
        ("epyc", "AMD EPYC", "cli-user", "bundled copy")
    ]
    assert main(["library", "show", "epyc"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["model"] == "llama-3.2-1b" and len(shown["content_hash"]) == 64

    out_csv, out_json = tmp_path / "e.csv", tmp_path / "e.json"
    assert main(["library", "export", "epyc", "--out", str(out_csv)]) == 0
    table = pd.read_csv(out_csv, comment="#")
    assert {"batch", "median_ms"} <= set(table.columns) and len(table) == 18
    assert main(["library", "export", "epyc", "--out", str(out_json)]) == 0

    assert main(["library", "delete", "epyc"]) == 2
    assert "add --yes" in capsys.readouterr().err
    assert main(["library", "delete", "epyc", "--yes"]) == 0
    assert main(["library", "list"]) == 0
    assert "nothing kept" in capsys.readouterr().out

    # The JSON export restores the entry whole: name, notes, who, content.
    assert main(["library", "import", str(out_json)]) == 0
    e = open_library(db).get("profile", "epyc")
    assert (e.notes, e.created_by) == ("bundled copy", "cli-user")
    assert open_library(db).content("profile", "epyc") == PROFILE.read_bytes()


def test_export_of_each_kind_as_csv(db, tmp_path):
    lib = open_library(db)
    save_scenario(lib, "s", "roi", {"target": "llama-3.3-70b", "k": "4"})
    rows = pd.DataFrame({"target": ["llama-3.3-70b"], "k": [4]})
    save_report(lib, "r", rows, rows.assign(speedup=[1.9]))
    for name, kind, columns in (("s", "scenario", ["parameter", "value"]), ("r", "report", None)):
        out = tmp_path / f"{name}.csv"
        assert main(["library", "export", name, "--kind", kind, "--out", str(out)]) == 0
        got = pd.read_csv(out)
        if columns:
            assert list(got.columns) == columns and ("k", "4") in {
                (p, str(v)) for p, v in got.itertuples(index=False)
            }
        else:
            assert got["speedup"].tolist() == [1.9]


def test_benchmark_import_needs_its_engine(db, tmp_path, capsys):
    f = tmp_path / "bench.json"
    f.write_text('[{"concurrency": 8, "output_throughput": 1234.5}]')
    assert main(["library", "import", str(f), "--kind", "benchmark"]) == 2
    assert "needs its device" in capsys.readouterr().err
    args = ["--device", "H100", "--engine", "vllm", "--engine-version", "0.11.0"]
    assert main(["library", "import", str(f), "--kind", "benchmark", *args]) == 0
    out = tmp_path / "b.csv"
    assert main(["library", "export", "bench", "--out", str(out)]) == 0
    assert pd.read_csv(out)["output_throughput"].tolist() == [1234.5]


def test_bad_input_exits_2_with_the_reason(db, tmp_path, capsys):
    long_name = "n" * 10_000
    src = tmp_path / "p.json"
    src.write_bytes(PROFILE.read_bytes())
    assert main(["library", "import", str(src), "--name", long_name]) == 2
    assert "10,000 characters long" in capsys.readouterr().err
    assert main(["library", "show", "missing"]) == 2
    assert "nothing named 'missing'" in capsys.readouterr().err
    assert main(["library", "import", str(tmp_path / "nope.json")]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "specplan.library/v1", "kind": "profile"}')
    assert main(["library", "import", str(bad)]) == 2
    assert "field 'name'" in capsys.readouterr().err


def test_unreadable_database_exits_2(tmp_path, monkeypatch, capsys):
    path = tmp_path / "lib.db"
    path.write_bytes(b"garbage" * 100)
    monkeypatch.setenv("SPECPLAN_DB_URL", f"sqlite:///{path}")
    assert main(["library", "list"]) == 2
    assert "not a readable SQLite database" in capsys.readouterr().err


def test_predict_with_a_kept_profile_matches_the_file(db, tmp_path):
    lib = open_library(db)
    from library.kinds import save_profile

    save_profile(lib, "cpu run", profile_bytes("AMD EPYC"))
    scenarios = tmp_path / "s.csv"
    scenarios.write_text(
        "target,method,draft,gpu,k,acceptance_rate,batch_size,prompt_len,output_len\n"
        "llama-3.2-1b,none,,cpu,0,,1,128,64\n"
    )
    file_profile = tmp_path / "p.json"
    file_profile.write_bytes(profile_bytes("AMD EPYC"))
    outs = []
    for flag in (str(file_profile), "library:cpu run"):
        out = tmp_path / f"out{len(outs)}.csv"
        args = ["predict", "--in", str(scenarios), "--out", str(out), "--profile", flag]
        assert main([*args, "--profile-gpu", "cpu"]) == 0
        outs.append(pd.read_csv(out))
    assert outs[0]["baseline_tpot_ms"].tolist() == outs[1]["baseline_tpot_ms"].tolist()
    # Measured by the kept profile, not the roofline.
    assert outs[1]["latency_source"].iloc[0] == "target:interpolated"
    assert (
        main(
            [
                "predict",
                "--in",
                str(scenarios),
                "--out",
                str(tmp_path / "x.csv"),
                "--profile",
                "library:absent",
            ]
        )
        == 2
    )


def test_profiler_run_save_keeps_the_profile(db, tmp_path, capsys):
    from profiler import cli

    out = tmp_path / "tiny.json"
    argv = ["run", "--target", "tiny", "--device", "cpu", "--batch", "1,2", "--k", "1"]
    argv += ["--context", "16", "--out", str(out), "--save", "tiny on cpu"]
    argv += ["--repeats", "3", "--warmup", "1", "--min-time", "0", "--threads", "1", "--quiet"]
    assert cli.main(argv) == 0
    assert "kept in the library as profile 'tiny on cpu'" in capsys.readouterr().err
    lib = open_library(db)
    assert lib.content("profile", "tiny on cpu") == out.read_bytes()
    assert lib.get("profile", "tiny on cpu").model == "tiny"


def test_validate_save_keeps_the_figures_over_time(db, tmp_path, capsys):
    from library.kinds import save_validation
    from tests.library.test_store import ROOT

    published = str(ROOT / "data" / "validation" / "published.csv")
    out = str(tmp_path / "errors.csv")
    lib = open_library(db)
    # An earlier run, by an older model, that was worse.
    save_validation(lib, "last month", pd.DataFrame({"case_id": ["a"]}), {"median_abs_error": 0.5})
    assert main(["validate", "--published", published, "--out", out, "--save", "today"]) == 0
    assert "kept as validation run 'today'" in capsys.readouterr().err
    runs = lib.figures("median_abs_error")
    assert [r[0] for r in runs] == ["last month", "today"]
    errors = pd.read_csv(out)
    ok = errors[errors["predicted_speedup"].notna()]
    assert runs[1][3] == pytest.approx(ok["abs_error"].median())
    assert lib.content("validation", "today") == errors.to_csv(index=False).encode()
    assert any(r[2].startswith("median_abs_error/") for r in lib.figures())
    assert main(["library", "history", "--metric", "median_abs_error"]) == 0
    shown = capsys.readouterr().out
    assert shown.index("last month") < shown.index("today") and "0.5" in shown
