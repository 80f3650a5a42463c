"""Does a step's time grow with cache slots it does not use? One run, ratios only.

    python bench/attention_slots.py [--device cpu|cuda] [--dtype bf16]

The same decode and verify steps (context 700) on a cache of 1,024 slots and one of
16,384: through the valid-context path (`context_len`, what the profiler times) and the
per-sequence masked path (sequences of different lengths, 690-700, as
`profiler.groundtruth` has them after rollbacks). Prints the median step of each and the
16k / 1k ratio. Both read only what they need on a CPU (the masked path up to the longest
sequence); on a GPU the masked path reads every slot (no host sync), so its ratio there
grows with the slots.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from profiler.model import ArchConfig, DecoderLM, KVCache

CFG = ArchConfig(
    vocab_size=1024,
    hidden_size=256,
    num_layers=4,
    num_heads=8,
    num_kv_heads=2,
    head_dim=32,
    intermediate_size=768,
)
CONTEXT, BATCH = 700, 8
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def _median_ms(fn, device: torch.device, repeats: int = 30) -> float:
    for _ in range(3):
        fn()
    samples = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        samples.append((time.perf_counter() - t0) * 1e3)
    return sorted(samples)[len(samples) // 2]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    args = p.parse_args(argv)
    device, dtype = torch.device(args.device), DTYPES[args.dtype]
    torch.manual_seed(0)
    model = DecoderLM(CFG, device=device, dtype=dtype).eval()
    print(f"{'path':<14}{'q':>3}{'1k slots ms':>13}{'16k slots ms':>14}{'16k / 1k':>10}")
    with torch.inference_mode():
        for q in (1, 4):
            ids = torch.randint(0, CFG.vocab_size, (BATCH, q), device=device)
            caches = [KVCache(CFG, BATCH, n, device=device, dtype=dtype) for n in (1024, 16384)]
            for path in ("valid context", "masked"):

                def step(cache, path=path, ids=ids):
                    if path == "valid context":
                        return model(ids, cache, context_len=CONTEXT)
                    cache.lengths.copy_(CONTEXT - torch.arange(BATCH, device=device) % 11)
                    return model(ids, cache)

                small, big = (_median_ms(lambda c=c: step(c), device) for c in caches)
                print(f"{path:<14}{q:>3}{small:>13.3f}{big:>14.3f}{big / small:>10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
