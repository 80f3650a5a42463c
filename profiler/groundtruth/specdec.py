"""Speculative sampling in plain torch (Leviathan et al. 2023; Chen et al. 2023).

One step of `speculative_generate`, per sequence of the batch:

1. the draft proposes K tokens autoregressively from its own KV cache;
2. the target scores all K+1 positions (the last emitted token and the K drafts) in one
   forward pass;
3. `accept_draft_tokens` applies the modified rejection rule: draft token x_i is accepted
   with probability min(1, p_i(x_i) / q_i(x_i)); at the first rejection the next token is
   drawn from the normalised max(0, p_i - q_i); when all K are accepted the target's
   distribution after the last draft gives a bonus token. Greedy decoding is the same
   rule with one-hot p and q: accept while the draft's token is the target's argmax;
4. both caches roll back to the accepted prefix by resetting their per-sequence lengths.

Every sequence accepts its own number of tokens, so positions diverge across the batch;
the static `KVCache` addresses each sequence at its own length. The target cache holds
every token but the last (which is fed next); the draft cache holds every token but the
last two, so the draft's first forward of a step always takes two tokens for every
sequence (the last accepted one, which its cache lacks when all K were accepted, and the
newest one) and the batch stays rectangular.

Probabilities are float32 (float64 if the model is), logits are divided by the
temperature before the softmax; temperature 0 means greedy.

`AutoregressiveDecoder` and `SpeculativeDecoder` run one step per `step()` and record each
step's wall-clock time; `autoregressive_generate` and `speculative_generate` drive one to
the end, `run_interleaved` steps several in turn (the validation's measurement).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from profiler.model import KVCache

GREEDY = 0.0


def probs_from_logits(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Softmax of logits / temperature, in at least float32. `temperature` must be > 0."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 for sampling, got {temperature}")
    dtype = torch.float64 if logits.dtype == torch.float64 else torch.float32
    return torch.softmax(logits.to(dtype) / temperature, dim=-1)


def sample_from(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """One token per row of `probs` [..., V] -> long [...]."""
    flat = probs.reshape(-1, probs.shape[-1])
    return torch.multinomial(flat, 1, generator=generator).reshape(probs.shape[:-1])


def accept_draft_tokens(
    draft_tokens: torch.Tensor,
    target: torch.Tensor,
    draft_probs: torch.Tensor | None = None,
    *,
    greedy: bool = False,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The modified rejection rule, for a batch of sequences at once.

    draft_tokens: long [B, K]. target: [B, K+1, V], probabilities p (sampling) or logits
    (greedy). draft_probs: [B, K, V], the draft's q the tokens were drawn from (sampling
    only). Returns (num_accepted long [B] in 0..K, next_token long [B]): the sequence emits
    draft_tokens[:num_accepted] then next_token, a correction drawn from the residual
    max(0, p - q) at the first rejected position, or the bonus from p_{K+1}.
    """
    b, k = draft_tokens.shape
    if target.shape[:2] != (b, k + 1):
        raise ValueError(f"target has shape {tuple(target.shape)}, expected [{b}, {k + 1}, V]")
    if greedy:
        best = target.argmax(dim=-1)  # [B, K+1]
        accepted = (draft_tokens == best[:, :k]).long()
        num = accepted.cumprod(dim=1).sum(dim=1)
        return num, best.gather(1, num[:, None]).squeeze(1)
    if draft_probs is None or draft_probs.shape != (b, k, target.shape[-1]):
        raise ValueError("sampling needs draft_probs of shape [B, K, V]")
    p = target
    p_x = p[:, :k].gather(2, draft_tokens[..., None]).squeeze(2)
    q_x = draft_probs.gather(2, draft_tokens[..., None]).squeeze(2)
    u = torch.rand((b, k), generator=generator, dtype=p.dtype, device=p.device)
    # u < p/q written without the division; strict, so that a token with p = 0 never passes.
    accepted = (u * q_x < p_x).long()
    num = accepted.cumprod(dim=1).sum(dim=1)
    # q padded with a zero row at index K: there the "residual" is p_{K+1} itself, the bonus.
    q_pad = torch.cat([draft_probs, torch.zeros_like(p[:, :1])], dim=1)
    rows = torch.arange(b, device=p.device)
    residual = (p[rows, num] - q_pad[rows, num]).clamp_min(0.0)
    total = residual.sum(dim=-1, keepdim=True)
    # A zero residual means p = q at that position, where rejection has probability 0;
    # fall back to p so that a rounding-level rejection still samples something valid.
    residual = torch.where(total > 0, residual / total.clamp_min(1e-30), p[rows, num])
    return num, sample_from(residual, generator)


@dataclass
class GenerationStats:
    """What one generation measured. Counts are over (step, sequence) pairs of the decode.

    accepted_hist[j]: how many sequence-steps accepted exactly j drafts (j = 0..K).
    step_s: wall-clock seconds of every decode step (one token for plain decoding, one
    draft-and-verify round for speculative decoding); on a CPU each step ends with a host
    read, so the times are complete. Every step of a run does the same work, so their
    median is the step time free of whatever else the machine was doing.
    step_context: tokens of context of every step, the longest sequence's valid target
    cache slots before it (on a CPU attention reads up to that sequence, plus the step's
    own tokens): the `context_len` a profile point with the same attention has.
    """

    k: int
    batch_size: int
    steps: int = 0
    tokens_emitted: int = 0
    decode_s: float = 0.0
    step_s: list[float] = field(default_factory=list)
    step_context: list[int] = field(default_factory=list)
    accepted_hist: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))

    @property
    def sequence_steps(self) -> int:
        return int(self.accepted_hist.sum())

    def per_position_acceptance(self) -> np.ndarray:
        """p_i = P(at least i drafts accepted), i = 1..K (vLLM's accepted_per_pos / drafts)."""
        n = max(self.sequence_steps, 1)
        at_least = self.accepted_hist[::-1].cumsum()[::-1]  # at_least[j] = #(accepted >= j)
        return at_least[1:] / n

    @property
    def mean_accepted_tokens(self) -> float:
        """tau: tokens emitted per sequence per target step, bonus included."""
        return 1.0 + float(self.per_position_acceptance().sum()) if self.k else 1.0

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_emitted / self.decode_s if self.decode_s > 0 else float("nan")

    def step_quantile_s(self, q: float = 0.5) -> float:
        """A quantile of the per-step times in seconds (0.5: the median)."""
        return float(np.quantile(self.step_s, q)) if self.step_s else float("nan")

    def context_quantile(self, q: float = 0.5) -> float:
        """A quantile of the per-step contexts in tokens (0.5: the median)."""
        return float(np.quantile(self.step_context, q)) if self.step_context else float("nan")


def _select(logits: torch.Tensor, temperature: float, generator) -> torch.Tensor:
    if temperature <= GREEDY:
        return logits.argmax(dim=-1)
    return sample_from(probs_from_logits(logits, temperature), generator)


def _cache_for(model, batch_size: int, max_len: int) -> KVCache:
    weight = next(model.parameters())
    return KVCache(model.cfg, batch_size, max_len, device=weight.device, dtype=weight.dtype)


def _check_prompt(prompt_ids: torch.Tensor, min_len: int) -> None:
    if prompt_ids.dim() != 2 or prompt_ids.shape[1] < min_len:
        raise ValueError(
            f"prompt_ids must be [batch, length >= {min_len}], got {tuple(prompt_ids.shape)}"
        )


class AutoregressiveDecoder:
    """Plain decoding, one step at a time: each `step()` is one forward of one token.

    `max_len` sizes the KV cache (default: just enough). On a CPU attention reads up to the
    batch's longest sequence, on a GPU the whole buffer, so give the same `max_len` to runs
    whose step times you compare.
    Step-wise so that a measurement can interleave several runs (see `run_interleaved`).
    """

    @torch.inference_mode()
    def __init__(
        self,
        model,
        prompt_ids: torch.Tensor,
        max_new_tokens: int,
        *,
        temperature: float = GREEDY,
        generator: torch.Generator | None = None,
        max_len: int | None = None,
    ) -> None:
        _check_prompt(prompt_ids, 1)
        b, plen = prompt_ids.shape
        self.model, self.n, self.temperature, self.generator = (
            model,
            max_new_tokens,
            temperature,
            generator,
        )
        self.cache = _cache_for(model, b, max_len or plen + max_new_tokens)
        self.stats = GenerationStats(k=0, batch_size=b)
        if plen > 1:
            model(prompt_ids[:, :-1], self.cache)
        self.context = plen - 1  # every sequence's valid cache slots before the next step
        self.pending = prompt_ids[:, -1:]
        self.out = torch.empty((b, max_new_tokens), dtype=torch.long, device=prompt_ids.device)
        self.sync = self.out.device.type == "cuda"  # a step's time needs the step to have run
        self.i = 0

    @property
    def done(self) -> bool:
        return self.i >= self.n

    @property
    def progress(self) -> float:
        """Fraction of the requested new tokens generated (by the slowest sequence)."""
        return self.i / self.n

    @torch.inference_mode()
    def step(self) -> None:
        self.stats.step_context.append(self.context)
        t0 = time.perf_counter()
        logits = self.model(self.pending, self.cache)[:, -1]
        token = _select(logits, self.temperature, self.generator)
        self.out[:, self.i] = token
        self.pending = token[:, None]
        if self.sync:
            torch.cuda.synchronize(self.out.device)
        self.stats.step_s.append(time.perf_counter() - t0)
        self.i += 1
        self.context += 1

    def result(self) -> tuple[torch.Tensor, GenerationStats]:
        st = self.stats
        st.steps = self.i
        st.decode_s = float(sum(st.step_s))
        st.tokens_emitted = st.batch_size * self.i
        st.accepted_hist = np.array([st.tokens_emitted], dtype=np.int64)
        return self.out[:, : self.i], st


def autoregressive_generate(
    model,
    prompt_ids: torch.Tensor,
    max_new_tokens: int,
    *,
    temperature: float = GREEDY,
    generator: torch.Generator | None = None,
    max_len: int | None = None,
) -> tuple[torch.Tensor, GenerationStats]:
    """Plain decoding: one forward of one token per step. Returns ([B, N] new ids, stats)."""
    dec = AutoregressiveDecoder(
        model,
        prompt_ids,
        max_new_tokens,
        temperature=temperature,
        generator=generator,
        max_len=max_len,
    )
    while not dec.done:
        dec.step()
    return dec.result()


@dataclass
class SpeculativeOutput:
    """Generated ids per sequence (all that each emitted, at least N) and the stats."""

    sequences: list[torch.Tensor]
    stats: GenerationStats

    def truncated(self, n: int) -> torch.Tensor:
        """The first n new tokens of every sequence, [B, n]."""
        return torch.stack([s[:n] for s in self.sequences])


class SpeculativeDecoder:
    """Speculative decoding, one draft-and-verify step at a time (see `speculative_generate`)."""

    @torch.inference_mode()
    def __init__(
        self,
        target,
        draft,
        prompt_ids: torch.Tensor,
        max_new_tokens: int,
        k: int,
        *,
        temperature: float = GREEDY,
        generator: torch.Generator | None = None,
        max_len: int | None = None,
    ) -> None:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        _check_prompt(prompt_ids, 2)
        b, plen = prompt_ids.shape
        device = prompt_ids.device
        max_len = max_len or plen + max_new_tokens * (k + 1) + k + 2
        if max_len < plen + max_new_tokens + k:
            raise ValueError(f"max_len {max_len} cannot hold prompt + {max_new_tokens} + {k}")
        self.target, self.draft, self.k = target, draft, k
        self.temperature, self.generator = temperature, generator
        self.greedy = temperature <= GREEDY
        self.plen, self.max_len, self.done_at = plen, max_len, plen + max_new_tokens
        self.n = max_new_tokens
        self.t_cache = _cache_for(target, b, max_len)
        self.d_cache = _cache_for(draft, b, max_len)
        self.buf = torch.zeros((b, max_len + k + 2), dtype=torch.long, device=device)
        self.buf[:, :plen] = prompt_ids
        self.total = torch.full((b,), plen, dtype=torch.long, device=device)
        target(prompt_ids[:, :-1], self.t_cache)
        if plen > 2:
            draft(prompt_ids[:, :-2], self.d_cache)
        self.stats = GenerationStats(k=k, batch_size=b)
        self.accepted: list[torch.Tensor] = []
        self.span = torch.arange(k + 1, device=device)
        self.frozen_out = False
        self._min_total = self._max_total = plen

    @property
    def done(self) -> bool:
        return self._min_total >= self.done_at or self.frozen_out

    @property
    def progress(self) -> float:
        """Fraction of the requested new tokens generated (by the slowest sequence)."""
        return (self._min_total - self.plen) / self.n

    @torch.inference_mode()
    def step(self) -> None:
        """One round: K draft forwards, one target forward over K+1 positions, the rule.

        Host-side work is a few small tensor ops per step: on a CPU every op costs
        microseconds, and the simulator prices a step as its forward passes.
        """
        context = self._max_total - 1  # the target cache holds all but the last token
        t0 = time.perf_counter()
        k, total, max_len = self.k, self.total, self.max_len
        t_cache, d_cache, buf, span = self.t_cache, self.d_cache, self.buf, self.span
        active = None
        if int(total.max()) + k > max_len:
            active = total + k <= max_len
            if not bool(active.any()):
                self.frozen_out = True
                return
            # Park frozen sequences at the end of their buffers: whatever they compute there
            # is discarded, and the forward pass stays in bounds.
            t_cache.lengths.copy_(torch.where(active, t_cache.lengths, max_len - k - 1))
            d_cache.lengths.copy_(torch.where(active, d_cache.lengths, max_len - k - 1))
        # Draft: two tokens first (see the module docstring), then one at a time.
        inp = buf.gather(1, (total - 2)[:, None] + span[None, :2])
        drafts, q_list = [], []
        for _ in range(k):
            logits = self.draft(inp, d_cache)[:, -1]
            if self.greedy:
                token = logits.argmax(dim=-1)
            else:
                q = probs_from_logits(logits, self.temperature)
                q_list.append(q)
                token = sample_from(q, self.generator)
            drafts.append(token)
            inp = token[:, None]
        draft_tokens = torch.stack(drafts, dim=1)
        verify_in = torch.cat([buf.gather(1, (total - 1)[:, None]), draft_tokens], dim=1)
        t_logits = self.target(verify_in, t_cache)
        if self.greedy:
            num, nxt = accept_draft_tokens(draft_tokens, t_logits, greedy=True)
        else:
            num, nxt = accept_draft_tokens(
                draft_tokens,
                probs_from_logits(t_logits, self.temperature),
                torch.stack(q_list, dim=1),
                generator=self.generator,
            )
        # Write all K+1 slots; those past the accepted prefix are overwritten next step.
        emitted = torch.cat([draft_tokens, nxt[:, None]], dim=1)
        emitted.scatter_(1, num[:, None], nxt[:, None])
        buf.scatter_(1, total[:, None] + span[None, :], emitted)
        if active is None:
            total = total + num + 1
            torch.sub(total, 1, out=t_cache.lengths)
            torch.sub(total, 2, out=d_cache.lengths)
            self.accepted.append(num)
        else:
            total = total + torch.where(active, num + 1, 0)
            t_cache.lengths.copy_(torch.where(active, total - 1, t_cache.lengths))
            d_cache.lengths.copy_(torch.where(active, total - 2, d_cache.lengths))
            self.accepted.append(num[active])
        self.total = total
        low, high = torch.aminmax(total)
        self._min_total, self._max_total = int(low), int(high)  # the host read that ends it
        self.stats.steps += 1
        self.stats.step_s.append(time.perf_counter() - t0)
        self.stats.step_context.append(min(context, max_len - k - 1))

    def result(self) -> SpeculativeOutput:
        st = self.stats
        st.decode_s = float(sum(st.step_s))
        counts = (
            torch.cat(self.accepted).cpu() if self.accepted else torch.zeros(0, dtype=torch.long)
        )
        st.accepted_hist = torch.bincount(counts, minlength=self.k + 1).numpy().astype(np.int64)
        st.tokens_emitted = int((self.total - self.plen).sum())
        sequences = [
            self.buf[i, self.plen : int(self.total[i])].clone() for i in range(st.batch_size)
        ]
        return SpeculativeOutput(sequences=sequences, stats=st)


def speculative_generate(
    target,
    draft,
    prompt_ids: torch.Tensor,
    max_new_tokens: int,
    k: int,
    *,
    temperature: float = GREEDY,
    generator: torch.Generator | None = None,
    max_len: int | None = None,
) -> SpeculativeOutput:
    """Speculative decoding until every sequence has at least `max_new_tokens` new tokens.

    Sequences that get there first keep decoding (their extra tokens are real output and
    count as emitted), so every step is a full batch, as in a serving engine's steady
    state. `max_len` sizes both caches (default: the worst case, K+1 tokens every step);
    a sequence whose next step would not fit is frozen: it still takes its slot in the
    batch but emits nothing more.
    """
    dec = SpeculativeDecoder(
        target,
        draft,
        prompt_ids,
        max_new_tokens,
        k,
        temperature=temperature,
        generator=generator,
        max_len=max_len,
    )
    while not dec.done:
        dec.step()
    return dec.result()


def run_interleaved(decoders: list, chunk: float = 0.125) -> None:
    """Step several decoders in turn until all are done, so that they run through the same
    seconds of the machine's life and their step times are comparable.

    The decoder furthest behind (by fraction of its tokens) runs until it is `chunk` of its
    tokens ahead of the next one: a few steps in a row, so its KV cache and weights are
    warm in the CPU caches as they are in a run of its own, and only the first step after
    a switch pays for reloading them.
    """
    pending = [d for d in decoders if not d.done]
    while pending:
        pending.sort(key=lambda d: d.progress)
        current = pending[0]
        goal = (pending[1].progress if len(pending) > 1 else 1.0) + chunk
        while not current.done and current.progress < goal:
            current.step()
        pending = [d for d in pending if not d.done]
