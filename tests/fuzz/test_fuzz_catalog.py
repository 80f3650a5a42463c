"""Fuzz the catalog loaders (`--gpus`, `--models`): the bundled CSVs cut to a few rows with
one cell, the header or a row mutated, then priced by `predict` at TP 1 and 2."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from simulator.errors import InputError
from simulator.inputs.catalog import (
    GPUS_CSV,
    MODELS_CSV,
    default_gpus,
    default_models,
    load_gpus,
    load_models,
)
from simulator.model.predict import predict
from tests.fuzz.harness import FUZZ, check_predictions, nasty_text, run_case, warm

TMP = Path(tempfile.mkdtemp(prefix="specplan-fuzz-catalog-"))
GPU_IDS = ("h100-sxm", "l4", "a100-80gb")
MODEL_IDS = ("llama-3.1-8b", "llama-3.2-1b", "deepseek-v3")


def _cut(path: Path, ids: tuple[str, ...]) -> list[list[str]]:
    import csv

    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    return [rows[0], *(r for r in rows[1:] if r[0] in ids)]


BASES = {"gpus": _cut(GPUS_CSV, GPU_IDS), "models": _cut(MODELS_CSV, MODEL_IDS)}


def _text(rows: list[list[str]]) -> str:
    import csv
    import io

    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue()


def _mutate(rows, kind, row, col, text):
    rows = [list(r) for r in rows]
    j = col % len(rows[0])
    i = 1 + row % (len(rows) - 1)
    if kind == "cell":
        rows[i][j] = text
    elif kind == "header_space":
        rows[0][j] = f" {rows[0][j]} "
    elif kind == "header_duplicate":
        rows[0].append(" " + rows[0][j])
        for r in rows[1:]:
            r.append(text)
    elif kind == "header_typo":
        rows[0][j] = rows[0][j][:-1] + "x"
    elif kind == "header_drop":
        for r in rows:
            del r[j]
    elif kind == "extra_value":
        rows[i].append(text)
    elif kind == "short_row":
        rows[i] = rows[i][:j]
    elif kind == "duplicate_row":
        rows.append(list(rows[i]))
    return rows


def _scenarios(gpus, models) -> pd.DataFrame:
    rows = []
    for g in gpus:
        for m in models:
            for tp in (1, 2):
                for method, k in (("none", 0), ("ngram", 3)):
                    rows.append(
                        dict(
                            target=m,
                            gpu=g,
                            num_gpus=tp,
                            method=method,
                            k=k,
                            acceptance_rate=0.8 if k else None,
                            batch_size=8,
                            prompt_len=512,
                            output_len=128,
                        )
                    )
    return pd.DataFrame(rows)


def _run(which: str, text: str, name: str):
    path = TMP / name
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    if which == "gpus":
        gpus, models = load_gpus(path), {m: default_models()[m] for m in MODEL_IDS[:2]}
    else:
        gpus, models = {g: default_gpus()[g] for g in GPU_IDS[:2]}, load_models(path)
    out = predict(_scenarios(list(gpus)[:3], list(models)[:3]), gpus=gpus, models=models)
    check_predictions(out)
    return out


for _which, _rows in BASES.items():
    warm(lambda w=_which, r=_rows: _run(w, _text(r), f"warm-{w}.csv"))

KINDS = [
    "cell",
    "cell",
    "cell",
    "cell",
    "header_space",
    "header_duplicate",
    "header_typo",
    "header_drop",
    "extra_value",
    "short_row",
    "duplicate_row",
]


def _case(which, kind, row, col, text):
    body = _text(_mutate(BASES[which], kind, row, col, text))
    return lambda: _run(which, body, f"{which}.csv")


@FUZZ
@given(
    kind=st.sampled_from(KINDS),
    row=st.integers(0, 100),
    col=st.integers(0, 100),
    text=nasty_text(),
)
def test_gpu_catalog(kind, row, col, text):
    run_case("catalog_gpus", _case("gpus", kind, row, col, text))


@FUZZ
@given(
    kind=st.sampled_from(KINDS),
    row=st.integers(0, 100),
    col=st.integers(0, 100),
    text=nasty_text(),
)
def test_model_catalog(kind, row, col, text):
    run_case("catalog_models", _case("models", kind, row, col, text))


def test_folder_and_missing_file_are_refused():
    for load in (load_gpus, load_models):
        for path in (TMP, TMP / "absent.csv"):
            try:
                load(path)
            except InputError as exc:
                assert exc.file == str(path)
            else:
                raise AssertionError(f"{load.__name__}({path}) was accepted")
