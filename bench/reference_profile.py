"""Build a `specplan.profile/v1` file from one series of `data/step_reference/`, so a table
of step times measured elsewhere can calibrate the simulator like a profile would.

    python bench/reference_profile.py --series fused_torch \\
        --out data/profiles/nvidia-h200/fused-reference-llama-3.1-8b+llama-3.2-1b.json

Only the median of each point is known: p10 and p90 are written equal to it, `repeats` is
what the source timed, and `peak_bytes` is 0 (not recorded). `--decode-only` keeps the
decode rows (query_len 1) alone. The profile's `command` and each model's `notes` say
where the figures come from.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simulator.inputs.catalog import default_models  # noqa: E402
from simulator.inputs.profile import SCHEMA, profile_from_dict, profile_to_json  # noqa: E402
from simulator.validation.step_gap import annotate  # noqa: E402

H200 = {
    "name": "NVIDIA H200",
    "kind": "cuda",
    "memory_bytes": 150109880320,
    "driver": "580.159.04",
    "torch_version": "2.11.0+cu130",
    "cpu_threads": 16,
    "nvml": None,
    "reason_no_gpu": None,
    "copy_gbps": 4095.0,
    "matmul_tflops": None,
}
"""The machine of data/step_reference/h200_decode_step_ms.csv (2026-12-04); its copy rate
was measured the same day (device-to-device, bytes read + written)."""
REPEATS = {"fused_torch": 50, "profiler_c9957ef": 20}


def _architecture(spec) -> dict:
    return {
        "vocab_size": spec.vocab_size,
        "hidden_size": spec.hidden_size,
        "num_layers": spec.num_layers,
        "num_heads": spec.num_attention_heads,
        "num_kv_heads": spec.num_kv_heads,
        "head_dim": spec.head_dim,
        "intermediate_size": spec.intermediate_size,
        "tie_word_embeddings": spec.tie_word_embeddings,
    }


def build(table: pd.DataFrame, series: str, *, decode_only: bool, command: str) -> dict:
    """The profile dict of one series (bf16, H200)."""
    rows = table[(table["series"] == series) & (table["gpu"] == "h200")]
    if decode_only:
        rows = rows[rows["query_len"] == 1]
    if rows.empty:
        raise SystemExit(f"--series: no h200 rows of series {series!r}")
    catalog = default_models()
    models, measurements = [], []
    for model_id, part in rows.groupby("model", sort=False):
        spec = catalog[model_id]
        kv = int(spec.kv_values_per_token_per_layer * spec.num_layers * 2)
        sources = "; ".join(sorted(set(part["source"])))
        models.append(
            {
                "id": model_id,
                "architecture": _architecture(spec),
                "layers_run": [spec.num_layers],
                "num_layers": spec.num_layers,
                "extrapolated": False,
                "weight_bytes": int(spec.total_params * 2),
                "kv_bytes_per_token": kv,
                "kv_bytes_per_token_formula": kv,
                "notes": f"figures from data/step_reference/ series {series}: {sources}; "
                "median only (p10 = p90 = median), peak_bytes not recorded",
            }
        )
        for r in part.itertuples():
            measurements.append(
                {
                    "model": model_id,
                    "batch": int(r.batch),
                    "query_len": int(r.query_len),
                    "context_len": int(r.context_len),
                    "median_ms": float(r.step_ms),
                    "p10_ms": float(r.step_ms),
                    "p90_ms": float(r.step_ms),
                    "repeats": REPEATS.get(series, 1),
                    "peak_bytes": 0,
                    "status": "ok",
                    "extrapolated": False,
                }
            )
        annotate(measurements[-len(part) :], spec, 2.0, H200["copy_gbps"])
    return {
        "schema": SCHEMA,
        "created": "2026-12-04T08:00:00+00:00",
        "command": command,
        "device": H200,
        "settings": {
            "dtype": "bf16",
            "warmup": 5,
            "repeats": REPEATS.get(series, 1),
            "min_time_s": 0.0,
            "cuda_graphs": True,
        },
        "models": models,
        "measurements": measurements,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--table", type=Path, default=ROOT / "data/step_reference/h200_decode_step_ms.csv"
    )
    p.add_argument("--series", default="fused_torch")
    p.add_argument("--decode-only", action="store_true")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    command = "python bench/reference_profile.py --series " + args.series
    command += " --decode-only" if args.decode_only else ""
    data = build(
        pd.read_csv(args.table), args.series, decode_only=args.decode_only, command=command
    )
    profile = profile_from_dict(data, str(args.out))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(profile_to_json(profile), encoding="utf-8")
    print(f"wrote {args.out}: {len(profile.measurements)} points", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
