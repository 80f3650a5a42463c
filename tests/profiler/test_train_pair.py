"""The trained draft/target pair: corpus split, training loop, the committed files, the
catalog rows that let the profiler time them, and a reduced `validate` end to end."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from profiler.groundtruth import corpus
from profiler.groundtruth.train_pair import (
    CONFIGS,
    DRAFT_ID,
    MODELS_DIR,
    TARGET_ID,
    TrainSettings,
    learning_rate,
    lm_loss,
    load_model,
    load_pair,
    num_params,
    save_model,
    train_model,
)
from profiler.groundtruth.validate import ValidationSettings, tau_vs_iid, validate
from profiler.model import ArchConfig
from simulator.inputs.catalog import load_models

SAMPLE_PY = '''"""Helpers for parsing configuration files.

The functions in this module read simple key-value files and return dictionaries.
"""


def parse(text):
    """Return a dictionary of the key-value pairs found in text, one per line."""
    result = {}
    for line in text.splitlines():
        key, _, value = line.partition("=")
        result[key.strip()] = value.strip()
    return result
'''


@pytest.fixture
def fake_stdlib(tmp_path):
    """A miniature standard library: enough files that both splits are non-empty."""
    for i in range(40):
        sub = tmp_path / ("pkg" if i % 2 else "")
        sub.mkdir(exist_ok=True)
        (sub / f"mod{i}.py").write_text(SAMPLE_PY.replace("parse", f"parse{i}"), "utf-8")
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "test_x.py").write_text("assert True\n", "utf-8")
    return tmp_path


def test_split_is_by_file_and_deterministic(fake_stdlib):
    c = corpus.load_corpus(fake_stdlib)
    train = set(c.splits["code"]["train"].paths)
    held = set(c.splits["code"]["held_out"].paths)
    assert train and held and not train & held
    assert held == {p for p, _ in corpus.list_source_files(fake_stdlib) if corpus.is_held_out(p)}
    assert not any(p.startswith("test/") for p in train | held)
    # Prose of a file lives in the same split as its code.
    assert set(c.splits["prose"]["held_out"].paths) <= held
    assert corpus.is_held_out("json/decoder.py") == corpus.is_held_out("json/decoder.py")


def test_docstrings_are_prose():
    docs = corpus.docstrings(SAMPLE_PY)
    assert docs[0].startswith("Helpers for parsing")
    assert all("def " not in d for d in docs)


def test_prompts_come_from_held_out(fake_stdlib):
    c = corpus.load_corpus(fake_stdlib, held_out_only=True)
    assert not c.splits["code"]["train"].docs
    prompts = corpus.sample_prompts(c.splits["code"]["held_out"], 3, 48, seed=0)
    assert prompts.shape == (3, 48) and prompts.dtype == np.uint8
    held_text = b"".join(c.splits["code"]["held_out"].docs)
    assert all(bytes(p) in held_text for p in prompts)


def test_learning_rate_schedule():
    s = TrainSettings(steps=100, lr=1e-3, warmup_steps=10, min_lr_ratio=0.1)
    assert learning_rate(0, s) == pytest.approx(1e-4)
    assert learning_rate(9, s) == pytest.approx(1e-3)
    assert learning_rate(99, s) == pytest.approx(1e-4, rel=0.01)


def test_training_lowers_the_loss_and_round_trips(fake_stdlib, tmp_path):
    c = corpus.load_corpus(fake_stdlib)
    cfg = ArchConfig(
        vocab_size=256,
        hidden_size=32,
        num_layers=1,
        num_heads=2,
        num_kv_heads=2,
        head_dim=16,
        intermediate_size=64,
    )
    settings = TrainSettings(steps=30, batch_size=4, seq_len=32, warmup_steps=3)
    model, info = train_model(cfg, c, settings, seed=0, log=lambda _: None)
    assert info["loss_curve_every_20"][0] > info["final_train_loss"]
    path = tmp_path / "m.safetensors"
    save_model(model, path, "m")
    loaded = load_model("m", tmp_path)
    assert loaded.cfg == cfg
    x = torch.randint(0, 256, (1, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        # Stored in bfloat16: equal to the model's weights rounded the same way.
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).float())
        assert torch.allclose(loaded(x), model(x), atol=1e-5)


def test_catalog_rows_match_the_trained_architectures():
    catalog = load_models()
    for model_id, cfg in CONFIGS.items():
        spec = catalog[model_id]
        assert ArchConfig.from_spec(spec) == cfg
        assert spec.total_params == spec.active_params == num_params(cfg)
        assert spec.tokenizer == "byte"


def test_committed_pair_loads_and_predicts_text():
    card = json.loads((MODELS_DIR / "card.json").read_text("utf-8"))
    target, draft = load_pair()
    assert target.cfg == CONFIGS[TARGET_ID] and draft.cfg == CONFIGS[DRAFT_ID]
    for model_id in (TARGET_ID, DRAFT_ID):
        size = (MODELS_DIR / f"{model_id}.safetensors").stat().st_size
        assert size < 5_000_000
        assert card["models"][model_id]["file_bytes"] == size
        assert card["models"][model_id]["steps"] > 0
    text = SAMPLE_PY.encode()
    ids = torch.tensor([list(text)], dtype=torch.long)
    with torch.no_grad():
        loss_t = float(lm_loss(target, ids))
        loss_d = float(lm_loss(draft, ids))
    # Uniform guessing costs ln 256 = 5.55 nats per byte; both models learned Python,
    # and the four-layer target better than the one-layer draft.
    assert loss_t < loss_d < math.log(256) - 2.0


def test_quick_validation_end_to_end(tmp_path):
    settings = ValidationSettings.quick()
    summary = validate(settings, tmp_path, log=lambda _: None)
    df = pd.read_csv(tmp_path / "cpu_validation.csv")
    n_points = (
        len(settings.temperatures) * 2 * len(settings.batches) * len(settings.ks)
    )  # modes x workloads x batches x K
    assert len(df) == summary["points"] == n_points
    assert summary["greedy_identical_to_target"]
    assert df["predicted_speedup"].gt(0).all() and df["measured_speedup"].gt(0).all()
    # tau is 1 + the sum of the per-position rates, which never increase with position.
    pos = df[[f"p{i}" for i in range(1, 4)]].to_numpy()
    tau = 1 + np.nansum(pos, axis=1)
    assert np.allclose(tau, df["tau_measured"])
    assert np.all(np.nan_to_num(np.diff(pos, axis=1), nan=-1) <= 1e-12)
    acc = pd.read_csv(tmp_path / "cpu_acceptance.csv")
    assert len(acc) == sum(df["k"])
    tau_table = tau_vs_iid(df)
    assert set(tau_table["k"]) == set(settings.ks)
    assert (tmp_path / "cpu_profile.json").is_file()
    assert not (tmp_path / ".cpu_new").exists()  # the staged files all moved into place


def test_committed_validation_is_what_the_simulator_predicts_from_the_committed_profile(
    tmp_path,
):
    from profiler.groundtruth.validate import VALIDATION_DIR, predict

    points = pd.read_csv(VALIDATION_DIR / "cpu_validation.csv")
    profile = VALIDATION_DIR / "cpu_profile.json"
    again = predict(points, profile, ValidationSettings())
    np.testing.assert_allclose(again["predicted_speedup"], points["predicted_speedup"], rtol=1e-4)
    assert (again["latency_source"].str.endswith("draft:in-loop")).all()
    np.testing.assert_allclose(
        again["predicted_speedup_isolated_draft"],
        points["predicted_speedup_isolated_draft"],
        rtol=1e-4,
    )
    # Without the in-loop table the validation refuses, rather than predicting otherwise.
    doc = json.loads(profile.read_text())
    del doc["draft_in_loop"]
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="profiler run --draft"):
        predict(points, bare, ValidationSettings())
