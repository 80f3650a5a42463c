"""Each engine's default cap on the requests it runs at once (its admission limit).

A launch that does not set it runs at most this many requests per replica, however many
the KV cache could hold: vLLM 1,024 on a GPU of 70 GiB or more that is not an A100, else
256 (`--max-num-seqs`, per data-parallel rank); SGLang 48 with speculative decoding on
and its KV-derived estimate (at most 4,096) without (`--max-running-requests`, per
replica); TensorRT-LLM 2,048 (`--max_batch_size`). The figures, their sources and the
code they quote are in data/engine_admission.csv. `ModelDefaults.max_num_seqs`, when set
(the deployment search's candidates), replaces them for every engine.
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ADMISSION_CSV = Path(__file__).resolve().parents[2] / "data" / "engine_admission.csv"
ARMS = ("plain", "speculative", "any")


@dataclass(frozen=True)
class Rule:
    """One row of data/engine_admission.csv."""

    engine: str
    arm: str
    min_gpu_memory_gib: float
    not_gpu: str
    max_running: int
    per_dp_rank: bool
    flag: str
    basis: str
    source: str

    def applies(self, engine: str, speculative: bool, gpu_id: str, memory_gib: float) -> bool:
        arm_ok = self.arm == "any" or self.arm == ("speculative" if speculative else "plain")
        gpu_ok = not (self.not_gpu and self.not_gpu in gpu_id)
        return self.engine == engine and arm_ok and gpu_ok and memory_gib >= self.min_gpu_memory_gib


@functools.cache
def rules(path: Path = ADMISSION_CSV) -> tuple[Rule, ...]:
    """The rules in file order; ValueError naming the line of a malformed one."""
    out = []
    with open(path, newline="", encoding="utf-8") as fh:
        for i, row in enumerate(csv.DictReader(fh), start=2):
            try:
                rule = Rule(
                    engine=row["engine"],
                    arm=row["arm"],
                    min_gpu_memory_gib=float(row["min_gpu_memory_gib"]),
                    not_gpu=row["not_gpu"].strip().lower(),
                    max_running=int(row["max_running"]),
                    per_dp_rank=row["per_dp_rank"] == "true",
                    flag=row["flag"],
                    basis=row["basis"],
                    source=row["source"],
                )
            except (KeyError, ValueError) as exc:
                raise ValueError(f"{path.name} line {i}: {exc}") from None
            if rule.arm not in ARMS or rule.max_running < 1:
                raise ValueError(f"{path.name} line {i}: bad arm or max_running")
            out.append(rule)
    return tuple(out)


@functools.cache
def rule_for(engine: str, speculative: bool, gpu_id: str, memory_gib: float) -> Rule:
    """The rule that sets the cap of one (engine, arm, GPU); engine `other`'s when the
    engine has none."""
    for name in (engine, "other"):
        for rule in rules():
            if rule.applies(name, speculative, gpu_id.lower(), memory_gib):
                return rule
    raise ValueError(f"data/engine_admission.csv has no rule for {engine} (nor other)")


def default_cap(
    engine: str, speculative: bool, gpu_id: str, memory_gib: float, dp: float = 1.0
) -> int:
    """Requests one replica runs at once by the engine's default (per-rank caps times
    the attention data-parallel ranks `dp`)."""
    rule = rule_for(engine, speculative, gpu_id, float(memory_gib))
    return int(rule.max_running * (max(1.0, float(dp)) if rule.per_dp_rank else 1.0))


def caps(engine_code, gpu_code, dp, engines, gpus, speculative: bool) -> np.ndarray:
    """`default_cap` per row, from its engine and GPU codes (into the names `engines` and
    the GPU specs `gpus`) and its attention-DP ranks; each distinct row looked up once."""
    engine_code, gpu_code, dp = np.broadcast_arrays(
        np.asarray(engine_code, np.int64), np.asarray(gpu_code, np.int64), np.asarray(dp, float)
    )
    ranks = np.maximum(np.rint(dp), 1).astype(np.int64)
    key = (engine_code * 65536 + gpu_code) * 4096 + np.minimum(ranks, 4095)
    uniques, inverse = np.unique(key, return_inverse=True)
    looked = []
    for k in uniques:
        gpu = gpus[int(k // 4096 % 65536)]
        engine = engines[int(k // (4096 * 65536))]
        looked.append(default_cap(engine, speculative, gpu.id, gpu.memory_gb, float(k % 4096)))
    return np.asarray(looked, dtype=float)[inverse.ravel()]


def cap_for_row(row: dict, speculative: bool, gpus=None) -> int:
    """`default_cap` of one scenario row (a dict of scenario columns; the catalog's GPU)."""
    from simulator.inputs.catalog import default_gpus

    catalog = default_gpus() if gpus is None else gpus
    gpu = catalog[str(row["gpu"])]
    engine = str(row.get("engine") or "vllm").strip().lower()
    dp = float(row.get("attention_dp_size") or 1.0)
    return default_cap(engine, speculative, gpu.id, gpu.memory_gb, 1.0 if dp != dp else dp)
