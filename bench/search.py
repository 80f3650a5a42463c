"""The deployment search's speed: a 500-configuration search end to end on a local Ray,
with 1 worker and then 2, in one run.

Prints, per worker count, the seconds to start Ray, the seconds of the search itself
(stage one, the plan, every confirming simulation), the arms bisected, and last the ratio
of the 1-worker search time to the 2-worker one. Both runs must give the same table (the
search is deterministic for a seed), which the script checks. On a shared machine the
ratio moves with what else runs: the load average before and after each run is printed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simulator.search import parse_spec, run_search
from simulator.search.runners import RayRunner

SPEC = {
    "models": ["llama-3.1-70b"],
    "traffic": {
        "rate": 20,
        "prompt": {"mean": 1024, "kind": "lognormal", "spread": 0.6},
        "output": {"mean": 256, "kind": "lognormal", "spread": 0.6},
    },
    "slo": {"p99_tpot_ms": 50, "p99_ttft_ms": 2000},
    "candidates": {
        "gpus": ["h100-sxm", "h200", "b200"],
        "tp": [2, 4, 8],
        "methods": [
            "none",
            {"method": "eagle3", "acceptance_rate": 0.797},
            {"method": "draft_model", "draft": "llama-3.2-1b", "acceptance_rate": 0.7},
        ],
        "k": [2, 4, "per batch"],
        "max_num_seqs": [128, 256],
        "weight_dtypes": ["bf16", "fp8"],
        "kv_dtypes": ["bf16", "fp8"],
    },
    "simulation": {"requests": 300, "seed": 0},
}
"""3 GPUs x 3 TP x 2 batch caps x 2 weight x 2 KV dtypes x 7 (none; EAGLE-3 and a draft
model at K 2, 4 and per batch): 504 configurations."""


def _search(workers: int, spec, max_configs: int | None):
    t0 = time.perf_counter()
    runner = RayRunner(num_cpus=workers)
    started = time.perf_counter() - t0
    load = os.getloadavg()[0]
    try:
        result = run_search(spec, runner=runner, max_configs=max_configs)
    finally:
        runner.close()
    print(
        f"{workers} worker(s): Ray started in {started:.1f} s; search {result.seconds:.1f} s "
        f"for {result.arms_run} arms of {len(result.table)} confirmed configurations; "
        f"load average {load:.2f} before, {os.getloadavg()[0]:.2f} after",
        flush=True,
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=SPEC["simulation"]["requests"])
    parser.add_argument("--max-configs", type=int, default=None)
    args = parser.parse_args()
    spec = parse_spec({**SPEC, "simulation": {**SPEC["simulation"], "requests": args.requests}})
    print(f"{os.cpu_count()} CPUs; {args.requests} requests per probe", flush=True)
    one = _search(1, spec, args.max_configs)
    two = _search(2, spec, args.max_configs)
    same = one.table.equals(two.table)
    print(f"same table on 1 and 2 workers: {same}")
    print(f"ratio 1 worker / 2 workers: {one.seconds / two.seconds:.2f}x")


if __name__ == "__main__":
    main()
