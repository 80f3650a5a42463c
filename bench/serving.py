"""The request-level simulation's speed: 10,000 requests through the engine, baseline and
one K together, at a few loads, on this machine in one run.

Prints, per load, the seconds each arm took (the step tables are priced once, before the
clock starts, and printed apart), the engine steps simulated, the time for both arms
together (the issue's figure: under 2 s) with the CPU seconds it took (the process's own
time, less sensitive to other work on a shared machine), and requests simulated per second.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simulator.serving.engine import Lengths, Load, run, step_model

SCENARIO = dict(
    target="llama-3.1-8b", gpu="h100-sxm", method="eagle3", k=3, mean_accepted_tokens=2.8
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=10_000)
    args = parser.parse_args()
    prompt, output = Lengths(512, "lognormal", 0.5), Lengths(256, "lognormal", 0.5)
    models = {}
    for arm, spec in (("baseline", False), ("spec K=3", True)):
        t0 = time.perf_counter()
        models[arm] = step_model(
            {**SCENARIO, "prompt_len": 512, "output_len": 256}, speculative=spec
        )
        print(f"{arm}: step table priced in {time.perf_counter() - t0:.2f} s")
    worst = 0.0
    for load in (
        Load(args.requests, rate=2.0),
        Load(args.requests, rate=16.0),
        Load(args.requests, rate=40.0),
        Load(args.requests, concurrency=64),
    ):
        what = f"rate {load.rate:g}/s" if load.rate else f"concurrency {load.concurrency}"
        cells, both, cpu = [], 0.0, 0.0
        for arm, model in models.items():
            t0, c0 = time.perf_counter(), time.process_time()
            result = run(model, load, prompt, output, acceptance_spread=0.1)
            took = time.perf_counter() - t0
            both += took
            cpu += time.process_time() - c0
            cells.append(f"{arm} {took:5.2f} s ({result.steps:>7} steps)")
        worst = max(worst, both)
        print(
            f"{what:>16}: {'; '.join(cells)}; both arms {both:5.2f} s ({cpu:.2f} s of CPU), "
            f"{2 * args.requests / both:>8,.0f} requests/s of simulation"
        )
    print(f"slowest load, {args.requests:,} requests, baseline and one K: {worst:.2f} s")


if __name__ == "__main__":
    main()
