"""Fuzz the /metrics reader: a valid vLLM V1 scrape with one sample, label or name mutated,
and K typed or not. A result is checked for sane figures; memory must not follow a number
in the scrape (a position label)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from simulator.inputs.metrics import MAX_POSITIONS, parse_vllm_metrics
from tests.fuzz.harness import FUZZ, finite, nasty_text, run_case, warm

BASE = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 1000.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 3000.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 1900.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 800.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 630.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 470.0
vllm:num_requests_running{engine="0",model_name="m"} 4.0
"""
LINES = BASE.splitlines()
PEAK_BYTES = 8 * 1024 * 1024


def _check(m) -> None:
    assert 1 <= m.k <= MAX_POSITIONS, m.k
    assert finite(m.alpha, 0, 1), m.alpha
    assert finite(m.mean_accepted_tokens, 1, m.k + 1 + 1e-9) or m.per_batch_k
    assert finite(m.mean_accepted_tokens, 1), m.mean_accepted_tokens
    assert finite(m.draft_acceptance_rate, 0, 1), m.draft_acceptance_rate
    for rates in (m.per_position_rates or [], m.per_position_upper or []):
        assert all(finite(r, 0, 1) for r in rates), rates
    for v in (m.num_drafts, m.num_draft_tokens, m.num_accepted_tokens):
        assert finite(v, 0), v


def _parse(text, k):
    return lambda: parse_vllm_metrics(text, k=k, source="scrape")


warm(_parse(BASE, None))


def _mutate(kind: str, line: int, text: str) -> str:
    lines = list(LINES)
    i = 2 + line % (len(lines) - 2)
    name, _, rest = lines[i].partition("{")
    labels, _, value = rest.rpartition("} ")
    if kind == "value":
        lines[i] = f"{name}{{{labels}}} {text}"
    elif kind == "position":
        lines[i] = f'{name}{{{labels.rsplit("position=", 1)[0]}position="{text}"}} {value}'
    elif kind == "label":
        lines[i] = f"{name}{{{labels},{text}}} {value}"
    elif kind == "name":
        lines[i] = f"{text}{{{labels}}} {value}"
    elif kind == "raw":
        lines[i] = text
    elif kind == "repeat":
        lines.insert(i, lines[i])
    elif kind == "drop":
        del lines[i]
    elif kind == "no_total":
        lines = [line.replace("_total{", "{") for line in lines]
    elif kind == "v0":
        lines = [ln for ln in lines if "num_drafts" not in ln]
    return "\n".join(lines) + "\n"


@FUZZ
@given(
    kind=st.sampled_from(
        [
            "value",
            "value",
            "position",
            "position",
            "label",
            "name",
            "raw",
            "repeat",
            "drop",
            "no_total",
            "v0",
        ]
    ),
    line=st.integers(0, 100),
    text=nasty_text()
    | st.sampled_from(["99999999999", "63", "64", "1e-310", "0.5", "00000000000000000001"]),
    k=st.none() | st.integers(-(2**64), 2**64) | st.sampled_from([0, 1, 3, 4, 16, 100]),
    encode=st.booleans(),
)
def test_metrics(kind, line, text, k, encode):
    scrape = _mutate(kind, line, text)
    data = scrape.encode("utf-8", "surrogatepass") if encode else scrape
    run_case("metrics", _parse(data, k), _check, max_peak_bytes=PEAK_BYTES)


@FUZZ
@given(
    size=st.integers(1, 200_000),
    char=st.sampled_from([" ", "{", '"', "=", "a", "\t", ","]),
    prefix=st.sampled_from(
        ["vllm:spec_decode_num_drafts{", "a ", 'x{a="', "vllm:spec_decode_num_drafts "]
    ),
)
def test_metrics_long_lines(size, char, prefix):
    """One long line of a repeated character: the line reader must stay linear."""
    text = prefix + char * size + " 1\n"
    run_case("metrics", _parse(text, 3), _check, max_peak_bytes=PEAK_BYTES + 4 * size)


def test_huge_position_label_allocates_nothing():
    import tracemalloc

    text = BASE.replace('position="2"', 'position="99999999999"')
    tracemalloc.start()
    try:
        parse_vllm_metrics(text)
    except ValueError as exc:
        assert "position" in str(exc)
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak < 1024 * 1024
    assert math.isfinite(peak)
