"""The request-level simulation's speed: 10,000 requests through the engine, baseline and
one K, at a few loads, on this machine in one run.

Prints, per load, the seconds each arm took (pricing the step table included), the
engine steps simulated, and requests simulated per second.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simulator.serving import Lengths, Load, run, step_model

SCENARIO = dict(
    target="llama-3.1-8b", gpu="h100-sxm", method="eagle3", k=3, mean_accepted_tokens=2.8
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=10_000)
    args = parser.parse_args()
    prompt, output = Lengths(512, "lognormal", 0.5), Lengths(256, "lognormal", 0.5)
    for arm, spec in (("baseline", False), ("spec K=3", True)):
        t0 = time.perf_counter()
        model = step_model({**SCENARIO, "prompt_len": 512, "output_len": 256}, speculative=spec)
        priced = time.perf_counter() - t0
        print(f"{arm}: step table priced in {priced:.2f} s")
        for load in (
            Load(args.requests, rate=2.0),
            Load(args.requests, rate=16.0),
            Load(args.requests, concurrency=64),
        ):
            t0 = time.perf_counter()
            result = run(model, load, prompt, output, acceptance_spread=0.1)
            took = time.perf_counter() - t0
            what = f"rate {load.rate}/s" if load.rate else f"concurrency {load.concurrency}"
            print(
                f"  {what:>16}: {took:6.2f} s, {result.steps:>8} steps, "
                f"{args.requests / took:>9,.0f} requests/s of simulation"
            )


if __name__ == "__main__":
    main()
