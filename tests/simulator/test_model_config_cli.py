"""A model from its config.json on the command line (`--model-config` on predict, sweep,
serve, search and `profiler import`), and Hugging Face ids as scenario targets."""

import json
from pathlib import Path

import pandas as pd
import pytest

from simulator.cli.main import main
from simulator.inputs import catalog
from simulator.inputs.hf_config import bundled_config_path
from simulator.model.predict import predict

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "model-configs"


@pytest.fixture(autouse=True)
def _own_catalog(monkeypatch):
    """Each test's --model-config stays in that test: the variable and the caches reset."""
    monkeypatch.delenv(catalog.MODEL_CONFIGS_ENV, raising=False)
    yield
    monkeypatch.delenv(catalog.MODEL_CONFIGS_ENV, raising=False)
    catalog.configured_models.cache_clear()
    catalog.default_models.cache_clear()


def _renamed(tmp_path: Path, hf_id: str, name: str) -> Path:
    """A bundled config saved as another model's folder (the shape of a fine-tune)."""
    data = json.loads(bundled_config_path(hf_id).read_text())
    data["_name_or_path"] = f"someteam/{name}"
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(data))
    return folder


def _predict_cli(tmp_path, rows: list[dict], *flags: str) -> pd.DataFrame:
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    pd.DataFrame(rows).to_csv(src, index=False)
    assert main(["predict", "--in", str(src), "--out", str(out), *flags]) == 0
    return pd.read_csv(out)


def test_predict_prices_an_moe_model_from_its_config_on_the_engines_kernels(tmp_path):
    folder = _renamed(tmp_path, "Qwen/Qwen3-30B-A3B", "Qwen3-30B-A3B-Ours")
    row = {"target": "qwen3-30b-a3b-ours", "gpu": "h200", "num_gpus": 1, "batch_size": 8}
    out = _predict_cli(tmp_path, [row], "--model-config", str(folder))
    assert out["status"].iloc[0] == "ok"
    assert out["latency_source"].iloc[0].startswith("kernels:")
    # The same network as the catalog's Qwen3-30B-A3B: the same step.
    same = predict(pd.DataFrame([{**row, "target": "qwen3-30b-a3b"}]))
    assert out["target_step_ms"].iloc[0] == pytest.approx(same["target_step_ms"].iloc[0], rel=1e-9)


def test_an_unknown_target_names_the_flag_that_would_add_it(tmp_path, capsys):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    pd.DataFrame([{"target": "not-a-model", "gpu": "h200"}]).to_csv(src, index=False)
    assert main(["predict", "--in", str(src), "--out", str(out)]) == 2
    assert "field 'target'" in capsys.readouterr().err
    assert not out.exists()


def test_a_bad_config_is_refused_naming_its_file_and_field(tmp_path, capsys):
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "config.json").write_text(
        json.dumps({"architectures": ["LlamaForCausalLM"], "hidden_size": "wide"})
    )
    src = tmp_path / "in.csv"
    pd.DataFrame([{"target": "broken", "gpu": "h200"}]).to_csv(src, index=False)
    code = main(
        [
            "predict",
            "--in",
            str(src),
            "--out",
            str(tmp_path / "o.csv"),
            "--model-config",
            str(folder),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "config.json" in err and "field '" in err


def test_two_configs_of_one_id_are_refused(tmp_path, capsys):
    a = _renamed(tmp_path, "Qwen/Qwen3-8B", "Twin")
    b = tmp_path / "other"
    b.mkdir()
    (b / "config.json").write_text((a / "config.json").read_text())
    src = tmp_path / "in.csv"
    pd.DataFrame([{"target": "twin", "gpu": "h200"}]).to_csv(src, index=False)
    argv = ["predict", "--in", str(src), "--out", str(tmp_path / "o.csv")]
    assert main([*argv, "--model-config", str(a), "--model-config", str(b)]) == 2
    assert "field '--model-config'" in capsys.readouterr().err


def test_a_target_may_be_a_hugging_face_id_or_a_snapshot_path():
    rows = pd.DataFrame(
        [
            {"target": "deepseek-ai/DeepSeek-R1", "gpu": "h200", "num_gpus": 8},
            {"target": "openai/gpt-oss-120b", "gpu": "h200"},
            {"target": "/data/hub/models--Qwen--Qwen3-30B-A3B/snapshots/abc", "gpu": "h200"},
        ]
    )
    out = predict(rows)
    assert out["target"].tolist() == ["deepseek-r1", "gpt-oss-120b", "qwen3-30b-a3b"]
    assert out["latency_source"].astype(str).str.startswith("kernels:").all()


def test_sweep_and_serve_take_the_flag(tmp_path):
    folder = _renamed(tmp_path, "Qwen/Qwen3-8B", "Qwen3-8B-Ours")
    flag = ["--model-config", str(folder)]
    out = tmp_path / "sweep.csv"
    argv = ["sweep", "--target", "qwen3-8b-ours", "--method", "eagle3", "--gpu", "h200"]
    argv += ["--batch", "1,8", "--k", "1-3"]
    assert main([*argv, "--out", str(out), *flag]) == 0
    assert pd.read_csv(out)["latency_source"].str.startswith("kernels:").all()
    scenarios, served = tmp_path / "one.csv", tmp_path / "serve.csv"
    one = {
        "target": "qwen3-8b-ours",
        "gpu": "h200",
        "method": "eagle3",
        "k": 2,
        "acceptance_rate": 0.7,
    }
    pd.DataFrame([one]).to_csv(scenarios, index=False)
    argv = ["serve", "--in", str(scenarios), "--rate", "1", "--requests", "30"]
    assert main([*argv, "--out", str(served), *flag]) == 0
    assert len(pd.read_csv(served)) >= 1


def test_profiler_import_resolves_a_recorded_hugging_face_id():
    from profiler.imports.build import resolve_model
    from simulator.inputs.catalog import default_models

    models = default_models()
    assert resolve_model([], "moonshotai/Kimi-K2.5", models).id == "kimi-k2.5"
    with pytest.raises(Exception, match="--model-config"):
        resolve_model([], "someone/NotAModel-7B", models)


def test_the_example_configs_price_or_refuse_as_their_readme_says(tmp_path, capsys):
    """examples/model-configs: the dense, MoE, MLA and linear-attention files price on
    kernels; the hybrid-Mamba one is refused naming `architectures`."""
    priced = {
        "Llama-3.1-8B": ("llama-3.1-8b", "h100-sxm", 1),
        "Qwen3-30B-A3B": ("qwen3-30b-a3b", "h200", 1),
        "DeepSeek-V3": ("deepseek-v3", "h200", 8),
        "Qwen3.5-35B-A3B": ("qwen3.5-35b-a3b", "h200", 1),
    }
    rows = [{"target": t, "gpu": g, "num_gpus": n, "batch_size": 8} for t, g, n in priced.values()]
    flags = [f for folder in priced for f in ("--model-config", str(EXAMPLES / folder))]
    out = _predict_cli(tmp_path, rows, *flags)
    assert (out["status"] == "ok").all()
    assert out["latency_source"].str.startswith("kernels:").all()
    src = tmp_path / "mamba.csv"
    pd.DataFrame([{"target": "nemotron-h-56b-base-8k", "gpu": "h200"}]).to_csv(src, index=False)
    folder = EXAMPLES / "Nemotron-H-56B-Base-8K"
    argv = ["predict", "--in", str(src), "--out", str(tmp_path / "m.csv")]
    assert main([*argv, "--model-config", str(folder)]) == 2
    assert "field 'architectures'" in capsys.readouterr().err


def test_models_lists_the_catalog_and_a_brought_config(tmp_path, capsys):
    folder = _renamed(tmp_path, "Qwen/Qwen3-30B-A3B", "team-moe-30b")
    out = tmp_path / "models.csv"
    assert main(["models", "--model-config", str(folder), "--out", str(out)]) == 0
    table = pd.read_csv(out).set_index("id")
    assert table.loc["team-moe-30b", "family"] == "moe"
    assert table.loc["team-moe-30b", "priced_by"] == "engine model"
    assert table.loc["deepseek-r1", "family"] == "mla"
    assert table.loc["llama-3.1-8b", "priced_by"] == "dense tables"
    assert 29 < table.loc["team-moe-30b", "total_params_b"] < 32
    assert main(["models", "--family", "dense"]) == 0
    listed = capsys.readouterr().out
    assert "llama-3.1-8b" in listed and "deepseek-r1" not in listed


def test_models_names_a_missing_catalog(capsys):
    assert main(["models", "--models", "/nonexistent/models.csv"]) == 2
    assert "--models" in capsys.readouterr().err
