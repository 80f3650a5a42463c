"""Which silicon_sample.csv runs ran speculative decoding: the InferenceMAX sweeps they came from.

Most aggregated runs in aiconfigurator-core 0.12.0's `silicon_sample.csv` are SemiAnalysis
InferenceMAX (now InferenceX) sweeps: prompts and outputs of 1k/1k, 1k/8k and 8k/1k tokens
at concurrency 4-256, and a `measured=` stamp a few seconds after the InferenceX commit whose
merge ran the sweep (2026-01-14T22:26:21Z for commit bf3456727, merged 22:26:18Z, "Add MTP
Benchmark Support for DeepSeek-R1 TRT", PR #392; 2026-02-06T17:21:58Z for 0aae52d4c at
17:21:54Z). The rows do not say whether a run used speculative decoding; InferenceX does.
Each merge runs the config keys its `perf-changelog.yaml` addition names, and each key's
search space in `.github/configs/nvidia-master.yaml` says `spec-decoding: mtp` or not (the
single-node keys that do end in `-mtp`; from 2026-02-05 they are the only ones that ran
TensorRT-LLM 1.2.0rc6.post3). A baseline TPOT checked against a run that verified MTP drafts
is checked against the wrong thing: DeepSeek-R1 on 8 B200s with TensorRT-LLM at rc6.post3
measures 35-55% below rc6.post2 at the same layout and concurrency.

`data/validation/inferencemax_runs.csv` is that join, one row per (sweep, config key), built
by `build` from a clone of github.com/SemiAnalysisAI/InferenceX (`python -m
simulator.validation.inferencemax CLONE > data/validation/inferencemax_runs.csv`);
`spec_decoding` matches each run to it.
"""

from __future__ import annotations

import fnmatch
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import yaml

RUNS_PATH = Path(__file__).resolve().parents[2] / "data" / "validation" / "inferencemax_runs.csv"

MODEL_PREFIX = {
    "deepseek-r1": "dsr1",
    "deepseek-v3": "dsr1",
    "gpt-oss-120b": "gptoss",
    "kimi-k2.5": "kimik2.5",
    "minimax-m2.5": "minimaxm2.5",
    "qwen3.5-397b-a17b": "qwen3.5",
    "glm-5": "glm5",
}
"""Catalog id -> InferenceX `model-prefix`. InferenceX never ran DeepSeek-V3: the rows
labelled V3 at its sweeps' stamps are the db-dump's label for its DeepSeek-R1 runs
(config 201, the same measurements as R1 rows of the 2026-03-25 file)."""

PRECISION = {"nvfp4": "fp4"}
"""InferenceX `precision` -> silicon_sample's, where they name one format two ways."""

FRAMEWORK = {"trtllm": "trt", "sglang": "sglang", "vllm": "vllm"}
"""aiconfigurator backend -> InferenceX single-node `framework` (aggregated runs only)."""

STAMP_WINDOW_S = 300
"""A run stamped to the second is matched to a sweep merged at most this long before it
(the stamps in the file are 3-4 s after their commits)."""

MASTER_FILES = (
    ".github/configs/nvidia-master.yaml",
    "configs/nvidia-master.yaml",
)


def load_table(path: Path = RUNS_PATH) -> pd.DataFrame:
    """The InferenceX sweeps, one row per (sweep, config key), `run_utc` as UTC timestamps."""
    table = pd.read_csv(path, dtype=str).fillna("")
    table["run_utc"] = pd.to_datetime(table["run_utc"], utc=True)
    return table


def _stamps(raw: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Each row's `measured=` stamp (UTC) and whether it names a time of day."""
    source = raw.get("silicon_data_source", pd.Series("", index=raw.index))
    text = source.fillna("").astype(str).str.extract(r"measured=([^;]+)")[0]
    when = pd.to_datetime(text.str.strip(), utc=True, errors="coerce", format="mixed")
    timed = text.str.contains(r"T\d\d:\d\d:\d\d", na=False) & ~text.str.contains(
        "T00:00:00", na=False
    )
    return when, timed


def spec_decoding(raw: pd.DataFrame, target: pd.Series, table=None) -> pd.DataFrame:
    """Per silicon_sample row: `spec_decoding` ("mtp", "none", "both" where one sweep ran
    the same model, GPU, precision and engine with and without it, "" where no InferenceX
    sweep matches), `inferencemax_run` (the keys and the sweep's merge time) and
    `kv_cache_dtype` (the KV dtype the matched keys served, `served_kv`: "fp8" or "bf16";
    "" where they disagree, none says, or nothing matches)."""
    table = load_table() if table is None else table
    when, timed = _stamps(raw)
    key = pd.DataFrame(
        {
            "prefix": target.map(MODEL_PREFIX),
            "precision": raw["precision"].astype(str),
            "gpu": raw["system"].astype(str).str.split("_").str[0],
            "framework": raw["backend"].map(FRAMEWORK),
            "when": when,
            "timed": timed,
        },
        index=raw.index,
    )
    out = pd.DataFrame(
        "", index=raw.index, columns=["spec_decoding", "inferencemax_run", "kv_cache_dtype"]
    )
    fields = ["prefix", "precision", "gpu", "framework", "when", "timed"]
    for group, rows in key.dropna(subset=["prefix", "framework", "when"]).groupby(fields):
        out.loc[rows.index, :] = _match(table, *group)
    return out


def _match(table, prefix, precision, gpu, framework, when, timed) -> tuple[str, str, str]:
    """The spec decoding, keys and KV dtype of the sweep(s) a stamp points at, for one
    model/GPU/engine."""
    same = table[
        (table["model_prefix"] == prefix)
        & (table["precision"].replace(PRECISION) == precision)
        & (table["gpu"] == gpu)
        & (table["framework"] == framework)
    ]
    if timed:
        lag = (when - same["run_utc"]).dt.total_seconds()
        same = same[(lag >= 0) & (lag <= STAMP_WINDOW_S)]
    else:
        same = same[same["run_utc"].dt.normalize() == when.normalize()]
    kinds = set(same["spec_decoding"]) - {""}
    if not kinds:
        return "", "", ""
    label = "both" if len(kinds) > 1 or "mixed" in kinds else kinds.pop()
    runs = sorted({f"{r.config_key} {r.run_utc:%Y-%m-%dT%H:%M:%SZ}" for r in same.itertuples()})
    kv = {served_kv(r.get("kv_cache_dtype", ""), r.get("model", "")) for _, r in same.iterrows()}
    return label, "; ".join(runs), kv.pop() if len(kv) == 1 else ""


def served_kv(flag: str, model: str) -> str:
    """The KV cache dtype a server ran with: its script's `flag` ("fp8", "auto", ""), and
    for "auto" the checkpoint it served. An engine's auto KV dtype is the checkpoint's own
    KV quantisation where it names one, else the model's activation dtype (vLLM's
    `resolve_kv_cache_dtype_string`; TensorRT-LLM's and SGLang's ModelOpt readers alike):
    NVIDIA's ModelOpt exports (`nvidia/...`) write `"kv_cache_quant_algo": "FP8"` into
    their hf_quant_config.json, the vendors' releases (deepseek-ai, moonshotai,
    MiniMaxAI, openai, zai-org, Qwen) name none. "" where the flag is unknown."""
    if flag == "fp8":
        return "fp8"
    if flag == "auto":
        return "fp8" if str(model).lower().startswith("nvidia/") else "bf16"
    return ""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
    ).stdout


def _master(repo: Path, commit: str) -> dict:
    """The single-node NVIDIA config keys at `commit`, with their fields."""
    for name in MASTER_FILES:
        text = _git(repo, "show", f"{commit}:{name}")
        if text:
            return yaml.safe_load(text) or {}
    return {}


def _spec_of(config: dict) -> str:
    """mtp / none / mixed over a config's search-space entries; "" where it has none.

    The entries sit under `seq-len-configs` until spring 2026 and under `scenarios:
    fixed-seq-len` after."""
    scenarios = config.get("scenarios") or {}
    seqs = (config.get("seq-len-configs") or []) + (
        (scenarios.get("fixed-seq-len") or []) if isinstance(scenarios, dict) else []
    )
    kinds = {
        "none" if str(entry.get("spec-decoding", "none")).lower() in ("none", "") else "mtp"
        for seq in seqs
        for entry in seq.get("search-space") or []
    }
    if not kinds:
        return ""
    return kinds.pop() if len(kinds) == 1 else "mixed"


_KV_FLAG = re.compile(r"""(?:--)?kv[-_]cache[-_]dtype[= :]+["']?([^\s"'\\]+)""")
_KV_BLOCK = re.compile(r"kv_cache_config:[ \t]*\n(?:[ \t]+.*\n){0,6}?[ \t]+dtype:[ \t]*(\S+)")


def _kv_of(repo: Path, commit: str, config: dict, spec: str) -> str:
    """The KV cache dtype a key's benchmark script serves with at `commit` (`spec` its
    `_spec_of`, which names the script): "fp8", "auto"
    (the engine's default, the model's activation dtype: the script says auto or names no
    KV dtype), or "" (no script found, the scripts disagree, or one reads the dtype from a
    variable).

    The script is the one InferenceX's runners launch (runners/launch_*.sh):
    {model-prefix}_{precision}_{gpu}{_trt}{_mtp}.sh under benchmarks/single_node/ (and its
    fixed_seq_len/ folder from spring 2026), or under benchmarks/ with a _docker or _slurm
    suffix for the runner kind before 2026-02."""
    stem = "_".join(
        [
            str(config.get("model-prefix", "")),
            str(config.get("precision", "")),
            str(config.get("runner", "")).split("-")[0],
        ]
    )
    stem += "_trt" if config.get("framework") == "trt" else ""
    stem += "_mtp" if spec == "mtp" else ""
    found = set()
    for name in SCRIPT_PATHS:
        text = _git(repo, "show", f"{commit}:{name.format(stem=stem)}")
        if text:
            found.add(_kv_in(text))
    return found.pop() if len(found) == 1 else ""


SCRIPT_PATHS = (
    "benchmarks/single_node/{stem}.sh",
    "benchmarks/single_node/fixed_seq_len/{stem}.sh",
    "benchmarks/{stem}.sh",
    "benchmarks/{stem}_docker.sh",
    "benchmarks/{stem}_slurm.sh",
)


def _kv_in(script: str) -> str:
    """fp8 / auto / "" as one benchmark script sets its server's KV cache dtype."""
    found = _KV_FLAG.search(script) or _KV_BLOCK.search(script)
    if found is None:
        return "auto"
    value = found.group(1).lower()
    if value.startswith("fp8"):
        return "fp8"
    return "auto" if value in ("auto", "bfloat16", "bf16") else ""


def _added(repo: Path, commit: str) -> list:
    """The changelog entries a first-parent commit added (as InferenceX's
    utils/process_changelog.py reads them: the diff's added lines, parsed as YAML)."""
    diff = _git(repo, "diff", f"{commit}^", commit, "--", "perf-changelog.yaml")
    lines = [ln[1:] for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    try:
        entries = yaml.safe_load("\n".join(lines)) or []
    except yaml.YAMLError:
        return []
    return entries if isinstance(entries, list) else []


def build(repo: Path) -> pd.DataFrame:
    """One row per (sweep, single-node NVIDIA config key) from an InferenceX clone."""
    log = _git(
        repo,
        "log",
        "--first-parent",
        "--reverse",
        "--format=%H %cI",
        "HEAD",
        "--",
        "perf-changelog.yaml",
    )
    rows = []
    for line in log.splitlines():
        commit, stamp = line.split()
        entries = _added(repo, commit)
        if not entries:
            continue
        master = _master(repo, commit)
        keys = set()
        for entry in entries:
            for pattern in (entry or {}).get("config-keys") or []:
                keys.update(fnmatch.filter(master, str(pattern)))
        for k in sorted(keys):
            config = master[k]
            spec = _spec_of(config)
            if config.get("multinode") or config.get("framework") not in FRAMEWORK.values():
                continue
            rows.append(
                {
                    "run_utc": pd.Timestamp(stamp).tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "commit": commit[:9],
                    "config_key": k,
                    "model_prefix": config.get("model-prefix", ""),
                    "precision": config.get("precision", ""),
                    "gpu": str(config.get("runner", "")).split("-")[0],
                    "framework": config.get("framework", ""),
                    "image": config.get("image", ""),
                    "model": config.get("model", ""),
                    "spec_decoding": spec,
                    "kv_cache_dtype": _kv_of(repo, commit, config, spec),
                    "source": f"SemiAnalysisAI/InferenceX@{commit[:9]} perf-changelog.yaml, "
                    "nvidia-master.yaml",
                }
            )
    return pd.DataFrame(rows)


if __name__ == "__main__":
    build(Path(sys.argv[1])).to_csv(sys.stdout, index=False)
