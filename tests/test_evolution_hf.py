"""The evolution search on a tiny local Llama: LoRA and DoRA adapters trained once per
heavy-gene set (population 4, 2 generations, CPU), a cache hit on the next run, and a
target module the model does not have refused before anything is trained."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import coral_env, ended_owner_tag, run_coral, skip_without

pytest.importorskip("optuna")
skip_without("torch", "peft")

from tiny_model import shared_tiny_model  # noqa: E402

TOML = """[dataset]
problems = ["sieve", "wrap"]
[model]
stop = ["\\n```"]
[run]
samples = 1
[search]
strategy = "evolution"
[search.options]
population = 4
generations = 2
[search.options.genes]
max_new_tokens = [8]
kind = ["lora", "dora"]
rank = [4, 8]
alpha = [8]
dropout = [0.0]
target_modules = [%s]
[search.options.training]
steps = 1
batch_size = 2
"""
MODULES = '["q_proj", "v_proj"]'


@pytest.fixture(scope="module")
def tiny(tiny_models) -> Path:
    return shared_tiny_model(tiny_models)


@pytest.fixture(scope="module")
def env(data_dir, tmp_path_factory):
    return coral_env(data_dir, CORAL_CACHE_DIR=str(tmp_path_factory.mktemp("cache")))


def _run(tmp_path: Path, env, tiny: Path, name: str, modules: str = MODULES):
    config = tmp_path / f"{name}.toml"
    config.write_text(TOML % modules)
    out = tmp_path / name
    return run_coral("run", "--plugin", "evolution", "--model", f"hf:{tiny}", "--config",
                     str(config), "--out", str(out), "--json", env=env), out


def test_lora_and_dora_adapters_are_trained_once_per_heavy_gene_set(tmp_path, env, tiny):
    cache = Path(env["CORAL_CACHE_DIR"]) / "adapters"
    killed = cache / f".staging-{ended_owner_tag()}-abc"  # what a killed training leaves
    killed.mkdir(parents=True)
    (killed / "adapter_model.safetensors").write_bytes(b"half")
    result, out = _run(tmp_path, env, tiny, "first")
    assert result.returncode == 0, result.stderr
    assert not list(cache.glob(".staging-*"))  # the next training removed it, and its own
    summary = json.loads(result.stdout)
    search = summary["search"]
    genomes = search["genomes"]
    assert len(genomes) == 8
    heavy = {(g["genes"]["kind"], g["genes"]["rank"]) for g in genomes}
    adapters = search["adapters"]
    assert len(adapters) == len(heavy) == len({g["adapter"] for g in genomes})
    assert all(a["trained"] for a in adapters)
    assert {g["genes"]["kind"] for g in genomes} == {"lora", "dora"}
    for genome in genomes:  # the adapter a genome names is the one its heavy genes select
        config = json.loads((Path(genome["adapter"]) / "adapter_config.json").read_text())
        assert config["r"] == genome["genes"]["rank"]
        assert config["use_dora"] == (genome["genes"]["kind"] == "dora")
    for trial in summary["trials"]:
        assert Path(trial["overrides"]["model.adapter"]).is_dir()
    for member in search["pareto_front"]:
        assert member["adapter"] and member["adapter_key"]
    assert search["ledger"]["search"]["adapters"] == len(adapters)
    assert search["ledger"]["search"]["completion_tokens"] > 0
    assert (out / "pareto.png").is_file()

    again, _ = _run(tmp_path, env, tiny, "second")  # same seed, same cache: all hits
    assert again.returncode == 0, again.stderr
    second = json.loads(again.stdout)["search"]
    assert not any(a["trained"] for a in second["adapters"])
    assert [a["path"] for a in second["adapters"]] == [a["path"] for a in adapters]
    assert json.dumps(second["pareto_front"]) == json.dumps(search["pareto_front"])


def test_a_target_module_the_model_lacks_is_refused(tmp_path, env, tiny):
    result, out = _run(tmp_path, env, tiny, "bad", '["q_proj", "qkv_proj"]')
    assert result.returncode == 2
    assert "has no module 'qkv_proj'" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize("option, reason", [
    ("max_tokens = 1", "max_tokens reached after generation 1"),
    ("max_train_seconds = 0.000001", "max_train_seconds reached after generation 1"),
])
def test_a_budget_ends_the_search_at_a_generation_boundary(tmp_path, data_dir, tiny, option,
                                                           reason):
    """[search.options] max_tokens / max_train_seconds: the search stops cleanly after the
    generation that spent the budget (here the first), says why, and the run finishes."""
    env = coral_env(data_dir, CORAL_CACHE_DIR=str(tmp_path / "cache"))  # adapters trained here
    config = tmp_path / "budget.toml"
    config.write_text((TOML % MODULES).replace("generations = 2", "generations = 3").replace(
        "[search.options.genes]", f"{option}\n[search.options.genes]"))
    result = run_coral("run", "--plugin", "evolution", "--model", f"hf:{tiny}", "--config",
                       str(config), "--out", str(tmp_path / "run"), "--json", env=env)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    search = summary["search"]
    assert search["stopped"].startswith(reason), search["stopped"]
    assert {g["generation"] for g in search["genomes"]} == {0}
    assert summary["status"] == "finished" and summary["best"] is not None
