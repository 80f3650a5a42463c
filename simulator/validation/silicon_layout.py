"""The parallel layout of a silicon_sample.csv run, read as the run was made.

Two dumps in aiconfigurator-core 0.12.0's `silicon_sample.csv` (`source_file=2026-04-06.csv`
and `db-dump/2026-04-27`) write an expert-parallel run's layout squared: a run on 8 GPUs
with attention TP 8 and EP 8 (the id says `..._tp8_ep8`) has `tp_size` 64, `moe_tp_size` 8
and `moe_ep_size` 8, and an attention-DP run on 8 GPUs (`tp1 dp8`, 8 requests a rank) has
`attention_dp_size` 64 and `batch_size` 1. The evidence is in the file: each such row of
the 2026-04-06 dump carries exactly the measured TPOT and TTFT of a 2026-03-25 row whose
columns agree with its id (DeepSeek-R1 on 8 B200s, SGLang, fp4, 1024/1024: 8.049, 9.205,
11.035, 13.678, 16.312 ms at concurrency 4-64 in both), and the db-dump's `tp_size` 64
rows of config 201 carry the same figures.

vLLM's squared rows write TP4 with EP4 on 4 GPUs as TP4 x DP4 with EP16 and one request
a rank (Kimi-K2.5 on B200: `..._tp4_ep4_1294` and config 635 both 8.361 ms, the gap
analysis's TP4 EP4 row 8.36 ms).

`decode` gives those rows the layout they ran: the GPUs the id records (`tpN_epM`, where
the columns give N x M), or, for rows without such an id, n where the columns have the
squared shape (moe_tp = moe_ep = n > 1, tp x dp = n^2) over more GPUs than one host holds
(a tensor-parallel group across hosts, which no run labelled by id has); EP as recorded,
MoE TP the rest, the attention DP (else TP) shrunk by the same factor with the
concurrency kept. `duplicates` marks the copies of one measurement the dumps repeat, and
`contradictions` names what stays impossible.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

ID_LAYOUT = r"_tp(\d+)(?:_0)?_ep(\d+|none)"
"""The parallelism a run's `id` records: `..._tp8_ep8_937`, `..._tp8_0_ep1_0_975`,
`..._tp4_epnone_1` (the replica's GPUs, attention DP included, then the EP size)."""


def id_layout(raw: pd.DataFrame) -> pd.DataFrame:
    """The GPUs and EP size each run's id records (columns `gpus`, `ep`; NaN where the
    id names none, `ep` NaN for `epnone`)."""
    if "id" not in raw:
        return pd.DataFrame({"gpus": np.nan, "ep": np.nan}, index=raw.index)
    found = raw["id"].astype(str).str.extract(ID_LAYOUT)
    return pd.DataFrame(
        {
            "gpus": pd.to_numeric(found[0], errors="coerce"),
            "ep": pd.to_numeric(found[1], errors="coerce"),
        },
        index=raw.index,
    )


def _written(raw: pd.DataFrame) -> dict[str, pd.Series]:
    return {
        "tp": raw["tp_size"].fillna(1.0),
        "dp": raw["attention_dp_size"].fillna(1.0).replace(0.0, 1.0),
        "moe_tp": raw["moe_tp_size"].fillna(1.0),
        "moe_ep": raw["moe_ep_size"].fillna(1.0),
    }


def squared(raw: pd.DataFrame, gpus_per_node: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Which rows are written squared, and the GPUs each ran on (NaN elsewhere).

    By id: the columns give gpus x ep GPUs where the id records `..._tp{gpus}_ep{ep}`
    (ep > 1). Without such an id: tp x dp = moe_tp x moe_ep = n^2 over more GPUs than one
    host holds, with moe_tp = moe_ep = n (SGLang's and TensorRT-LLM's TP8 EP8 as TP64,
    MoE TP8 x EP8) or moe_tp = 1 (vLLM's TP4 EP4 as TP4 x DP4 with EP16, the very columns
    of the id'ed rows `..._tp4_ep4_...`); the GPUs then n."""
    w = _written(raw)
    gpus = w["tp"] * w["dp"]
    named = id_layout(raw)
    by_id = (named["ep"] > 1) & (named["gpus"] != gpus) & (gpus == named["gpus"] * named["ep"])
    n = np.sqrt(gpus).round()
    shape = (
        (n > 1)
        & (n * n == gpus)
        & (w["moe_tp"] * w["moe_ep"] == gpus)
        & ((w["moe_tp"] == w["moe_ep"]) | (w["moe_tp"] == 1.0))
    )
    by_shape = named["gpus"].isna() & shape & (gpus > gpus_per_node)
    ran_on = named["gpus"].where(by_id, n.where(by_shape))
    return by_id | by_shape, ran_on


def decode(raw: pd.DataFrame, gpus_per_node: pd.Series) -> tuple[pd.DataFrame, pd.Series]:
    """`raw` with squared layouts decoded (module docstring), and which rows were.

    The GPUs become those the run ran on, EP as the id (or the squared shape) gives it,
    MoE TP the rest; the attention DP shrinks by the same factor where it can (its
    batch per rank grows, the concurrency kept), else the attention TP. `gpus_per_node`
    is each row's host size (NaN where the system is unknown).
    """
    fix, ran_on = squared(raw, gpus_per_node)
    w = _written(raw)
    named = id_layout(raw)
    ep = named["ep"].where(named["ep"].notna(), w["moe_ep"].where(w["moe_tp"] == w["moe_ep"]))
    ep = ep.where(~(named["gpus"].isna() & fix), ran_on)
    scale = (w["tp"] * w["dp"]) / ran_on
    ranks = fix & (w["dp"] >= scale) & ((w["dp"] % scale.fillna(1.0)) == 0)
    heads = fix & ~ranks
    out = raw.copy()
    out.loc[ranks, "attention_dp_size"] = (w["dp"] / scale)[ranks]
    out.loc[ranks, "batch_size"] = (raw["batch_size"] * scale)[ranks]
    out.loc[heads, "tp_size"] = (w["tp"] / scale)[heads]
    out.loc[fix, "moe_ep_size"] = ep[fix]
    out.loc[fix, "moe_tp_size"] = (ran_on / ep)[fix]
    return out, fix


def duplicates(raw: pd.DataFrame) -> pd.Series:
    """Rows that repeat another row's measurement: the same GPU, engine, precision, lengths
    and concurrency with TPOT and TTFT equal to 10 us (one dump gives two decimals),
    whatever layout or model name each writes (several dumps of the file carry the same
    benchmark, some squared; `db-dump/2026-04-27` writes its `dsr1_` runs, DeepSeek-R1's,
    as model DeepSeek-V3, 391 of them the very measurements of the DeepSeek-R1 rows of
    other dumps). Of each set the row whose id names its layout is kept, else the first."""
    w = _written(raw)
    key = pd.DataFrame(
        {
            **{c: raw[c] for c in ("mode", "system", "backend", "precision", "isl", "osl")},
            "concurrency": raw["batch_size"] * w["dp"],
            "tpot": raw["silicon_tpot_ms"].round(2),
            "ttft": raw["silicon_ttft_ms"].round(2),
        }
    )
    named = id_layout(raw)["gpus"].notna()
    order = np.lexsort((np.arange(len(raw)), ~named.to_numpy()))
    repeat = key.iloc[order].duplicated(keep="first")
    return repeat.reindex(raw.index)


def contradictions(raw: pd.DataFrame, heads: pd.Series) -> pd.Series:
    """Per run, why its layout cannot be the run's ('' where it can): the GPUs the columns
    give (tp_size x attention_dp_size as written, after `decode`) against those its id
    records, and
    the attention TP against the model's attention heads `heads` (no engine splits
    DeepSeek-R1's 128 heads over the 36 GPUs the 2026-04-06 dump gives some GB200 runs)."""
    out = pd.Series("", raw.index, dtype=object)
    w = _written(raw)
    gpus = w["tp"] * w["dp"]
    named = id_layout(raw)["gpus"]
    bad = named.notna() & gpus.notna() & (named != gpus)
    out[bad] = [
        f"its columns give {int(g)} GPUs, its id records {int(n)}"
        for g, n in zip(gpus[bad], named[bad], strict=True)
    ]
    tp = raw["tp_size"].where(raw["tp_size"] >= 1)
    split = (out == "") & heads.notna() & tp.notna() & (heads % tp.fillna(1.0) != 0)
    out[split] = [
        f"attention TP {int(t)} does not divide the model's {int(h)} attention heads"
        for t, h in zip(tp[split], heads[split], strict=True)
    ]
    return out
