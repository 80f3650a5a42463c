"""vLLM /metrics scrapes: counters in, acceptance out; scrapes without counters refused."""

import pytest

from simulator.errors import InputError
from simulator.metrics import parse_vllm_metrics

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
