"""`simulator serve` and the dashboard simulate the same traffic when given nothing: one
default for the request count, the length distribution and its spread, and the per-request
acceptance spread (issue 27: `--lengths lognormal` without `--length-spread` meant fixed
lengths, the dashboard's lognormal was sigma 0.5, and the CLI's acceptance spread was 0.1
against the dashboard's published per-method floor)."""

from __future__ import annotations

import pandas as pd

from simulator.cli.main import main, make_parser
from simulator.serving.spread import default_acceptance_spread

ROW = (
    "target,gpu,method,k,mean_accepted_tokens,prompt_len,output_len\n"
    "llama-3.1-8b,h100-sxm,eagle3,3,2.8,256,64\n"
)


def _serve(tmp_path, name: str, *flags: str) -> pd.DataFrame:
    src, out = tmp_path / "in.csv", tmp_path / f"{name}.csv"
    src.write_text(ROW)
    argv = ["serve", "--in", str(src), "--out", str(out), "--rate", "4", "--requests", "200"]
    assert main([*argv, *flags]) == 0
    return pd.read_csv(out)


def test_lognormal_without_a_spread_is_the_default_sigma_not_fixed(tmp_path):
    lognormal = _serve(tmp_path, "lognormal", "--lengths", "lognormal")
    fixed = _serve(tmp_path, "fixed", "--lengths", "fixed")
    sigma = _serve(tmp_path, "sigma", "--lengths", "lognormal", "--length-spread", "0.5")
    assert not lognormal["ttft_p99_ms"].equals(fixed["ttft_p99_ms"])
    pd.testing.assert_frame_equal(lognormal, sigma)


def test_the_cli_defaults_are_the_dashboards(tmp_path):
    from simulator.serving.defaults import (
        LENGTH_KIND,
        LENGTH_SPREAD,
        REQUESTS,
    )

    parsed = make_parser().parse_args(["serve", "--in", "x.csv", "--out", "y.csv"])
    assert parsed.requests == REQUESTS == 2000
    assert parsed.lengths == LENGTH_KIND == "lognormal"
    assert LENGTH_SPREAD["lognormal"] == 0.5
    plain = _serve(tmp_path, "plain")
    spelled = _serve(
        tmp_path,
        "spelled",
        "--lengths",
        "lognormal",
        "--length-spread",
        "0.5",
        "--acceptance-spread",
        str(default_acceptance_spread("eagle3")),
    )
    pd.testing.assert_frame_equal(plain, spelled)
    other = _serve(tmp_path, "other", "--acceptance-spread", "0.1")
    assert not other.loc[other["arm"] == "spec", "tpot_p99_ms"].equals(
        plain.loc[plain["arm"] == "spec", "tpot_p99_ms"]
    )
