"""Parsed engine benchmarks -> one `specplan.profile/v1` profile.

The engine and its version become the profile's `engine` provenance, the decode and
prefill forwards it timed become `measurements` (one model, one device), its serving loads
become `serving_points`, and the fit of its per-step host cost (`fit`) goes into
`engine.fit`. The model and the GPU come from the files where they record them (a Hugging
Face repo or catalog id; a device name such as 'NVIDIA H200'), otherwise from `target` and
`gpu`, ids of the catalogs.
"""

from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass
from datetime import UTC, datetime

import pandas as pd

from profiler.imports.bounds import TOLERANCE, step_floor
from profiler.imports.common import Parsed, StepPoint
from profiler.imports.fit import (
    EngineFit,
    Setup,
    check_acceptance,
    fit_engine_step,
    given_acceptance,
    method_name,
)
from simulator.errors import InputError
from simulator.inputs.catalog import default_gpus, default_models
from simulator.inputs.profile import SCHEMA, Profile, profile_from_dict
from simulator.inputs.specs import DTYPE_BYTES, GPUSpec, ModelSpec
from simulator.model.calibration import match_gpu_id
from simulator.model.memory import get_kv_bytes_per_token


@dataclass(frozen=True)
class Imported:
    """The profile, the fit it carries, what the files could not give (`notes`), and what
    the user must read first (`warnings`: a file recording another model than the chosen
    one)."""

    profile: Profile
    fit: EngineFit
    notes: tuple[str, ...]
    speedups: pd.DataFrame
    warnings: tuple[str, ...] = ()


def resolve_model(parsed: list[Parsed], target: str, models: dict[str, ModelSpec]) -> ModelSpec:
    """The catalog model: `target` when given, else the one the files record; either may be
    a catalog id, a Hugging Face id or a local checkpoint path ending in the repo name
    (`simulator.inputs.catalog.resolve_model`)."""
    from simulator.inputs.catalog import resolve_model as lookup

    hint = (
        "give --target with a catalog or Hugging Face id, or --model-config with the "
        "model's config.json"
    )
    if target:
        found_id = lookup(target, models)
        if found_id is None:
            raise InputError(f"unknown model '{target[:80]}': {hint}", field="--target")
        return models[found_id]
    recorded = {p.model for p in parsed if p.model}
    found = set()
    for name in recorded:
        found_id = lookup(name, models)
        if found_id is None:
            raise InputError(
                f"the files record the model '{name[:80]}', which is not in the model "
                f"catalog: {hint}",
                field="--target",
            )
        found.add(found_id)
    if len(found) > 1:
        raise InputError(f"the files record several models: {sorted(found)}", field="--target")
    if not found:
        names = ", ".join(sorted({p.source for p in parsed}))
        raise InputError(
            f"{names}: the model is not recorded; {hint} (e.g. --target llama-3.1-8b)",
            field="--target",
        )
    return models[found.pop()]


def model_warnings(parsed: list[Parsed], spec: ModelSpec, models: dict[str, ModelSpec]):
    """One line per file that records a model other than `spec` (the chosen one)."""
    from simulator.inputs.catalog import resolve_model as lookup

    out = []
    for p in parsed:
        found = lookup(p.model, models) if p.model else spec.id
        if found != spec.id:
            known = f" (catalog id {found})" if found else ""
            out.append(
                f"{p.source}: the file records the model '{p.model[:80]}'{known}, not the "
                f"chosen {spec.id}; its times are imported as {spec.id}'s: choose the model "
                "the file records if that is what ran"
            )
    return out


def check_steps(steps: list[StepPoint], spec: ModelSpec, gpu: GPUSpec, dtype: str, n: int):
    """Refuse a forward timed faster than `TOLERANCE` x the least time the model can take
    on `n` GPUs of `gpu` (`profiler.imports.bounds`): it did not run as imported."""
    for s in steps:
        floor = step_floor(spec, gpu, dtype, n, s.batch, s.query_len, s.context_len)
        if s.median_ms >= TOLERANCE * floor.ms:
            continue
        point = (
            f"the decode step at batch {s.batch}, context {s.context_len:,} tokens"
            if s.query_len == 1
            else f"the forward of batch {s.batch} x {s.query_len:,} tokens over context "
            f"{s.context_len:,}"
        )
        raise InputError(
            f"{point} was timed at {s.median_ms:.3g} ms, faster than {spec.id} can run on "
            f"{n} x {gpu.id}: at least {floor.ms:.3g} ms = {floor.how} (refused below "
            f"{TOLERANCE:.0%} of that). Is it another model (a smaller or MoE one), more "
            "GPUs or narrower weights than imported? Choose the model, GPU and dtype that ran",
            file=s.source,
        )


def resolve_gpu(parsed: list[Parsed], gpu: str, gpus: dict[str, GPUSpec]) -> GPUSpec:
    """The catalog GPU: `gpu` when given, else the one the files' device names match."""
    if gpu:
        if gpu not in gpus:
            raise InputError(
                f"unknown GPU id '{gpu[:80]}' (known: {', '.join(sorted(gpus))})", field="--gpu"
            )
        return gpus[gpu]
    ids = {p.gpu if p.gpu in gpus else match_gpu_id(p.gpu, "cuda") for p in parsed if p.gpu}
    if len(ids) == 1 and (gid := next(iter(ids))) in gpus:
        return gpus[gid]
    names = ", ".join(sorted({p.source for p in parsed}))
    raise InputError(
        f"{names}: the GPU is not recorded or not in the catalog ("
        f"{', '.join(sorted({p.gpu for p in parsed if p.gpu})) or 'none recorded'}): give "
        f"--gpu (known: {', '.join(sorted(gpus))})",
        field="--gpu",
    )


def latency_steps(runs: list[dict]) -> tuple[list[StepPoint], list[str]]:
    """Decode steps from `vllm bench latency` runs that differ only in output length:
    (t(O2) - t(O1)) / (O2 - O1) per pair of neighbouring output lengths."""
    groups: dict[tuple[int, int], dict[int, dict]] = {}
    for run in runs:
        same = groups.setdefault((run["batch"], run["input_len"]), {})
        if run["output_len"] in same:
            raise InputError(
                f"repeats batch {run['batch']}, input {run['input_len']}, output "
                f"{run['output_len']} of {same[run['output_len']]['source']}",
                file=run["source"],
            )
        same[run["output_len"]] = run
    steps, notes = [], []
    for (batch, input_len), by_out in groups.items():
        outs = sorted(by_out)
        if len(outs) == 1:
            r = by_out[outs[0]]
            notes.append(
                f"{r['source']}: only one vllm bench latency run at batch {batch}, input "
                f"{input_len}: a run times a whole generate() (prefill and every decode step), "
                "not a step; upload a second run that differs only in --output-len "
                f"(this one bounds the step below {r['avg_s'] * 1e3 / outs[0]:.2f} ms)"
            )
            continue
        for o1, o2 in itertools.pairwise(outs):
            r1, r2 = by_out[o1], by_out[o2]
            step_ms = (r2["avg_s"] - r1["avg_s"]) * 1e3 / (o2 - o1)
            if step_ms <= 0:
                notes.append(
                    f"{r1['source']} and {r2['source']}: the longer output ran no slower; no "
                    "step time from this pair"
                )
                continue
            repeats = min(r1["samples"], r2["samples"])
            steps.append(
                StepPoint(
                    batch,
                    1,
                    input_len + (o1 + o2) // 2,
                    step_ms,
                    repeats,
                    f"{r1['source']}+{r2['source']}",
                )
            )
    return steps, notes


def _measurements(model_id: str, steps: list[StepPoint]) -> list[dict]:
    """Measurement rows, repeated points merged: median of their times, repeats summed."""
    grouped: dict[tuple[int, int, int], list[StepPoint]] = {}
    for s in steps:
        grouped.setdefault((s.batch, s.query_len, s.context_len), []).append(s)
    rows = []
    for (b, q, c), group in sorted(grouped.items()):
        ms = round(statistics.median(s.median_ms for s in group), 6)
        rows.append(
            {
                "model": model_id,
                "batch": b,
                "query_len": q,
                "context_len": c,
                "median_ms": ms,
                "p10_ms": ms,
                "p90_ms": ms,
                "repeats": sum(s.repeats for s in group),
                "peak_bytes": 0,
                "status": "ok",
                "extrapolated": False,
            }
        )
    return rows


def _model_entry(spec: ModelSpec, dtype: str) -> dict:
    kv = get_kv_bytes_per_token(spec, "bf16")
    return {
        "id": spec.id,
        "architecture": {
            "num_layers": spec.num_layers,
            "hidden_size": spec.hidden_size,
            "num_heads": spec.num_attention_heads,
            "num_kv_heads": spec.num_kv_heads,
            "head_dim": spec.head_dim,
            "intermediate_size": spec.intermediate_size,
            "vocab_size": spec.vocab_size,
            "tie_word_embeddings": spec.tie_word_embeddings,
        },
        "layers_run": [spec.num_layers],
        "num_layers": spec.num_layers,
        "extrapolated": False,
        "weight_bytes": int(spec.total_params * DTYPE_BYTES.get(dtype, 2.0)),
        "kv_bytes_per_token": kv,
        "kv_bytes_per_token_formula": kv,
        "notes": "architecture from the model catalog; times measured by the engine",
    }


SPEEDUP_COLUMNS = (
    "concurrency",
    "request_rate",
    "acceptance_length",
    "throughput_speedup",
    "tpot_speedup",
    "predicted_before",
    "predicted_after",
    "baseline",
    "speculative",
)


def speedups(points: pd.DataFrame, fit: pd.DataFrame | None = None) -> pd.DataFrame:
    """Speculative points paired with a plain one at the same load: the measured speedup
    (output tokens/s, and TPOT) with the acceptance length, and with `fit` (an
    `EngineFit.table` of the same points) the TPOT speedup predicted before and after the
    fit."""
    rows = []
    load = points[["concurrency", "request_rate"]].fillna(-1.0)
    for i in points.index[points["speculative"]]:
        same = points.index[~points["speculative"] & (load == load.loc[i]).all(axis=1)]
        if not len(same):
            continue
        b, s = points.loc[same[0]], points.loc[i]
        row = {
            "concurrency": s["concurrency"],
            "request_rate": s["request_rate"],
            "acceptance_length": s["acceptance_length"],
            "throughput_speedup": s["output_tok_s"] / b["output_tok_s"],
            "tpot_speedup": b["tpot_ms"] / s["tpot_ms"],
            "predicted_before": float("nan"),
            "predicted_after": float("nan"),
            "baseline": b["source"],
            "speculative": s["source"],
        }
        if fit is not None:
            for when in ("before", "after"):
                col = f"predicted_{when}_ms"
                row[f"predicted_{when}"] = fit.loc[same[0], col] / fit.loc[i, col]
        rows.append(row)
    return pd.DataFrame(rows, columns=list(SPEEDUP_COLUMNS))


def build(
    parsed: list[Parsed],
    *,
    target: str = "",
    gpu: str = "",
    engine_version: str = "",
    method: str = "",
    draft: str = "",
    k: int | None = None,
    acceptance: float | None = None,
    num_gpus: int | None = None,
    command: str = "",
    refused: list[str] | None = None,
    models: dict[str, ModelSpec] | None = None,
    gpus: dict[str, GPUSpec] | None = None,
) -> Imported:
    """The profile of `parsed` files (one engine, one model, one GPU) with its fit.
    `method`, `k` and `acceptance` (mean tokens per verify step) are what the speculating
    server ran where the files do not say (`_contents`); `num_gpus` the replica's GPUs where
    they do not; `refused` names files left out (warnings the user reads first)."""
    models = default_models() if models is None else models
    gpus = default_gpus() if gpus is None else gpus
    engine = _engine(parsed, method)
    acceptance = check_acceptance(acceptance, "--acceptance")
    spec = resolve_model(parsed, target, models)
    gpu_spec = resolve_gpu(parsed, gpu, gpus)
    dtype = next((p.dtype for p in parsed if p.dtype), spec.checkpoint_dtype)
    steps, serving, notes = _contents(parsed, method, k)
    versions = sorted({p.version for p in parsed if p.version})
    num_gpus = _num_gpus(parsed, num_gpus)
    check_steps(steps, spec, gpu_spec, dtype, num_gpus)
    warnings = [*model_warnings(parsed, spec, models), *(refused or [])]
    notes = [*warnings, *notes]
    raw = _document(spec, gpu_spec, dtype, steps, command)
    raw["engine"] = {
        "name": engine,
        "version": engine_version or ", ".join(versions) or "unrecorded",
        "format": ", ".join(sorted({p.format for p in parsed})),
        "files": [p.source for p in parsed],
        "notes": "; ".join(notes),
    }
    raw["serving_points"] = serving
    profile = profile_from_dict(raw, "import")
    setup = Setup(spec.id, gpu_spec.id, num_gpus, dtype, draft=draft, k=k, acceptance=acceptance)
    notes += _acceptance_notes(profile.serving_points, acceptance)
    raw["engine"]["notes"] = "; ".join(notes)
    fit = fit_engine_step(profile.serving_points, setup)
    raw["engine"]["fit"] = {**fit.summary(), **setup.record()}
    profile = profile_from_dict(raw, "import")
    pairs = speedups(profile.serving_points, fit.table)
    return Imported(profile, fit, tuple(notes), pairs, tuple(warnings))


def _num_gpus(parsed: list[Parsed], given: int | None) -> int:
    """GPUs per replica: `given` (the user's), else the most a file records (1 when none
    does); a file recording another count than the one given is refused."""
    recorded = max(p.num_gpus for p in parsed)
    if given is None:
        return recorded
    if isinstance(given, bool) or not isinstance(given, int) or not 1 <= given <= 1024:
        raise InputError(f"{given!r} is not a GPU count from 1 to 1024", field="--num-gpus")
    other = next((p for p in parsed if p.num_gpus > 1 and p.num_gpus != given), None)
    if other is not None:
        raise InputError(
            f"{given} GPUs given, but the file records {other.num_gpus} (its tensor-parallel size)",
            file=other.source,
            field="--num-gpus",
        )
    return given


def _engine(parsed: list[Parsed], method: str) -> str:
    """The one engine of the files; refused when none, several, or `method` is unknown."""
    if not parsed:
        raise InputError("no files to import")
    if method and not method_name(method):
        raise InputError(
            f"unknown method '{method[:40]}' (known: eagle, eagle3, mtp, medusa, ngram, "
            "draft_model)",
            field="--method",
        )
    engines = {p.engine for p in parsed}
    if len(engines) > 1:
        raise InputError(
            f"files from several engines ({', '.join(sorted(engines))}): import "
            "one engine's files at a time"
        )
    return engines.pop()


def _contents(parsed: list[Parsed], method: str, k: int | None):
    """(steps, serving rows, notes) of the files; `method` and `k` fill in what a
    speculating server's result did not record."""
    notes = [n for p in parsed for n in p.notes]
    steps = [s for p in parsed for s in p.steps]
    lat_steps, lat_notes = latency_steps([r for p in parsed for r in p.latency_runs])
    steps += lat_steps
    notes += lat_notes
    serving = [s.row() for p in parsed for s in p.serving]
    notes += _apply_method(serving, method)
    for row in serving:
        if row["speculative"] and row["k"] is None and k is not None:
            row["k"] = k
    if not steps and not serving:
        raise InputError(
            "nothing to import: " + ("; ".join(notes) or "no step and no serving point"),
            file=", ".join(p.source for p in parsed),
        )
    return steps, serving, notes


def _apply_method(serving: list[dict], method: str) -> list[str]:
    """Give the user's `method` to the serving rows, in place: to those the files mark
    speculative, or, where no file marks any, to every row (the user says the server
    speculated; such rows record no acceptance). The notes that say which."""
    if not method or method_name(method) == "none":
        return []
    marked = any(row["speculative"] for row in serving)
    for row in serving:
        if row["speculative"] or not marked:
            row["speculative"], row["method"] = True, method
    if marked or not serving:
        return []
    return [
        f"no file records speculation: --method {method} takes its {len(serving)} serving "
        "point(s) for the speculating server's, so they are not fitted on as plain runs "
        "(import the plain server's results without --method to fit the host cost)"
    ]


def _acceptance_notes(points: pd.DataFrame, acceptance: float | None) -> list[str]:
    """What the user's acceptance length was used for, if anything."""
    n = int(given_acceptance(points).sum())
    if acceptance is None:
        return []
    if not n:
        return [f"--acceptance {acceptance:g} not used: every speculative point records its own"]
    return [
        f"acceptance length {acceptance:g} from --acceptance for {n} speculative point(s) that "
        "record none (given, not measured: the host cost is not fitted on them)"
    ]


def _document(spec: ModelSpec, gpu_spec: GPUSpec, dtype: str, steps, command: str) -> dict:
    """The profile document without its engine parts."""
    return {
        "schema": SCHEMA,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command,
        "device": {
            "name": gpu_spec.name,
            "kind": "cuda",
            "memory_bytes": int(gpu_spec.memory_gb * 2**30),
            "driver": None,
            "torch_version": "n/a (measured by the engine)",
            "cpu_threads": None,
        },
        "settings": {
            "dtype": dtype,
            "warmup": 0,
            "repeats": 1,
            "min_time_s": 0.0,
            "cuda_graphs": True,
        },
        "models": [_model_entry(spec, dtype)],
        "measurements": _measurements(spec.id, steps),
    }


def refit(profile: Profile) -> EngineFit | None:
    """The fit of an imported profile again, from the scenario its `engine.fit` records;
    None for a profile that holds no serving points."""
    fit = (profile.engine or {}).get("fit") or {}
    if not len(profile.serving_points) or "target" not in fit:
        return None
    return fit_engine_step(profile.serving_points, Setup.of(fit))
