"""How far a profile's decode step is from what serving engines reach on the same GPU, and
how close to the memory system the profile got.

A profile whose decode step is slower than an engine's on the same GPU makes speculation
look better than it is: the extra tokens of a verify forward ride on an inflated step, and
a draft's cost is a smaller share of it. The check compares each model's decode step at
batch 1 with a reference step time for that model on that GPU. The reference is a
function (`ReferenceStep`), so a better source can replace it (the engine kernel tables
of the step-time work). The default, `engine_or_roofline_step_ms`, takes the engines'
step where `data/step_reference/` holds one for the model, GPU and context (the median
of NVIDIA aiconfigurator's TensorRT-LLM, vLLM and SGLang tables, H200), and otherwise
the datasheet roofline as the simulator prices a step without a profile
(`roofline_step_ms`: catalog HBM bandwidth and tensor rate times the model's
efficiencies, plus the fixed cost of a forward). Engines land within 20% of that roofline
on an 8B model on an H200 (4.9 ms against 4.1 ms at batch 1), less closely on a 1B
(1.2 ms against 0.9 ms), which is why measured engine steps come first.

Times are milliseconds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from simulator.inputs.catalog import DATA_DIR, default_gpus, default_models
from simulator.inputs.profile import Profile
from simulator.inputs.specs import DTYPE_BYTES, GPUSpec, ModelSpec
from simulator.model.calibration import match_gpu_id
from simulator.model.defaults import DEFAULTS
from simulator.model.latency import Hardware, ModelArrays, get_model_step_ms, get_model_traffic

GAP_LIMIT = 1.3
"""A decode step above this many times the reference step draws the warning."""

ReferenceStep = Callable[[ModelSpec, GPUSpec, str, int, int], tuple[float, str] | None]
"""(model, gpu, weight dtype, batch, context_len) -> (ms of one decode step, what that
reference is), or None where it has none."""
ENGINE_SERIES = ("aiconfigurator_trtllm", "aiconfigurator_vllm", "aiconfigurator_sglang")
STEP_REFERENCE_DIR = DATA_DIR / "step_reference"


@lru_cache(maxsize=1)
def step_reference() -> pd.DataFrame:
    """Every table of `data/step_reference/` (model, gpu, dtype, batch, query_len,
    context_len, series, step_ms, source)."""
    frames = [pd.read_csv(p) for p in sorted(STEP_REFERENCE_DIR.glob("*.csv"))]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def engine_step_ms(spec: ModelSpec, gpu: GPUSpec, dtype: str, batch: int, context: int):
    """The engines' decode step from `data/step_reference/`: the median over engines at
    this batch, linear in context between the contexts they were estimated at; None
    outside them."""
    ref = step_reference()
    if ref.empty:
        return None
    rows = ref[
        (ref["model"] == spec.id)
        & (ref["gpu"] == gpu.id)
        & (ref["dtype"] == dtype)
        & (ref["batch"] == batch)
        & (ref["query_len"] == 1)
        & ref["series"].isin(ENGINE_SERIES)
    ]
    if rows.empty:
        return None
    by_context = rows.groupby("context_len")["step_ms"].median()
    lo, hi = by_context.index.min(), by_context.index.max()
    if not lo <= context <= hi:
        return None
    ms = float(np.interp(context, by_context.index.to_numpy(float), by_context.to_numpy()))
    return ms, "what engines reach (aiconfigurator's TensorRT-LLM/vLLM/SGLang tables)"


def engine_or_roofline_step_ms(spec: ModelSpec, gpu: GPUSpec, dtype: str, batch: int, context: int):
    """`engine_step_ms` where it has the point, else `roofline_step_ms`."""
    return engine_step_ms(spec, gpu, dtype, batch, context) or roofline_step_ms(
        spec, gpu, dtype, batch, context
    )


def roofline_step_ms(spec: ModelSpec, gpu: GPUSpec, dtype: str, batch: int, context: int):
    """One decode step as the simulator prices it without a profile, in ms."""
    dtype_bytes = DTYPE_BYTES.get(dtype, 2.0)
    hw = Hardware(
        bw_gbps=np.array([gpu.hbm_bandwidth_gbps]),
        tflops=np.array([gpu.tflops_for(dtype)]),
        link_gbps=np.array([gpu.interconnect_gbps]),
        num_gpus=np.array([1.0]),
        sharpness=DEFAULTS.roofline_sharpness,
    )
    ms = get_model_step_ms(
        ModelArrays.from_specs([spec]),
        hw,
        batch,
        1.0,
        context,
        dtype_bytes,
        dtype_bytes,
        DEFAULTS.forward_overhead_ms,
    )
    return float(np.asarray(ms).flat[0]), "the datasheet roofline"


@dataclass(frozen=True)
class StepGap:
    """A profiled decode step at batch 1 against the reference step, in ms."""

    model: str
    gpu: str
    context_len: int
    measured_ms: float
    reference_ms: float
    reference: str

    @property
    def ratio(self) -> float:
        return self.measured_ms / self.reference_ms


def decode_gaps(
    profile: Profile,
    gpu_id: str | None = None,
    *,
    reference_step: ReferenceStep = engine_or_roofline_step_ms,
    gpus: dict[str, GPUSpec] | None = None,
    models: dict[str, ModelSpec] | None = None,
) -> list[StepGap]:
    """Every batch-1 decode point of the profile's catalog models on a catalog GPU; empty
    for a CPU, an unknown GPU or models outside the catalog."""
    gpus = default_gpus() if gpus is None else gpus
    models = default_models() if models is None else models
    gpu_id = gpu_id or match_gpu_id(profile.device.name, profile.device.kind)
    gpu = gpus.get(gpu_id)
    if gpu is None:
        return []
    out = []
    for pm in profile.models:
        spec = models.get(pm.id)
        if spec is None:
            continue
        rows = profile.measurements_for(pm.id)
        rows = rows[(rows["batch"] == 1) & (rows["query_len"] == 1)]
        for row in rows.itertuples():
            ref = reference_step(spec, gpu, profile.settings.dtype, 1, int(row.context_len))
            if ref and ref[0] > 0:
                context = int(row.context_len)
                out.append(StepGap(pm.id, gpu_id, context, row.median_ms, ref[0], ref[1]))
    return out


def flattery_warnings(
    profile: Profile,
    gpu_id: str | None = None,
    *,
    reference_step: ReferenceStep = engine_or_roofline_step_ms,
    limit: float = GAP_LIMIT,
    gpus: dict[str, GPUSpec] | None = None,
    models: dict[str, ModelSpec] | None = None,
) -> list[str]:
    """One line per model whose batch-1 decode step is above `limit` x the reference."""
    worst: dict[str, StepGap] = {}
    for gap in decode_gaps(
        profile, gpu_id, reference_step=reference_step, gpus=gpus, models=models
    ):
        if gap.ratio > limit and (gap.model not in worst or gap.ratio > worst[gap.model].ratio):
            worst[gap.model] = gap
    return [
        f"{g.model}: the profile's decode step at batch 1 is {g.ratio:.2f}x {g.reference} "
        f"on {g.gpu} ({g.measured_ms:.2f} ms against {g.reference_ms:.2f} ms at context "
        f"{g.context_len}, more than {limit:g}x); calibrating with this profile will flatter "
        "speculation (a slow step makes a verify forward's extra tokens and the draft look "
        "cheap): profile with an engine-grade step or upload an engine's own benchmark"
        for g in worst.values()
    ]


def copy_fraction_lines(profile: Profile) -> list[str]:
    """The measured copy rate, and per model the fraction of it the batch-1 decode steps
    reached; empty for a profile that did not measure the copy rate."""
    rate = profile.device.copy_gbps
    m = profile.measurements
    if rate is None or "copy_fraction" not in m.columns:
        return []
    lines = [f"{profile.device.name}: copy rate {rate:,.0f} GB/s (bytes read + written)"]
    if profile.device.matmul_tflops is not None:
        lines[0] += f", bf16 matmul {profile.device.matmul_tflops:,.0f} TFLOP/s"
    for pm in profile.models:
        rows = profile.measurements_for(pm.id)
        rows = rows[(rows["batch"] == 1) & (rows["query_len"] == 1)].dropna(
            subset=["copy_fraction"]
        )
        if len(rows):
            lo, hi = rows["copy_fraction"].min(), rows["copy_fraction"].max()
            span = f"{lo:.2f}" if np.isclose(lo, hi, atol=5e-3) else f"{lo:.2f}-{hi:.2f}"
            lines.append(f"{pm.id}: decode at batch 1 moves its bytes at {span} of the copy rate")
    return lines


def step_bytes(spec: ModelSpec, batch: int, q: int, context: int, dtype_bytes: float) -> int:
    """Bytes one forward of B sequences x q tokens at context L moves: every weight the
    step reads (the embedding table only where it doubles as the LM head; MoE: the experts
    the step's tokens route to, as the simulator counts them) plus the KV cache read (L
    slots) and written (q slots)."""
    nbytes, _ = get_model_traffic(
        ModelArrays.from_specs([spec]), batch, q, context, dtype_bytes, dtype_bytes, 1.0
    )
    # The simulator counts every parameter; a step reads B*q rows of an untied embedding.
    unread = 0 if spec.tie_word_embeddings else spec.vocab_size * spec.hidden_size * dtype_bytes
    return int(float(sum(getattr(nbytes, "flat", [nbytes]))) - unread)


def annotate(rows: list[dict], spec: ModelSpec, dtype_bytes: float, copy_rate: float | None):
    """Add `bytes_moved` and `copy_fraction` to a model's measurement rows, in place."""
    for row in rows:
        row["bytes_moved"] = step_bytes(
            spec, row["batch"], row["query_len"], row["context_len"], dtype_bytes
        )
        ms = row.get("median_ms")
        ok = row.get("status") == "ok" and ms == ms and ms and copy_rate
        row["copy_fraction"] = row["bytes_moved"] / (ms * 1e-3) / (copy_rate * 1e9) if ok else None
    return rows


@dataclass(frozen=True)
class VerifyGap:
    """A profiled verify forward of `query` tokens against the decode step the profile
    timed at the same batch and context, and the same ratio on an engine's kernel tables."""

    model: str
    gpu: str
    batch: int
    query: int
    context_len: int
    profile_ratio: float
    engine_ratio: float
    engine: str

    @property
    def off(self) -> float:
        """How far apart the two ratios are, as a factor >= 1."""
        r = self.profile_ratio / self.engine_ratio
        return max(r, 1 / r)


def verify_gaps(
    profile: Profile,
    gpu_id: str | None = None,
    *,
    engine: str = "vllm",
    models: dict[str, ModelSpec] | None = None,
) -> list[VerifyGap]:
    """Every verify point (query > 1) of the profile's catalog models whose decode step at
    the same batch and context it also timed, where `engine`'s kernel tables price the
    model on the profile's GPU; empty elsewhere."""
    from simulator.kernels import source as kernel_source

    models = default_models() if models is None else models
    gpu_id = gpu_id or match_gpu_id(profile.device.name, profile.device.kind)
    dtype = profile.settings.dtype
    out = []
    for pm in profile.models:
        spec = models.get(pm.id)
        resolved = spec and kernel_source.resolve(
            spec, None, gpu_id, engine, "", dtype, dtype, kernel_source.Layout(), False
        )
        if not resolved:
            continue
        rows = profile.measurements_for(pm.id)
        decode = rows[rows["query_len"] == 1].set_index(["batch", "context_len"])["median_ms"]
        verify = rows[rows["query_len"] > 1]
        verify = verify[
            [
                (b, c) in decode.index
                for b, c in zip(verify["batch"], verify["context_len"], strict=True)
            ]
        ]
        if verify.empty:
            continue
        b, q, c = (verify[x].to_numpy(float) for x in ("batch", "query_len", "context_len"))
        plan = kernel_source.plan_rows([np.zeros(len(verify), dtype=int)], lambda _, r=resolved: r)
        tables_v = kernel_source.forward_ms(plan, "target", b, q, c)
        tables_d = kernel_source.forward_ms(plan, "target", b, np.ones_like(q), c)
        measured_d = decode.loc[list(zip(b, c, strict=True))].to_numpy(float)
        for i, ms in enumerate(verify["median_ms"].to_numpy(float)):
            out.append(
                VerifyGap(pm.id, gpu_id, int(b[i]), int(q[i]), int(c[i]), float(ms / measured_d[i]),
                          float(tables_v[i] / tables_d[i]), resolved.target.label)
            )  # fmt: skip
    return out


def verify_warnings(profile: Profile, gpu_id: str | None = None, *, limit: float = GAP_LIMIT):
    """One line per model whose verify/decode ratio is more than `limit` times (or less
    than 1/`limit` of) what vLLM's kernel tables give at the same point. Calibration prices
    a verify step from the profile's ratio where the profile timed verify forwards around
    the row (`simulator.model.kernel_calibration`), so that ratio, on which the speedup hangs,
    must be the engine's."""
    worst: dict[str, VerifyGap] = {}
    for gap in verify_gaps(profile, gpu_id):
        if gap.off > limit and (gap.model not in worst or gap.off > worst[gap.model].off):
            worst[gap.model] = gap
    lines = []
    for g in worst.values():
        way = (
            "understate speculation (a costly verify)"
            if g.profile_ratio > g.engine_ratio
            else "overstate speculation (a cheap verify)"
        )
        lines.append(
            f"{g.model}: the profile's verify forward of {g.query} tokens at batch {g.batch}, "
            f"context {g.context_len} costs {g.profile_ratio:.2f}x its decode step, where the "
            f"engine's kernel tables ({g.engine}) give {g.engine_ratio:.2f}x; calibrating with this "
            f"profile prices the verify step from it near that point and will {way}"
        )
    return lines
