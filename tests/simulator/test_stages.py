"""Each stage of the model (`simulator.model.stages`) alone, against numbers worked by hand,
and the step-time seam (`simulator.model.step_times`) with a source that is not the roofline."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.inputs.catalog import default_models
from simulator.model import stages
from simulator.model.defaults import DEFAULTS
from simulator.model.drafts import method_masks
from simulator.model.latency import Hardware, ModelArrays, get_model_step_ms
from simulator.model.step_times import (
    TARGET,
    Forwards,
    RooflineStepTimes,
    step_times_for,
)

GIB = 2.0**30

CAPS = (np.array([256.0]), np.array([256.0]))
"""An engine's admission cap per arm, far above these rows' KV-bound batches."""


def piece(method="eagle", n=1, **kw) -> stages.Piece:
    """A piece of `n` Llama-3.1-8B rows on one 80 GiB, 3,350 GB/s GPU (bf16, batch 4,
    prompt 100, output 200, K 2), every field overridable."""
    llama = ModelArrays.from_specs([default_models()["llama-3.1-8b"]]).take(np.zeros(n, int))
    full = lambda v: np.full(n, float(v))  # noqa: E731
    fields = dict(
        n=n,
        method_name=method,
        method=method_masks(method),
        target=llama,
        draft=ModelArrays.from_specs([None]).take(np.zeros(n, int)),
        target_code=0,
        draft_code=0,
        hardware=Hardware(
            bw_gbps=full(3350), tflops=full(989), link_gbps=full(450), num_gpus=full(1)
        ),
        memory_gb=full(80),
        weight_bytes=2.0,
        kv_bytes=2.0,
        k=full(0 if method == "none" else 2),
        batch=full(4),
        prompt=full(100),
        output=full(200),
        verify=full(0 if method == "none" else 3),
        medusa_heads=full(np.nan),
        mtp_depth=full(1),
        draft_window=full(np.nan),
        acceptance_rate=full(np.nan if method == "none" else 0.5),
        mean_accepted_tokens=full(np.nan),
        positions=None,
        gpu_memory_utilization=full(0.9),
        request_rate=full(np.nan),
        in_steady=False,
        sampled=False,
        gpu_hourly_usd=full(2.0),
    )
    fields.update(kw)
    return stages.Piece(**fields)


def test_acceptance_iid_and_from_tau():
    # alpha 0.5 at K=2: tau = 1 + 0.5 + 0.25 = 1.75 (Leviathan et al. 2023, eq. 1).
    acc = stages.get_acceptance(piece())
    assert acc.tau == pytest.approx([1.75])
    assert acc.alpha == pytest.approx([0.5])
    # The same tau given instead: alpha solved back to 0.5.
    acc = stages.get_acceptance(
        piece(acceptance_rate=np.array([np.nan]), mean_accepted_tokens=np.array([1.75]))
    )
    assert acc.tau == pytest.approx([1.75]) and acc.alpha == pytest.approx([0.5])
    # p10/p50/p90 of tokens per step: P(1) = 0.5, P(2) = 0.25, P(3) = 0.25.
    assert [acc.quantiles[q][0] for q in stages.QUANTILES] == [1.0, 1.0, 3.0]
    none = stages.get_acceptance(piece("none"))
    assert np.isnan(none.alpha[0]) and none.tau[0] == 1.0


def test_acceptance_from_measured_positions():
    # Measured p1 = 0.8, p2 = 0.6 at K=2: tau = 1 + 0.8 + 0.6 = 2.4.
    acc = stages.get_acceptance(piece(positions=np.array([[0.8, 0.6]])))
    assert acc.tau == pytest.approx([2.4])


def test_memory_by_hand():
    p = piece("ngram")
    mem = stages.get_memory(p, DEFAULTS)
    # KV per token: 32 layers * 2 (K and V) * 8 KV heads * 128 dims * 2 bytes = 128 KiB.
    assert mem.kv_per_token == pytest.approx([131_072])
    weights = default_models()["llama-3.1-8b"].total_params * 2.0
    assert mem.weights == pytest.approx([weights])
    # Activation peak: 8,192 tokens * (2 * 14,336 + 6 * 4,096) * 2 bytes + 256 seqs *
    # 128,256 vocab * 4 bytes; then 0.9 * 80 GiB - 1.5 GiB reserves - peak - weights.
    act = 8192 * (2 * 14336 + 6 * 4096) * 2 + 256 * 128_256 * 4
    usable = 0.9 * 80 * GIB - 1.5 * GIB - act - weights
    assert mem.usable_base == pytest.approx([usable])
    assert mem.capacity_base == pytest.approx([np.floor(usable / 131_072)])
    # n-grams add no weights and no KV: both arms alike.
    assert mem.usable_spec == pytest.approx(mem.usable_base)
    assert mem.concurrency_base == pytest.approx([np.floor(mem.capacity_base[0] / 300)])


def test_batch_is_capped_by_kv_capacity_with_lookahead():
    p = piece("eagle", batch=np.array([64.0]))
    mem = stages.Memory(
        **{
            **{f: np.array([0.0]) for f in stages.Memory.__dataclass_fields__},
            "capacity_base": np.array([10_000.0]),
            "capacity_spec": np.array([10_000.0]),
        }
    )
    b = stages.get_batch(p, mem, DEFAULTS, CAPS)
    # A request holds P + O/2 = 200 tokens: 10,000 / 200 = 50; EAGLE reserves K = 2
    # lookahead slots more: 10,000 / 202 = 49.5 -> 49.
    assert b.base == pytest.approx([50]) and b.spec == pytest.approx([49])


class FixedTimes(RooflineStepTimes):
    """A source that is not the roofline: 10 ms a target decode, 12 ms a verify, 2 ms a
    draft-model forward, labelled "table"."""

    def forward_ms(self, model, batch, query, context):
        ms = np.where(np.asarray(query) > 1, 12.0, 10.0) if model == TARGET else 2.0
        return np.broadcast_to(ms, (self.fw.n,)).astype(float), np.full(self.fw.n, "table")

    def latency_source(self, target, verify, draft, head):
        return target


def fixed_times(p):
    fw = Forwards(p.target, p.draft, p.hardware, p.weight_bytes, p.kv_bytes, p.n, names=None)
    return FixedTimes(fw, DEFAULTS)


def test_steps_come_from_the_provider():
    draft = ModelArrays.from_specs([default_models()["llama-3.2-1b"]]).take(np.zeros(1, int))
    p = piece("draft_model", draft=draft, k=np.array([3.0]), verify=np.array([4.0]))
    s = stages.get_steps(p, np.array([2.5]), fixed_times(p), np.array([4.0]), np.array([4.0]))
    # decode_only: no prefill. Baseline = 10 + engine step 1.5 = 11.5 ms.
    assert s.base == pytest.approx([11.5])
    # Spec = 3 drafts * 2 + verify 12 + verify overhead 0.3 + engine step 1.5
    #        + round 0.5 + 3 draft forwards * 1.0 = 23.3 ms.
    assert s.draft == pytest.approx([6.0])
    assert s.spec == pytest.approx([23.3])
    assert list(s.source) == ["table"]
    serving = stages.get_serving(p, np.array([2.5]), s, np.array([4.0]), np.array([4.0]))
    assert serving.baseline_tok_s == pytest.approx([4 * 1e3 / 11.5])
    assert serving.spec_tok_s == pytest.approx([4 * 2.5 * 1e3 / 23.3])
    assert serving.speedup == pytest.approx([(2.5 / 23.3) / (1 / 11.5)])
    assert serving.spec_tpot == pytest.approx([23.3 / 2.5])


def test_roofline_source_is_the_roofline():
    p = piece()
    times = RooflineStepTimes(fixed_times(p).fw, DEFAULTS)
    ms, source = times.forward_ms(TARGET, 4.0, 1.0, 200.0)
    want = get_model_step_ms(
        p.target, p.hardware, 4.0, 1.0, 200.0, 2.0, 2.0, DEFAULTS.forward_overhead_ms, DEFAULTS
    )
    assert ms == pytest.approx(want) and source is None
    assert times.latency_source(None, None, None, False) is None
    assert times.host_shift_ms == 0.0
    steps = object()
    assert times.price_steps(p, steps, 4.0, 4.0) is steps
    assert times.prefill_per_tau(p, 1.0, 0.25) == 0.25


def test_a_source_that_prices_whole_steps_is_one_class_the_stages_do_not_name():
    import dataclasses
    import inspect

    from simulator.model.kernel_steps import KernelStepTimes

    class FlatSteps(type(fixed_times(piece()))):
        def price_steps(self, p, steps, b_base, b_spec):
            return dataclasses.replace(steps, base=np.array([7.0]), spec=np.array([9.0]))

    p = piece("draft_model", k=np.array([3.0]), verify=np.array([4.0]))
    fw = fixed_times(p).fw
    s = stages.get_steps(p, np.array([2.5]), FlatSteps(fw, DEFAULTS), 4.0, 4.0)
    assert (s.base, s.spec) == (pytest.approx([7.0]), pytest.approx([9.0]))
    assert s.draft == pytest.approx([6.0])  # the forwards still come from the source
    assert "kernel" not in inspect.getsource(stages).lower()
    # The kernel tables are such a source: step_times_for wraps the roofline or a profile.
    wrapped = step_times_for(fw, DEFAULTS, None, kernel_plan="a plan")
    assert isinstance(wrapped, KernelStepTimes) and wrapped.kernel_plan == "a plan"
    assert wrapped.forward_ms(TARGET, 4.0, 1.0, 200.0)[0] == pytest.approx(
        RooflineStepTimes(fw, DEFAULTS).forward_ms(TARGET, 4.0, 1.0, 200.0)[0]
    )
    assert wrapped.hardware is fw.hardware and wrapped.defaults is DEFAULTS


def test_economics_by_hand():
    # $2 an hour on one GPU at 1,000 tok/s: 2 / 3.6e6 tokens * 1e6 = $0.5556 per 1M.
    s = stages.Serving(*(np.array([1000.0]),) * 5)
    money = stages.get_economics(piece(), s, np.array([False]), np.array([True]))
    assert money.cost_base == pytest.approx([2.0 / 3.6])
    assert np.isnan(money.cost_spec[0])


def test_blank_cannot_run_leaves_the_arm_that_runs():
    s = stages.Serving(*(np.array([5.0, 5.0]),) * 5)
    out = stages.blank_cannot_run(s, np.array([False, True]), np.array([True, True]))
    assert out.baseline_tok_s[0] == 5.0 and np.isnan(out.baseline_tok_s[1])
    assert np.isnan(out.spec_tok_s).all() and np.isnan(out.speedup).all()


def test_open_loop_batch_solves_littles_law():
    """Under 5 requests/s with a step of 11.5 ms whatever the batch, a request spends its
    prompt's prefill plus 200 * 11.5 ms in the engine, and the batch is 5/s times that."""
    p = piece("eagle", batch=np.array([np.nan]), request_rate=np.array([5.0]))
    times = fixed_times(p)
    batch = stages.get_batch(p, stages.get_memory(p, DEFAULTS), DEFAULTS, CAPS)
    loop = stages.get_open_loop(p, np.array([1.75]), times, batch)
    ttft_ms = stages.get_base_prefill_ms(p, times, p.prompt, DEFAULTS)
    assert loop.base == pytest.approx(5.0 * (ttft_ms + 200 * 11.5) / 1e3, rel=1e-6)
    assert not loop.overloaded_base.any()
