"""Fuzz `python -m simulator serve` with hostile flags: several at once, each a nasty
value or one at the edge of its range (a step of 1e-320, `1e-3`, `--requests 100000`),
over scenarios whose lengths vary from 1 to 100,000 tokens.
`test_fuzz_scenarios.test_serve_flags` changes one flag of a fixed call; this is the
family that found the range parser's OverflowError and `--requests` refused late,
naming a column the file does not have (issue 24, "Hardening" 1 and 8).

The engine's bound on decode rounds drawn ahead (`serving.MAX_DECODE_ROUNDS`) is lowered
for these cases, so a request count the bound refuses is reached with runs that take a
fraction of a second; a valid call larger than SERVE_TOKENS output tokens stops where
its simulation would pass them (what decides to run it is what is timed). A refusal names
a flag, or a row and a column of the file.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from simulator.serving import engine as serving
from tests.fuzz.harness import FUZZ, run_case, warm
from tests.fuzz.test_fuzz_scenarios import FLAG_VALUES, CliRefused, _cli, check_serving

TMP = Path(tempfile.mkdtemp(prefix="specplan-fuzz-serve-"))
HEADER = ["target", "gpu", "num_gpus", "method", "k", "mean_accepted_tokens"]
HEADER += ["prompt_len", "output_len"]
ROWS = [
    ["llama-3.1-8b", "h100-sxm", "1", "eagle3", "3", "2.8"],
    ["llama-3.1-8b", "h100-sxm", "1", "none", "", ""],
    ["llama-3.3-70b", "h200", "4", "eagle", "4", "2.5"],
    ["llama-3.3-70b", "l4", "1", "eagle", "4", "2.5"],
]
"""Scenarios that run, one without speculation, and one that cannot run (the 70B's
weights exceed one L4): its rows carry the reason instead of numbers."""
LOWERED_ROUNDS = 8_000
"""MAX_DECODE_ROUNDS in these cases: 20 requests of 1,024 tokens pass it."""
SERVE_TOKENS = 400_000
"""Most output tokens a case simulates (requests x mean output length, summed over its
runs; a run simulates about two million a second); a valid call that asks more stops
at the run that would pass it."""
EDGES = {
    "--rate": ["1e-3", "7e-1", "1:2:1e-320", "0:1e308:1e-308", "1e-3:1e-2:1e-3", "1-3", "5e1"],
    "--concurrency": ["1", "4,16", "1-3", "0", "100000", "100001", "1e2", "1:1e308:1e-300"],
    "--requests": ["1", "2", "30", "200", "100000", "100001", "0", "-1", "1e3", "600"],
    "--lengths": ["fixed", "uniform", "lognormal", "normal", ""],
    "--length-spread": ["0", "0.3", "1", "1.0001", "5", "nan", "inf", "-0", "1e-320"],
    "--acceptance-spread": ["0", "0.1", "0.5", "0.51", "nan", "-inf", "5e-324"],
    "--slo-ttft-ms": ["1", "0", "1e308", "inf", "nan", "-1", "1e-320"],
    "--slo-tpot-ms": ["1", "0", "1e308", "inf", "nan", "-1"],
    "--seed": ["0", "-1", "18446744073709551616", "1e3", "2147483648"],
}
FLAGS = sorted(EDGES)


class WouldRun(Exception):
    """Every check passed and the simulations were about to pass SERVE_TOKENS."""


def _named(exc: BaseException) -> None:
    """A flag named (argparse's 'argument --x' or our field '--x'), or a row and a
    column the file has: never a column it lacks, such as 'requests'."""
    text = str(exc)
    assert "error" in text, text
    if "argument --" in text or "field '--" in text:
        return
    field = re.search(r"field '([^']*)'", text)
    assert field and field.group(1) in HEADER and "row " in text, text


def _serve(flags: dict[str, str], rows: list[int], lengths: tuple[int, int]):
    src = TMP / "in.csv"
    body = [",".join([*ROWS[i], str(lengths[0]), str(lengths[1])]) for i in rows]
    src.write_text("\n".join([",".join(HEADER), *body]) + "\n")
    argv = ["serve", "--in", str(src), "--out", str(TMP / "out.csv")]
    argv += [f"{flag}={value}" for flag, value in flags.items()]
    real, bound = serving.run_arms, serving.MAX_DECODE_ROUNDS
    work = [0]

    def run_arms(scenario, load, prompt, output, **kwargs):
        work[0] += load.requests * output.mean
        if work[0] > SERVE_TOKENS:
            raise WouldRun
        return real(scenario, load, prompt, output, **kwargs)

    serving.run_arms, serving.MAX_DECODE_ROUNDS = run_arms, LOWERED_ROUNDS
    try:
        out = _cli(argv)
    except WouldRun:
        return None
    finally:
        serving.run_arms, serving.MAX_DECODE_ROUNDS = real, bound
    check_served(out, lengths[1], fixed=flags.get("--lengths") == "fixed")
    return out


def check_served(out, output_len: int, fixed: bool = True) -> None:
    """Rows that ran pass `check_serving`; the others say why they could not run.
    `fixed`: every request has `output_len` tokens (else they spread around it)."""
    ran = out["status"] == "ok"
    assert out.loc[~ran, "status"].str.startswith("cannot run").all(), out["status"]
    out = out[ran].copy()
    if not len(out):
        return
    tpot = [c for c in out.columns if c.startswith("tpot_")]
    if output_len == 1 and fixed:
        # One output token: no gap between tokens, so no TPOT.
        assert out[tpot].isna().all().all(), out[tpot]
        out[tpot] = 0.0
    elif output_len == 1:
        # Spread lengths around 1: the requests drawn above 1 token have a TPOT, or none.
        out[tpot] = out[tpot].fillna(0.0)
    check_serving(out)


warm(lambda: _serve({"--rate": "2", "--requests": "20"}, [0], (64, 32)))


@st.composite
def hostile_flag(draw) -> tuple[str, str]:
    """A flag and a value: one at the edge of its range three times in four, else any
    nasty text."""
    flag = draw(st.sampled_from(FLAGS))
    edge = draw(st.integers(0, 3))
    return flag, draw(st.sampled_from(EDGES[flag]) if edge else FLAG_VALUES)


@FUZZ
@given(
    flags=st.lists(hostile_flag(), min_size=1, max_size=4).map(dict),
    load=st.sampled_from(["--rate", "--concurrency"]),
    rows=st.lists(st.integers(0, len(ROWS) - 1), min_size=1, max_size=2),
    prompt=st.sampled_from([1, 256, 4096]),
    output=st.sampled_from([1, 8, 256, 1024, 4096, 100_000]),
)
def test_serve_hostile_flags(flags, load, rows, prompt, output):
    flags = {load: "2" if load == "--rate" else "4", "--requests": "20", **flags}
    run_case(
        "serve_hostile",
        lambda: _serve(flags, rows, (prompt, output)),
        refusals=(CliRefused,),
        refusal_check=_named,
    )
