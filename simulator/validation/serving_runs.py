"""Absolute TPOT and TTFT checked on measured serving runs.

aiconfigurator-core ships `systems/silicon_sample.csv` (Apache-2.0): serving benchmarks
run with vLLM, SGLang and TensorRT-LLM on H100, H200, B200 and others, one row per
(model, GPU, engine, parallelism, ISL/OSL, concurrency) with the measured mean TPOT and
TTFT. `load_runs` keeps the rows this model can price as the runs were made: dense
models the catalog has, aggregated serving (not disaggregated), tensor parallelism only
(no pipeline or attention data parallelism), fp8 weights (KV cache fp8, as the
engines' fp8 recipes run it). `score` prices each as `simulator predict` would (method
none, `serving` steady, batch = concurrency, prompt = isl, output = osl) and returns one
row per run with the errors; `summarise` groups them.

The measured TTFT includes queueing behind the other requests' prefill and decode
steps; the predicted TTFT is one prompt's prefill alone, so its error is expected to be
negative and grows with concurrency.

**Runs left out of the summary: the prefill floor.** At concurrency C a run completes C
requests per request lifetime (TTFT + (OSL - 1) * TPOT, as measured), so in that time the
engine must prefill C prompts. `score` prices that work from the engine's own kernel tables
at a full chunk's per-token cost (the cheapest a prompt token gets; device time only, no
host cost) and marks a run `excluded` when it exceeds the measured lifetime: those prompts
were not all computed (prefix-cache hits) or the TPOT left the prefill steps out, and the
run does not measure what `serving = steady` prices. The rule reads the data alone, the
same under kernel or roofline pricing; the summary states how many runs it left out and
from which groups.

**Layouts as run, each measurement once.** `silicon_layout` decodes the rows two dumps of
the file write squared (TP8 EP8 on 8 GPUs as `tp_size` 64), keeps one row of each
measurement the dumps repeat, and leaves out, naming why, a row whose columns contradict
its own id or whose attention TP does not divide the model's heads.

**Runs that verified MTP drafts.** Most 2026 rows are InferenceMAX sweeps, and the file
does not say which ran MTP speculative decoding. `inferencemax` joins each row's
`measured=` stamp to the InferenceX sweep it came from (`spec_decoding`, `inferencemax_run`);
a run whose sweep searched only MTP configs is left out, named: its TPOT is a speculative
run's at an unrecorded acceptance, not the baseline `method none` prices.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from simulator.errors import InputError
from simulator.kernels import tables
from simulator.validation import inferencemax, silicon_layout

SILICON_COLUMNS = (
    "backend",
    "model_path",
    "system",
    "precision",
    "mode",
    "isl",
    "osl",
    "batch_size",
    "tp_size",
    "pp_size",
    "attention_dp_size",
    "silicon_ttft_ms",
    "silicon_tpot_ms",
)
"""Columns of silicon_sample.csv this reads; a file without them is refused."""

BUCKETS = ((0, 8, "1-8"), (8, 32, "9-32"), (32, 128, "33-128"), (128, np.inf, ">128"))
"""Concurrency buckets of the summary (lower bound exclusive)."""


def bundled_runs_path() -> Path:
    """silicon_sample.csv as the installed aiconfigurator-core ships it."""
    return tables.systems_root() / "silicon_sample.csv"


def catalog_id(model_path: str) -> str:
    """A Hugging Face repo name as a catalog id: 'meta-llama/Llama-3.1-8B-Instruct' and
    'nvidia/Llama-3.1-8B-Instruct-FP8' -> 'llama-3.1-8b' (same shape)."""
    name = str(model_path).rsplit("/", 1)[-1].lower()
    for suffix in ("-fp8", "-instruct"):
        name = name.removesuffix(suffix)
    return name


PRECISIONS = {
    "fp8": ("fp8", "fp8"),
    "fp4": ("fp4", "fp8"),
    "int4": ("int4", "fp8"),
    "bf16": ("bf16", "bf16"),
}
"""A run's `precision` -> (weight dtype, KV dtype) of its scenario (the engines' quantised
recipes keep an fp8 KV cache). Dense runs are kept at fp8 only, as before the MoE runs.
Where the InferenceMAX sweep that ran it is known, the KV dtype is the one its benchmark
script served (`kv_cache_dtype_run`, `inferencemax.served_kv`: a script without
`--kv-cache-dtype` serves the engine's auto, bf16 on the vendors' checkpoints)."""

LAYOUT_COLUMNS = ("tp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")


def _absent(raw: pd.DataFrame) -> list[str]:
    """The layout columns a file lacks (older files have no MoE columns)."""
    return [c for c in LAYOUT_COLUMNS if c not in raw]


def _model_ids(raw: pd.DataFrame, models) -> pd.Series:
    """Each run's catalog id: its Hugging Face id looked up in the catalog (`resolve_model`
    where the catalog has one), else the repo name as `catalog_id` spells it."""
    from simulator.inputs import catalog

    resolve = getattr(catalog, "resolve_model", None)
    ids = {}
    for path in raw["model_path"].astype(str).unique():
        found = resolve(path, models) if resolve else None
        ids[path] = found or catalog_id(path)
    return raw["model_path"].astype(str).map(ids)


def load_runs(path, models) -> pd.DataFrame:
    """The usable runs of a silicon_sample.csv as scenario columns plus the measurements.

    Keeps aggregated runs on catalog GPUs of the engines with tables, without pipeline
    parallelism: dense catalog models at fp8 with tensor parallelism only, and MoE / MLA
    catalog models that aiconfigurator-core's engine builds (`ModelSpec.aic_model`) at any
    precision and layout (attention DP and EP included; the run's `batch_size` is per
    attention-DP rank, so the replica's concurrency is batch_size x attention_dp_size).
    Raises `InputError` naming the file if a needed column is missing.
    """
    raw = pd.read_csv(path)
    missing = [c for c in SILICON_COLUMNS if c not in raw.columns]
    if missing:
        raise InputError(f"missing columns {missing}", file=str(path))
    gpu_of = {system: gpu for gpu, system in tables.SYSTEMS.items()}
    per_node = raw["system"].map(gpu_of).map(tables.get_gpus_per_node, na_action="ignore")
    raw, decoded = silicon_layout.decode(
        raw.reindex(columns=[*raw.columns, *_absent(raw)]), per_node
    )
    target = _model_ids(raw, models)
    dense = {k for k, m in models.items() if not m.is_moe and not m.is_mla}
    moe = {k for k, m in models.items() if (m.is_moe or m.is_mla) and m.aic_model}
    layout = {
        c: raw[c].fillna(1.0).replace(0.0, np.nan) if c in raw else pd.Series(1.0, raw.index)
        for c in LAYOUT_COLUMNS
    }
    moe_gpus = layout["moe_tp_size"].fillna(1.0) * layout["moe_ep_size"].fillna(1.0)
    implied = moe_gpus / raw["tp_size"].where(raw["tp_size"] >= 1)
    # A run that leaves attention DP blank while its MoE spans more GPUs than its attention
    # TP (vLLM's data parallelism, 19 Qwen3-235B runs) ran that many attention-DP ranks.
    blank = raw["attention_dp_size"].isna() if "attention_dp_size" in raw else True
    dp = layout["attention_dp_size"].where(
        ~(blank & (implied > 1) & (implied == implied.round())), implied
    )
    is_dense = target.isin(dense) & (raw["precision"] == "fp8") & (dp == 1.0)
    is_moe = target.isin(moe) & raw["precision"].isin(PRECISIONS)
    keep = (
        (raw["mode"] == "agg")
        & (is_dense | is_moe)
        & raw["system"].isin(gpu_of)
        & raw["pp_size"].fillna(1.0).isin({1.0})
        & (raw["silicon_tpot_ms"] > 0)
        & (raw["tp_size"] >= 1)
        & raw["backend"].isin(tables.ENGINES)
    )
    repeat = silicon_layout.duplicates(raw)
    keep &= ~repeat
    runs = raw[keep]
    heads = target.map({k: m.num_attention_heads for k, m in models.items()})
    contradiction = silicon_layout.contradictions(raw, heads)[keep]
    dtypes = runs["precision"].map(PRECISIONS)
    gpus = (runs["tp_size"] * dp[keep]).astype(int)
    ep = layout["moe_ep_size"][keep].fillna(1.0).astype(int)
    moe_tp = layout["moe_tp_size"][keep].fillna(gpus / ep).astype(int)
    dense_row = is_dense[keep].to_numpy()
    spec = inferencemax.spec_decoding(runs, target[keep])
    return pd.DataFrame(
        {
            "target": target[keep].to_numpy(),
            "gpu": runs["system"].map(gpu_of).to_numpy(),
            "num_gpus": gpus.to_numpy(),
            "tp_size": runs["tp_size"].astype(int).to_numpy(),
            "attention_dp_size": dp[keep].astype(int).to_numpy(),
            "moe_tp_size": np.where(dense_row, gpus, moe_tp),
            "moe_ep_size": np.where(dense_row, 1, ep),
            "engine": runs["backend"].to_numpy(),
            "weight_dtype": [d[0] for d in dtypes],
            "kv_dtype": np.where(
                spec["kv_cache_dtype"].to_numpy() != "",
                spec["kv_cache_dtype"].to_numpy(),
                [d[1] for d in dtypes],
            ),
            "method": "none",
            "serving": "steady",
            "batch_size": (runs["batch_size"] * dp[keep]).astype(int).to_numpy(),
            "prompt_len": runs["isl"].astype(int).to_numpy(),
            "output_len": runs["osl"].astype(int).to_numpy(),
            "measured_tpot_ms": runs["silicon_tpot_ms"].to_numpy(float),
            "measured_ttft_ms": runs["silicon_ttft_ms"].to_numpy(float),
            "engine_version_measured": runs.get("backend_version", pd.Series("", runs.index))
            .fillna("")
            .astype(str)
            .to_numpy(),
            "family": np.where(dense_row, "dense", "MoE"),
            "layout_decoded": decoded[keep].to_numpy(),
            "layout_contradiction": contradiction.to_numpy(),
            "spec_decoding": spec["spec_decoding"].to_numpy(),
            "inferencemax_run": spec["inferencemax_run"].to_numpy(),
            "kv_cache_dtype_run": spec["kv_cache_dtype"].to_numpy(),
        }
    )


def score(runs: pd.DataFrame, *, gpus=None, models=None, kernels: bool = True) -> pd.DataFrame:
    """Each run priced, with `tpot_error` and `ttft_error` (predicted / measured - 1)."""
    from simulator.model.predict import predict

    scen = runs.drop(
        columns=[
            "measured_tpot_ms",
            "measured_ttft_ms",
            "engine_version_measured",
            "family",
            "layout_decoded",
            "layout_contradiction",
            "spec_decoding",
            "inferencemax_run",
        ],
        errors="ignore",
    )
    out = predict(scen, gpus=gpus, models=models, break_even=False, kernels=kernels)
    res = runs.copy()
    res["predicted_tpot_ms"] = out["baseline_tpot_ms"].to_numpy()
    res["predicted_ttft_ms"], floor = _ttft_ms(runs, kernels, models)
    res["prefill_floor_ms"] = floor
    res["latency_source"] = out["latency_source"].astype(str).to_numpy()
    res["status"] = out["status"].astype(str).to_numpy()
    res["tpot_error"] = res["predicted_tpot_ms"] / res["measured_tpot_ms"] - 1.0
    res["ttft_error"] = res["predicted_ttft_ms"] / res["measured_ttft_ms"] - 1.0
    lifetime = res["measured_ttft_ms"] + (res["output_len"] - 1) * res["measured_tpot_ms"]
    res["excluded"] = np.where(
        res["prefill_floor_ms"] > lifetime, "below the prefill floor (prompts not computed)", ""
    )
    if "layout_contradiction" in res:
        named = res["layout_contradiction"].fillna("").astype(str)
        res["excluded"] = np.where(
            named != "", "layout columns contradict the run: " + named, res["excluded"]
        )
    if "spec_decoding" in res:
        mtp = res["spec_decoding"].eq("mtp").to_numpy()
        res.loc[mtp, "excluded"] = (
            "ran with MTP speculative decoding (InferenceMAX "
            + res.loc[mtp, "inferencemax_run"].astype(str)
            + "): the file records no acceptance"
        )
    return res


def _ttft_ms(runs: pd.DataFrame, kernels: bool, models=None) -> tuple[np.ndarray, np.ndarray]:
    """Per run: the predicted TTFT, one prompt's prefill alone (a forward of `prompt_len`
    tokens) plus one host step (NaN when not `kernels`); and the prefill floor, the device
    ms of the run's `batch_size` prompts at a full chunk's per-token cost (NaN where the
    engine has no tables). Both from the engine's kernel tables."""
    from simulator.inputs.catalog import default_models
    from simulator.kernels.engines import ENGINE_HOST
    from simulator.kernels.source import Layout, target_surface

    models = default_models() if models is None else models
    ttft = np.full(len(runs), np.nan)
    floor = np.full(len(runs), np.nan)
    cols = [c for c in LAYOUT_COLUMNS if c in runs]
    keys = ["target", "gpu", "engine", "weight_dtype", "kv_dtype", "num_gpus", *cols, "prompt_len"]
    for key, idx in runs.groupby(keys).indices.items():
        t, g, e, wd, kv, tp = key[:6]
        spec = models.get(t)
        lay = Layout(*(int(x) for x in key[6:-1])) if cols else Layout.tensor_parallel(int(tp))
        s = None if spec is None else target_surface(spec, g, e, "", wd, kv, lay)
        if s is None:
            continue
        p = key[-1]
        prefill = float(s.prefill_ms(p, p))
        floor[idx] = runs["batch_size"].to_numpy(float)[idx] * prefill
        if kernels:
            ttft[idx] = prefill + float(s.at_m(s.lm_head_ms, 1.0)) + ENGINE_HOST[e].step_ms
    return ttft, floor


def _bucket(batch) -> np.ndarray:
    b = np.asarray(batch, dtype=float)
    out = np.full(b.shape, "", dtype=object)
    for lo, hi, name in BUCKETS:
        out[(b > lo) & (b <= hi)] = name
    return out


def _stats(errors: pd.DataFrame, key) -> pd.DataFrame:
    g = errors.groupby(key, sort=True)
    return pd.DataFrame(
        {
            "runs": g.size(),
            "tpot_median_abs": g["tpot_error"].apply(lambda e: e.abs().median()),
            "tpot_signed": g["tpot_error"].median(),
            "ttft_median_abs": g["ttft_error"].apply(lambda e: e.abs().median()),
        }
    )


def summarise(errors: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Median |error| and signed median of TPOT (and |error| of TTFT): overall, by engine,
    GPU, model, concurrency bucket, and by (model, GPU, engine), over the runs not
    `excluded` (the prefill floor, a contradicted layout, MTP: module docstring)."""
    kept = errors["excluded"] == "" if "excluded" in errors else True
    e = errors[np.isfinite(errors["tpot_error"]) & kept].assign(
        concurrency=lambda d: _bucket(d["batch_size"]), all="all"
    )
    return {
        "overall": _stats(e, "all"),
        "engine": _stats(e, "engine"),
        "gpu": _stats(e, "gpu"),
        "model": _stats(e, "target"),
        "concurrency": _stats(e, "concurrency"),
        "model, GPU, engine": _stats(e, ["target", "gpu", "engine"]),
        **_family_tables(e),
    }


def _family_tables(e: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Dense and MoE runs apart, and the MoE runs by layout and by concurrency."""
    if "family" not in e:
        return {}
    out = {"family": _stats(e, "family")}
    m = e[e["family"] == "MoE"]
    if not m.empty:
        lay = [c for c in LAYOUT_COLUMNS if c in m]
        named = m.assign(layout=m[lay].astype(int).astype(str).agg(" ".join, axis=1) if lay else "")
        out["MoE layout (tp dp moe_tp moe_ep)"] = _stats(named, "layout")
        out["MoE concurrency"] = _stats(m, "concurrency")
        out["MoE precision"] = _stats(m, "weight_dtype")
    return out


def excluded_note(errors: pd.DataFrame) -> str:
    """How many runs were left out, for which reason (the prefill floor, a layout the
    columns contradict, an MTP run), and from which (model, GPU, engine)."""
    out = errors[errors["excluded"] != ""]
    if out.empty:
        return "no run left out (prefill floor, layout, MTP)"
    reason = np.select(
        [out["excluded"].str.startswith("layout"), out["excluded"].str.startswith("ran with")],
        [
            "layout columns contradict the run (its id's GPUs, or a TP that does not divide "
            "the model's attention heads)",
            "ran with MTP speculative decoding (the InferenceMAX sweep at the run's stamp "
            "searched only MTP configs; the file records no acceptance, so its TPOT is not "
            "a baseline's)",
        ],
        "below the prefill floor (the engine's own kernels need longer to prefill the "
        "run's concurrent prompts than a request's measured lifetime, TTFT + (OSL - 1) * "
        "TPOT; prompts not computed)",
    )
    parts = []
    for why, rows in out.groupby(reason, sort=False):
        groups = rows.groupby(["target", "gpu", "engine"]).size()
        named = ", ".join(f"{t} {g} {e}: {n}" for (t, g, e), n in groups.items())
        parts.append(f"{len(rows)}: {why} ({named})")
    return f"{len(out)} of {len(errors)} runs left out. " + "; ".join(parts)


def format_summary(tables_by: dict[str, pd.DataFrame], errors=None) -> str:
    """The summary as text tables (percentages); with `errors`, the runs left out."""
    parts = [
        "TPOT and TTFT against measured serving runs (measured TTFT includes queueing; "
        "the predicted TTFT is the prompt's prefill alone)"
    ]
    if errors is not None and "excluded" in errors:
        parts.append(excluded_note(errors))
    for name, df in tables_by.items():
        shown = df.copy()
        for c in ("tpot_median_abs", "tpot_signed", "ttft_median_abs"):
            shown[c] = (100 * shown[c]).round(1)
        shown.columns = ["runs", "TPOT |err| %", "TPOT signed %", "TTFT |err| %"]
        parts.append(f"\nby {name}:\n{shown.to_string()}")
    return "\n".join(parts)
