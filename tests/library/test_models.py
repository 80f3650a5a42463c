"""A user's own model kept in the library (kind `model`): its config.json (and
hf_quant_config.json) text as given, read by the same config reader on save and on
`library import` of an export; list, show, export and delete from the shell."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest

from library import open_library
from library.errors import LibraryError
from library.export import entry_json, read_export, restore
from library.kinds import load_model_entry, model_content, model_files, save_model
from simulator.cli.main import main
from simulator.errors import InputError

CONFIGS = Path(importlib.util.find_spec("aiconfigurator_core").origin).parent / "model_configs"
"""Real checkpoints' config.json files, as aiconfigurator-core ships them."""
DENSE = CONFIGS / "Qwen--Qwen3-8B_config.json"
FP8 = CONFIGS / "Qwen--Qwen3-32B-FP8-Static-PerTensor_config.json"
FP8_QUANT = CONFIGS / "Qwen--Qwen3-32B-FP8-Static-PerTensor_hf_quant_config.json"


@pytest.fixture
def db(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'lib.db'}"
    monkeypatch.setenv("SPECPLAN_DB_URL", url)
    monkeypatch.setenv("SPECPLAN_USER", "cli-user")
    return url


def _without(field: str) -> str:
    value = json.loads(DENSE.read_text())
    value.pop(field)
    return json.dumps(value)


def test_a_model_is_kept_as_its_files_text_and_read_back(db):
    lib = open_library(db)
    text = DENSE.read_text()
    saved = save_model(lib, "my qwen", text, notes="from the hub")
    assert not saved.existed
    e = saved.entry
    assert (e.kind, e.name, e.notes) == ("model", "my qwen", "from the hub")
    assert e.facts["num_layers"] == 36 and e.facts["hf_quant_config"] is False
    # The file's own text, not a re-serialisation: what the user gave is what is kept.
    assert model_files(lib.content("model", "my qwen")) == (text, None)
    spec = load_model_entry(lib, "my qwen", model_id="user:my qwen")
    assert (spec.id, spec.num_layers, spec.hidden_size) == ("user:my qwen", 36, 4096)
    # The same file again, bytes this time, under another name: one entry.
    again = save_model(lib, "other", DENSE.read_bytes())
    assert again.existed and again.entry.name == "my qwen"


def test_a_bad_config_is_refused_naming_the_field_and_nothing_is_kept(db):
    lib = open_library(db)
    with pytest.raises(InputError, match="num_hidden_layers"):
        save_model(lib, "broken", _without("num_hidden_layers"))
    with pytest.raises(InputError, match="UTF-8"):
        save_model(lib, "binary", b"\xff\xfe{}")
    assert lib.entries("model") == []


def test_cli_import_list_show_export_delete_a_model(db, tmp_path, capsys):
    folder = tmp_path / "Qwen3-8B"
    folder.mkdir()
    (folder / "config.json").write_bytes(DENSE.read_bytes())
    assert main(["library", "import", str(folder / "config.json"), "--kind", "model"]) == 0
    # A checkpoint's folder holds config.json: the folder names the model.
    assert "kept model 'Qwen3-8B'" in capsys.readouterr().out

    assert main(["library", "list", "--kind", "model", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["kind"], r["name"], r["saved_by"]) for r in rows] == [
        ("model", "Qwen3-8B", "cli-user")
    ]
    assert main(["library", "show", "Qwen3-8B", "--content"]) == 0
    out = capsys.readouterr().out
    assert '"kind": "model"' in out and "num_hidden_layers" in out

    table = tmp_path / "m.csv"
    assert main(["library", "export", "Qwen3-8B", "--out", str(table)]) == 0
    fields = dict(pd.read_csv(table, keep_default_na=False).itertuples(index=False))
    assert (fields["num_layers"], fields["hidden_size"]) == ("36", "4096")

    backup = tmp_path / "m.json"
    assert main(["library", "export", "Qwen3-8B", "--out", str(backup)]) == 0
    assert main(["library", "delete", "Qwen3-8B", "--kind", "model", "--yes"]) == 0
    assert main(["library", "import", str(backup)]) == 0
    assert model_files(open_library(db).content("model", "Qwen3-8B")) == (DENSE.read_text(), None)


def test_cli_import_with_its_quant_config(db, tmp_path, capsys):
    args = ["library", "import", str(FP8), "--kind", "model", "--name", "q32-fp8"]
    assert main([*args, "--quant", str(FP8_QUANT)]) == 0
    e = open_library(db).get("model", "q32-fp8")
    assert e.facts["hf_quant_config"] is True
    assert model_files(open_library(db).content("model", "q32-fp8")) == (
        FP8.read_text(),
        FP8_QUANT.read_text(),
    )
    assert main(["library", "import", str(DENSE), "--quant", str(FP8_QUANT)]) == 2
    assert "--quant goes with --kind model" in capsys.readouterr().err


def test_cli_import_of_a_bad_config_exits_2_naming_the_field(db, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(_without("hidden_size"))
    assert main(["library", "import", str(bad), "--kind", "model"]) == 2
    assert "hidden_size" in capsys.readouterr().err
    assert open_library(db).entries("model") == []


def test_import_of_an_edited_export_is_checked_as_a_save_is(db, tmp_path):
    """An export anyone may have edited: its config is read again, and the shape shown
    beside it comes from the content, not from the export's own copy."""
    lib = open_library(db)
    value = entry_json(lib, save_model(lib, "m", DENSE.read_text()).entry)
    lib.delete("model", "m")

    forged = {**value, "facts": {**value["facts"], "num_layers": 999}, "model": "forged"}
    restored = restore(lib, read_export(json.dumps(forged).encode(), "m.json"))
    assert restored.entry.facts["num_layers"] == 36 and restored.entry.model != "forged"
    lib.delete("model", "m")

    broken = {**value, "content": model_content(_without("num_attention_heads")).decode()}
    with pytest.raises(InputError, match="num_attention_heads"):
        restore(lib, read_export(json.dumps(broken).encode(), "m.json"))
    not_model = {**value, "content": json.dumps({"config": 3})}
    with pytest.raises(LibraryError, match="'config' and 'hf_quant_config'"):
        restore(lib, read_export(json.dumps(not_model).encode(), "m.json"))
    assert lib.entries("model") == []


def test_import_of_an_edited_profile_export_is_checked_too(db, tmp_path):
    from tests.library.test_store import PROFILE

    lib = open_library(db)
    assert main(["library", "import", str(PROFILE), "--name", "p"]) == 0
    value = entry_json(lib, lib.get("profile", "p"))
    lib.delete("profile", "p")
    broken = {**value, "content": value["content"].replace('"schema"', '"schemata"', 1)}
    with pytest.raises(InputError):
        restore(lib, read_export(json.dumps(broken).encode(), "p.json"))
    assert lib.entries("profile") == []
