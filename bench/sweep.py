"""Vectorised prediction against the same maths row by row, on one machine in one run.

Prints scenarios per second for each path and, last, their ratio as `ratio: N x`.
The per-row path calls the same `predict` on one-row tables: the one code path, with
its per-call overhead paid per scenario, which is what a Python loop over scenarios costs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simulator import predict


def scenarios(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    targets = np.array(
        ["llama-3.1-8b", "llama-3.3-70b", "qwen2.5-32b", "llama-4-scout", "deepseek-v3"]
    )
    methods = np.array(["none", "draft_model", "eagle", "medusa", "mtp", "ngram"])
    gpus = np.array(["h100-sxm", "h200", "a100-80gb", "mi300x", "b200"])
    method = methods[rng.integers(0, len(methods), n)]
    k = np.where(method == "none", 0, rng.integers(1, 9, n))
    return pd.DataFrame(
        {
            "target": targets[rng.integers(0, len(targets), n)],
            "method": method,
            "draft": np.where(method == "draft_model", "llama-3.2-1b", ""),
            "gpu": gpus[rng.integers(0, len(gpus), n)],
            "num_gpus": rng.choice([1, 2, 4, 8], n),
            "k": k,
            "acceptance_rate": np.where(method == "none", np.nan, rng.uniform(0.3, 0.95, n)),
            "batch_size": rng.choice([1, 2, 4, 8, 16, 32, 64, 128, 256], n),
            "prompt_len": rng.integers(128, 8192, n),
            "output_len": rng.integers(64, 2048, n),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--loop-sample", type=int, default=300)
    args = parser.parse_args()
    table = scenarios(args.n)
    predict(table.head(1000))  # warm caches (catalog load, imports)
    t0 = time.perf_counter()
    vec = predict(table)
    vec_s = time.perf_counter() - t0
    sample = table.head(args.loop_sample)
    t0 = time.perf_counter()
    rows = [predict(sample.iloc[[i]]) for i in range(len(sample))]
    loop_s = time.perf_counter() - t0
    looped = pd.concat(rows, ignore_index=True)
    same = np.allclose(looped["speedup"], vec["speedup"].head(len(sample)))
    vec_rate = len(table) / vec_s
    loop_rate = len(sample) / loop_s
    print(f"vectorised: {len(table):,} scenarios in {vec_s:.3f} s = {vec_rate:,.0f} scenarios/s")
    print(
        f"per-row loop: {len(sample):,} scenarios in {loop_s:.3f} s = {loop_rate:,.0f} scenarios/s"
    )
    print(f"same answers on the sample: {same}")
    print(f"ratio: {vec_rate / loop_rate:,.0f} x")


if __name__ == "__main__":
    main()
