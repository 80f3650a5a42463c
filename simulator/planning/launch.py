"""Launch configurations in the engines' own forms: vLLM and SGLang command lines, vLLM's
per-batch-size speculative tokens and TensorRT-LLM's `draft_len_schedule`, each with the
replica's parallel layout (`simulator.planning.layouts`) in that engine's flags:

- vLLM: `--tensor-parallel-size` (attention TP), `--data-parallel-size` (attention DP),
  `--enable-expert-parallel` (experts over all TP x DP GPUs; without it they are TP over
  them), its data- and expert-parallel deployment docs;
- SGLang: `--tp` (all the replica's GPUs), `--dp` with `--enable-dp-attention`, `--ep-size`
  (expert TP = tp / ep), its server-arguments docs;
- TensorRT-LLM: `--tp_size` (all the GPUs) and, in the `--extra_llm_api_options` YAML,
  `enable_attention_dp`, `moe_expert_parallel_size`, `moe_tensor_parallel_size` (its
  parallel-strategy docs: their product is `tensor_parallel_size`).

A plain-TP layout (every row that gives only num_gpus, every dense target) writes the
commands as before. vLLM's `--max-num-seqs` and TensorRT-LLM's `--max_batch_size` and KV
pool are per attention-DP rank (each rank schedules its own batch); SGLang's
`--max-running-requests` is the replica's, split over its DP ranks.
"""

from __future__ import annotations

import json
import math
import shlex

from simulator.inputs.specs import ModelSpec
from simulator.planning.layouts import Layout

_VLLM_METHOD = {
    "draft_model": "draft_model",
    "eagle": "eagle",
    "eagle3": "eagle3",
    "medusa": "medusa",
    "mtp": "mtp",
    "ngram": "ngram",
}
_SGLANG_ALGO = {
    "eagle": "EAGLE",
    "eagle3": "EAGLE3",
    "draft_model": "STANDALONE",
    "mtp": "EAGLE",
    "ngram": "NGRAM",
}
SGLANG_CHAIN_NOTE = (
    "# --speculative-num-draft-tokens is K+1 for a chain (topk 1): K drafted tokens plus "
    "the bonus token the target adds"
)


DEFAULT_MAX_MODEL_LEN = 8192
"""The `--max-model-len` every page's command gives by default (the Sizer's input's
default), within the target's window and never below a request's own length."""


def _repo(model: ModelSpec | None, fallback: str) -> str:
    return model.hf_repo if model is not None and model.hf_repo else fallback


def vllm_schedule(ranges: list[tuple[int, int, int]]) -> list[list[int]]:
    """vLLM `num_speculative_tokens_per_batch_size`: [[lo, hi, k], ...] batch ranges."""
    return [[int(lo), int(hi), int(k)] for lo, hi, k in ranges]


def trtllm_draft_len_schedule(ranges: list[tuple[int, int, int]]) -> dict[int, int]:
    """TensorRT-LLM `draft_len_schedule`: {batch size upper bound: draft length}."""
    return {int(hi): int(k) for _, hi, k in ranges}


def _drafter(method: str, target: ModelSpec, draft: ModelSpec | None, head_repo: str) -> str:
    """The repository the engine loads as the drafter: the draft model, the EAGLE or Medusa
    head (a placeholder naming what belongs there when none is given), '' for none."""
    if method == "draft_model":
        return _repo(draft, draft.id if draft else "<draft>")
    if method in ("eagle", "eagle3", "medusa"):
        return head_repo or f"<{method} head for {target.id}>"
    return ""


def _serve_args(
    head: list[str], flags: tuple[str, str, str, str], target: ModelSpec, **values
) -> list[str]:
    """`head` and the target's repository, then the four sizing flags in `flags`' names
    (tensor parallel, memory fraction, context length, sequences) with their values."""
    order = ("num_gpus", "gpu_memory_utilization", "max_model_len", "max_num_seqs")
    args = [*head, _repo(target, target.id)]
    for flag, key in zip(flags, order, strict=True):
        v = values[key]
        args += [flag, f"{v:g}" if isinstance(v, float) else str(v)]
    return args


def _layout_of(layout: Layout | None, num_gpus: int) -> Layout:
    """`layout`, or plain TP over `num_gpus` where none is given; a layout over another
    number of GPUs than `num_gpus` is a caller's error."""
    if layout is None:
        return Layout(int(num_gpus))
    if layout.num_gpus != int(num_gpus):
        raise ValueError(f"layout {layout.describe()} is not {num_gpus} GPUs")
    return layout


def _per_rank(total: int, dp: int) -> int:
    """Sequences (or tokens) per attention-DP rank of a replica's `total`."""
    return max(1, math.ceil(int(total) / int(dp)))


_MULTI_NODE = {
    "vllm": "# this replica spans {n} hosts: vLLM runs it over a Ray cluster of them, or "
    "one launch per host with --data-parallel-size-local and --data-parallel-address when "
    "it is data parallel (its multi-node serving docs)",
    "sglang": "# this replica spans {n} hosts: run the command on each, --node-rank 0 to "
    "{last}, --dist-init-addr the first host's address",
    "trtllm": "# this replica spans {n} hosts: start it on all of them, one rank per GPU "
    "(mpirun, or srun with trtllm-llmapi-launch)",
}


def _notes(engine: str, layout: Layout, nodes: int, per_rank: int, total: int) -> list[str]:
    """Comment lines a command carries for its layout: the per-rank batch, the hosts."""
    out = []
    dp = layout.attention_dp_size
    if dp > 1 and engine != "sglang":
        flag = "--max-num-seqs" if engine == "vllm" else "--max_batch_size"
        out.append(
            f"# {flag} is per attention-DP rank: {per_rank} x {dp} ranks for the plan's "
            f"{total} sequences"
        )
    if nodes > 1:
        out.append(_MULTI_NODE[engine].format(n=nodes, last=nodes - 1))
    return out


def _joined(notes: list[str], args: list[str]) -> str:
    return "\n".join([*notes, " ".join(shlex.quote(a) for a in args)])


def launch_schedule(
    ranges: list[tuple[int, int, int]], max_num_seqs: int, operating_k: int
) -> list[tuple[int, int, int]]:
    """The (lo, hi, K) batch ranges a launch at `max_num_seqs` sequences carries: the
    schedule cut at that batch, or none when the operating point's K is 0. A server sized
    to run at K = 0 would otherwise load the draft (its weights and KV cache) for batches
    it speculates at only when the load falls below the sizing."""
    if operating_k <= 0:
        return []
    return [(lo, min(hi, max_num_seqs), k) for lo, hi, k in ranges if lo <= max_num_seqs]


def vllm_command(
    *,
    target: ModelSpec,
    method: str,
    k: int,
    num_gpus: int,
    gpu_memory_utilization: float,
    max_model_len: int,
    max_num_seqs: int,
    draft: ModelSpec | None = None,
    head_repo: str = "",
    kv_dtype: str = "bf16",
    weight_dtype: str = "bf16",
    ranges: list[tuple[int, int, int]] | None = None,
    layout: Layout | None = None,
    nodes: int = 1,
) -> str:
    """`vllm serve` with `--speculative-config` JSON for exactly this deployment.

    vLLM's method names: draft_model, eagle (EAGLE-1/2 heads), eagle3, medusa (K must equal
    the checkpoint's heads), mtp, ngram. `layout` (default TP over `num_gpus`) and `nodes`,
    the hosts it spans: the module docstring."""
    lay = _layout_of(layout, num_gpus)
    dp = lay.attention_dp_size
    args = _serve_args(
        ["vllm", "serve"],
        ("--tensor-parallel-size", "--gpu-memory-utilization", "--max-model-len", "--max-num-seqs"),
        target,
        num_gpus=lay.tp_size,
        gpu_memory_utilization=float(gpu_memory_utilization),
        max_model_len=max_model_len,
        max_num_seqs=_per_rank(max_num_seqs, dp),
    )
    if dp > 1:
        args += ["--data-parallel-size", str(dp)]
    if lay.moe_ep_size > 1:
        args += ["--enable-expert-parallel"]
    notes = _notes("vllm", lay, nodes, _per_rank(max_num_seqs, dp), max_num_seqs)
    if weight_dtype == "fp8":
        args += ["--quantization", "fp8"]
    if kv_dtype == "fp8":
        args += ["--kv-cache-dtype", "fp8"]
    if method != "none" and k > 0:
        spec: dict = {"method": _VLLM_METHOD[method], "num_speculative_tokens": int(k)}
        if _drafter(method, target, draft, head_repo):
            spec["model"] = _drafter(method, target, draft, head_repo)
        elif method == "ngram":
            spec.update(prompt_lookup_min=2, prompt_lookup_max=5)
        if ranges and any(r[2] != k for r in ranges):
            spec["num_speculative_tokens_per_batch_size"] = vllm_schedule(ranges)
        args += ["--speculative-config", json.dumps(spec, separators=(",", ":"))]
    return _joined(notes, args)


def sglang_command(
    *,
    target: ModelSpec,
    method: str,
    k: int,
    num_gpus: int,
    gpu_memory_utilization: float,
    max_model_len: int,
    max_num_seqs: int,
    draft: ModelSpec | None = None,
    head_repo: str = "",
    kv_dtype: str = "bf16",
    layout: Layout | None = None,
    nodes: int = 1,
) -> str:
    """`python -m sglang.launch_server` for this deployment (chain drafts: topk 1);
    `layout` and `nodes` as `vllm_command`'s."""
    lay = _layout_of(layout, num_gpus)
    args = _serve_args(
        ["python", "-m", "sglang.launch_server", "--model-path"],
        ("--tp", "--mem-fraction-static", "--context-length", "--max-running-requests"),
        target,
        num_gpus=num_gpus,
        gpu_memory_utilization=float(gpu_memory_utilization),
        max_model_len=max_model_len,
        max_num_seqs=max_num_seqs,
    )
    if lay.attention_dp_size > 1:
        args += ["--dp", str(lay.attention_dp_size), "--enable-dp-attention"]
    if lay.moe_ep_size > 1:
        args += ["--ep-size", str(lay.moe_ep_size)]
    if nodes > 1:
        args += ["--nnodes", str(nodes), "--node-rank", "0", "--dist-init-addr", "<host0>:50000"]
    notes = _notes("sglang", lay, nodes, max_num_seqs, max_num_seqs)
    if kv_dtype == "fp8":
        args += ["--kv-cache-dtype", "fp8_e4m3"]
    if method in _SGLANG_ALGO and k > 0:
        args += [
            "--speculative-algorithm",
            _SGLANG_ALGO[method],
            "--speculative-num-steps",
            str(k),
            "--speculative-eagle-topk",
            "1",
            "--speculative-num-draft-tokens",
            str(k + 1),
        ]
        if method in ("draft_model", "eagle", "eagle3"):
            args += ["--speculative-draft-model-path", _drafter(method, target, draft, head_repo)]
        return _joined([SGLANG_CHAIN_NOTE, *notes], args)
    elif method == "medusa":
        return _joined(["# SGLang has no Medusa support; use vLLM or TensorRT-LLM", *notes], args)
    return _joined(notes, args)


_TRTLLM_DECODING = {
    "eagle3": "Eagle3",
    "draft_model": "DraftTarget",
    "mtp": "MTP",
    "ngram": "NGram",
}
"""TensorRT-LLM PyTorch-backend `speculative_config.decoding_type` per method (its
speculative-decoding docs: EAGLE 3, draft/target, MTP, NGram; EAGLE-1/2 and Medusa heads
run only on its older TensorRT backend)."""


def trtllm_command(
    *,
    target: ModelSpec,
    method: str,
    k: int,
    num_gpus: int,
    gpu_memory_utilization: float,
    max_model_len: int,
    max_num_seqs: int,
    draft: ModelSpec | None = None,
    head_repo: str = "",
    kv_dtype: str = "bf16",
    kv_cache_tokens: int | None = None,
    layout: Layout | None = None,
    nodes: int = 1,
) -> str:
    """`trtllm-serve` and the `--extra_llm_api_options` YAML it reads: K is
    `max_draft_len` (MTP: `num_nextn_predict_layers`), a chain of K drafted tokens.

    Its `--kv_cache_free_gpu_memory_fraction` is a share of the memory free after the
    weights load, not of the whole GPU as vLLM's `--gpu-memory-utilization` that the
    plan sizes on, so the same figure gives TensorRT-LLM a bigger pool than planned;
    `kv_cache_tokens` (the plan's KV capacity of the replica, in tokens) caps it with
    `kv_cache_config.max_tokens`, the smaller of the two applying (TensorRT-LLM's
    KvCacheConfig reference). With attention DP each rank holds its own pool and batch,
    so both are the replica's over its ranks. `layout` and `nodes` as `vllm_command`'s."""
    lay = _layout_of(layout, num_gpus)
    dp = lay.attention_dp_size
    args = _serve_args(
        ["trtllm-serve"],
        ("--tp_size", "--kv_cache_free_gpu_memory_fraction", "--max_seq_len", "--max_batch_size"),
        target,
        num_gpus=num_gpus,
        gpu_memory_utilization=float(gpu_memory_utilization),
        max_model_len=max_model_len,
        max_num_seqs=_per_rank(max_num_seqs, dp),
    )
    notes = _notes("trtllm", lay, nodes, _per_rank(max_num_seqs, dp), max_num_seqs)
    kv_config = []
    if kv_dtype == "fp8":
        kv_config.append("  dtype: fp8")
    if kv_cache_tokens is not None and kv_cache_tokens > 0:
        kv_config.append(f"  max_tokens: {_per_rank(kv_cache_tokens, dp)}")
    yaml = ["kv_cache_config:", *kv_config] if kv_config else []
    if dp > 1:
        yaml.append("enable_attention_dp: true")
    if not lay.plain_tp:
        yaml += [
            f"moe_expert_parallel_size: {lay.moe_ep_size}",
            f"moe_tensor_parallel_size: {lay.moe_tp_size}",
        ]
    if method in ("eagle", "medusa") and k > 0:
        note = f"# TensorRT-LLM's PyTorch backend has no {method} heads; use vLLM or SGLang"
        return _joined([note, *notes], args)
    if method in _TRTLLM_DECODING and k > 0:
        yaml += ["speculative_config:", f"  decoding_type: {_TRTLLM_DECODING[method]}"]
        if method == "mtp":
            yaml.append(f"  num_nextn_predict_layers: {int(k)}")
        else:
            yaml.append(f"  max_draft_len: {int(k)}")
        if method in ("draft_model", "eagle3"):
            yaml.append(f"  speculative_model: {_drafter(method, target, draft, head_repo)}")
    if not yaml:
        return _joined(notes, args)
    args += ["--extra_llm_api_options", "spec.yaml"]
    body = "\n".join(yaml)
    return _joined([*notes, f"cat > spec.yaml <<'EOF'\n{body}\nEOF"], args)


def engine_command(engine: str, **kwargs) -> str:
    """The launch command of the scenario's `engine` (vllm, sglang or trtllm; `other` gets
    vLLM's as the reference form), with K mapped onto that engine's own flags.
    `kv_cache_tokens` caps TensorRT-LLM's KV pool (`trtllm_command`); vLLM's and SGLang's
    memory fractions are of the whole GPU, as the plan sizes them, and need no cap."""
    if engine == "trtllm":
        kwargs.pop("weight_dtype", None)
        kwargs.pop("ranges", None)
        return trtllm_command(**kwargs)
    kwargs.pop("kv_cache_tokens", None)  # a fraction of the whole GPU, as the plan sizes
    if engine == "sglang":
        kwargs.pop("weight_dtype", None)
        kwargs.pop("ranges", None)
        return sglang_command(**kwargs)
    return vllm_command(**kwargs)
