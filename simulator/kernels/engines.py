"""Host-side costs of each serving engine on top of its measured kernels, in ms.

The kernel tables time the GPU work of a forward (GEMMs, attention, all-reduce, the
element-wise ops priced as aiconfigurator prices them); a served step also pays what the
tables leave out: scheduling and input preparation, sampling, detokenisation and output
processing, launch gaps between CUDA graphs. One set of these figures per engine, for
every model, GPU and source (no factor per source, model or GPU). `NOTES` gives each
figure's source or derivation.
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
    """Per speculative round: rejection sampling, draft-token bookkeeping."""
    draft_forward_ms: float
    """Per forward of a separate draft model (its own graph launch and synchronisation)."""
    head_forward_ms: float
    """Per EAGLE/EAGLE-3/MTP/Medusa head forward (inside the target's runner)."""


ENGINE_HOST: dict[str, EngineHost] = {
    "vllm": EngineHost(
        step_ms=0.9, per_seq_ms=0.004, round_ms=0.5, draft_forward_ms=0.75, head_forward_ms=0.35
    ),
    "sglang": EngineHost(
        step_ms=0.9, per_seq_ms=0.004, round_ms=0.5, draft_forward_ms=0.75, head_forward_ms=0.35
    ),
    "trtllm": EngineHost(
        step_ms=0.9, per_seq_ms=0.004, round_ms=0.5, draft_forward_ms=0.75, head_forward_ms=0.35
    ),
}

NOTES = {
    "step_ms": "placeholder, set in a later commit",
}
