"""Fuzz the scenario table (`python -m simulator predict --in` from CSV and from Parquet,
and `predict` on a frame as the dashboard's editor passes it), the sweep flags (`python -m simulator sweep`) and the
serve flags (`python -m simulator serve`).

These parsers live in simulator/inputs/scenarios.py, simulator/inputs/sweep.py, simulator/serving/engine.py and
simulator/cli/;
a failure here names the input, and the assertion says what was wrong with the result.
"""

from __future__ import annotations

import contextlib
import datetime
import decimal
import functools
import io
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from simulator.cli.main import main
from simulator.inputs.scenarios import INPUT_COLUMNS
from simulator.model.predict import OUTPUT_COLUMNS, predict
from tests.fuzz.harness import FUZZ, NASTY_NUMBERS, check_predictions, nasty_text, run_case, warm

TMP = Path(tempfile.mkdtemp(prefix="specplan-fuzz-scenarios-"))
BASE = [
    [
        "target",
        "method",
        "draft",
        "gpu",
        "num_gpus",
        "k",
        "acceptance_rate",
        "batch_size",
        "prompt_len",
        "output_len",
    ],
    [
        "llama-3.3-70b",
        "draft_model",
        "llama-3.2-1b",
        "h100-sxm",
        "4",
        "5",
        "0.7",
        "8",
        "1024",
        "256",
    ],
    ["llama-3.1-8b", "eagle", "", "h100-sxm", "1", "3", "0.75", "1", "512", "128"],
    ["llama-3.1-8b", "none", "", "l4", "1", "", "", "4", "256", "64"],
    ["llama-3.1-8b", "ngram", "", "a100-80gb", "2", "4", "0.6", "16", "2048", "512"],
]
EXTRA_COLUMNS = [
    "acceptance_per_position",
    "verify_tokens",
    "gpu_hourly_usd",
    "kv_dtype",
    "weight_dtype",
]


ODD_CELLS = [
    True,
    np.bool_(False),
    [1, 2],
    (3,),
    {"k": 3},
    b"3",
    b"\xff",
    datetime.date(2026, 1, 1),
    datetime.timedelta(seconds=3),
    pd.Timestamp("2026-01-01"),
    np.datetime64("2026-01-01"),
    decimal.Decimal("4"),
    decimal.Decimal("NaN"),
    complex(1, 2),
    np.array([3.0]),
    pd.NA,
    pd.NaT,
]
"""Cells that are neither text nor a plain number, as a DataFrame or a Parquet file holds
them."""


class CliRefused(Exception):
    """Exit status 2 with an error line."""


def _cli(argv: list[str]) -> pd.DataFrame:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = main(argv)
        except SystemExit as exc:  # argparse refuses a flag
            rc = exc.code
    if rc == 2:
        raise CliRefused(err.getvalue().strip())
    assert rc == 0, f"exit status {rc}: {err.getvalue()[-300:]}"
    return pd.read_csv(argv[argv.index("--out") + 1])


def _named(exc: BaseException) -> None:
    text = str(exc)
    names = ("field '", "argument --", "row ", "--", ".csv")
    assert "error" in text and any(n in text for n in names), text


def _csv(rows) -> str:
    import csv

    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue()


def _predict_cli(text: str):
    src, out = TMP / "in.csv", TMP / "out.csv"
    src.write_text(text, encoding="utf-8", errors="surrogatepass")
    return _cli(["predict", "--in", str(src), "--out", str(out)])


warm(lambda: _predict_cli(_csv(BASE)))


@FUZZ
@given(
    kind=st.sampled_from(
        ["cell", "cell", "cell", "new_column", "header_space", "header_typo", "extra_value"]
    ),
    row=st.integers(0, 100),
    col=st.integers(0, 100),
    text=nasty_text(),
    extra=st.sampled_from(EXTRA_COLUMNS),
)
def test_scenario_csv(kind, row, col, text, extra):
    rows = [list(r) for r in BASE]
    i, j = 1 + row % (len(rows) - 1), col % len(rows[0])
    if kind == "cell":
        rows[i][j] = text
    elif kind == "new_column":
        rows[0].append(extra)
        for r in rows[1:]:
            r.append("")
        rows[i][-1] = text
    elif kind == "header_space":
        rows[0].append(" " + rows[0][j])
        for r in rows[1:]:
            r.append(r[j])
    elif kind == "header_typo":
        rows[0][j] = rows[0][j][:-1] + "x"
    else:
        rows[i].append(text)
    body = _csv(rows)
    run_case(
        "scenario_csv",
        lambda: _predict_cli(body),
        check_predictions,
        refusals=(CliRefused,),
        refusal_check=_named,
    )


@FUZZ
@given(
    row=st.integers(0, 100),
    column=st.sampled_from([*BASE[0], *EXTRA_COLUMNS]),
    value=st.sampled_from(NASTY_NUMBERS)
    | st.sampled_from(["", "abc", "0.9;nan", "nan", None])
    | st.sampled_from(ODD_CELLS),
)
def test_scenario_frame(row, column, value):
    """A table as the dashboard's data editor hands it over: typed cells, 1e19 typed in."""
    frame = pd.DataFrame([dict(zip(BASE[0], r, strict=True)) for r in BASE[1:]])
    for c in ("num_gpus", "batch_size", "prompt_len", "output_len"):
        frame[c] = frame[c].astype(int)
    frame["k"] = pd.to_numeric(frame["k"])
    frame["acceptance_rate"] = pd.to_numeric(frame["acceptance_rate"])
    frame = frame.astype(object)
    cells = list(frame[column]) if column in frame else [None] * len(frame)
    cells[row % len(frame)] = value
    frame[column] = pd.Series(cells, index=frame.index, dtype=object)
    run_case("scenario_frame", lambda: predict(frame, source="editor"), check_predictions)


def _arrow_column(kind: str, values: list[str], row: int, text: str):
    """One column of BASE as Parquet may type it; `text` goes into row `row` where the
    type holds text."""
    import pyarrow as pa

    cells = list(values)
    cells[row % len(cells)] = text
    numbers = pd.to_numeric(pd.Series(values), errors="coerce")
    if kind == "text":
        return pa.array(cells, pa.string())
    if kind == "large_text":
        return pa.array(cells, pa.large_string())
    if kind == "dictionary":
        return pa.array(cells, pa.string()).dictionary_encode()
    if kind == "binary":
        return pa.array([c.encode("utf-8", "surrogatepass") for c in cells], pa.binary())
    if kind == "float64":
        return pa.array(numbers, pa.float64(), from_pandas=True)
    if kind == "float16":
        return pa.array(numbers.to_numpy(np.float16), pa.float16())
    if kind == "int8":
        return pa.array(numbers.fillna(0).to_numpy().astype(np.int8))
    if kind == "uint64_max":
        return pa.array([2**64 - 1] * len(values), pa.uint64())
    if kind == "decimal":
        return pa.array([decimal.Decimal(str(x)) for x in numbers.fillna(0)], pa.decimal128(38, 9))
    if kind == "bool":
        return pa.array([bool(i % 2) for i in range(len(values))])
    if kind == "null":
        return pa.nulls(len(values))
    if kind == "list":
        return pa.array([[1, 2]] * len(values))
    if kind == "struct":
        return pa.array([{"a": 1}] * len(values))
    if kind == "map":
        return pa.array([[("a", 1)]] * len(values), pa.map_(pa.string(), pa.int64()))
    if kind == "timestamp":
        return pa.array([datetime.datetime(2026, 1, 1)] * len(values))
    if kind == "date":
        return pa.array([datetime.date(2026, 1, 1)] * len(values))
    if kind == "duration":
        return pa.array([datetime.timedelta(seconds=3)] * len(values))
    raise ValueError(kind)


ARROW_KINDS = [
    "text",
    "large_text",
    "dictionary",
    "binary",
    "float64",
    "float16",
    "int8",
    "uint64_max",
    "decimal",
    "bool",
    "null",
    "list",
    "struct",
    "map",
    "timestamp",
    "date",
    "duration",
]


@FUZZ
@given(
    column=st.sampled_from([*BASE[0], *EXTRA_COLUMNS]),
    kind=st.sampled_from(ARROW_KINDS),
    row=st.integers(0, 100),
    text=nasty_text(),
)
def test_scenario_parquet(column, kind, row, text):
    """A Parquet scenario table with one column of any type Parquet can hold."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = list(BASE[0])
    columns = [pa.array([r[j] for r in BASE[1:]], pa.string()) for j in range(len(names))]
    values = [r[names.index(column)] if column in names else "" for r in BASE[1:]]
    replaced = _arrow_column(kind, values, row, text)
    if column in names:
        columns[names.index(column)] = replaced
    else:
        names.append(column)
        columns.append(replaced)
    src, out = TMP / "in.parquet", TMP / "out.csv"
    pq.write_table(pa.Table.from_arrays(columns, names=names), src)
    run_case(
        "scenario_parquet",
        lambda: _cli(["predict", "--in", str(src), "--out", str(out)]),
        check_predictions,
        refusals=(CliRefused,),
        refusal_check=_named,
    )


SWEEP_BASE = {"--k": "2", "--alpha": "0.7", "--batch": "4"}
SWEEP_FLAGS = ["--k", "--alpha", "--batch", "--num-gpus", "--prompt-len", "--output-len"]
FLAG_VALUES = nasty_text() | st.sampled_from(
    [
        "1-8",
        "1.5",
        "2,4,6",
        "1-1000000000",
        "0.5:0.9:0.1",
        "0:1:0",
        "1-0",
        "1e400",
        "nan",
        "inf",
        "--k",
        "-1",
        "2,2",
    ]
)


def _sweep(flag: str, value: str) -> pd.DataFrame:
    argv = ["sweep", "--target", "llama-3.1-8b", "--gpu", "h100-sxm", "--method", "ngram"]
    for f, v in {**SWEEP_BASE, flag: value}.items():
        argv.append(f"{f}={v}")
    out = _cli([*argv, "--out", str(TMP / "sweep.csv")])
    check_predictions(out)
    if flag == "--k" and "," in value:
        asked = sorted({float(x) for x in value.split(",") if x.strip()})
        got = sorted(set(out["k"].astype(float)))
        assert got == asked, f"--k {value!r} ran K {got}"
    return out


warm(lambda: _sweep("--k", "2"))


@FUZZ
@given(flag=st.sampled_from(SWEEP_FLAGS), value=FLAG_VALUES)
def test_sweep_flags(flag, value):
    from simulator.inputs.sweep import grid_size, parse_range

    if flag in ("--k", "--alpha", "--batch"):
        # A valid grid of many points is a long run, not a hang: only its parsing is timed.
        try:
            n = len(parse_range(value, name=flag, most=10_001))
        except Exception:
            n = 0
        if n > 10_000:
            run_case("sweep_flags", lambda: grid_size(x=parse_range(value, name=flag, most=None)))
            return
    run_case(
        "sweep_flags",
        lambda: _sweep(flag, value),
        refusals=(CliRefused,),
        refusal_check=_named,
    )


KNOWN_COLUMNS = st.sampled_from(sorted(set(INPUT_COLUMNS) | set(OUTPUT_COLUMNS)))
COLUMN_NAMES = KNOWN_COLUMNS | nasty_text() | st.sampled_from(["Speedup", "spedup", " k "])
COLUMNS_VALUES = (
    st.lists(KNOWN_COLUMNS, min_size=1, max_size=8, unique=True).map(",".join)
    | st.lists(KNOWN_COLUMNS, min_size=1, max_size=4, unique=True).map(" , ".join)
    | st.lists(COLUMN_NAMES, min_size=0, max_size=6).map(",".join)
    | st.lists(KNOWN_COLUMNS, min_size=1, max_size=3).map(lambda names: ",".join(names) + ",")
)


@functools.cache
def _whole_sweep() -> pd.DataFrame:
    """The sweep `_sweep_columns` picks from, every column, run once."""
    return _sweep("--k", SWEEP_BASE["--k"])


def _sweep_columns(value: str) -> pd.DataFrame:
    argv = ["sweep", "--target", "llama-3.1-8b", "--gpu", "h100-sxm", "--method", "ngram"]
    argv += [f"{f}={v}" for f, v in {**SWEEP_BASE, "--columns": value}.items()]
    out = _cli([*argv, "--out", str(TMP / "sweep-columns.csv")])
    names = [name.strip() for name in value.split(",")]
    assert list(out.columns) == names, f"--columns {value!r} wrote {list(out.columns)}"
    pd.testing.assert_frame_equal(out, _whole_sweep()[names])
    return out


@FUZZ
@given(value=COLUMNS_VALUES)
def test_sweep_columns(value):
    run_case(
        "columns_flag",
        lambda: _sweep_columns(value),
        refusals=(CliRefused,),
        refusal_check=_named,
    )


SERVE_IN = TMP / "serve.csv"
SERVE_IN.write_text(
    "target,gpu,method,k,mean_accepted_tokens,prompt_len,output_len\n"
    "llama-3.1-8b,h100-sxm,eagle3,3,2.8,256,32\n"
)
SERVE_BASE = {"--rate": "2", "--requests": "30", "--lengths": "lognormal", "--length-spread": "0.3"}
SERVE_FLAGS = [
    "--rate",
    "--concurrency",
    "--requests",
    "--seed",
    "--lengths",
    "--length-spread",
    "--acceptance-spread",
    "--slo-ttft-ms",
    "--slo-tpot-ms",
]
SERVE_RUNS = 20
"""A valid case with more (loads x requests) than this many times the base's is a long run,
not a hang: only its parsing is timed."""


def check_serving(out: pd.DataFrame) -> None:
    """Per row: latencies finite and >= 0 (NaN only where no request finished), rates
    finite and >= 0, goodput within throughput, attainment a share, refusals a count."""
    assert len(out) and set(out["arm"]) <= {"baseline", "spec"}, out
    for c in out.columns:
        if c.endswith("_ms") or c.endswith("_s") or c.endswith("_rps"):
            v = out[c].to_numpy(float)
            assert not np.isinf(v).any() and (v[~np.isnan(v)] >= 0).all(), (c, v)
    ok = out["refused"] < out["requests"]
    assert out.loc[ok, ["tpot_p99_ms", "ttft_p99_ms", "throughput_tok_s"]].notna().all().all()
    assert (out["goodput_rps"].fillna(0) <= out["request_throughput_rps"].fillna(0) + 1e-9).all()
    assert out["slo_attainment"].between(0, 1).all()
    assert out["refused"].between(0, out["requests"]).all()


def _serve(flag: str, value: str) -> pd.DataFrame:
    flags = {**SERVE_BASE, flag: value}
    if flag == "--concurrency":
        del flags["--rate"]
    if flag == "--lengths" and value != "lognormal":
        del flags["--length-spread"]
    argv = ["serve", "--in", str(SERVE_IN), "--out", str(TMP / "serve-out.csv")]
    out = _cli([*argv, *(f"{f}={v}" for f, v in flags.items())])
    check_serving(out)
    return out


def _serve_size(flag: str, value: str) -> int:
    """(loads x requests) of a valid case, 0 when the value is not valid."""
    from simulator.inputs.sweep import parse_range

    try:
        if flag in ("--rate", "--concurrency"):
            kind = float if flag == "--rate" else int
            return len(parse_range(value, name=flag, kind=kind, most=200)) * 30
        if flag == "--requests":
            return int(value)
    except Exception:
        return 0
    return 30


warm(lambda: _serve("--rate", "1"))


@FUZZ
@given(flag=st.sampled_from(SERVE_FLAGS), value=FLAG_VALUES)
def test_serve_flags(flag, value):
    from simulator.inputs.sweep import parse_range
    from simulator.serving.engine import Load

    if _serve_size(flag, value) > SERVE_RUNS * 30:
        # A long valid run: only what decides to run it is timed (the count against its
        # limit, the loads parsed).
        if flag == "--requests":
            run_case("serve_flags", lambda: Load(requests=int(value), rate=1.0))
        else:
            kind = float if flag == "--rate" else int
            run_case("serve_flags", lambda: parse_range(value, name=flag, kind=kind, most=200))
        return
    run_case(
        "serve_flags",
        lambda: _serve(flag, value),
        refusals=(CliRefused,),
        refusal_check=_named,
    )


BLOCK_ROWS_POOL = [
    *BASE[1:],
    ["llama-3.1-8b", "none", "", "h100-sxm", "1", "", "", "1", "1024", "256"],
    ["llama-3.1-8b", "eagle", "", "h100-sxm", "1", "2", "1", "8", "1024", "256"],
    ["llama-3.1-8b", "eagle", "", "h100-sxm", "1", "4", "0", "8", "1024", "256"],
    ["llama-3.3-70b", "medusa", "", "h200", "4", "3", "0.5", "64", "4096", "512"],
    ["deepseek-v3", "mtp", "", "h200", "8", "1", "0.85", "32", "2048", "1024"],
    ["llama-3.1-8b", "eagle", "", "l4", "1", "8", "0.9", "256", "8192", "4096"],
    ["llama-3.3-70b", "draft_model", "llama-3.2-1b", "a100-80gb", "1", "5", "0.7", "8", "", ""],
]
"""Scenario rows that differ in what their outputs look like: no speculation (tau 1, whole
numbers), acceptance 0 and 1, rows that do not fit, blank cells left to defaults."""


def _frame_text(frame: pd.DataFrame) -> dict:
    """Each column as floats (NaN for blanks) or as text ('' for blanks)."""
    out = {}
    for c in frame.columns:
        col = frame[c]
        if pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col):
            out[c] = col.to_numpy(dtype=float)
        else:
            out[c] = col.astype(object).where(col.notna(), "").astype(str).to_numpy()
    return out


def _same_as_one_call(got: pd.DataFrame, expected: pd.DataFrame) -> None:
    assert list(got.columns) == list(expected.columns)
    assert len(got) == len(expected)
    a, b = _frame_text(got), _frame_text(expected)
    for c in a:
        if a[c].dtype == float and b[c].dtype == float:
            assert np.allclose(a[c], b[c], rtol=1e-12, atol=0, equal_nan=True), c
        else:  # a text column whose cells are all blank reads back from CSV as floats
            assert list(map(_text, a[c])) == list(map(_text, b[c])), c


def _text(cell) -> str:
    return "" if isinstance(cell, float) and np.isnan(cell) else str(cell)


@FUZZ
@given(
    picks=st.lists(st.integers(0, len(BLOCK_ROWS_POOL) - 1), min_size=1, max_size=14),
    block=st.integers(1, 6),
    piece=st.integers(1, 4),
    source=st.sampled_from(["csv", "parquet"]),
    sink=st.sampled_from(["csv", "parquet", "report"]),
)
def test_scenario_blocks(picks, block, piece, source, sink):
    """`predict --in --out` reads, predicts and writes in blocks (and CSV text in pieces):
    for any block size the file holds what one `predict` call on the whole table gives;
    with `--report`, what the dashboard's report of that call holds."""
    from simulator.cli import common
    from simulator.cli import predict as predict_command
    from simulator.inputs import io as table_io
    from simulator.inputs.catalog import default_models
    from simulator.planning.reports import add_economics, add_preflight, read_report_csv, report_csv

    rows = [BASE[0], *(BLOCK_ROWS_POOL[i] for i in picks)]
    table = pd.read_csv(io.StringIO(_csv(rows)))
    report = sink == "report"
    src, out = TMP / f"blocks.{source}", TMP / f"blocks_out.{'csv' if report else sink}"
    if source == "csv":
        src.write_text(_csv(rows))
    else:
        table.to_parquet(src)
    expected = predict(table)
    if report:
        demand = np.full(len(table), float(predict_command.REQUESTS_PER_DAY))
        expected = read_report_csv(
            report_csv(add_preflight(add_economics(expected, demand), default_models()))
        )

    def case():
        saved = common.WRITE_BLOCK_ROWS, table_io.CSV_ROWS
        common.WRITE_BLOCK_ROWS, table_io.CSV_ROWS = block, piece
        argv = ["predict", "--in", str(src), "--out", str(out), *(["--report"] if report else [])]
        try:
            assert main(argv) == 0
        finally:
            common.WRITE_BLOCK_ROWS, table_io.CSV_ROWS = saved
        if report:
            return read_report_csv(out.read_text())
        return pd.read_csv(out) if sink == "csv" else pd.read_parquet(out)

    run_case(
        "scenario_blocks",
        case,
        lambda got: (check_predictions(got), _same_as_one_call(got, expected)),
    )
