"""Where a forward pass's time comes from: the one seam between the model and its sources.

The pipeline (`simulator.model.stages`) never prices a forward itself. It asks a `StepTimes`
provider for the time of one forward of the target or the draft model at arrays of
(batch, query tokens per sequence, context length), one entry per scenario row of a piece
of work: query 1 is a decode step, K+1 a verification step. A provider answers with
milliseconds and, per row, where each figure came from; `latency_source` is spelled from
those answers in one place (`StepTimes.latency_source`).

Sources today:
- `RooflineStepTimes`: the datasheet roofline of `simulator.model.latency` (every row's
  `latency_source` is "roofline").
- `ProfiledStepTimes`: a measured profile (`simulator.model.calibration.Calibration`): the
  profile's measurements where they cover the point, its fit of the device elsewhere, the
  roofline on GPUs it did not measure; a draft model's in-loop times per round.

- `KernelStepTimes` (`simulator.model.kernel_steps`): an engine's measured kernel tables. It
  prices whole steps (forwards, prefill and the engine's host costs) on the rows its plan
  covers (`price_steps`, `prefill_per_tau`) and answers everything else from the source
  it wraps (one of the two above).

A new source of forward times is one module with a class that implements
`StepTimes` (most simply a subclass of `RooflineStepTimes` that overrides `forward_ms` and
falls back to it where its tables do not reach; a source that prices whole steps overrides
`price_steps` and `prefill_per_tau` as `KernelStepTimes` does) and one line in
`step_times_for`.
Units: ms; batch and query in tokens per sequence; context in tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from simulator.model.defaults import ModelDefaults
from simulator.model.latency import Hardware, ModelArrays, get_model_step_ms

ROOFLINE = "roofline"
"""The `latency_source` of a row priced from the datasheets alone."""

TARGET, DRAFT = "target", "draft"
"""The models a provider prices: the target, or a separate draft model."""


@dataclass(frozen=True)
class Forwards:
    """What a provider needs to know about a piece's rows besides the point it prices:
    the model figures (`target`, `draft`: `ModelArrays`, per row or shared), the datasheet
    hardware per row, bytes per weight and per KV value, and the ids of the GPU, target,
    draft and weight dtype per row (`names`, a callable that spells a scenario column's
    codes, so a provider that needs no ids costs nothing)."""

    target: ModelArrays
    draft: ModelArrays
    hardware: Hardware
    weight_bytes: np.ndarray | float
    kv_bytes: np.ndarray | float
    n: int
    names: object
    """`names(column)`: the scenario's text ids of `column` for these rows, shape (n,)."""


class StepTimes(Protocol):
    """A source of forward times for one piece of rows (see the module docstring)."""

    hardware: Hardware
    """The target's hardware as this source sees it: prefill, sampling and the forwards
    of EAGLE/MTP/Medusa heads (which run inside the target's model runner) use it."""
    draft_hardware: Hardware
    """A separate draft model's hardware (its prefill)."""
    head_overhead_ms: np.ndarray | float
    """Fixed cost of one head forward, ms (never calibrated: no profile times a head)."""
    raw_hardware: Hardware
    """The datasheet hardware: what a profile does not measure keeps it (a head's steps,
    the sampler's passes, a head's prefill)."""
    host_shift_ms: np.ndarray | float
    """An engine's fitted host cost per step less the default (`profiler import`), ms."""
    defaults: ModelDefaults
    """The engine terms and efficiencies the rest of the step is priced with."""

    def forward_ms(self, model: str, batch, query, context) -> tuple[np.ndarray, object]:
        """ms of one forward of `model` (TARGET or DRAFT) at these points, and per row
        where it came from (an array of short labels, "" for the roofline) or None when
        every row came from the roofline."""

    def draft_round_ms(self, batch, k, context, source) -> tuple[object, object]:
        """ms of a draft model's K forwards inside a speculative round where measured
        (NaN elsewhere), or None when this source has none; and `source` updated."""

    def latency_source(self, target, verify, draft, head: bool) -> np.ndarray | None:
        """Per row, the label of where the target, verify and draft steps came from
        (None: the roofline for every row); `head`: the piece drafts with a head."""

    def price_steps(self, p, steps, b_base, b_spec):
        """`steps` (a `stages.Steps` built from this source's forwards, the roofline's
        prefill and the default host costs) with whatever this source prices as whole
        steps; `p` the piece, `b_base`/`b_spec` the batches. Forward-only sources return
        `steps` as it is."""

    def prefill_per_tau(self, p, one, per_tau):
        """The prefill ms per unit of tau a speculative step carries (break-even), where
        this source prices prefill itself; `one` the prefill tokens per step at tau = 1,
        `per_tau` the roofline's figure (returned as it is by forward-only sources)."""


class RooflineStepTimes:
    """Forward times from the datasheet roofline (`simulator.model.latency.get_model_step_ms`)."""

    def __init__(self, fw: Forwards, defaults: ModelDefaults) -> None:
        self.fw = fw
        self.defaults = defaults
        self.hardware = fw.hardware
        self.draft_hardware = fw.hardware
        self.raw_hardware = fw.hardware
        self.host_shift_ms = 0.0
        self.overhead_ms = {
            TARGET: defaults.forward_overhead_ms,
            DRAFT: defaults.draft_forward_overhead_ms,
        }
        self.head_overhead_ms = defaults.head_forward_overhead_ms

    def roofline_ms(self, model: str, batch, query, context):
        """The roofline's ms at these points, on this source's hardware and overheads."""
        fw = self.fw
        spec, hw = (
            (fw.target, self.hardware) if model == TARGET else (fw.draft, self.draft_hardware)
        )
        return get_model_step_ms(
            spec,
            hw,
            batch,
            query,
            context,
            fw.weight_bytes,
            fw.kv_bytes,
            self.overhead_ms[model],
            self.defaults,
        )

    def forward_ms(self, model: str, batch, query, context):
        return self.roofline_ms(model, batch, query, context), None

    def draft_round_ms(self, batch, k, context, source):
        return None, source

    def latency_source(self, target, verify, draft, head):
        return None

    def price_steps(self, p, steps, b_base, b_spec):
        return steps

    def prefill_per_tau(self, p, one, per_tau):
        return per_tau


class ProfiledStepTimes(RooflineStepTimes):
    """Forward times from a measured profile where it covers the row: measured or
    interpolated points, else the roofline fitted to the profiled device ("fitted"),
    else the datasheet roofline ("")."""

    def __init__(self, fw: Forwards, defaults: ModelDefaults, calibration):
        super().__init__(fw, defaults)
        self.cal = calibration
        full = (fw.n,)
        hw = fw.hardware
        hw = Hardware(
            bw_gbps=np.broadcast_to(hw.bw_gbps, full).astype(float),
            tflops=np.broadcast_to(hw.tflops, full).astype(float),
            link_gbps=np.broadcast_to(hw.link_gbps, full).astype(float),
            num_gpus=hw.num_gpus,
            sharpness=hw.sharpness,
        )
        self.gpu = fw.names("gpu")
        self.ids = {TARGET: fw.names("target"), DRAFT: fw.names("draft")}
        self.dtype = fw.names("weight_dtype")
        self.draft_hardware = calibration.effective_hardware(
            self.gpu, hw, defaults, self.ids[DRAFT]
        )
        self.hardware = calibration.effective_hardware(self.gpu, hw, defaults, self.ids[TARGET])
        layers = {TARGET: fw.target.num_layers, DRAFT: fw.draft.num_layers}
        self.overhead_ms = {
            m: calibration.overhead_ms(self.gpu, layers[m], self.overhead_ms[m], self.ids[m])
            for m in (TARGET, DRAFT)
        }
        step = defaults.engine_step_ms
        self.host_shift_ms = calibration.engine_step_ms(self.gpu, step) - step
        self.fitted = np.isin(self.gpu, list(calibration.fits))
        self.empty = np.full(fw.n, "", dtype=object)

    def forward_ms(self, model: str, batch, query, context):
        roof = self.roofline_ms(model, batch, query, context)
        ms, how = self.cal.measured_ms(
            self.gpu, self.ids[model], self.dtype, self.hardware.num_gpus, batch, query, context
        )
        return np.where(np.isnan(ms), roof, ms), np.where(
            how != "", how, np.where(self.fitted, "fitted", "")
        )

    def draft_round_ms(self, batch, k, context, source):
        ms = self.cal.draft_round_ms(
            self.gpu,
            self.ids[TARGET],
            self.ids[DRAFT],
            self.dtype,
            self.hardware.num_gpus,
            batch,
            k,
            context,
        )
        return ms, np.where(np.isnan(ms), source, "in-loop")

    def latency_source(self, target, verify, draft, head):
        parts = [self.empty if s is None else s for s in (target, verify, draft)]
        heads = np.where(self.fitted & head, "uncalibrated", "").astype(object)
        described = self.cal.describe(*parts, heads)
        shift = self.host_shift_ms
        if np.any(shift != 0):  # an engine's fitted host cost (profiler import)
            host = np.broadcast_to(shift != 0, (self.fw.n,))
            pairs = zip(described, host, strict=True)
            described = np.array(
                [f"{d} host:fitted".lstrip() if h else d for d, h in pairs], dtype=object
            )
        return np.where(described == "", ROOFLINE, described)


def step_times_for(
    fw: Forwards, defaults: ModelDefaults, calibration=None, kernel_plan=None
) -> StepTimes:
    """The source of a piece's forward times: a profile's where one is given (it falls
    back to the roofline row by row), the roofline otherwise; wrapped by the engine's
    kernel tables (`kernel_steps.KernelStepTimes`) when `kernel_plan`, their plan of the
    piece's rows (`kernel_steps.get_plan`), covers any row."""
    times = (
        RooflineStepTimes(fw, defaults)
        if calibration is None
        else ProfiledStepTimes(fw, defaults, calibration)
    )
    if kernel_plan is not None:
        from simulator.model.kernel_steps import KernelStepTimes

        return KernelStepTimes(times, kernel_plan)
    return times
