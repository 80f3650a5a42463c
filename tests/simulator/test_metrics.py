"""vLLM /metrics scrapes: counters in, acceptance out; scrapes without counters refused."""

import numpy as np
import pytest

from app.samples import EXAMPLE_SCRAPE
from simulator.errors import InputError
from simulator.inputs.metrics import (
    InconsistentScrape,
    parse_vllm_metrics,
    per_batch_position_bounds,
)

# A V1 scrape: 1000 steps of K=4, 2400 drafts accepted, per-position counts decaying.
V1 = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 600.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 400.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 2400.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="m"} 1600.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 1440.0
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="m"} 960.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 480
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 420
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 300
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="3"} 240
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="0"} 320
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="1"} 280
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="2"} 200
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="3"} 160
vllm:num_requests_running{model_name="m"} 3.0
"""


def test_v1_scrape():
    m = parse_vllm_metrics(V1)
    assert m.num_drafts == 1000 and m.num_draft_tokens == 4000 and m.k == 4
    # tau = 1 + 2400 / 1000; vLLM's draft acceptance rate = 2400 / 4000
    assert m.mean_accepted_tokens == pytest.approx(3.4)
    assert m.draft_acceptance_rate == pytest.approx(0.6)
    assert m.per_position_rates == pytest.approx([0.8, 0.7, 0.5, 0.4])
    assert sum(m.per_position_rates) + 1 == pytest.approx(m.mean_accepted_tokens)
    assert 0.6 < m.alpha < 1.0
    assert m.acceptance_per_position == "0.8000;0.7000;0.5000;0.4000"


def test_v0_scrape_needs_k():
    text = (
        "vllm:spec_decode_num_draft_tokens_total 500\n"
        "vllm:spec_decode_num_accepted_tokens_total 300\n"
        "vllm:spec_decode_num_emitted_tokens_total 400\n"
    )
    with pytest.raises(InputError, match="give K"):
        parse_vllm_metrics(text)
    m = parse_vllm_metrics(text, k=5)
    assert m.num_drafts == 100 and m.mean_accepted_tokens == pytest.approx(4.0)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("vllm:num_requests_running 1\n", "no speculative-decoding counters"),
        ("", "no speculative-decoding counters"),
        ("this is not prometheus {\n", "not a Prometheus sample line"),
        (
            "vllm:spec_decode_num_drafts_total 0\nvllm:spec_decode_num_draft_tokens_total 0\n"
            "vllm:spec_decode_num_accepted_tokens_total 0\n",
            "counters are zero",
        ),
        ("vllm:spec_decode_num_drafts_total abc\n", "not a number"),
        ("vllm:spec_decode_num_drafts_total 10\n", "no vllm:spec_decode_num_draft_tokens"),
    ],
    ids=["no-counters", "empty", "garbage", "zero", "nan-text", "missing-counter"],
)
def test_bad_scrapes(text, needle):
    with pytest.raises(InputError, match=needle):
        parse_vllm_metrics(text)


def test_bytes_cap():
    with pytest.raises(InputError, match="limit"):
        parse_vllm_metrics(b"#" * (6 * 1024 * 1024))


def _scrape(drafts, draft_tokens, accepted, per_pos=()) -> str:
    """A V1 scrape from its totals and per-position accepted counts (position 0 first)."""
    lines = [
        f"vllm:spec_decode_num_drafts_total {drafts}",
        f"vllm:spec_decode_num_draft_tokens_total {draft_tokens}",
        f"vllm:spec_decode_num_accepted_tokens_total {accepted}",
    ]
    lines += [
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}} {c}'
        for i, c in enumerate(per_pos)
    ]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (_scrape(1000, 4000, 2400, [480, 500, 300, 240]), "rise with position"),
        (_scrape(1000, 4000, 2400, [800, 700, 500, 500, 100]), "per-position sum above"),
        (_scrape(1000, 4000, 5000), "more accepted than drafted"),
        (_scrape(1000, 2500, 1900), "non-integer drafts per round"),
        (_scrape(1000, 800, 500), "fewer draft tokens than drafts"),
        (_scrape(1000, 4000, 1300, [1100, 100, 50, 50]), 'position="0" counts 1100'),
        (_scrape(100, 150, 150, [90, 60]), "need at least 160 draft tokens"),
        (_scrape(1000, 3500, 2400, [800, 700, 500]), "exceed the 3 per-position counters"),
    ],
    ids=[
        "rising",
        "sum-above-total",
        "accepted-over-drafted",
        "non-integer-k",
        "k-below-1",
        "first-over-drafts",
        "deep-accepts-undrafted",
        "k-beyond-positions",
    ],
)
def test_each_inconsistency_is_refused_and_named(text, needle):
    with pytest.raises(InconsistentScrape) as info:
        parse_vllm_metrics(text, source="s.prom")
    assert len(info.value.problems) == 1 and needle in info.value.problems[0], info.value.problems
    assert isinstance(info.value, InputError) and "s.prom" in str(info.value)


def test_several_inconsistencies_are_each_named():
    text = _scrape(1000, 4000, 5000, [480, 500, 300, 240])
    with pytest.raises(InconsistentScrape) as info:
        parse_vllm_metrics(text)
    problems = info.value.problems
    assert any("rise with position" in p for p in problems)
    assert any("more accepted than drafted" in p for p in problems)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("vllm:spec_decode_num_drafts_total -3\n", "finite count >= 0"),
        ("vllm:spec_decode_num_drafts_total NaN\n", "finite count >= 0"),
        ("vllm:spec_decode_num_draft_tokens_total +Inf\n", "finite count >= 0"),
        ("vllm:spec_decode_num_drafts_total 1e308\n" * 2, "infinite count"),
        (
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="99999999999"} 1\n',
            "beyond the 64 positions",
        ),
        (
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="' + "9" * 5000 + '"} 1\n',
            "beyond the 64 positions",
        ),
        (
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="64"} 1\n',
            "beyond the 64 positions",
        ),
        ('vllm:spec_decode_num_accepted_tokens_per_pos_total{position="²"} 1\n', "plain integer"),
        ('vllm:spec_decode_num_accepted_tokens_per_pos_total{position="-1"} 1\n', "plain integer"),
        ('vllm:spec_decode_num_accepted_tokens_per_pos_total{position="1.0"} 1\n', "plain integer"),
        ('vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0"} 1\n', "no position"),
        (_scrape(1e-310, 4, 2), "at least 1"),
        (_scrape(0.5, 2, 1), "at least 1"),
    ],
    ids=[
        "negative",
        "nan",
        "inf",
        "sum-overflows",
        "huge-position",
        "5000-digit-position",
        "position-64",
        "superscript-position",
        "negative-position",
        "float-position",
        "no-position",
        "tiny-drafts",
        "half-a-draft",
    ],
)
def test_unusable_counters_are_refused_cleanly(text, needle):
    with pytest.raises(InputError, match=needle):
        parse_vllm_metrics(text)


def test_v0_drafts_below_one_are_refused():
    text = (
        "vllm:spec_decode_num_draft_tokens_total 1e-310\nvllm:spec_decode_num_accepted_tokens 0\n"
    )
    with pytest.raises(InputError, match="at least 1"):
        parse_vllm_metrics(text, k=1)


def test_v0_drafted_tokens_must_be_a_multiple_of_the_given_k():
    text = (
        "vllm:spec_decode_num_draft_tokens_total 500\n"
        "vllm:spec_decode_num_accepted_tokens_total 300\n"
    )
    with pytest.raises(InputError, match="not a multiple of K = 3"):
        parse_vllm_metrics(text, k=3)


def test_deepest_position_63_is_read():
    per_pos = [10] * 64
    m = parse_vllm_metrics(_scrape(10, 640, 640, per_pos))
    assert m.k == 64 and m.per_position_rates == pytest.approx([1.0] * 64)


# A per-batch K schedule: 600 rounds drafted K = 2 and 400 drafted K = 4 (mean 2.8), each
# position accepted with i.i.d. alpha = 0.5. Position j is accepted in rounds(K >= j) * 0.5^j
# rounds: 1000 * 0.5, 1000 * 0.25, 400 * 0.125, 400 * 0.0625.
PER_BATCH = _scrape(1000, 600 * 2 + 400 * 4, 500 + 250 + 50 + 25, [500, 250, 50, 25])
PER_BATCH_TRUE_RATES = [0.5, 0.25, 0.125, 0.0625]


def test_per_batch_k_is_read_from_the_per_position_counters():
    m = parse_vllm_metrics(PER_BATCH)
    assert m.per_batch_k and m.k == 4 and m.k_source == "per-position counters"
    assert m.mean_k == pytest.approx(2.8)
    assert m.mean_accepted_tokens == pytest.approx(1 + 825 / 1000)
    # Position 1 is drafted in every round, so its rate (alpha) is exact.
    assert m.alpha == pytest.approx(0.5) and m.per_position_rates[0] == pytest.approx(0.5)
    lower, upper = np.array(m.per_position_rates), np.array(m.per_position_upper)
    assert np.all(lower <= np.array(PER_BATCH_TRUE_RATES) + 1e-12)
    assert np.all(upper >= np.array(PER_BATCH_TRUE_RATES) - 1e-12)
    # Lower bounds at least as tight as accepted / drafts, and never rising.
    assert np.all(lower >= np.array([500, 250, 50, 25]) / 1000 - 1e-12)
    assert np.all(np.diff(lower) <= 0)
    # r_3 <= (D - R - a_4) / 2 = 887.5 rounds; r_3 >= (D - 2R) / 2 = 400 rounds.
    assert lower[2] == pytest.approx(50 / 887.5) and upper[2] == pytest.approx(50 / 400)
    assert any("per-batch K schedule" in n for n in m.notes)


def test_integer_mean_k_with_deeper_counters_is_a_per_batch_schedule():
    # Half the rounds at K = 2, half at K = 4: mean 3, but position 4 was drafted.
    m = parse_vllm_metrics(_scrape(1000, 3000, 1425, [800, 500, 100, 25]))
    assert m.per_batch_k and m.k == 4 and m.mean_k == pytest.approx(3.0)


def _simulate_schedule(rng) -> tuple[list[float], float, float, list[float]]:
    """Random per-batch K schedule: per-position accepted counts, R, D, true a_j / r_j."""
    n = int(rng.integers(2, 7))
    ks = rng.integers(1, n + 1, size=int(rng.integers(20, 400)))
    ks[0] = n
    p_cond = rng.uniform(0.2, 1.0, size=n)
    accepted = np.zeros(n)
    drafted = np.zeros(n)
    for k in ks:
        drafted[:k] += 1
        ok = np.cumprod(rng.random(k) < p_cond[:k])
        accepted[:k] += ok
    return accepted.tolist(), float(len(ks)), float(ks.sum()), (accepted / drafted).tolist()


@pytest.mark.parametrize("seed", range(40))
def test_per_batch_bounds_hold_the_true_rates(seed):
    counts, drafts, draft_tokens, true = _simulate_schedule(np.random.default_rng(seed))
    lower, upper = per_batch_position_bounds(counts, drafts, draft_tokens)
    assert np.all(np.array(lower) <= np.array(true) + 1e-12)
    assert np.all(np.array(upper) >= np.array(true) - 1e-12)
    # Every random schedule's counters pass the consistency checks.
    parse_vllm_metrics(_scrape(drafts, draft_tokens, sum(counts), counts))


def test_typed_k_does_not_override_a_measured_k():
    # The scrape's drafts per round is 3: at the typed K = 1, tau 1.91 would give alpha 1.
    m = parse_vllm_metrics(EXAMPLE_SCRAPE, k=1)
    assert m.k == 3 and m.k_source == "drafts per round"
    assert m.alpha == pytest.approx(parse_vllm_metrics(EXAMPLE_SCRAPE).alpha)
    assert round(m.alpha, 3) == 0.790
    assert any("K typed (1) was not used" in n for n in m.notes)


def test_per_position_counters_give_k_without_a_drafts_counter():
    text = (
        "vllm:spec_decode_num_draft_tokens_total 300\n"
        "vllm:spec_decode_num_accepted_tokens_total 150\n"
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 80\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="1"} 50\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="2"} 20\n'
    )
    m = parse_vllm_metrics(text, k=5)
    assert m.k == 3 and m.k_source == "per-position counters" and m.num_drafts == 100
    assert any("K typed (5) was not used" in n for n in m.notes)


def test_per_position_sum_below_the_total_is_noted_not_refused():
    m = parse_vllm_metrics(_scrape(1000, 4000, 2400, [800, 700, 500, 300]))
    assert any("add up to 2300, below num_accepted_tokens 2400" in n for n in m.notes)
