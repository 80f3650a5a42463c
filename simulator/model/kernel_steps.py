"""The kernel tables as a step-time source: where an engine's measured kernel tables
(`simulator.kernels.source`) cover a row, they price its step (device times from the
tables, host costs the engine's) in place of the roofline; a profile of the row's GPU
scales the tables' forwards it measured (`simulator.model.kernel_calibration`).

`KernelStepTimes` is the `step_times.StepTimes` provider (`step_times.step_times_for`
wraps the roofline or a profile in it when `get_plan` finds tables for a piece's rows);
`get_kernel_steps` and `get_kernel_prefill_per_tau` are its whole-step prices.
Units: ms; tokens.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from simulator.model import kernel_calibration, steady


def get_plan(sc, codes, catalog, n, layout, is_draft):
    """The kernel-table plan of a piece's rows (`simulator.kernels.source`), or None when
    no row of it has tables (its GPUs or dtypes have none). `sc` the validated table,
    `codes` the piece's scenario codes, `catalog` the model and GPU catalogs as arrays,
    `layout` the rows' tp_size, attention_dp_size, moe_tp_size and moe_ep_size."""
    from simulator.kernels import source as kernel_source

    names = {c: sc.categories[c] for c in ("gpu", "engine", "engine_version")}
    names.update(weight_dtype=sc.categories["weight_dtype"], kv_dtype=sc.categories["kv_dtype"])
    if not any(g in kernel_source.tables.SYSTEMS for g in names["gpu"]):
        return None
    cols = ("target", "draft", "gpu", "engine", "engine_version", "weight_dtype", "kv_dtype")
    row_codes = {c: np.broadcast_to(codes[c], (n,)) for c in cols}
    names_l = ("tp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")
    lay = np.stack([np.broadcast_to(layout[c], (n,)) for c in names_l], axis=1).astype(np.int64)
    lay_codes = np.unique(lay, axis=0, return_inverse=True)[1].reshape(-1)
    draft_model = is_draft is True or bool(np.any(is_draft))

    def resolve(i):
        c = {col: int(row_codes[col][i]) for col in cols}
        draft = catalog.model_specs[c["draft"] - 1] if c["draft"] > 0 else None
        return kernel_source.resolve(
            catalog.model_specs[c["target"]],
            draft,
            names["gpu"][c["gpu"]],
            names["engine"][c["engine"]],
            names["engine_version"][c["engine_version"]],
            names["weight_dtype"][c["weight_dtype"]],
            names["kv_dtype"][c["kv_dtype"]],
            kernel_source.Layout(*(int(x) for x in lay[i])),
            draft_model,
        )

    plan = kernel_source.plan_rows([*row_codes.values(), lay_codes], resolve)
    return plan if plan.target is not None else None


def without_profiled(plan, gpu_ids, calibration):
    """`plan` less the rows on a device the calibration prices on the roofline: a device
    outside the catalog, and a GPU with an imported engine's host cost. A measured profile
    of a GPU with tables scales the tables' times instead (`kernel_calibration`)."""
    # An imported engine's host cost was fitted on the roofline's prices
    # (profiler.imports.fit): its GPU stays on the roofline.
    profiled = np.isin(gpu_ids, [*calibration.gpus, *calibration.engine_steps])
    plan = replace(plan, covered=plan.covered & ~profiled)
    return replace(plan, group=np.where(plan.covered, plan.group, -1))


def merged_labels(plan, labels):
    """The kernel plan's labels, or with a profile's labels where the plan does not cover
    a row (a profiled device)."""
    if labels is None:
        return plan.labels
    codes, names = plan.labels
    kernel = np.asarray(names, dtype=object)[codes]
    return np.where(plan.covered, kernel, labels)


def calibrated_labels(labels, scale):
    """`labels` with a profile's labels where it scaled the tables' times."""
    if scale is None:
        return labels
    if isinstance(labels, tuple):  # (codes, names), as `merged_labels` passes the plan's
        codes, names = labels
        labels = np.asarray(names, dtype=object)[codes]
    return np.where(scale.labels != "", scale.labels, labels)


def has_engine_costs(defaults) -> bool:
    """False for `ModelDefaults.without_engine()` (every engine_* term zero): the kernel
    path then leaves out the engines' host costs as the roofline does."""
    return any(
        getattr(defaults, f) != 0.0
        for f in defaults.__dataclass_fields__
        if f.startswith("engine_")
    )


def get_kernel_steps(p, times, steps, b_base, b_spec):
    """`steps` (a `stages.Steps` priced by the roofline or a profile) with the kernel
    tables' times where the plan covers a row."""
    from simulator.kernels import source as kernel_source

    plan, defaults = times.kernel_plan, times.defaults
    kt = kernel_source.step_times(
        plan,
        p.method_name,
        b_base=b_base,
        b_spec=b_spec,
        verify=p.verify,
        context=p.context,
        d_context=p.draft_context,
        k=p.k,
        medusa_heads=p.medusa_heads,
        prompt=p.prompt,
        pf_base=steps.prefill_tokens_base,
        pf_spec=steps.prefill_tokens_spec if p.spec_on else 0.0,
        host=has_engine_costs(defaults),
    )
    everywhere = isinstance(plan.rows, slice)
    scale = kernel_calibration.scale_for(times, plan, p, b_base, b_spec)
    if scale is not None:  # a profile scales what it measured (kernel_calibration)
        kt = replace(
            kt,
            target=kt.target * scale.target,
            verify=kt.verify * scale.verify,
            draft=kt.draft * scale.draft,
        )

    def pick(kernel, roof):
        return kernel if everywhere else np.where(plan.covered, kernel, roof)

    t_step = pick(kt.target, steps.target)
    pf_base_ms = pick(kt.prefill_base, steps.prefill_base)
    host_base = pick(kt.host_base, steps.engine_base)
    base_step = t_step + pf_base_ms + host_base
    v_step, d_step = steps.verify, steps.draft
    pf_spec_ms, host_spec, spec_step = pf_base_ms, host_base, base_step
    if p.spec_on:
        hw = times.raw_hardware  # the sampler's pass: no profile times it
        vocab = p.target.vocab_size
        rounds = steady.get_engine_round_ms(
            True, p.sampled, 0.0, b_spec, p.k, vocab, hw.bw_gbps, hw.num_gpus, defaults
        )
        sampled_extra = rounds - defaults.engine_round_ms
        v_step = pick(kt.verify, v_step)
        d_step = pick(kt.draft, d_step)
        pf_spec_ms = pick(kt.prefill_spec, steps.prefill_spec)
        host_spec = pick(kt.host_spec + sampled_extra, steps.engine_spec)
        spec_step = pick(d_step + v_step + pf_spec_ms + host_spec, steps.spec)
    return replace(
        steps,
        target=t_step,
        verify=v_step,
        draft=d_step,
        prefill_base=pf_base_ms,
        prefill_spec=pf_spec_ms,
        engine_base=host_base,
        engine_spec=host_spec,
        base=base_step,
        spec=spec_step,
        source=calibrated_labels(merged_labels(plan, steps.source), scale),
    )


def get_kernel_prefill_per_tau(p, times, one, per_tau):
    """The prefill ms per unit of tau a speculative step carries (break-even), from the
    kernel tables where they cover a row; `one` the prefill tokens per step at tau = 1."""
    from simulator.kernels import source as kernel_source

    plan = times.kernel_plan
    kernel = kernel_source.spec_prefill_ms(plan, p.method_name, one, p.prompt)
    return np.where(plan.covered, kernel, per_tau)


class KernelStepTimes:
    """A `step_times.StepTimes` provider: the kernel tables' whole steps on the rows
    `kernel_plan` covers, the wrapped source (`inner`, the roofline or a profile) for
    everything else: its forwards, hardware, overheads and labels, and every attribute it
    has (a profile's calibration, read by name, stays reachable through this one)."""

    def __init__(self, inner, kernel_plan) -> None:
        self.inner = inner
        self.kernel_plan = kernel_plan

    def __getattr__(self, name):
        if name == "inner":  # not yet set (copy, pickle): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

    def forward_ms(self, model, batch, query, context):
        return self.inner.forward_ms(model, batch, query, context)

    def draft_round_ms(self, batch, k, context, source):
        return self.inner.draft_round_ms(batch, k, context, source)

    def latency_source(self, target, verify, draft, head):
        return self.inner.latency_source(target, verify, draft, head)

    def price_steps(self, p, steps, b_base, b_spec):
        steps = self.inner.price_steps(p, steps, b_base, b_spec)
        return get_kernel_steps(p, self, steps, b_base, b_spec)

    def prefill_per_tau(self, p, one, per_tau):
        per_tau = self.inner.prefill_per_tau(p, one, per_tau)
        return get_kernel_prefill_per_tau(p, self, one, per_tau)
