"""Fuzz the deployment search's YAML spec (`python -m simulator search --spec`): a valid
spec with one node replaced by a nasty value, or its text given a huge integer, deep
nesting, an alias, an anchor, an alias bomb or a key twice, then loaded and expanded.

The reader lives in simulator/search/spec.py and spec_yaml.py; a failure names the
mutation, and the assertion says what was wrong with the refusal or the spec.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import yaml
from hypothesis import given
from hypothesis import strategies as st

from simulator.search.candidates import expand
from simulator.search.spec import SearchSpec, load_spec
from tests.fuzz.harness import FUZZ, mutate_doc, nasty_value, paths, run_case, warm

TMP = Path(tempfile.mkdtemp(prefix="specplan-fuzz-search-spec-"))
BASE = {
    "models": ["llama-3.1-8b"],
    "traffic": {
        "rate": 10,
        "prompt": {"mean": 1024, "kind": "lognormal", "spread": 0.4},
        "output": 128,
    },
    "slo": {"p99_ttft_ms": 1000, "p99_tpot_ms": 30},
    "candidates": {
        "gpus": ["h100-sxm", "l40s"],
        "tp": [1, 2],
        "methods": ["none", {"method": "eagle3", "acceptance_rate": 0.75}],
        "k": [2, "per batch"],
        "max_num_seqs": [16, 64],
    },
    "prices": {"h100-sxm": 2.5},
    "simulation": {"requests": 80, "window": 2},
}
PATHS = paths(BASE)
MARK = "FUZZPLACEHOLDER"
LEVELS = ["&a [x, x, x, x, x, x, x, x, x, x]"] + [
    f"&{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]" for i in range(8)
]
TEXTS = {
    "huge": lambda n: "1" * n,
    "deep": lambda n: "[" * n + "1" + "]" * n,
    "alias": lambda n: "*a",
    "anchor": lambda n: "&a 1",
    "bomb": lambda n: f"[{', '.join(LEVELS)}]",
    "merge": lambda n: "{<<: {a: 1}}",
}
"""Text put where a value goes; each must be refused naming the field it stands in."""


def _load(text: str) -> tuple[SearchSpec, int]:
    path = TMP / "spec.yaml"
    path.write_text(text, encoding="utf-8")
    spec = load_spec(path)
    return spec, len(expand(spec))


def _top(field: str) -> str:
    return field.split(".")[0].split("[")[0]


def _must_refuse(top: str):
    def check(result):
        raise AssertionError(f"accepted a spec that must be refused naming {top}: {result}")

    return check


def _refused_at(top: str):
    def check(exc):
        assert exc.field and _top(exc.field) == top, f"names {exc.field!r}, not {top}: {exc}"

    return check


def _sane(result) -> None:
    spec, count = result
    assert isinstance(spec, SearchSpec) and count > 0
    assert 0 < spec.traffic.rate_min <= spec.traffic.rate_max < 1e10
    assert spec.candidates.gpus and spec.candidates.methods and spec.candidates.max_num_seqs
    assert all(p > 0 for _, p in spec.prices)


warm(lambda: _load(yaml.safe_dump(BASE)))


@FUZZ
@given(
    path=st.sampled_from(PATHS),
    how=st.sampled_from(["replace", "delete", "unknown"]),
    value=nasty_value(),
)
def test_search_spec_values(path, how, value):
    doc = mutate_doc(BASE, path, how, value)
    text = yaml.safe_dump(doc, sort_keys=False)
    falsy_section = len(path) == 1 and how == "replace" and path[0] in ("prices", "simulation")
    check = _sane
    if falsy_section and value is not None and not isinstance(value, dict):
        check = _must_refuse(path[0])
    run_case("search_spec", lambda: _load(text), check)


@FUZZ
@given(
    path=st.sampled_from(PATHS),
    kind=st.sampled_from(sorted(TEXTS)),
    size=st.sampled_from([17, 309, 401, 4301, 10_000]),
)
def test_search_spec_text(path, kind, size):
    doc = mutate_doc(BASE, path, "replace", MARK)
    text = yaml.safe_dump(doc, sort_keys=False).replace(MARK, TEXTS[kind](size), 1)
    top = str(path[0])
    if kind == "huge" and size < 309:
        run_case("search_spec_text", lambda: _load(text), _sane, refusal_check=_refused_at(top))
        return
    run_case(
        "search_spec_text", lambda: _load(text), _must_refuse(top), refusal_check=_refused_at(top)
    )


@FUZZ
@given(path=st.sampled_from([p for p in PATHS if isinstance(p[-1], str)]))
def test_search_spec_key_twice(path):
    doc = mutate_doc(BASE, path, "replace", MARK)
    text = yaml.safe_dump(doc, sort_keys=False)
    line = next(ln for ln in text.splitlines() if MARK in ln)
    body = line.lstrip()
    indent = " " * (len(line) - len(body) + (2 if body.startswith("- ") else 0))
    twice = text.replace(line, f"{line}\n{indent}{path[-1]}: 1", 1).replace(MARK, "2", 1)
    top = str(path[0])
    run_case(
        "search_spec_text", lambda: _load(twice), _must_refuse(top), refusal_check=_refused_at(top)
    )
