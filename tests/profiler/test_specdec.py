"""Speculative sampling is lossless: greedy output is the target's own, token for token, and
sampled tokens follow the target's distribution.

The statistical tests use Pearson's chi-square with a fixed seed. Under the null hypothesis
(the rule is exact) the p-value is uniform on [0, 1], so the threshold P_MIN = 1e-3 is the
false-alarm rate a fresh seed would have; the seeds below were not chosen by looking at
the p-values. The negative controls show the same test has the power to catch a wrong
rule (sampling from p instead of the residual after a rejection) at these sample sizes.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from profiler.groundtruth.specdec import (
    accept_draft_tokens,
    autoregressive_generate,
    probs_from_logits,
    sample_from,
    speculative_generate,
)
from profiler.model import ArchConfig, DecoderLM

P_MIN = 1e-3
MIN_EXPECTED = 5.0  # Cochran's rule: chi-square is accurate when every cell expects >= 5


def chi_square_p_value(counts: np.ndarray, probs: np.ndarray) -> float:
    """Pearson's goodness-of-fit p-value; cells expecting < 5 are pooled into one."""
    counts = np.asarray(counts, dtype=float).ravel()
    probs = np.asarray(probs, dtype=float).ravel()
    n = counts.sum()
    expected = probs / probs.sum() * n
    small = expected < MIN_EXPECTED
    if small.any():
        counts = np.append(counts[~small], counts[small].sum())
        expected = np.append(expected[~small], expected[small].sum())
    stat = float(((counts - expected) ** 2 / expected).sum())
    dof = len(counts) - 1
    # chi2.sf(x, dof) = Q(dof / 2, x / 2), the regularised upper incomplete gamma.
    return float(torch.special.gammaincc(torch.tensor(dof / 2.0), torch.tensor(stat / 2.0)))


def test_chi_square_helper_matches_known_values():
    # chi2.sf(3.84146, 1) = 0.05 and chi2.sf(18.307, 10) = 0.05 (standard tables).
    assert (
        abs(float(torch.special.gammaincc(torch.tensor(0.5), torch.tensor(3.84146 / 2))) - 0.05)
        < 1e-4
    )
    assert (
        abs(float(torch.special.gammaincc(torch.tensor(5.0), torch.tensor(18.307 / 2))) - 0.05)
        < 1e-4
    )


def _random_dist(gen: torch.Generator, shape, sharpness: float = 1.5) -> torch.Tensor:
    logits = torch.randn(*shape, generator=gen, dtype=torch.float64) * sharpness
    return torch.softmax(logits, dim=-1)


def _rule_samples(p, q, trials, k, seed, wrong=False):
    """Run one speculative step `trials` times on fixed p [K+1, V] and q [K, V]."""
    gen = torch.Generator().manual_seed(seed)
    qb = q.expand(trials, k, -1)
    pb = p.expand(trials, k + 1, -1)
    drafts = sample_from(qb, gen)
    if wrong:
        # The tempting bug: on rejection resample from p instead of max(0, p - q).
        num, _ = accept_draft_tokens(drafts, pb, qb, generator=gen)
        nxt = sample_from(pb[torch.arange(trials), num], gen)
    else:
        num, nxt = accept_draft_tokens(drafts, pb, qb, generator=gen)
    first = torch.where(num > 0, drafts[:, 0], nxt)
    return num, first, drafts, nxt


@pytest.mark.parametrize("k", [1, 4])
def test_first_token_follows_target_distribution(k):
    gen = torch.Generator().manual_seed(1)
    vocab, trials = 12, 40_000
    p = _random_dist(gen, (k + 1, vocab))
    q = _random_dist(gen, (k, vocab))
    num, first, _, _ = _rule_samples(p, q, trials, k, seed=2)
    counts = np.bincount(first.numpy(), minlength=vocab)
    assert chi_square_p_value(counts, p[0].numpy()) > P_MIN
    # The draft really differs from the target: a fair share of first drafts is rejected.
    assert 0.2 < float((num == 0).float().mean()) < 0.8


def test_later_positions_and_bonus_follow_target():
    """p and q here do not depend on the prefix, so the token emitted at position j must
    follow p_j whenever the step reached position j: the second token (accepted draft or
    correction) among steps that accepted the first draft, and the bonus token."""
    gen = torch.Generator().manual_seed(3)
    vocab, trials, k = 8, 60_000, 2
    p = _random_dist(gen, (k + 1, vocab), sharpness=1.0)
    q = _random_dist(gen, (k, vocab), sharpness=1.0)
    num, _, drafts, nxt = _rule_samples(p, q, trials, k, seed=4)
    reached = num >= 1
    second = torch.where(num >= 2, drafts[:, 1], nxt)[reached]
    assert len(second) > 10_000
    counts = np.bincount(second.numpy(), minlength=vocab)
    assert chi_square_p_value(counts, p[1].numpy()) > P_MIN
    bonus = nxt[num == k]
    assert len(bonus) > 5_000
    assert chi_square_p_value(np.bincount(bonus.numpy(), minlength=vocab), p[k].numpy()) > P_MIN


def test_negative_control_wrong_rule_is_detected():
    gen = torch.Generator().manual_seed(1)
    vocab, trials, k = 12, 40_000, 1
    p = _random_dist(gen, (k + 1, vocab))
    q = _random_dist(gen, (k, vocab))
    _, first, _, _ = _rule_samples(p, q, trials, k, seed=2, wrong=True)
    counts = np.bincount(first.numpy(), minlength=vocab)
    assert chi_square_p_value(counts, p[0].numpy()) < P_MIN


def test_acceptance_probability_is_min_one_p_over_q():
    gen = torch.Generator().manual_seed(5)
    vocab, trials = 6, 50_000
    p = _random_dist(gen, (2, vocab))
    q = _random_dist(gen, (1, vocab))
    num, _, drafts, _ = _rule_samples(p, q, trials, 1, seed=6)
    expected = float(torch.minimum(p[0], q[0]).sum())  # sum_x q(x) min(1, p(x)/q(x))
    measured = float(num.double().mean())
    # Binomial standard error at 50k trials is < 0.0023; 5 sigma.
    assert abs(measured - expected) < 5 * 0.0023
    del drafts


def test_greedy_rule():
    target = torch.tensor([[[0.1, 0.9, 0.0], [0.8, 0.1, 0.1], [0.0, 0.0, 1.0]]]).log()
    num, nxt = accept_draft_tokens(torch.tensor([[1, 2]]), target, greedy=True)
    assert num.tolist() == [1] and nxt.tolist() == [0]
    num, nxt = accept_draft_tokens(torch.tensor([[1, 0]]), target, greedy=True)
    assert num.tolist() == [2] and nxt.tolist() == [2]
    num, nxt = accept_draft_tokens(torch.tensor([[0, 0]]), target, greedy=True)
    assert num.tolist() == [0] and nxt.tolist() == [1]


def _tiny(seed: int, layers: int, hidden: int, vocab: int = 32, std: float = 0.0) -> DecoderLM:
    cfg = ArchConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        num_layers=layers,
        num_heads=2,
        num_kv_heads=1,
        head_dim=hidden // 2,
        intermediate_size=2 * hidden,
    )
    model = DecoderLM(cfg, dtype=torch.float64, seed=seed).eval()
    if std:
        # Sharper than the default init, so distributions are peaked and draft and target
        # disagree often enough to exercise rejection.
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, param in model.named_parameters():
                if not name.endswith("norm.weight"):
                    param.normal_(0.0, std, generator=gen)
    return model


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
def test_greedy_output_identical_to_target_alone(k):
    target = _tiny(seed=0, layers=2, hidden=32, std=0.3)
    draft = _tiny(seed=1, layers=1, hidden=16, std=0.3)
    gen = torch.Generator().manual_seed(7)
    prompts = torch.randint(0, 32, (3, 6), generator=gen)
    n = 40
    reference, _ = autoregressive_generate(target, prompts, n)
    out = speculative_generate(target, draft, prompts, n, k)
    assert torch.equal(out.truncated(n), reference)
    stats = out.stats
    assert stats.tokens_emitted == sum(len(s) for s in out.sequences)
    assert all(len(s) >= n for s in out.sequences)
    # Acceptance is partial: the test exercised both rejections and accepted drafts.
    p = stats.per_position_acceptance()
    assert 0.0 < p[0] < 1.0
    assert np.all(np.diff(p) <= 0)
    assert stats.mean_accepted_tokens == pytest.approx(1.0 + p.sum())


def test_greedy_with_a_perfect_draft_accepts_everything():
    target = _tiny(seed=0, layers=2, hidden=32, std=0.3)
    prompts = torch.randint(0, 32, (2, 5), generator=torch.Generator().manual_seed(0))
    out = speculative_generate(target, target, prompts, 30, 4)
    reference, _ = autoregressive_generate(target, prompts, 30)
    assert torch.equal(out.truncated(30), reference)
    assert out.stats.per_position_acceptance().tolist() == [1.0] * 4
    assert out.stats.mean_accepted_tokens == 5.0


def test_frozen_sequences_stay_in_bounds():
    target = _tiny(seed=0, layers=1, hidden=16, std=0.3)
    prompts = torch.randint(0, 32, (2, 4), generator=torch.Generator().manual_seed(0))
    # A tight cache: the same model as draft accepts everything and reaches the end first.
    out = speculative_generate(target, target, prompts, 12, 3, max_len=4 + 12 + 3)
    assert all(len(s) >= 12 for s in out.sequences)


def test_sampled_joint_distribution_matches_target():
    """End to end through both caches: the first two sampled tokens after a prompt follow
    p(x1 | prompt) p(x2 | prompt, x1), with a vocabulary of 8 (64 cells) and 30k samples."""
    vocab, trials, k, temperature = 8, 30_000, 3, 1.0
    target = _tiny(seed=10, layers=2, hidden=16, vocab=vocab, std=0.4)
    draft = _tiny(seed=11, layers=1, hidden=16, vocab=vocab, std=0.4)
    prompt = torch.tensor([[1, 5, 2]])
    gen = torch.Generator().manual_seed(12)
    out = speculative_generate(
        target,
        draft,
        prompt.expand(trials, -1).contiguous(),
        2,
        k,
        temperature=temperature,
        generator=gen,
    )
    pairs = out.truncated(2)
    counts = np.bincount((pairs[:, 0] * vocab + pairs[:, 1]).numpy(), minlength=vocab * vocab)
    with torch.no_grad():
        p1 = probs_from_logits(target(prompt)[0, -1], temperature)
        ext = torch.cat([prompt.expand(vocab, -1), torch.arange(vocab)[:, None]], dim=1)
        p2 = probs_from_logits(target(ext)[:, -1], temperature)
    joint = (p1[:, None] * p2).numpy()
    assert chi_square_p_value(counts, joint) > P_MIN
    p = out.stats.per_position_acceptance()
    assert 0.1 < p[0] < 0.95


def test_interleaved_runs_give_the_same_output():
    """Stepping several decoders in turn (as the validation does) changes no output."""
    from profiler.groundtruth.specdec import (
        AutoregressiveDecoder,
        SpeculativeDecoder,
        run_interleaved,
    )

    target = _tiny(seed=0, layers=2, hidden=32, std=0.3)
    draft = _tiny(seed=1, layers=1, hidden=16, std=0.3)
    prompts = torch.randint(0, 32, (2, 6), generator=torch.Generator().manual_seed(3))
    ar = AutoregressiveDecoder(target, prompts, 24)
    spec = [SpeculativeDecoder(target, draft, prompts, 24, k) for k in (1, 3, 6)]
    run_interleaved([ar, *spec], chunk=0.1)
    reference, stats = ar.result()
    assert stats.steps == 24 and len(stats.step_s) == 24
    for dec in spec:
        assert torch.equal(dec.result().truncated(24), reference)


def test_each_step_records_the_context_its_attention_reads():
    """The validation prices each arm at the context its steps ran at: plain decoding
    advances one slot a step, speculation runs the longest sequence ahead."""
    from profiler.groundtruth.specdec import SpeculativeDecoder

    target = _tiny(seed=0, layers=2, hidden=32, std=0.3)
    draft = _tiny(seed=1, layers=1, hidden=16, std=0.3)
    prompts = torch.randint(0, 32, (3, 6), generator=torch.Generator().manual_seed(5))
    _, stats = autoregressive_generate(target, prompts, 10)
    assert stats.step_context == list(range(5, 15))
    assert stats.context_quantile(0.5) == 9.5
    dec = SpeculativeDecoder(target, draft, prompts, 20, 3)
    while not dec.done:
        longest = int(dec.t_cache.lengths.max())
        dec.step()
        assert dec.stats.step_context[-1] == longest
    ctx = dec.stats.step_context
    assert ctx[0] == 5 and np.all(np.diff(ctx) >= 1) and ctx[-1] > 5 + 20 - 4
    # A draft that is always right: the longest sequence runs K + 1 slots a step.
    perfect = speculative_generate(target, target, prompts, 20, 3).stats.step_context
    assert perfect == list(range(5, 5 + 4 * len(perfect), 4))
    # With a tight buffer, parked sequences read up to max_len - K - 1 at most.
    tight = speculative_generate(target, target, prompts[:, :4], 12, 3, max_len=4 + 12 + 3)
    assert max(tight.stats.step_context) <= 4 + 12 + 3 - 3 - 1
