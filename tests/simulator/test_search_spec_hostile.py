"""The deployment search's YAML spec under hostile input (issue 36): huge integers, deep
nesting, an alias bomb, a key given twice, a falsy section, a `max_num_seqs` list of
thousands; and Ctrl-C while the search starts its local Ray."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from simulator.cli.main import main
from simulator.errors import InputError
from simulator.search import spec as search_spec
from simulator.search.spec import load_spec
from tests.simulator.test_search import spec_dict

ROOT = Path(__file__).resolve().parents[2]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def _valid_text(**over) -> str:
    return yaml.safe_dump(spec_dict(**over), sort_keys=False)


def _refused(tmp_path, text: str) -> InputError:
    with pytest.raises(InputError) as err:
        load_spec(_write(tmp_path, text))
    return err.value


@pytest.mark.parametrize("digits", [309, 400, 4300, 5000])
def test_a_huge_integer_is_refused_naming_its_field(tmp_path, digits):
    text = _valid_text().replace("rate: 10", "rate: 1" + "0" * (digits - 1))
    exc = _refused(tmp_path, text)
    assert exc.field == "traffic.rate"
    assert "digits" in exc.bare_message or "outside" in exc.bare_message


def test_a_huge_integer_in_a_list_is_refused_naming_its_field(tmp_path):
    text = _valid_text().replace("- 16", "- " + "9" * 5000)
    assert _refused(tmp_path, text).field == "candidates.max_num_seqs"


@pytest.mark.parametrize("opener,closer", [("[", "]"), ("{a: ", "}")])
def test_deep_nesting_is_refused_naming_where_it_starts(tmp_path, opener, closer):
    deep = opener * 10_000 + "1" + closer * 10_000
    text = _valid_text().replace("rate: 10", f"rate: {deep}")
    exc = _refused(tmp_path, text)
    assert exc.field.startswith("traffic.rate")
    assert "deep" in exc.bare_message


def test_the_cli_exits_2_on_each_of_them(tmp_path, capsys):
    out = tmp_path / "r.csv"
    for bad in ("1" * 5000, "[" * 10_000 + "]" * 10_000):
        spec = _write(tmp_path, _valid_text().replace("rate: 10", f"rate: {bad}"))
        assert main(["search", "--spec", str(spec), "--out", str(out)]) == 2
        assert "field 'traffic.rate" in capsys.readouterr().err
    assert not out.exists()


LEVELS = ["&a [x, x, x, x, x, x, x, x, x, x]"] + [
    f"&{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]" for i in range(8)
]
BOMB = f"models:\n- [{', '.join(LEVELS)}]\n"
"""Nine anchors, each ten of the one before: 10**9 x's once expanded, in 400 bytes."""


def test_an_alias_bomb_is_refused_at_once(tmp_path):
    text = _valid_text().replace("models:\n- llama-3.1-8b\n", BOMB)
    assert len(BOMB) < 800 and BOMB in text
    start = time.perf_counter()
    exc = _refused(tmp_path, text)
    assert time.perf_counter() - start < 1.0
    assert "alias" in exc.bare_message


def test_an_anchor_and_alias_in_a_valid_spec_are_refused(tmp_path):
    text = _valid_text().replace("gpus:", "gpus: &g")
    text = text.replace("  tp:\n  - 1\n  - 2\n", "  tp: *g\n")
    exc = _refused(tmp_path, text)
    assert "alias" in exc.bare_message
    assert exc.field == "candidates.gpus"


def test_an_alias_standing_for_a_value_names_that_value(tmp_path):
    """Found by the search-spec fuzz family: an alias or anchor where a value goes was
    refused naming '(top level)', the path before the value's own key."""
    exc = _refused(tmp_path, _valid_text().replace("models:\n- llama-3.1-8b", "models: *a"))
    assert exc.field == "models"


@pytest.mark.parametrize(
    "text,field",
    [
        ("models: [llama-3.1-8b]\nmodels: [llama-3.3-70b]\n", "models"),
        ("traffic:\n  rate: 1\n  rate: 2\n", "traffic.rate"),
    ],
)
def test_a_key_given_twice_is_refused_naming_it(tmp_path, text, field):
    exc = _refused(tmp_path, _valid_text().replace("models:", text + "x_models:", 1))
    assert exc.field == field
    assert "twice" in exc.bare_message


@pytest.mark.parametrize(
    "key,value", [("prices", 0), ("prices", False), ("simulation", False), ("simulation", 0)]
)
def test_a_falsy_section_is_refused_not_read_as_absent(key, value):
    with pytest.raises(InputError) as err:
        search_spec.parse_spec({**spec_dict(), key: value})
    assert err.value.field == key


def test_a_draft_given_to_another_method_is_refused_even_when_falsy():
    eagle = {"method": "eagle3", "acceptance_rate": 0.7, "draft": 0}
    with pytest.raises(InputError) as err:
        search_spec.parse_spec(spec_dict(candidates={"methods": [eagle]}))
    assert err.value.field == "candidates.methods[0].draft"


def test_a_list_of_thousands_of_max_num_seqs_is_refused_naming_the_key():
    with pytest.raises(InputError) as err:
        search_spec.parse_spec(spec_dict(candidates={"max_num_seqs": list(range(1, 4097))}))
    assert err.value.field == "candidates.max_num_seqs"
    assert str(search_spec.MAX_SEQS_VALUES) in str(err.value)


def _children(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
def test_ctrl_c_while_ray_starts_exits_130_and_writes_nothing(tmp_path):
    """SIGINT as soon as the search has spawned Ray's first process (inside `ray.init`)."""
    spec = _write(tmp_path, _valid_text(candidates={"gpus": ["h100-sxm"]}))
    out = tmp_path / "r.csv"
    argv = [sys.executable, "-m", "simulator", "search", "--spec", str(spec), "--out", str(out)]
    proc = subprocess.Popen(argv, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while not _children(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert proc.poll() is None, proc.stderr.read()
    proc.send_signal(signal.SIGINT)
    rc = proc.wait(timeout=30)
    err = proc.stderr.read()
    proc.stderr.close()
    assert rc == 130, err
    assert "Traceback" not in err, err
    assert "interrupted" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.yaml"]
