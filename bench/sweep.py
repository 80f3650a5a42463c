"""Vectorised prediction against the same maths row by row, on one machine in one run.

Prints scenarios per second for each path (every column; without the break-even
acceptance, the one column a sweep seldom needs; and the rows in catalog order, where
rows sharing target and method are priced with the model's figures as scalars), then a
table whose every row the kernel tables price (dense targets on H100, H200 and B200 under
vLLM, SGLang and TRT-LLM) with the same table on the roofline (`kernels=False`) and their
ratio, then MoE and MLA rows in three layouts priced from aiconfigurator-core's engine
(and one such row alone, warm), and, last, the vectorised rate's ratio to the loop as `ratio: N x`. The per-row path calls the same `predict` on
one-row tables: the one code path, with its per-call overhead paid per scenario, which is
what a Python loop over scenarios costs. It is also the reference the vectorised answers
are checked against, column by column (`same answers on the sample`).
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


def kernel_table_scenarios(n: int, seed: int = 0) -> pd.DataFrame:
    """`scenarios(n)` moved onto models, GPUs and engines the kernel tables cover, so that
    every row is priced from them (its `latency_source` starts with "kernels:")."""
    rng = np.random.default_rng(seed + 1)
    table = scenarios(n, seed)
    pick = {
        "target": ["llama-3.1-8b", "llama-3.3-70b", "qwen2.5-32b"],
        "gpu": ["h100-sxm", "h200", "b200"],
        "engine": ["vllm", "sglang", "trtllm"],
    }
    for column, values in pick.items():
        table[column] = np.array(values)[rng.integers(0, len(values), n)]
    return table


MOE_LAYOUTS = ((8, 1, 8, 1), (8, 1, 1, 8), (1, 8, 1, 8))
"""(tp_size, attention_dp_size, moe_tp_size, moe_ep_size) of the MoE rows: TP8, TP8 EP8 and
TP1 DP8 EP8 on one node of 8 GPUs."""


def moe_table_scenarios(n: int, seed: int = 0) -> pd.DataFrame:
    """`scenarios(n)` moved onto MoE and MLA targets that aiconfigurator-core's engine
    builds, on H200 and B200 under vLLM, SGLang and TRT-LLM, in the `MOE_LAYOUTS`."""
    from simulator.inputs.catalog import default_models

    rng = np.random.default_rng(seed + 2)
    table = scenarios(n, seed)
    moe = [k for k, m in default_models().items() if (m.is_moe or m.is_mla) and m.aic_model]
    targets = [t for t in ("deepseek-v3", "qwen3-235b-a22b", "gpt-oss-120b") if t in moe] or moe
    table["target"] = np.array(targets)[rng.integers(0, len(targets), n)]
    table["gpu"] = np.array(["h200", "b200"])[rng.integers(0, 2, n)]
    table["engine"] = np.array(["vllm", "sglang", "trtllm"])[rng.integers(0, 3, n)]
    layout = np.array(MOE_LAYOUTS)[rng.integers(0, len(MOE_LAYOUTS), n)]
    for i, c in enumerate(("tp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")):
        table[c] = layout[:, i]
    table["num_gpus"] = 8
    table["kv_dtype"] = "fp8"
    table.loc[table["method"] == "draft_model", ["method", "draft"]] = ["eagle3", ""]
    return table


def same_answers(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """Every column equal: numbers to 1e-12 relative (NaN equal to NaN), text exactly."""
    if list(a.columns) != list(b.columns) or len(a) != len(b):
        return False
    for c in a.columns:
        x, y = a[c], b[c]
        if x.dtype.kind in "fiub":
            if not np.allclose(x.to_numpy(float), y.to_numpy(float), rtol=1e-12, equal_nan=True):
                return False
        elif not (x.astype(str).to_numpy() == y.astype(str).to_numpy()).all():
            return False
    return True


def _rate(table: pd.DataFrame, repeats: int, **kwargs) -> tuple[float, pd.DataFrame]:
    """Best scenarios per second of `repeats` runs (the machine is shared)."""
    best, out = np.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = predict(table, **kwargs)
        best = min(best, time.perf_counter() - t0)
    return len(table) / best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--loop-sample", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    table = scenarios(args.n)
    predict(table.head(1000))  # warm caches (catalog load, imports)
    vec_rate, vec = _rate(table, args.repeats)
    lean_rate, _ = _rate(table, args.repeats, break_even=False)
    ordered = table.sort_values(["target", "method", "gpu"], kind="stable")
    sorted_rate, _ = _rate(ordered, args.repeats)
    kernel_table = kernel_table_scenarios(args.n)
    predict(kernel_table)  # builds every surface once (the cached first build)
    kernel_rate, on_kernels = _rate(kernel_table, args.repeats)
    roof_rate, _ = _rate(kernel_table, args.repeats, kernels=False)
    share = on_kernels["latency_source"].astype(str).str.startswith("kernels:").mean()
    moe_table = moe_table_scenarios(args.n)
    predict(moe_table)  # builds every MoE surface once (or reads it from the disk cache)
    moe_rate, on_moe = _rate(moe_table, args.repeats)
    moe_share = on_moe["latency_source"].astype(str).str.startswith("kernels:").mean()
    one = moe_table.head(1)
    t0 = time.perf_counter()
    for _ in range(50):
        predict(one)
    one_ms = (time.perf_counter() - t0) / 50 * 1e3
    sample = table.head(args.loop_sample)
    t0 = time.perf_counter()
    rows = [predict(sample.iloc[[i]]) for i in range(len(sample))]
    loop_s = time.perf_counter() - t0
    looped = pd.concat(rows, ignore_index=True)
    same = same_answers(looped, vec.head(len(sample)))
    loop_rate = len(sample) / loop_s
    print(f"vectorised, every column: {len(table):,} scenarios = {vec_rate:,.0f} scenarios/s")
    print(f"vectorised, break_even=False: {lean_rate:,.0f} scenarios/s")
    print(f"vectorised, rows in catalog order: {sorted_rate:,.0f} scenarios/s")
    print(
        f"vectorised, kernel-table rows ({share:.0%} on kernels): {kernel_rate:,.0f} "
        f"scenarios/s; the same rows on the roofline: {roof_rate:,.0f} scenarios/s "
        f"(kernels/roofline {kernel_rate / roof_rate:.2f})"
    )
    print(
        f"vectorised, MoE rows ({moe_share:.0%} on kernels, {len(MOE_LAYOUTS)} layouts): "
        f"{moe_rate:,.0f} scenarios/s; one MoE row warm: {one_ms:.1f} ms per call"
    )
    print(
        f"per-row loop: {len(sample):,} scenarios in {loop_s:.3f} s = {loop_rate:,.0f} "
        f"scenarios/s ({1e3 / loop_rate:.1f} ms per call)"
    )
    print(f"same answers on the sample (every column, rtol 1e-12): {same}")
    print(f"ratio: {vec_rate / loop_rate:,.0f} x")


if __name__ == "__main__":
    main()
