"""A Llama-style decoder in plain torch, built from a `data/models.csv` entry, laid out as
serving engines run it.

One fused QKV projection and one fused gate-up projection per layer (one weight read each),
`F.rms_norm`, rotary position embeddings (rotate-half convention) from cos/sin tables built
once and indexed, grouped-query attention through `scaled_dot_product_attention` without
copying the cache, a SwiGLU MLP and optional top-k mixture-of-experts routing.
Weights are random (latency does not depend on their values) and are created directly on the
target device in the target dtype: the module is built on the meta device, materialised with
`to_empty` and initialised in place, so a large model never has a full-size copy on the CPU.

The static `KVCache` holds keys and values for every layer as
`[num_layers, batch, num_kv_heads, max_len, head_dim]` plus a per-sequence `lengths` tensor.
A forward pass with a cache writes the new tokens at `lengths[b] + j`, attends to everything
before them, and advances `lengths` in place, so the same tensors serve CUDA graph replays.
Rolling back rejected speculative tokens is `cache.lengths[:] = new_lengths`.

Two attention paths. With `context_len` given (every sequence holds that many valid slots,
as the profiler's grid points do), the forward writes the new tokens at slots
`context_len ..` and attends to the first `context_len + q` slots only: a decode step needs
no mask, and a verification of q tokens is a bottom-right causal block over that valid
context, the shape engines' multi-token decode kernels take. Its cost does not depend on
how many slots the cache allocated. Without it, the per-sequence `lengths` decide: on a
CPU, where reading them costs nothing, equal lengths take the same path and unequal ones
(sequences after a rollback, `profiler.groundtruth`) attend up to the longest sequence
under a per-sequence mask; on a GPU (no host synchronisation, CUDA graphs) the masked
attention reads all `max_len` slots.

MLA models (DeepSeek-V3) run as standard grouped-query attention with the catalog's
`num_kv_heads` and `head_dim`; their latent cache is not modelled here (see `mla_note`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F
from torch import nn

from simulator.inputs.specs import ModelSpec

# Llama's `initializer_range`: with it, random logits have a standard deviation near 1 for
# hidden sizes in the thousands, so softmax and sampling behave like a real model's.
INIT_STD = 0.02


@dataclass(frozen=True)
class ArchConfig:
    """Shapes of one decoder; sizes are counts of numbers, not bytes."""

    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    num_shared_experts: int = 0
    num_dense_layers: int = 0
    tie_word_embeddings: bool = False
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        for name in ("vocab_size", "hidden_size", "num_layers", "num_heads", "num_kv_heads"):
            if getattr(self, name) <= 0:
                raise ValueError(f"ArchConfig.{name} must be > 0, got {getattr(self, name)}")
        if self.head_dim <= 0 or self.head_dim % 2:
            raise ValueError(f"ArchConfig.head_dim must be even and > 0, got {self.head_dim}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"ArchConfig.num_heads ({self.num_heads}) must be a multiple of "
                f"num_kv_heads ({self.num_kv_heads})"
            )
        if self.num_experts and not 0 < self.experts_per_token <= self.num_experts:
            raise ValueError("ArchConfig.experts_per_token must be in 1..num_experts")

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    def layer_is_moe(self, index: int) -> bool:
        """Layers before `num_dense_layers` keep a dense MLP, as DeepSeek-V3's first three do."""
        return self.is_moe and index >= self.num_dense_layers

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def num_parameters(self) -> int:
        """Numbers in the weights of `DecoderLM(self)`, a tied embedding counted once.

        Arithmetic on the shapes the modules below create: building the model on the meta
        device gives the same count but pulls in `torch._dynamo` (seconds of start-up).
        """
        h, kv, hd = self.hidden_size, self.num_kv_heads, self.head_dim
        attention = h * self.num_heads * hd * 2 + h * kv * hd * 2  # q and o; k and v
        dense_mlp = 3 * h * self.intermediate_size
        moe = h * self.num_experts + 3 * self.num_experts * self.moe_intermediate_size * h
        if self.num_shared_experts:
            moe += 3 * h * self.moe_intermediate_size * self.num_shared_experts
        n_moe = self.num_layers - min(self.num_dense_layers, self.num_layers) if self.is_moe else 0
        layers = self.num_layers * (2 * h + attention) + n_moe * moe
        layers += (self.num_layers - n_moe) * dense_mlp
        embeddings = self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        return embeddings + layers + h  # + the final norm

    @classmethod
    def from_spec(cls, spec: ModelSpec, num_layers: int | None = None) -> ArchConfig:
        """The architecture of a catalog model, optionally cut to `num_layers` layers.

        A cut MoE model keeps only MoE layers (no dense prefix): the profiler fits a line in
        depth, and the routed layers are the ones a deep model is made of.
        """
        depth = spec.num_layers if num_layers is None else int(num_layers)
        if depth <= 0:
            raise ValueError(f"num_layers must be > 0, got {depth}")
        dense = spec.num_dense_layers if spec.num_experts else 0
        if depth < spec.num_layers:
            dense = 0
        # The catalog carries no RoPE base or norm epsilon: neither changes a step's cost, so
        # the defaults stand.
        return cls(
            vocab_size=spec.vocab_size,
            hidden_size=spec.hidden_size,
            num_layers=depth,
            num_heads=spec.num_attention_heads,
            num_kv_heads=spec.num_kv_heads,
            head_dim=spec.head_dim,
            intermediate_size=spec.intermediate_size,
            num_experts=spec.num_experts,
            experts_per_token=spec.experts_per_token,
            moe_intermediate_size=spec.moe_intermediate_size,
            num_shared_experts=spec.num_shared_experts,
            num_dense_layers=min(dense, depth),
            tie_word_embeddings=spec.tie_word_embeddings,
        )


def mla_note(spec: ModelSpec) -> str:
    """Why an MLA model's measured KV bytes differ from the simulator's latent formula."""
    if not spec.is_mla:
        return ""
    return (
        "MLA profiled as standard grouped-query attention "
        f"({spec.num_kv_heads} KV heads x head_dim {spec.head_dim}); the simulator's KV "
        f"formula uses the latent cache (kv_lora_rank {spec.kv_lora_rank} + rope dim "
        f"{spec.qk_rope_head_dim})"
    )


class KVCache:
    """Static key/value cache for all layers of one `DecoderLM`.

    `k`, `v`: `[num_layers, batch, num_kv_heads, max_len, head_dim]`; `lengths`: int64 `[batch]`,
    the number of valid slots of each sequence. Slots at or past `lengths[b]` are ignored.
    """

    def __init__(
        self,
        cfg: ArchConfig,
        batch_size: int,
        max_len: int,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        if batch_size <= 0 or max_len <= 0:
            raise ValueError(f"batch_size and max_len must be > 0, got {batch_size}, {max_len}")
        self.cfg = cfg
        self.batch_size = batch_size
        self.max_len = max_len
        shape = (cfg.num_layers, batch_size, cfg.num_kv_heads, max_len, cfg.head_dim)
        dtype = dtype or torch.get_default_dtype()
        # Finite contents everywhere: a masked slot still multiplies a zero attention weight,
        # and uninitialised memory may hold NaN (0 * NaN = NaN).
        self.k = torch.empty(shape, device=device, dtype=dtype).uniform_(-1.0, 1.0)
        self.v = torch.empty(shape, device=device, dtype=dtype).uniform_(-1.0, 1.0)
        self.lengths = torch.zeros(batch_size, dtype=torch.long, device=self.k.device)

    @classmethod
    def prefix_of(cls, base: KVCache, cfg: ArchConfig, max_len: int) -> KVCache:
        """A cache of `cfg.num_layers` layers and `max_len` slots over the first elements of
        `base`'s key and value storage, nothing allocated or filled.

        Its `k` and `v` are contiguous, laid out exactly as a fresh cache of that size, and
        hold `base`'s random contents; attention reads its `max_len` slots, no more. The
        profiler fills one cache per (batch, context) and runs every query length and depth
        on such prefixes. Writes through either cache show in the other.
        """
        shape = (cfg.num_layers, base.batch_size, cfg.num_kv_heads, max_len, cfg.head_dim)
        numel = math.prod(shape)
        fits = (cfg.num_kv_heads, cfg.head_dim) == (base.cfg.num_kv_heads, base.cfg.head_dim)
        if max_len <= 0 or not fits or numel > base.k.numel():
            raise ValueError(f"cannot view a {shape} cache in a {tuple(base.k.shape)} one")
        cache = cls.__new__(cls)
        cache.cfg = cfg
        cache.batch_size = base.batch_size
        cache.max_len = max_len
        cache.k = base.k.view(-1)[:numel].view(shape)
        cache.v = base.v.view(-1)[:numel].view(shape)
        cache.lengths = torch.zeros(base.batch_size, dtype=torch.long, device=base.device)
        return cache

    @property
    def device(self) -> torch.device:
        return self.k.device

    def fill_(self, length: int) -> None:
        """Mark the first `length` slots of every sequence valid (random contents)."""
        if not 0 <= length <= self.max_len:
            raise ValueError(f"length {length} is outside 0..max_len={self.max_len}")
        self.lengths.fill_(length)

    def nbytes(self) -> int:
        """Bytes held by the key and value tensors."""
        return self.k.numel() * self.k.element_size() + self.v.numel() * self.v.element_size()


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float, *, device=None, dtype=None) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(size, device=device, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # One fused kernel where torch has one; it accumulates in fp32 for bf16/fp16 input.
        return F.rms_norm(x, self.weight.shape, self.weight, self.eps)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate-half RoPE. x: `[..., head_dim]`; cos: `[..., head_dim]` (cos of each frequency,
    twice); sin: `[..., head_dim]` (-sin then +sin), broadcast against x.

    `x * cos + rotate_half(x) * sin` with the sign folded into the table, and the halves
    swapped by a view and one copy instead of a negation and a concatenation.
    """
    half = x.shape[-1] // 2
    swapped = x.unflatten(-1, (2, half)).flip(-2).flatten(-2)
    return x * cos + swapped * sin


def rope_tables(inv_freq: torch.Tensor, length: int, dtype: torch.dtype):
    """cos and signed sin tables `[length, head_dim]` for positions 0..length-1, computed in
    fp32 and stored in `dtype`."""
    pos = torch.arange(length, device=inv_freq.device, dtype=torch.float32)
    freqs = pos[:, None] * inv_freq[None, :]
    cos = torch.cat((freqs.cos(), freqs.cos()), dim=-1)
    sin = torch.cat((-freqs.sin(), freqs.sin()), dim=-1)
    return cos.to(dtype), sin.to(dtype)


def _fuse_legacy(state_dict: dict, prefix: str, parts: tuple[str, ...], fused: str) -> None:
    """Concatenate the split projection weights of a file saved before fusion, in place."""
    keys = [f"{prefix}{name}.weight" for name in parts]
    if all(k in state_dict for k in keys):
        state_dict[f"{prefix}{fused}.weight"] = torch.cat([state_dict.pop(k) for k in keys])


class MLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x)), gate and up as one matmul (`gate_up`)."""

    def __init__(self, hidden: int, inter: int, *, device=None, dtype=None) -> None:
        super().__init__()
        kw = {"bias": False, "device": device, "dtype": dtype}
        self.gate_up = nn.Linear(hidden, 2 * inter, **kw)
        self.down = nn.Linear(inter, hidden, **kw)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        _fuse_legacy(state_dict, prefix, ("gate", "up"), "gate_up")
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


class MoE(nn.Module):
    """Top-k routed SwiGLU experts (softmax over the chosen k) plus optional shared experts.

    Tokens are grouped by expert and only experts that received tokens run, so a step costs
    what a serving engine's grouped GEMM reads. The grouping needs the per-expert counts on
    the host, so MoE layers cannot be captured in a CUDA graph.
    """

    def __init__(self, cfg: ArchConfig, *, device=None, dtype=None) -> None:
        super().__init__()
        e, h, i = cfg.num_experts, cfg.hidden_size, cfg.moe_intermediate_size
        self.top_k = cfg.experts_per_token
        self.router = nn.Linear(h, e, bias=False, device=device, dtype=dtype)
        self.w_gate = nn.Parameter(torch.empty(e, i, h, device=device, dtype=dtype))
        self.w_up = nn.Parameter(torch.empty(e, i, h, device=device, dtype=dtype))
        self.w_down = nn.Parameter(torch.empty(e, h, i, device=device, dtype=dtype))
        self.shared = (
            MLP(h, i * cfg.num_shared_experts, device=device, dtype=dtype)
            if cfg.num_shared_experts
            else None
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        scores = self.router(flat).float()
        weights, chosen = scores.topk(self.top_k, dim=-1)
        weights = weights.softmax(dim=-1).to(x.dtype)
        order = chosen.flatten().argsort()
        token_of = order // self.top_k
        counts = torch.bincount(chosen.flatten(), minlength=self.w_gate.shape[0]).tolist()
        out = torch.zeros_like(flat)
        start = 0
        for expert, count in enumerate(counts):
            if not count:
                continue
            slots = order[start : start + count]
            tokens = token_of[start : start + count]
            start += count
            h = flat[tokens]
            y = F.silu(h @ self.w_gate[expert].T) * (h @ self.w_up[expert].T)
            y = (y @ self.w_down[expert].T) * weights.flatten()[slots, None]
            out = out.index_add(0, tokens, y)
        if self.shared is not None:
            out = out + self.shared(flat)
        return out.reshape(shape)


def fold_heads(xq: torch.Tensor, kv_heads: int) -> torch.Tensor:
    """Queries `[B, q, heads, dim]` as `[B, kv_heads, group * q, dim]`: the query heads that
    share a KV head become rows of that head (row g * q + j is head kv * group + g, token
    j), so attention reads each KV head once and the cache is never expanded."""
    b, q, heads, dim = xq.shape
    group = heads // kv_heads
    return xq.view(b, q, kv_heads, group, dim).permute(0, 2, 3, 1, 4).reshape(b, kv_heads, -1, dim)


def unfold_heads(out: torch.Tensor, q: int) -> torch.Tensor:
    """The inverse of `fold_heads` for an attention output of any layout: `[B, q, heads *
    dim]`. SDPA backends may return a non-contiguous tensor, so no `view` of it is assumed."""
    b, kv_heads, rows, dim = out.shape
    out = out.unflatten(2, (rows // q, q)).permute(0, 3, 1, 2, 4)
    return out.reshape(b, q, kv_heads * (rows // q) * dim)


def _is_causal_bias(mask) -> bool:
    """A `CausalBias` (a tensor subclass) rather than a plain mask tensor or None."""
    if mask is None or type(mask) is torch.Tensor:
        return False
    from torch.nn.attention.bias import CausalBias

    return isinstance(mask, CausalBias)


class Attention(nn.Module):
    def __init__(self, cfg: ArchConfig, layer: int, *, device=None, dtype=None) -> None:
        super().__init__()
        self.layer = layer
        self.heads, self.kv_heads, self.dim = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        kw = {"bias": False, "device": device, "dtype": dtype}
        qkv_out = (self.heads + 2 * self.kv_heads) * self.dim
        self.qkv_proj = nn.Linear(cfg.hidden_size, qkv_out, **kw)
        self.o_proj = nn.Linear(self.heads * self.dim, cfg.hidden_size, **kw)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        _fuse_legacy(state_dict, prefix, ("q_proj", "k_proj", "v_proj"), "qkv_proj")
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def _project(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        """Rotated queries `[B, q, heads, dim]`, rotated keys and values `[B, q, kv, dim]`:
        one matmul, and one rotary pass over queries and keys together."""
        b, q, _ = x.shape
        qkv = self.qkv_proj(x).view(b, q, self.heads + 2 * self.kv_heads, self.dim)
        qk = apply_rope(qkv[:, :, : self.heads + self.kv_heads], cos, sin)
        return qk[:, :, : self.heads], qk[:, :, self.heads :], qkv[:, :, -self.kv_heads :]

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        cache: KVCache | None,
        positions: torch.Tensor | None,
        mask,
        context_len: int | None = None,
    ) -> torch.Tensor:
        b, q, _ = x.shape
        xq, xk, xv = self._project(x, cos, sin)
        if cache is None:
            out = F.scaled_dot_product_attention(
                xq.transpose(1, 2),
                xk.transpose(1, 2),
                xv.transpose(1, 2),
                is_causal=True,
                enable_gqa=True,
            )
            out = out.transpose(1, 2).reshape(b, q, self.heads * self.dim)
        elif context_len is not None:
            out = self._attend_valid(xq, xk, xv, cache, context_len, mask)
        else:
            out = self._attend_masked(xq, xk, xv, cache, positions, mask)
        return self.o_proj(out)

    def _attend_valid(self, xq, xk, xv, cache: KVCache, context_len: int, mask):
        """Attention over the first `context_len + q` slots only (every sequence holds
        `context_len` valid ones). `mask`: None for a decode step, the additive
        bottom-right block of `verify_mask` for the folded heads, or a `CausalBias` (then
        SDPA's own grouped-query path runs on unfolded heads)."""
        q = xq.shape[1]
        end = context_len + q
        k_all, v_all = cache.k[self.layer], cache.v[self.layer]
        k_all[:, :, context_len:end] = xk.transpose(1, 2)
        v_all[:, :, context_len:end] = xv.transpose(1, 2)
        k, v = k_all[:, :, :end], v_all[:, :, :end]
        if not _is_causal_bias(mask):
            out = F.scaled_dot_product_attention(
                fold_heads(xq, self.kv_heads), k, v, attn_mask=mask
            )
            return unfold_heads(out, q)
        out = F.scaled_dot_product_attention(
            xq.transpose(1, 2), k, v, attn_mask=mask, enable_gqa=True
        )
        return out.transpose(1, 2).reshape(xq.shape[0], q, self.heads * self.dim)

    def _attend_masked(self, xq, xk, xv, cache: KVCache, positions, mask):
        """Sequences of different lengths: scatter the new tokens at each one's own slots
        and attend to the mask's slots (all `max_len` on a GPU, up to the longest sequence
        on a CPU) under the per-sequence mask."""
        b, q = xq.shape[:2]
        k_all, v_all = cache.k[self.layer], cache.v[self.layer]
        # Indexed writes of B x q slots; `scatter_` here copied the whole layer on a CPU.
        rows = torch.arange(b, device=positions.device)[:, None]
        k_all[rows, :, positions] = xk.to(k_all.dtype)
        v_all[rows, :, positions] = xv.to(v_all.dtype)
        slots = mask.shape[-1]
        out = F.scaled_dot_product_attention(
            fold_heads(xq, self.kv_heads), k_all[:, :, :slots], v_all[:, :, :slots], attn_mask=mask
        )
        return unfold_heads(out, q)


class Block(nn.Module):
    def __init__(self, cfg: ArchConfig, layer: int, *, device=None, dtype=None) -> None:
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.attn_norm = RMSNorm(cfg.hidden_size, cfg.norm_eps, **kw)
        self.attn = Attention(cfg, layer, **kw)
        self.mlp_norm = RMSNorm(cfg.hidden_size, cfg.norm_eps, **kw)
        self.mlp: nn.Module = (
            MoE(cfg, **kw)
            if cfg.layer_is_moe(layer)
            else MLP(cfg.hidden_size, cfg.intermediate_size, **kw)
        )

    def forward(self, x, cos, sin, cache, positions, mask, context_len=None) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), cos, sin, cache, positions, mask, context_len)
        return x + self.mlp(self.mlp_norm(x))


class DecoderLM(nn.Module):
    """Random-weight decoder; `forward(ids, cache)` returns logits `[B, q, vocab]`."""

    def __init__(
        self,
        cfg: ArchConfig,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.cfg = cfg
        dtype = dtype or torch.get_default_dtype()
        meta = {"device": "meta", "dtype": dtype}
        # Given its weight, Embedding skips its own normal_ init: on meta that runs a Python
        # kernel which imports torch._dynamo (1.4-2 s of every run's start-up on a 2-core VM);
        # reset_parameters draws every weight anyway.
        self.embed = nn.Embedding(
            cfg.vocab_size,
            cfg.hidden_size,
            _weight=torch.empty((cfg.vocab_size, cfg.hidden_size), **meta),
        )
        self.layers = nn.ModuleList(Block(cfg, i, **meta) for i in range(cfg.num_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.norm_eps, **meta)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False, **meta)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.embed.weight
        target = torch.device(device) if device is not None else torch.device("cpu")
        if target.type != "meta":
            # Not `to_empty`: its empty_like of a meta tensor runs a Python reference that
            # imports sympy (0.5 s of start-up); torch.empty of the shape allocates the same.
            for module in self.modules():
                for name, p in list(module.named_parameters(recurse=False)):
                    fresh = torch.empty(p.shape, device=target, dtype=p.dtype)
                    setattr(module, name, nn.Parameter(fresh, requires_grad=p.requires_grad))
            if cfg.tie_word_embeddings:
                # Every parameter got its own storage, which unties them.
                self.lm_head.weight = self.embed.weight
            self.reset_parameters(seed)
        inv_freq = 1.0 / (
            cfg.rope_theta
            ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float32, device=target) / cfg.head_dim)
        )
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self._rope_tables: dict = {}
        self._masks: dict = {}
        self.verify_attention = "fold"
        """How a verification (q > 1 over `context_len`) attends: 'fold' (query heads folded
        per KV head, additive bottom-right block) or 'lower_right' (SDPA's
        `causal_lower_right` bias with `enable_gqa`; flash attention where it applies)."""

    @torch.no_grad()
    def reset_parameters(self, seed: int = 0) -> None:
        """Random weights drawn on the parameters' own device."""
        device = self.embed.weight.device
        gen = torch.Generator(device=device).manual_seed(seed)
        for name, p in self.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            elif name.endswith("attn.o_proj.weight") or name.endswith("down.weight"):
                # GPT-2's residual scaling keeps the residual stream from growing with depth.
                p.normal_(0.0, INIT_STD / math.sqrt(2 * self.cfg.num_layers), generator=gen)
            else:
                p.normal_(0.0, INIT_STD, generator=gen)

    @property
    def device(self) -> torch.device:
        return self.embed.weight.device

    def rope(self, length: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and signed sin tables `[n, head_dim]` with n >= length, built once per device
        and dtype and grown by doubling: a step only indexes them. Build them before a CUDA
        graph capture (a warm-up call does) so the capture allocates none."""
        key = (self.inv_freq.device, dtype)
        tables = self._rope_tables.get(key)
        if tables is None or tables[0].shape[0] < length:
            size = max(length, 256, 2 * tables[0].shape[0] if tables else 0)
            tables = rope_tables(self.inv_freq, size, dtype)
            self._rope_tables[key] = tables
        return tables

    def verify_mask(self, q: int, context_len: int, dtype: torch.dtype, device: torch.device):
        """The additive bottom-right causal block for q tokens after `context_len` valid
        slots, rows in `fold_heads` order: `[group * q, context_len + q]`, 0 where token j
        may attend (slot <= context_len + j), the dtype's minimum elsewhere. Kept per shape;
        its rows are padded to 16 elements so SDPA's memory-efficient kernel takes it
        without copying."""
        key = (q, context_len, dtype, device)
        mask = self._masks.get(key)
        if mask is None:
            end = context_len + q
            width = -(-end // 16) * 16
            group = self.cfg.num_heads // self.cfg.num_kv_heads
            token = torch.arange(q, device=device).repeat(group)[:, None]
            blocked = torch.arange(width, device=device)[None, :] > context_len + token
            full = torch.zeros(blocked.shape, dtype=dtype, device=device)
            mask = full.masked_fill_(blocked, torch.finfo(dtype).min)[:, :end]
            if len(self._masks) >= 64:
                self._masks.clear()
            self._masks[key] = mask
        return mask

    def forward(
        self,
        input_ids: torch.Tensor,
        cache: KVCache | None = None,
        *,
        num_layers: int | None = None,
        context_len: int | None = None,
    ) -> torch.Tensor:
        """Logits `[B, q, vocab]` for `input_ids` `[B, q]`.

        `num_layers` runs only the first layers (the profiler's depth sweep shares one set of
        weights between depths); the cache then needs only that many layers. `context_len`
        says every sequence of the cache holds that many valid slots (its `lengths` are not
        read): attention then reads `context_len + q` slots, as an engine's does, and the
        lengths are set to `context_len + q` after the step.
        """
        b, q = input_ids.shape
        x = self.embed(input_ids)
        positions = mask = None
        if cache is not None and cache.batch_size != b:
            raise ValueError(f"cache holds {cache.batch_size} sequences, input has {b}")
        slots = cache.max_len if cache is not None else 0
        if cache is not None and context_len is None and cache.device.type == "cpu":
            # On the host the lengths cost nothing to read: equal ones take the engine path,
            # unequal ones attend up to the longest sequence rather than every slot.
            lo, hi = (int(v) for v in cache.lengths.aminmax())
            if hi + q > cache.max_len:
                raise ValueError(f"cache overflow: {hi} + {q} > max_len {cache.max_len}")
            context_len, slots = (lo, slots) if lo == hi else (None, hi + q)
        if cache is None or context_len is not None:
            start = context_len or 0
            if cache is not None and not 0 <= start <= cache.max_len - q:
                raise ValueError(f"cache overflow: {start} + {q} > max_len {cache.max_len}")
            cos, sin = self.rope(start + q, x.dtype)
            cos, sin = cos[start : start + q, None], sin[start : start + q, None]
            if cache is not None and q > 1:
                mask = self._verify_bias(q, start, x.dtype, x.device)
        else:
            positions = cache.lengths[:, None] + torch.arange(q, device=input_ids.device)
            mask = self._sequence_mask(positions, slots, x.dtype)
            cos, sin = self.rope(cache.max_len, x.dtype)
            cos, sin = cos[positions][:, :, None], sin[positions][:, :, None]
        for layer in self.layers[:num_layers]:
            x = layer(x, cos, sin, cache, positions, mask, context_len)
        logits = self.lm_head(self.norm(x))
        if cache is not None and context_len is not None:
            cache.lengths.fill_(context_len + q)
        elif cache is not None:
            cache.lengths.add_(q)
        return logits

    def _verify_bias(self, q: int, context_len: int, dtype: torch.dtype, device: torch.device):
        if self.verify_attention == "lower_right":
            # Imported here: torch.nn.attention.bias pulls in torch._dynamo (about 1 s).
            from torch.nn.attention.bias import causal_lower_right

            return causal_lower_right(q, context_len + q)
        return self.verify_mask(q, context_len, dtype, device)

    def _sequence_mask(self, positions: torch.Tensor, max_len: int, dtype: torch.dtype):
        """Per-sequence additive mask `[B, 1, group * q, max_len]` in `fold_heads` row order:
        token j of sequence b sees slots <= positions[b, j]. Built once per step in the
        model's dtype (a boolean one would be converted inside every layer's attention)."""
        b, q = positions.shape
        slots = torch.arange(max_len, device=positions.device)
        visible = slots[None, None, :] <= positions[:, :, None]  # [B, q, max_len]
        group = self.cfg.num_heads // self.cfg.num_kv_heads
        bias = torch.zeros(visible.shape, dtype=dtype, device=positions.device)
        bias.masked_fill_(~visible, torch.finfo(dtype).min)
        mask = bias[:, None, None].expand(b, 1, group, q, max_len)
        return mask.reshape(b, 1, group * q, max_len)


def weight_bytes(model: nn.Module) -> int:
    """Bytes of all parameters, a tied embedding counted once (works on meta modules too)."""
    return sum(p.numel() * p.element_size() for p in model.parameters())
