"""Every default the model uses, in one place, with the reason for its value.

None of the efficiency or overhead figures below is a datasheet number: they are
assumptions that set the analytic roofline's realism, and a measured profile replaces
them (`simulator.model.calibration` fits efficiency and overhead to the measurements). The
reason column of `DEFAULT_NOTES` says where each value comes from.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class ModelDefaults:
    """Knobs of the analytic model. Units are in the names."""

    bandwidth_efficiency: float = 0.90
    compute_efficiency: float = 0.30
    prefill_compute_efficiency: float = 0.88
    roofline_sharpness: float = 1.0
    interconnect_efficiency: float = 0.70
    forward_overhead_ms: float = 0.30
    draft_forward_overhead_ms: float = 0.75
    head_forward_overhead_ms: float = 1.0
    verify_overhead_ms: float = 0.30
    engine_step_ms: float = 1.5
    engine_per_seq_ms: float = 0.0
    engine_draft_forward_ms: float = 1.0
    engine_round_ms: float = 0.5
    engine_sampled_round_ms: float = 0.5
    sampler_vocab_passes: float = 6.0
    allreduce_latency_us: float = 15.0
    gpu_memory_utilization: float = 0.90
    non_torch_reserve_gb: float = 1.0
    cuda_graph_reserve_gb: float = 0.5
    max_num_batched_tokens: int = 8192
    max_num_seqs: int | None = None
    logits_rows: int = 256
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

FITTED = (
    "one of the values fitted together, one set for every row, on the development set "
    "data/validation/published.csv by `python -m simulator validate`; docs/model.md gives "
    "the fit and what each term moved"
)

DEFAULT_NOTES: dict[str, str] = {
    "bandwidth_efficiency": "fraction of datasheet HBM bandwidth a decode forward sustains; "
    + FITTED
    + ". Above the 77% of the bandwidth ceiling a vLLM A100 run reached at concurrency 1 "
    "(johnmusgrave.com) because that figure includes the host costs this model prices "
    "separately (engine_step_ms)",
    "compute_efficiency": "fraction of dense tensor peak the GEMMs of a forward reach; "
    + FITTED
    + ". Low because it prices the mid-sized GEMMs of decode and verification (B*(K+1) "
    "tokens), not the large GEMMs of a training step",
    "prefill_compute_efficiency": "fraction of dense tensor peak a prefill chunk's large "
    "GEMMs reach. Derived, not fitted (the development set has little long-prompt "
    "traffic): BLIS's blackbox fit for vLLM 0.8.4 on one H100 with Llama-3.1-8B charges "
    "17.3 us per prefill token; 2 x 7.5e9 matmul parameters / 17.3 us = 870 TFLOP/s, 0.88 "
    "of the 989.5 dense BF16 TFLOP/s",
    "roofline_sharpness": "n in (mem^n + cmp^n)^(1/n) per forward; "
    + FITTED
    + ". 1 adds the memory and compute times: measured speedups fall with batch as if "
    "verification's extra compute did not hide under the weight reads (EAGLE-3 paper "
    "Table 3: 1.40x at batch 2 to 0.99x at 64 at the same acceptance); a profile's own "
    "fit keeps max() on the device it measured",
    "interconnect_efficiency": "fraction of the per-direction link bandwidth a ring all-reduce "
    "achieves for the message sizes of decode (assumption)",
    "forward_overhead_ms": "device-side fixed cost of one target forward under CUDA graphs "
    "(kernel launch tails, graph replay); "
    + FITTED
    + "; a profile fits it on the device it measured",
    "draft_forward_overhead_ms": "fixed cost of one forward of a separate draft model; "
    + FITTED
    + ". With engine_draft_forward_ms a 1B draft step costs about 1.75 ms beyond its weight "
    "reads, as vLLM #45258 measured (drafter chain 4.9 ms for 3 proposals at concurrency 1) "
    "and vLLM #17504 (an EAGLE-3 proposal of K=3 at ~6 ms with torch.compile and CUDA "
    "graphs); a profile fits it",
    "head_forward_overhead_ms": "fixed cost of one EAGLE/MTP/Medusa head forward, which runs "
    "inside the target's model runner (no scheduling of its own); " + FITTED,
    "verify_overhead_ms": "rejection sampling and cache bookkeeping on the device once per "
    "speculative step (assumption; kept at the value the CPU validation was scored with)",
    "engine_step_ms": "host cost of one engine step: scheduling, input preparation, sampling, "
    "output processing; " + FITTED + ". Sources: vLLM v0.5.3 spent 29% of an 8B step on scheduling "
    "(blog.vllm.ai/2024/09/05/perf-update); BLIS's trained per-step constants give about "
    "1.15 ms for a 32-layer 8B (126 us/step + 32.1 us/layer)",
    "engine_per_seq_ms": "host cost per running sequence per step; "
    + FITTED
    + " (0: no measurable gain; BLIS's trained figure is 4.4 us per request)",
    "engine_draft_forward_ms": "host cost per forward of a separate draft model: its own "
    "input preparation and synchronisation (vLLM runs the draft as its own model); " + FITTED,
    "engine_round_ms": "host cost once per speculative round: proposing, rejection-sampler "
    "launch, bookkeeping of the draft tokens; " + FITTED + " (it moved nothing from 0.5 ms)",
    "engine_sampled_round_ms": "extra host cost per round when sampling (temperature > 0): "
    "no sampled row is in the development set, so this is an assumption, not a fit. vLLM "
    "#45258 measured 2.1 ms (concurrency 1) and 3.2 ms (16) for the whole sampler on a GB10; "
    "the CPU validation saw sampling add 0.7-4.1 ms per round on a CPU",
    "sampler_vocab_passes": "passes over B*(K+1) rows of fp32 logits the rejection sampler "
    "makes when sampling (softmax of target and draft, compare, residual distribution, "
    "draw): a count of the algorithm's steps (Leviathan et al. 2023), not a measurement",
    "allreduce_latency_us": "small-message latency of one NCCL all-reduce, two per layer; "
    + FITTED
    + ". Vidur adds 20 us of NCCL launch per tensor-parallel all-reduce",
    "gpu_memory_utilization": "vLLM's default --gpu-memory-utilization",
    "non_torch_reserve_gb": "CUDA context, NCCL and cuBLAS workspaces outside torch's allocator "
    "per GPU (assumption; vLLM measures it at start-up)",
    "cuda_graph_reserve_gb": "memory the captured CUDA graphs hold per GPU (assumption)",
    "max_num_batched_tokens": "vLLM's default chunked-prefill budget; sets the activation peak",
    "max_num_seqs": "requests a replica runs at once, for every engine (the deployment "
    "search sets it per candidate); None: each engine's own default "
    "(data/engine_admission.csv: vLLM 1,024 on 70+ GiB GPUs but A100s, else 256; SGLang 48 "
    "with speculation; TensorRT-LLM 2,048)",
    "logits_rows": "rows of fp32 logits the sampler's warm-up holds (vLLM's 256-sequence "
    "default; its 1,024 on 70+ GiB GPUs would add 0.4 GB for a 128k vocabulary, not "
    "modelled)",
    "activation_dtype_bytes": "bf16 activations",
    "logits_dtype_bytes": "vLLM samples from fp32 logits",
    "hbm_bytes_per_gb": "HBM stacks are binary-sized: an '80 GB' H100 has 80 GiB",
    "hours_per_month": "8760 hours / 12",
}
