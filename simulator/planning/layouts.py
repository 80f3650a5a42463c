"""The parallel layouts of one replica that the search and the Sizer choose between, and
the nodes a layout spans.

A layout is the four scenario columns aiconfigurator-core names (`simulator columns`):
`tp_size` (attention tensor parallel) x `attention_dp_size` = GPUs of the replica =
`moe_tp_size` x `moe_ep_size`. Which layouts are tried for a GPU count (`span`):

- a dense target: TP over all the GPUs, nothing else (no experts to spread; the kernel
  tables price dense targets at attention DP 1 only);
- an MoE target: attention DP d for every power of two d dividing the GPUs (TP = GPUs / d),
  each with its experts tensor-parallel over all the GPUs (EP 1) or spread one share per GPU
  (EP = GPUs). Intermediate EP (EP4 x expert TP2 on 8 GPUs) is left out: vLLM cannot
  express it (`--enable-expert-parallel` spreads the experts over all TP x DP GPUs), and
  it doubles the count for a layout rarely deployed. 8 GPUs: 8 layouts (TensorRT-LLM: 4);
- an MLA target without experts: the attention DP degrees alone.

Attention DP runs only where the engine has it (`ATTENTION_DP`); TensorRT-LLM's spans all
the replica's GPUs (`enable_attention_dp` makes attention TP 1), so it gets DP 1 or DP = GPUs.
A layout other than plain TP is priced only from the kernel tables (aiconfigurator-core's
engine, `simulator.kernels.composite`); the roofline prices every layout as TP, so a
layout row it prices is no alternative (`priced_by_layout`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simulator.inputs.specs import ModelSpec
from simulator.kernels.tables import get_gpus_per_node

ATTENTION_DP = {
    "vllm": "--data-parallel-size (attention DP; experts TP over DP x TP, or EP with "
    "--enable-expert-parallel)",
    "sglang": "--dp with --enable-dp-attention",
    "trtllm": "enable_attention_dp (attention DP over every GPU of the replica)",
}
"""Engines that run attention data parallelism, and how (their serving docs)."""

DP_ALL_GPUS_ONLY = ("trtllm",)
"""Engines whose attention DP spans all the replica's GPUs (attention TP 1): TensorRT-LLM's
parallel-strategy docs give `tensor_parallel_size` with `enable_attention_dp` on or off."""

EP_ALL_GPUS_ONLY = ("vllm",)
"""Engines whose expert parallelism spans all the replica's GPUs: vLLM's
`--enable-expert-parallel` (its data- and expert-parallel deployment docs)."""


@dataclass(frozen=True)
class Layout:
    """One replica's layout; GPUs = tp_size x attention_dp_size = moe_tp_size x moe_ep_size."""

    tp_size: int
    attention_dp_size: int = 1
    moe_tp_size: int | None = None
    """None: the replica's GPUs / moe_ep_size."""
    moe_ep_size: int = 1

    def __post_init__(self):
        if self.moe_tp_size is None:
            object.__setattr__(self, "moe_tp_size", self.num_gpus // self.moe_ep_size)

    @property
    def num_gpus(self) -> int:
        return int(self.tp_size) * int(self.attention_dp_size)

    @property
    def plain_tp(self) -> bool:
        """TP over every GPU, experts split by TP: what a row giving only num_gpus means."""
        return self.attention_dp_size == 1 and self.moe_ep_size == 1

    def describe(self) -> str:
        """'TP8', 'TP8 EP8', 'TP1 DP8 EP8': as `latency_source` names it."""
        parts = [f"TP{self.tp_size}"]
        if self.attention_dp_size > 1:
            parts.append(f"DP{self.attention_dp_size}")
        if self.moe_ep_size > 1:
            parts.append(f"EP{self.moe_ep_size}")
        return " ".join(parts)

    def columns(self) -> dict:
        """The scenario columns of this layout."""
        return {
            "num_gpus": self.num_gpus,
            "tp_size": int(self.tp_size),
            "attention_dp_size": int(self.attention_dp_size),
            "moe_tp_size": int(self.moe_tp_size),
            "moe_ep_size": int(self.moe_ep_size),
        }


LAYOUT_COLUMNS = ("tp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")


def has_layouts(target: ModelSpec) -> bool:
    """Whether a target has layouts beyond TP: MoE or MLA targets."""
    return bool(target.is_moe or target.is_mla)


def _powers_of_two_dividing(n: int) -> list[int]:
    return [2**i for i in range(int(math.log2(n)) + 1) if n % 2**i == 0]


def span(num_gpus: int, target: ModelSpec, engine: str, *, corners: bool = False):
    """The layouts tried for `num_gpus` GPUs (the module docstring), plain TP first.
    `corners`: attention DP 1 or all the GPUs only, the layouts every engine runs."""
    n = int(num_gpus)
    if not has_layouts(target) or n == 1:
        return (Layout(n),)
    dps = [1]
    if engine in ATTENTION_DP:
        dps = _powers_of_two_dividing(n)
        if corners or engine in DP_ALL_GPUS_ONLY:
            dps = sorted({1, n} & set(dps) or {1})
    eps = (1, n) if target.is_moe else (1,)
    return tuple(Layout(n // d, d, moe_ep_size=e) for d in dps for e in eps)


def problem(layout: Layout, target: ModelSpec, engine: str) -> str:
    """Why `engine` cannot run `target` in `layout` ('' where it can), as 'cannot run: ...'."""
    what = layout.describe()
    if layout.moe_ep_size > 1 and not target.is_moe:
        return f"cannot run: layout {what} spreads experts, and {target.id} has none"
    if layout.attention_dp_size > 1:
        if not has_layouts(target):
            return (
                f"cannot run: layout {what}: attention DP is for MoE and MLA targets; "
                f"{target.id} is dense (more replicas do the same)"
            )
        if engine not in ATTENTION_DP:
            return f"cannot run: layout {what}: {engine} has no attention data parallelism"
        if engine in DP_ALL_GPUS_ONLY and layout.tp_size != 1:
            return (
                f"cannot run: layout {what}: {engine}'s attention DP spans every GPU of the "
                f"replica (TP1 DP{layout.num_gpus})"
            )
    if engine in EP_ALL_GPUS_ONLY and layout.moe_ep_size not in (1, layout.num_gpus):
        return (
            f"cannot run: layout {what}: {engine}'s expert parallelism spans every GPU of "
            f"the replica (EP{layout.num_gpus})"
        )
    return ""


def priced_by_layout(latency_source: str) -> bool:
    """Whether a row's step was priced for its layout: from the kernel tables."""
    return str(latency_source).startswith("kernels:")


def from_row(row: dict) -> Layout | None:
    """The layout a scenario row gives, or None where it gives only num_gpus (plain TP)."""
    given = {c: row.get(c) for c in LAYOUT_COLUMNS if _given(row.get(c))}
    if not given:
        return None
    n = int(row.get("num_gpus") or 1)
    dp = int(given.get("attention_dp_size", 1))
    tp = int(given.get("tp_size", n // dp))
    ep = int(given.get("moe_ep_size", 1))
    moe_tp = given.get("moe_tp_size")
    return Layout(tp, dp, None if moe_tp is None else int(moe_tp), ep)


def _given(value) -> bool:
    if value is None or value == "":
        return False
    try:
        return not math.isnan(float(value))
    except (TypeError, ValueError):
        return True


def get_nodes(gpu_id: str, num_gpus: int) -> int:
    """Hosts one replica of `num_gpus` GPUs spans."""
    return max(1, math.ceil(int(num_gpus) / get_gpus_per_node(gpu_id)))
