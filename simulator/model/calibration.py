"""Calibration by measured profiles: measured step times where a profile covers a point,
and a roofline fitted to the profile everywhere else on the same device.

Fit, per device: effective bandwidth (GB/s), effective compute (TFLOP/s) and a fixed
overhead of o0 + o1 * layers ms per forward, minimising squared relative error over
every directly measured point. Lookup: trilinear interpolation in (batch, query_len,
context_len) inside the measured grid, exact at measured points; outside it, the fit.

A draft model's cost per round: where a profile timed the draft inside the speculative loop
(its `draft_in_loop` table, for this target and draft), the sum over positions 1..K of
those times, bilinear in (batch, context_len) inside the table; elsewhere K isolated steps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from simulator.errors import InputError
from simulator.inputs.catalog import default_gpus, default_models
from simulator.inputs.profile import ARCH_LIMITS, Profile
from simulator.inputs.specs import DTYPE_BYTES, GPUSpec, ModelSpec
from simulator.model.defaults import DEFAULTS, ModelDefaults
from simulator.model.latency import Hardware, ModelArrays, get_model_traffic, get_roofline_ms

# Device-name patterns (as torch and NVML print them) to catalog ids; first match wins.
_NAME_PATTERNS = (
    (r"GB200", "gb200"),
    (r"B200", "b200"),
    (r"H200", "h200"),
    (r"H800", "h800"),
    (r"H100.*(PCIE|NVL)", "h100-pcie"),
    (r"H100", "h100-sxm"),
    (r"A100.*40\s?GB", "a100-40gb"),
    (r"A100", "a100-80gb"),
    (r"L40S", "l40s"),
    (r"\bL4\b", "l4"),
    (r"A10G", "a10g"),
    (r"MI355X", "mi355x"),
    (r"MI325X", "mi325x"),
    (r"MI300X", "mi300x"),
    (r"4090", "rtx-4090"),
    (r"5090", "rtx-5090"),
)
_GRID_POINTS = 48
"""Candidates per axis of the (bandwidth, compute) search: 48 log-spaced points over two
decades, then twice again over four steps of the previous grid, which ends finer than
the repeat-to-repeat noise of a CPU profile."""


_MIN_MODEL_FIT_POINTS = 8
"""A model gets its own fit (four parameters) only with at least twice as many points."""

_MAX_FIT_POINTS = 2048
"""Points a fit scores: beyond this an evenly spaced subset of them (in measured order).
The search scores every candidate at every point, so a fit costs time and memory in
proportion; a real profile has a few hundred direct points and is fitted on all of them."""

_ARCH_FOR_SPEC = (
    "num_layers",
    "hidden_size",
    "num_heads",
    "num_kv_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
)
"""Architecture fields a profiled model outside the catalog must give."""


def match_gpu_id(device_name: str, kind: str) -> str:
    """Catalog id of a profiled device, 'cpu' for a host CPU, or a `profile-<slug>` id."""
    if kind == "cpu":
        return "cpu"
    upper = device_name.upper()
    for pattern, gpu_id in _NAME_PATTERNS:
        if re.search(pattern, upper):
            return gpu_id
    return "profile-" + re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-")


@dataclass(frozen=True)
class DeviceFit:
    """The roofline fitted to one device's measurements."""

    gpu_id: str
    bandwidth_gbps: float
    tflops: float
    overhead_fixed_ms: float
    overhead_per_layer_ms: float
    points: int
    median_rel_error: float
    """Median |fit - measured| / measured over the points fitted."""


@dataclass
class _Grid:
    batch: np.ndarray
    query: np.ndarray
    context: np.ndarray
    ms: np.ndarray  # (nb, nq, nL), NaN where not measured


@dataclass(frozen=True)
class _LoopGrid:
    batch: np.ndarray
    context: np.ndarray
    ms: np.ndarray  # (nb, nL, positions), NaN where not measured


def _spec_for(pm, models: dict[str, ModelSpec], dtype: str, where: str = "") -> ModelSpec:
    if pm.id in models:
        return models[pm.id]
    a = pm.architecture
    for key in _ARCH_FOR_SPEC:
        low, high = ARCH_LIMITS[key]
        value = a.get(key)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not low <= value <= high
        ):
            raise InputError(
                f"model {pm.id!r} is not in the model catalog, so its architecture must give "
                f"{key} as a whole number in {low}..{high} (found {value!r:.40})",
                file=where,
                field=f"architecture.{key}",
            )
    experts = a.get("num_experts") or 0
    if experts:
        # The spec below is dense: every parameter read by every token. Fitting an MoE
        # model's times to that would silently skew the fitted bandwidth and FLOP rate.
        raise InputError(
            f"model {pm.id!r} is not in the model catalog and its architecture gives "
            f"num_experts {experts!r:.40}: calibration reads a mixture-of-experts model's "
            "routing from the catalog, so add the model there (--models) or profile a dense one",
            file=where,
            field="architecture.num_experts",
        )
    params = round(pm.weight_bytes / DTYPE_BYTES.get(dtype, 2.0))
    return ModelSpec(
        id=pm.id,
        name=pm.id,
        tokenizer="",
        total_params=params,
        active_params=params,
        num_layers=int(a["num_layers"]),
        hidden_size=int(a["hidden_size"]),
        num_attention_heads=int(a["num_heads"]),
        num_kv_heads=int(a["num_kv_heads"]),
        head_dim=int(a["head_dim"]),
        intermediate_size=int(a["intermediate_size"]),
        vocab_size=int(a["vocab_size"]),
        tie_word_embeddings=bool(a.get("tie_word_embeddings", False)),
    )


def _score(t, nbytes, flops, x, bws, fs):
    """Overhead coefficients and mean squared relative error for each (bw, flops) pair."""
    roof = (
        np.maximum(
            nbytes[None, None, :] / (bws[:, None, None] * 1e9),
            flops[None, None, :] / (fs[None, :, None] * 1e12),
        )
        * 1e3
    )
    w = 1.0 / t
    coef = np.einsum("ij,abj->abi", np.linalg.pinv(x * w[:, None]), (t - roof) * w)
    coef = np.maximum(coef, 0.0)
    pred = roof + np.einsum("ji,abi->abj", x, coef)
    return coef, pred, (((pred - t) / t) ** 2).mean(axis=-1)


def _fit(t_ms, nbytes, flops, layers) -> tuple[float, float, float, float, float]:
    """Grid search over effective bandwidth and compute, then a finer grid around the
    best pair; least squares for the overhead o0 + o1 * layers at each candidate."""
    t = np.asarray(t_ms, dtype=float)
    if t.size > _MAX_FIT_POINTS:
        keep = np.linspace(0, t.size - 1, _MAX_FIT_POINTS).round().astype(int)
        t, nbytes, flops, layers = (np.asarray(a)[keep] for a in (t, nbytes, flops, layers))
    distinct_layers = np.unique(layers).size > 1
    x = np.stack([np.ones_like(t), layers if distinct_layers else np.zeros_like(t)], axis=1)
    # A floor keeps the search away from 0 where a model moves no bytes or does no work.
    bw_c = max(np.max(nbytes / (t * 1e-3)) / 1e9, 1e-9)
    f_c = max(np.max(flops / (t * 1e-3)) / 1e12, 1e-12)
    span = 100.0
    for _ in range(3):
        bws = bw_c * np.geomspace(1 / np.sqrt(span), np.sqrt(span), _GRID_POINTS)
        fs = f_c * np.geomspace(1 / np.sqrt(span), np.sqrt(span), _GRID_POINTS)
        coef, pred, score = _score(t, nbytes, flops, x, bws, fs)
        i, j = np.unravel_index(np.argmin(score), score.shape)
        bw_c, f_c = bws[i], fs[j]
        span = (span ** (1 / (_GRID_POINTS - 1))) ** 4
    rel = np.abs(pred[i, j] - t) / t
    return (
        float(bw_c),
        float(f_c),
        float(coef[i, j, 0]),
        float(coef[i, j, 1]),
        float(np.median(rel)),
    )


@dataclass
class Calibration:
    """Measured step times and fitted rooflines of one or more profiles."""

    fits: dict[str, DeviceFit] = field(default_factory=dict)
    """Per device, fitted over every profiled model: used for models without a profile."""
    model_fits: dict[tuple[str, str], DeviceFit] = field(default_factory=dict)
    """Per (device, model): a profiled model's own fit beyond its measured grid."""
    gpus: dict[str, GPUSpec] = field(default_factory=dict)
    """Devices that are not in the catalog (a CPU, an unknown GPU), as GPU specs."""
    grids: dict[tuple[str, str, str], _Grid] = field(default_factory=dict)
    """(gpu id, model id, weight dtype) -> measured grid."""
    loops: dict[tuple[str, str, str, str], _LoopGrid] = field(default_factory=dict)
    """(gpu id, target id, draft id, weight dtype) -> the draft's in-loop forward times."""
    warnings: list[str] = field(default_factory=list)
    """What calibration changed in the measurements, one line each (shown by `summary`)."""
    engine_steps: dict[str, float] = field(default_factory=dict)
    """Per device: the engine's host cost per step in ms, fitted to its own serving
    benchmarks (a profile's `engine.fit`, written by `profiler import`); replaces
    `engine_step_ms` there."""

    @classmethod
    def from_profiles(
        cls,
        profiles: list[Profile],
        *,
        gpu_id: str | None = None,
        models: dict[str, ModelSpec] | None = None,
        catalog_gpus: dict[str, GPUSpec] | None = None,
    ) -> Calibration:
        models = default_models() if models is None else models
        catalog_gpus = default_gpus() if catalog_gpus is None else catalog_gpus
        cal = cls()
        by_device: dict[str, list[tuple[Profile, object]]] = {}
        for p in profiles:
            gid = gpu_id or match_gpu_id(p.device.name, p.device.kind)
            for pm in p.models:
                by_device.setdefault(gid, []).append((p, pm))
        for p in profiles:
            gid = gpu_id or match_gpu_id(p.device.name, p.device.kind)
            cal._add_loops(gid, p.settings.dtype, p.draft_in_loop)
            cal._add_engine_step(p, gpu_id, catalog_gpus)
        for gid, entries in by_device.items():
            t_all, b_all, f_all, l_all = [], [], [], []
            for p, pm in entries:
                dtype = p.settings.dtype
                spec = _spec_for(pm, models, dtype, f"profile of {p.device.name[:80]}")
                rows = p.measurements_for(pm.id)
                if not len(rows):
                    continue
                cal._add_grid(gid, pm.id, dtype, rows)
                direct = rows[~rows["extrapolated"].astype(bool)]
                if not len(direct):
                    direct = rows
                m = ModelArrays.from_specs([spec])
                nbytes, flops = get_model_traffic(
                    m,
                    direct["batch"].to_numpy(float),
                    direct["query_len"].to_numpy(float),
                    direct["context_len"].to_numpy(float),
                    DTYPE_BYTES.get(dtype, 2.0),
                    DTYPE_BYTES.get(dtype, 2.0),
                    1.0,
                )
                if len(direct) >= _MIN_MODEL_FIT_POINTS:
                    fit = _fit(
                        direct["median_ms"].to_numpy(float),
                        np.broadcast_to(nbytes, len(direct)),
                        np.broadcast_to(flops, len(direct)),
                        np.full(len(direct), float(spec.num_layers)),
                    )
                    cal.model_fits[(gid, pm.id)] = DeviceFit(gid, *fit[:4], len(direct), fit[4])
                t_all.append(direct["median_ms"].to_numpy(float))
                b_all.append(np.broadcast_to(nbytes, len(direct)))
                f_all.append(np.broadcast_to(flops, len(direct)))
                l_all.append(np.full(len(direct), float(spec.num_layers)))
            if not t_all:
                continue
            t, nb, fl, ly = (np.concatenate(a) for a in (t_all, b_all, f_all, l_all))
            bw, tf, o0, o1, err = _fit(t, nb, fl, ly)
            cal.fits[gid] = DeviceFit(gid, bw, tf, o0, o1, int(t.size), err)
            if gid not in catalog_gpus:
                dev = entries[0][0].device
                cal.gpus[gid] = GPUSpec(
                    id=gid,
                    name=dev.name,
                    vendor="measured",
                    memory_gb=dev.memory_bytes / DEFAULTS.hbm_bytes_per_gb,
                    hbm_bandwidth_gbps=bw,
                    bf16_tflops=tf,
                    fp8_tflops=None,
                    int8_tops=None,
                    interconnect_gbps=1.0,
                    interconnect="none",
                    price_usd_per_hr=None,
                    source=f"fitted to profile ({dev.kind})",
                )
        return cal

    def _add_grid(self, gid: str, model_id: str, dtype: str, rows) -> None:
        b = np.unique(rows["batch"].to_numpy(float))
        q = np.unique(rows["query_len"].to_numpy(float))
        c = np.unique(rows["context_len"].to_numpy(float))
        ms = np.full((b.size, q.size, c.size), np.nan)
        ms[
            np.searchsorted(b, rows["batch"].to_numpy(float)),
            np.searchsorted(q, rows["query_len"].to_numpy(float)),
            np.searchsorted(c, rows["context_len"].to_numpy(float)),
        ] = rows["median_ms"]
        self._floor_at_decode(gid, model_id, q, ms)
        self.grids[(gid, model_id, dtype)] = _Grid(b, q, c, ms)

    def _floor_at_decode(self, gid: str, model_id: str, q: np.ndarray, ms: np.ndarray) -> None:
        """Price a forward of q > 1 tokens no faster than the decode step (q = 1) measured
        at the same batch and context, in place. A forward of more tokens does the same
        work and more; where a profile timed it faster, that is timing noise, and taken as
        measured it would let a verify cost less than the decode step it replaces (a
        speedup above K + 1)."""
        if not q.size or q[0] != 1 or q.size < 2:
            return
        decode = ms[:, :1, :]
        faster = ms[:, 1:, :] < decode
        if not faster.any():
            return
        worst = float(np.nanmax(np.where(faster, 1 - ms[:, 1:, :] / decode, np.nan)))
        ms[:, 1:, :] = np.where(faster, decode, ms[:, 1:, :])
        self.warnings.append(
            f"{gid} / {model_id}: {int(faster.sum())} forward(s) of more than one token were "
            f"timed faster than the decode step at the same batch and context (up to "
            f"{worst:.0%} faster); they are priced at the decode step's time"
        )

    def _add_engine_step(self, p: Profile, gpu_id: str | None, catalog_gpus) -> None:
        """The fitted host cost per step of an imported engine profile, on the GPU its fit
        priced (the catalog id it records), else on the profile's device."""
        fit = (p.engine or {}).get("fit") or {}
        ms = fit.get("fitted_ms")
        if isinstance(ms, bool) or not isinstance(ms, int | float) or not 0 <= ms <= 1e3:
            return
        recorded = fit.get("gpu")
        gid = gpu_id or (
            recorded
            if isinstance(recorded, str) and recorded in catalog_gpus
            else match_gpu_id(p.device.name, p.device.kind)
        )
        self.engine_steps[gid] = float(ms)

    def engine_step_ms(self, gpu_ids, default: float) -> np.ndarray:
        """Host cost of one engine step per row (ms): the fitted one on devices with an
        engine fit, `default` elsewhere."""
        out = np.full(len(gpu_ids), float(default))
        for gid, ms in self.engine_steps.items():
            out[gpu_ids == gid] = ms
        return out

    def _add_loops(self, gid: str, dtype: str, rows) -> None:
        for (tid, did), g in rows.groupby(["target", "draft"], sort=False):
            b = np.unique(g["batch"].to_numpy(float))
            c = np.unique(g["context_len"].to_numpy(float))
            pos = g["position"].to_numpy(int)
            ms = np.full((b.size, c.size, int(pos.max())), np.nan)
            ms[
                np.searchsorted(b, g["batch"].to_numpy(float)),
                np.searchsorted(c, g["context_len"].to_numpy(float)),
                pos - 1,
            ] = g["median_ms"]
            self.loops[(gid, str(tid), str(did), dtype)] = _LoopGrid(b, c, ms)

    # ---------------------------------------------------------------- used by `predict`
    def _fit_rows(self, gpu_ids, model_ids):
        """(rows mask, fit) pairs, device fits first so that a model's own fit wins."""
        for gid, fit in self.fits.items():
            yield gpu_ids == gid, fit
        if model_ids is not None:
            for (gid, mid), fit in self.model_fits.items():
                yield (gpu_ids == gid) & (model_ids == mid), fit

    def effective_hardware(
        self, gpu_ids, hw: Hardware, d: ModelDefaults = DEFAULTS, model_ids=None
    ) -> Hardware:
        """Per-row hardware whose efficiency-scaled roofline equals the fitted one."""
        bw, tf = hw.bw_gbps.astype(float).copy(), hw.tflops.astype(float).copy()
        sharp = np.broadcast_to(np.asarray(hw.sharpness, dtype=float), bw.shape).copy()
        pre = np.broadcast_to(np.asarray(hw.prefill_efficiency, dtype=float), bw.shape).copy()
        for rows, fit in self._fit_rows(gpu_ids, model_ids):
            bw[rows] = fit.bandwidth_gbps / d.bandwidth_efficiency
            tf[rows] = fit.tflops / d.compute_efficiency
            sharp[rows] = np.inf  # the fit is a max() roofline
            pre[rows] = d.compute_efficiency  # prefill at the fitted compute, no more
        return Hardware(
            bw_gbps=bw,
            tflops=tf,
            link_gbps=hw.link_gbps,
            num_gpus=hw.num_gpus,
            sharpness=sharp,
            prefill_efficiency=pre,
        )

    def overhead_ms(self, gpu_ids, layers, default: float, model_ids=None) -> np.ndarray:
        """Fixed cost per forward: the fitted o0 + o1 * layers on calibrated devices."""
        out = np.full(len(gpu_ids), float(default))
        layers = np.broadcast_to(np.asarray(layers, dtype=float), out.shape)
        for rows, fit in self._fit_rows(gpu_ids, model_ids):
            out[rows] = fit.overhead_fixed_ms + fit.overhead_per_layer_ms * layers[rows]
        return out

    def fitted_step_ms(
        self, gpu_id: str, spec: ModelSpec, weight_dtype: str, batch, query_len, context_len
    ) -> np.ndarray | None:
        """The fitted roofline (no measurements) of one model on one device, in ms, as
        `predict` uses it beyond a profile's grid; None when the device has no fit."""
        fit = self.model_fits.get((gpu_id, spec.id)) or self.fits.get(gpu_id)
        if fit is None:
            return None
        dtype_bytes = DTYPE_BYTES.get(weight_dtype, 2.0)
        nbytes, flops = get_model_traffic(
            ModelArrays.from_specs([spec]),
            batch,
            query_len,
            context_len,
            dtype_bytes,
            dtype_bytes,
            1.0,
        )
        return (
            roofline_only_ms(fit, nbytes, flops)
            + fit.overhead_fixed_ms
            + fit.overhead_per_layer_ms * spec.num_layers
        )

    def measured_ms(
        self, gpu_ids, model_ids, weight_dtype, num_gpus, batch, query_len, context_len
    ) -> tuple[np.ndarray, np.ndarray]:
        """Measured or interpolated ms where a profile covers the point, else NaN; and per
        row 'measured', 'interpolated' or ''."""
        n = len(gpu_ids)
        out = np.full(n, np.nan)
        how = np.full(n, "", dtype=object)
        b = np.broadcast_to(np.asarray(batch, dtype=float), (n,))
        q = np.broadcast_to(np.asarray(query_len, dtype=float), (n,))
        c = np.broadcast_to(np.asarray(context_len, dtype=float), (n,))
        for (gid, mid, dtype), grid in self.grids.items():
            rows = np.flatnonzero(
                (gpu_ids == gid) & (model_ids == mid) & (weight_dtype == dtype) & (num_gpus == 1)
            )
            if not rows.size:
                continue
            val, exact = _trilinear(grid, b[rows], q[rows], c[rows])
            out[rows] = val
            how[rows] = np.where(np.isnan(val), "", np.where(exact, "measured", "interpolated"))
        return out, how

    def draft_round_ms(
        self, gpu_ids, target_ids, draft_ids, weight_dtype, num_gpus, batch, k, context_len
    ) -> np.ndarray:
        """A draft model's time per round in ms, sum over positions 1..K of its in-loop
        forward time, where a profile's `draft_in_loop` covers the row; beyond the last
        timed position that position's time repeats. NaN elsewhere and where K < 1."""
        n = len(gpu_ids)
        out = np.full(n, np.nan)
        b = np.broadcast_to(np.asarray(batch, dtype=float), (n,))
        c = np.broadcast_to(np.asarray(context_len, dtype=float), (n,))
        kk = np.broadcast_to(np.asarray(k, dtype=float), (n,))
        for (gid, tid, did, dtype), grid in self.loops.items():
            rows = np.flatnonzero(
                (gpu_ids == gid)
                & (target_ids == tid)
                & (draft_ids == did)
                & (weight_dtype == dtype)
                & (num_gpus == 1)
                & (kk >= 1)
            )
            if not rows.size:
                continue
            positions = grid.ms.shape[2]
            chain = np.cumsum(grid.ms, axis=2)
            k_rows = kk[rows].astype(int)
            within = np.minimum(k_rows, positions) - 1
            beyond = np.maximum(k_rows - positions, 0)
            (b0, b1, wb), (c0, c1, wc) = _axis(grid.batch, b[rows]), _axis(grid.context, c[rows])
            total = np.zeros(rows.size)
            for ib, fb in ((b0, 1 - wb), (b1, wb)):
                for ic, fc in ((c0, 1 - wc), (c1, wc)):
                    f = fb * fc
                    v = chain[ib, ic, within] + beyond * grid.ms[ib, ic, positions - 1]
                    total = total + np.where(f == 0, 0.0, f * v)
            out[rows] = total
        return out

    @staticmethod
    def describe(*parts) -> np.ndarray:
        """Join per-row sources of the target, verify, draft-model and head steps into one
        label ('head:uncalibrated': an EAGLE/Medusa/MTP head, which no profile times)."""
        names = ("target", "verify", "draft", "head")
        out = []
        for row in zip(*parts, strict=True):
            labels = [f"{name}:{src}" for name, src in zip(names, row, strict=False) if src]
            out.append(" ".join(labels))
        return np.array(out, dtype=object)


def _axis(values: np.ndarray, x: np.ndarray):
    """Bracketing indices and weight of x on a sorted axis; NaN weight outside it."""
    if values.size == 1:
        inside = np.isclose(x, values[0])
        return np.zeros(x.shape, int), np.zeros(x.shape, int), np.where(inside, 0.0, np.nan)
    hi = np.clip(np.searchsorted(values, x), 1, values.size - 1)
    lo = hi - 1
    w = (x - values[lo]) / (values[hi] - values[lo])
    w = np.where((x < values[0] - 1e-9) | (x > values[-1] + 1e-9), np.nan, np.clip(w, 0, 1))
    return lo, hi, w


def _trilinear(grid: _Grid, b, q, c) -> tuple[np.ndarray, np.ndarray]:
    (b0, b1, wb), (q0, q1, wq), (c0, c1, wc) = (
        _axis(grid.batch, b),
        _axis(grid.query, q),
        _axis(grid.context, c),
    )
    total = np.zeros(b.shape)
    for ib, fb in ((b0, 1 - wb), (b1, wb)):
        for iq, fq in ((q0, 1 - wq), (q1, wq)):
            for ic, fc in ((c0, 1 - wc), (c1, wc)):
                f = fb * fq * fc
                v = grid.ms[ib, iq, ic]
                # A corner with zero weight may be unmeasured without spoiling the point.
                total = total + np.where(f == 0, 0.0, f * v)
    exact = np.isin(wb, (0.0, 1.0)) & np.isin(wq, (0.0, 1.0)) & np.isin(wc, (0.0, 1.0))
    return total, exact


def _describe_fit(label: str, f: DeviceFit) -> str:
    return (
        f"{label}: {f.bandwidth_gbps:,.1f} GB/s, {f.tflops:,.3f} TFLOP/s, overhead "
        f"{f.overhead_fixed_ms:.3f} + {f.overhead_per_layer_ms:.4f} x layers ms, "
        f"median fit error {f.median_rel_error:.1%} over {f.points} points"
    )


def summary(cal: Calibration) -> list[str]:
    """One line per fitted device and per profiled model, then calibration's warnings,
    for the CLI and the app."""
    return (
        [_describe_fit(gid, f) for gid, f in cal.fits.items()]
        + [_describe_fit(f"{gid} / {mid}", f) for (gid, mid), f in cal.model_fits.items()]
        + [
            f"{gid}: engine host cost {ms:.3f} ms per step, fitted to the engine's serving "
            f"benchmarks (default {DEFAULTS.engine_step_ms:g})"
            for gid, ms in cal.engine_steps.items()
        ]
        + [f"warning: {w}" for w in cal.warnings]
    )


def roofline_only_ms(fit: DeviceFit, nbytes, flops) -> np.ndarray:
    """The fitted roofline without overhead, for plots."""
    d = DEFAULTS.replace(bandwidth_efficiency=1.0, compute_efficiency=1.0)
    return get_roofline_ms(nbytes, flops, fit.bandwidth_gbps, fit.tflops, d)
