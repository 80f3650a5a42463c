"""Every default the model uses, in one place, with the reason for its value.

None of the efficiency or overhead figures below is a datasheet number: they are
assumptions that set the analytic roofline's realism, and a measured profile replaces
them (`simulator.calibration` fits efficiency and overhead to the measurements). The
reason column of `DEFAULT_NOTES` says where each value comes from.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class ModelDefaults:
    """Knobs of the analytic model. Units are in the names."""

    bandwidth_efficiency: float = 0.80
    compute_efficiency: float = 0.60
    interconnect_efficiency: float = 0.70
    forward_overhead_ms: float = 0.80
    draft_forward_overhead_ms: float = 0.25
    verify_overhead_ms: float = 0.30
    engine_step_ms: float = 1.0
    engine_per_seq_ms: float = 0.005
    engine_draft_forward_ms: float = 0.5
    engine_round_ms: float = 0.5
    engine_sampled_round_ms: float = 0.5
    sampler_vocab_passes: float = 6.0
    allreduce_latency_us: float = 10.0
    gpu_memory_utilization: float = 0.90
    non_torch_reserve_gb: float = 1.0
    cuda_graph_reserve_gb: float = 0.5
    max_num_batched_tokens: int = 8192
    max_num_seqs: int = 256
    activation_dtype_bytes: int = 2
    logits_dtype_bytes: int = 4
    hbm_bytes_per_gb: float = 2.0**30
    hours_per_month: float = 730.0

    def replace(self, **changes) -> ModelDefaults:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        unknown = set(changes) - set(values)
        if unknown:
            raise KeyError(f"unknown default(s): {sorted(unknown)}")
        values.update(changes)
        return ModelDefaults(**values)

    def without_engine(self) -> ModelDefaults:
        """These defaults with every host-side engine cost (`engine_*`, the sampler's
        vocabulary passes) at zero: a bare loop of forwards, as a profiler times them."""
        return self.replace(
            **{f.name: 0.0 for f in fields(self) if f.name.startswith("engine_")},
            sampler_vocab_passes=0.0,
        )


DEFAULTS = ModelDefaults()

DEFAULT_NOTES: dict[str, str] = {
    "bandwidth_efficiency": "fraction of datasheet HBM bandwidth a decode GEMV stream sustains; "
    "0.8 is typical of well-tuned kernels on H100-class parts (assumption, calibrate)",
    "compute_efficiency": "fraction of dense tensor peak large inference GEMMs reach (assumption, "
    "calibrate); prefill-like verification of many tokens is where it bites",
    "interconnect_efficiency": "fraction of the per-direction link bandwidth a ring all-reduce "
    "achieves for the message sizes of decode (assumption)",
    "forward_overhead_ms": "fixed cost of one target forward under CUDA graphs: launch, "
    "scheduling, sampling (assumption; a profile fits it)",
    "draft_forward_overhead_ms": "fixed cost of one draft or head forward under CUDA graphs "
    "(assumption; a profile fits it)",
    "verify_overhead_ms": "rejection sampling and cache bookkeeping once per speculative step "
    "(assumption)",
    "engine_step_ms": "ENGINE_STEP",
    "engine_per_seq_ms": "ENGINE_SEQ",
    "engine_draft_forward_ms": "ENGINE_DRAFT",
    "engine_round_ms": "ENGINE_ROUND",
    "engine_sampled_round_ms": "ENGINE_SAMPLED",
    "sampler_vocab_passes": "SAMPLER_PASSES",
    "allreduce_latency_us": "small-message latency of one NCCL all-reduce on NVLink, order of "
    "10 us (assumption)",
    "gpu_memory_utilization": "vLLM's default --gpu-memory-utilization",
    "non_torch_reserve_gb": "CUDA context, NCCL and cuBLAS workspaces outside torch's allocator "
    "per GPU (assumption; vLLM measures it at start-up)",
    "cuda_graph_reserve_gb": "memory the captured CUDA graphs hold per GPU (assumption)",
    "max_num_batched_tokens": "vLLM's default chunked-prefill budget; sets the activation peak",
    "max_num_seqs": "vLLM's default --max-num-seqs; sets the size of the sampler's logits",
    "activation_dtype_bytes": "bf16 activations",
    "logits_dtype_bytes": "vLLM samples from fp32 logits",
    "hbm_bytes_per_gb": "HBM stacks are binary-sized: an '80 GB' H100 has 80 GiB",
    "hours_per_month": "8760 hours / 12",
}
