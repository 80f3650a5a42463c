"""Host-side costs of each serving engine on top of its measured kernels, in ms.

The kernel tables time the GPU work of a forward (GEMMs, attention, all-reduce, the
element-wise ops priced as aiconfigurator prices them); a served step also pays what the
tables leave out: scheduling and input preparation, sampling, detokenisation and output
processing, launch gaps between CUDA graphs, and under speculation the proposer's own
launches and bookkeeping. One set of these figures per engine, for every model, GPU and
source (no factor per source, model or GPU). `NOTES` gives each figure's source or how
it was set; docs/model.md has the tables before and after.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EngineHost:
    """Per-engine host costs in ms."""

    step_ms: float
    """Per engine step (one target forward), whatever the batch."""
    per_seq_ms: float
    """Per running sequence per step (input preparation, sampling, output processing)."""
    round_ms: float
    """Per speculative round: rejection sampling, draft-token bookkeeping (SGLang: the
    draft-extend pass over the accepted tokens)."""
    draft_forward_ms: float
    """Per forward of a separate draft model (its own graph launch and synchronisation)."""
    head_forward_ms: float
    """Per EAGLE/EAGLE-3/MTP/Medusa head forward beyond its kernels."""
    head_per_seq_ms: float = 0.0
    """Per head forward per running sequence (a proposer's per-request work on the host)."""


ENGINE_HOST: dict[str, EngineHost] = {
    "vllm": EngineHost(
        step_ms=0.25, per_seq_ms=0.005, round_ms=0.8, draft_forward_ms=1.0, head_forward_ms=0.6
    ),
    "sglang": EngineHost(
        step_ms=0.25,
        per_seq_ms=0.035,
        round_ms=0.5,
        draft_forward_ms=1.0,
        head_forward_ms=0.6,
        head_per_seq_ms=0.06,
    ),
    "trtllm": EngineHost(
        step_ms=0.25, per_seq_ms=0.02, round_ms=0.8, draft_forward_ms=1.0, head_forward_ms=0.6
    ),
}

NOTES = {
    "step_ms": "0.25 ms for every engine: the 200-300 us inter-step gap vLLM V1 set as its "
    "target (vLLM issue #10634); the three engines overlap scheduling with the GPU (vLLM "
    "async scheduling, SGLang's overlap scheduler, TensorRT-LLM's overlap scheduler), so "
    "little of it shows. Checked, not fitted: a free fit on the serving runs gave 0-0.3 ms",
    "per_seq_ms": "fitted per engine (one value each, every model and GPU) on the 559 "
    "serving runs of aiconfigurator-core's silicon_sample.csv, median |TPOT error|: vLLM "
    "5 us, TensorRT-LLM 20 us, SGLang 35 us per running request per step. BLIS's trained "
    "figure for vLLM is 4.4 us per request (SERVING-NOTES (c))",
    "round_ms": "vLLM/TensorRT-LLM 0.8 ms: the roofline's fitted engine_round_ms (0.5) plus "
    "its verify_overhead_ms (0.3), which the kernel path has no separate term for; SGLang "
    "0.5 ms, fitted with its head costs (below)",
    "draft_forward_ms": "1.0 ms: the roofline's engine_draft_forward_ms, fitted on the "
    "development set's draft-model cases (MagicDec)",
    "head_forward_ms": "0.6 ms: with the kernels' ~0.4 ms head forward (8B, H100/H200) it "
    "makes the ~1.0 ms per extra EAGLE step that issue 26 derives from a public vLLM K "
    "sweep at batch 1 (vLLM #17504 measured ~2 ms a step for EAGLE-3 at K=3 with CUDA "
    "graphs, an older build). TensorRT-LLM has no speculative case in either set: vLLM's "
    "figures are used (an assumption)",
    "head_per_seq_ms": "SGLang 0.06 ms per running request per head forward, fitted with "
    "its round_ms on the development set's only SGLang speculative cases (EAGLE-3 paper "
    "Table 3, SGLang v0.4.4, H100, batch 2-64: EAGLE gains 1.40x at batch 2 and reverses "
    "to 0.88-0.99x from batch 24, which a constant per head forward cannot give); 0 for "
    "vLLM and TensorRT-LLM (no case to set it)",
}
