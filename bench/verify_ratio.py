"""Verify / decode step ratio from the kernel tables, beside the published verify timings.

For Llama-3.1-8B (TP1) and Llama-3.1-70B (TP4) on H100 SXM and H200 with vLLM's tables,
bf16: the forward of K+1 query tokens per sequence over the decode forward (1 token), at
K = 3 and 5 and a few batches, context 2048, with the KV read once per sequence for its
K+1 queries (the default) and once per query (aiconfigurator's way). Then the only
verify timings the data sources give:
- SpecPlan's H200 fused-torch measurements (data/step_reference/h200_decode_step_ms.csv,
  query 4 and 6 against query 1 where both were timed). Only batch 1 is an engine-grade
  figure: at batch 64-128 the reference's verify attention moves its bytes at 12-23% of
  the copy rate against 49-89% for its decode steps (`copy_fraction` in
  data/profiles/nvidia-h200/fused-reference.json), a slow kernel, not the verify's cost;
- the batch-1 K sweeps of vLLM PRs #16937 and #16035 (H100, 8B, EAGLE): a round's time
  (tau / tok/s) regressed on K; its K = 0 intercept over the vanilla step is verify plus
  the round's host cost over decode, an upper bound of the verify ratio.
arXiv 2601.11580's fitted H100 step model is not in data/ (not transcribed), so it is not
compared. Then the MoE verify term: DeepSeek-V3 on 8 H200s and 8 B200s (SGLang, fp8,
TP8 and TP8 EP8), from aiconfigurator-core's engine (`simulator.kernels.composite`),
where a verify of K+1 tokens runs the MoE GEMMs at B(K+1) tokens: more tokens reach
more experts, so at small batch the ratio grows with K far faster than a dense model's.
Run: python bench/verify_ratio.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simulator.inputs.catalog import default_models  # noqa: E402
from simulator.kernels.composite import Layout, get_composite  # noqa: E402
from simulator.kernels.source import get_surface, shape_of  # noqa: E402

CASES = (("llama-3.1-8b", 1), ("llama-3.1-70b", 4))
GPUS = ("h100-sxm", "h200")
BATCHES = (1, 4, 16, 64, 128)
KS = (3, 5)
CONTEXT = 2048.0

# vLLM PR #16937 (K, tau, tok/s; vanilla 133 tok/s) and PR #16035 (vanilla 128.64 tok/s),
# as data/validation/published.csv cites them.
SWEEPS = {
    "vLLM #16937 (H100, 8B, EAGLE, B=1)": (
        133.0,
        [(2, 2.1, 201.69), (4, 2.39, 198.0), (7, 2.47, 169.92)],
    ),
    "vLLM #16035 (H100, 8B, EAGLE, B=1)": (128.64, [(2, 1.89, 175.49), (4, 2.08, 165.65)]),
}


def table_ratios() -> pd.DataFrame:
    models = default_models()
    rows = []
    for model, tp in CASES:
        shape = shape_of(models.get(model))
        for gpu in GPUS:
            s = get_surface(shape, gpu, "vllm", "", "bf16", "bf16", tp)
            for b in BATCHES:
                dec = float(s.forward_ms(b, 1.0, CONTEXT))
                row = {"model": model, "tp": tp, "gpu": gpu, "batch": b, "decode_ms": dec}
                for k in KS:
                    q = k + 1.0
                    row[f"K={k} shared"] = float(s.forward_ms(b, q, CONTEXT)) / dec
                    row[f"K={k} separate"] = float(s.forward_ms(b, q, CONTEXT, True)) / dec
                rows.append(row)
    return pd.DataFrame(rows)


MOE_CASES = (
    ("h200", Layout(8, 1, 8, 1)),
    ("h200", Layout(8, 1, 1, 8)),
    ("b200", Layout(8, 1, 1, 8)),
)


def moe_ratios() -> pd.DataFrame:
    """DeepSeek-V3's verify / decode from the engine's surfaces (K = 1, 3, 5)."""
    rows = []
    for gpu, lay in MOE_CASES:
        s = get_composite(
            "deepseek-ai/DeepSeek-V3", 61, 7168, gpu, "sglang", "", "fp8", "fp8", "fp8", lay
        )
        if s is None:
            continue
        for b in BATCHES:
            dec = float(s.forward_ms(b, 1.0, CONTEXT))
            row = {"gpu": gpu, "layout": lay.describe(), "batch": b, "decode_ms": dec}
            for k in (1, 3, 5):
                row[f"K={k}"] = float(s.forward_ms(b, k + 1.0, CONTEXT)) / dec
            rows.append(row)
    return pd.DataFrame(rows)


def measured_ratios() -> pd.DataFrame:
    ref = pd.read_csv(ROOT / "data/step_reference/h200_decode_step_ms.csv")
    ref = ref[ref["series"] == "fused_torch"]
    keys = ["model", "batch", "context_len"]
    one = ref[ref["query_len"] == 1].set_index(keys)["step_ms"]
    rows = []
    for _, r in ref[ref["query_len"] > 1].iterrows():
        key = (r["model"], r["batch"], r["context_len"])
        if key in one.index:
            rows.append(
                {
                    "model": r["model"],
                    "batch": r["batch"],
                    "context": r["context_len"],
                    "K": int(r["query_len"]) - 1,
                    "verify/decode": r["step_ms"] / one[key],
                }
            )
    return pd.DataFrame(rows)


def sweep_intercepts() -> pd.DataFrame:
    rows = []
    for name, (vanilla, points) in SWEEPS.items():
        k = np.array([p[0] for p in points], float)
        rnd = np.array([p[1] / p[2] * 1e3 for p in points])
        slope, icpt = np.polyfit(k, rnd, 1)
        dec = 1e3 / vanilla
        rows.append(
            {
                "source": name,
                "decode_ms": dec,
                "ms_per_extra_step": slope,
                "round_at_K0_ms": icpt,
                "(verify+round host)/decode": icpt / dec,
            }
        )
    return pd.DataFrame(rows)


def main() -> None:
    pd.set_option("display.width", 200)
    print("kernel tables (vLLM, bf16, context 2048): verify / decode")
    print(table_ratios().round(3).to_string(index=False))
    print("\nSpecPlan H200 fused-torch measurements: verify / decode (batch 1 engine-grade only)")
    measured = measured_ratios()
    print(measured.round(3).to_string(index=False) if len(measured) else "(no matching pairs)")
    print("\npublic batch-1 K sweeps: round time against K")
    print(sweep_intercepts().round(3).to_string(index=False))
    print("\nMoE: DeepSeek-V3 (SGLang, fp8, context 2048) verify / decode from the engine")
    print(moe_ratios().round(3).to_string(index=False))


if __name__ == "__main__":
    main()
