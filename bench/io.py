"""The command line on large tables, against pandas reading the same CSV, in one run.

Prints, for a scenario CSV of `--n` rows (bench/sweep.py's table): the time
`pandas.read_csv` takes to read it, in this process (pandas imported already) and as a
command a user runs (`python -c "import pandas; pandas.read_csv(...)"`, start-up and
imports included, as they are in every command below); `python -m simulator predict`
from it to Parquet and to CSV (end to end, as a user runs it, with peak memory), with
every column and with 12 (`--columns`); the floor under those: the command line's writer
writing the same predictions with no prediction at all; a sweep of about `--n` points to
Parquet and to CSV; `python -m simulator --help`; and the CPU time of a one-row `predict`
call. Ratios are to the read_csv times measured in the same run: a predict run against
the in-process read, then against the command that reads the same file. Every figure but
the floor and the one-row call is the fastest of `--repeats` runs.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from sweep import scenarios  # noqa: E402

FEW_COLUMNS = (
    "target,method,draft,gpu,num_gpus,k,acceptance_rate,batch_size,speedup,"
    "spec_tok_s,cost_per_mtok_spec,status"
)
"""The 12 columns the `--columns` runs write."""


def _run(argv: list[str], repeats: int) -> tuple[float, float]:
    """Wall seconds of the fastest of `repeats` runs of a child process (the machines are
    shared, and a neighbour only ever adds time), and that run's peak RSS in MB (NaN
    without /usr/bin/time)."""
    timer = ["/usr/bin/time", "-f", "%M"] if Path("/usr/bin/time").exists() else []
    best = (float("inf"), float("nan"))
    for _ in range(repeats):
        t0 = time.perf_counter()
        done = subprocess.run(
            [*timer, sys.executable, *argv], cwd=ROOT, check=True, capture_output=True, text=True
        )
        wall = time.perf_counter() - t0
        peak = float(done.stderr.strip().splitlines()[-1]) / 1024 if timer else float("nan")
        best = min(best, (wall, peak))
    return best


def _write_floor(predictions: Path) -> dict[str, float]:
    """Seconds the command line's own writer (`simulator.inputs.io.TableWriter`, the settings
    `predict` uses) takes to write the prediction table (read back from `predictions`) as
    Parquet and as CSV, with no prediction at all: what any predict run must pay."""
    import pyarrow.parquet as pq

    from simulator.inputs.io import TableWriter

    frame = pq.read_table(predictions).to_pandas()
    out = {}
    for suffix in ("parquet", "csv"):
        t0 = time.perf_counter()
        writer = TableWriter(str(predictions.with_name(f"floor.{suffix}")), suffix)
        writer.write(frame)
        writer.close()
        out[suffix] = time.perf_counter() - t0
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each; the fastest")
    args = parser.parse_args()
    repeats = max(1, args.repeats)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "scenarios.csv"
        scenarios(args.n).to_csv(src, index=False)
        read_s = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            pd.read_csv(src)
            read_s = min(read_s, time.perf_counter() - t0)
        read_cmd, _ = _run(["-c", f"import pandas; pandas.read_csv({str(src)!r})"], repeats)
        print(f"pandas.read_csv of {args.n:,} rows: {read_s:.2f} s in this process")
        print(f"the same as a command (python -c, imports included): {read_cmd:.2f} s")
        for label, extra in (("", []), (", 12 columns (--columns)", ["--columns", FEW_COLUMNS])):
            for suffix in ("parquet", "csv"):
                out = Path(tmp) / f"predictions{'-few' if extra else ''}.{suffix}"
                argv = ["-m", "simulator", "predict", "--in", str(src), "--out", str(out)]
                wall, peak = _run([*argv, *extra], repeats)
                print(
                    f"predict CSV -> {suffix}{label}: {wall:.2f} s = {wall / read_s:.1f} x "
                    f"read_csv, {wall / read_cmd:.1f} x the read_csv command, "
                    f"peak RSS {peak:,.0f} MB"
                )
        for suffix, write_s in _write_floor(Path(tmp) / "predictions.parquet").items():
            print(
                f"floor, the writer alone writing those predictions as {suffix}: {write_s:.2f} s "
                f"= {write_s / read_s:.1f} x read_csv"
            )
        batches = max(1, args.n // 500)
        for suffix in ("parquet", "csv"):
            out = Path(tmp) / f"sweep.{suffix}"
            sweep = [
                "-m", "simulator", "sweep", "--target", "llama-3.1-8b", "--method", "eagle",
                "--gpu", "h100-sxm", "--k", "1-10", "--alpha", "0.5:0.99:0.01",
                "--batch", f"1-{batches}", "--force", "--out", str(out),
            ]  # fmt: skip
            wall, peak = _run(sweep, repeats)
            rows = 10 * 50 * batches
            print(f"sweep of {rows:,} points -> {suffix}: {wall:.2f} s, peak RSS {peak:,.0f} MB")
    wall, _ = _run(["-m", "simulator", "--help"], repeats)
    print(f"python -m simulator --help: {wall:.2f} s")
    from simulator import predict

    row = pd.DataFrame(
        [dict(target="llama-3.1-8b", gpu="h100-sxm", method="eagle", k=3, acceptance_rate=0.7)]
    )
    predict(row)
    t0 = time.process_time()
    for _ in range(200):
        predict(row)
    print(f"one-row predict: {(time.process_time() - t0) / 200 * 1e3:.1f} ms of CPU")


if __name__ == "__main__":
    main()
