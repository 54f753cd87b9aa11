"""The plugin system, exercised through real distributions found by their entry points."""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys

import pytest

from conftest import ROOT, coral_env, run_coral
from coral_core import hookspecs
from plugin_kit import echo_model_distribution, kitchen_sink_distribution, make_distribution

HOOKS = [name for name, _ in inspect.getmembers(hookspecs, inspect.isfunction)
         if name.startswith("coral_")]
DOCS = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")


# -------------------------------------------------------------- documentation and coverage

@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_is_documented_with_its_exact_signature(hook):
    signature = f"{hook}{inspect.signature(getattr(hookspecs, hook))}"
    assert f"### {signature}" in DOCS, f"docs/plugins.md lacks a '### {signature}' section"


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_has_a_test_of_its_own(hook):
    assert f"test_hook_{hook}" in globals(), f"tests/test_plugins.py has no test_hook_{hook}"


def _documented_files() -> dict[str, str]:
    """`File \\`path\\`:` followed by a fenced block, in docs/plugins.md."""
    pattern = re.compile(r"File `([^`]+)`:\s*\n\s*```[a-z]*\n(.*?)```", re.S)
    return {path: body for path, body in pattern.findall(DOCS)}


def test_documented_example_package_installs_and_its_objective_reaches_a_run(tmp_path, data_dir):
    files = _documented_files()
    assert {"coral-brevity/pyproject.toml", "coral-brevity/coral_brevity.py"} <= set(files)
    for relative, body in files.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(body)
    site = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(site), str(tmp_path / "coral-brevity")],
        capture_output=True, text=True)
    assert install.returncode == 0, install.stderr
    assert list(site.glob("coral_brevity-1.0.0.dist-info/entry_points.txt"))
    echo_model_distribution(site)
    env = coral_env(data_dir, PYTHONPATH=str(site))

    listed = run_coral("plugins", "list", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    brevity = next(p for p in json.loads(listed.stdout) if p["name"] == "brevity")
    assert brevity["source"] == "coral-brevity 1.0.0"
    assert brevity["evaluators"] == ["brevity"] and brevity["objectives"] == ["brevity"]

    config = tmp_path / "brevity.toml"
    config.write_text(
        '[evaluators]\nuse = ["tests", "style", "brevity"]\ngate = ""\n'
        '[evaluators.weights]\nbugfix = 0.5\nbrevity = 0.5\n'
        '[evaluators.options.brevity]\nslack = 1.0\n')
    result = run_coral("run", "--plugin", "quixbugs", "--model", "echo", "--config", str(config),
                       "--samples", "2", "--out", str(tmp_path / "run"), "--json", env=env)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert set(summary["objectives"]) == {"bugfix", "style", "brevity"}
    assert all("brevity" in p["objectives"] for p in summary["problems"])
    assert 0 < summary["objectives"]["brevity"] <= 1


# -------------------------------------------------------------- one run through every hook

@pytest.fixture(scope="module")
def kitchen_run(tmp_path_factory, data_dir):
    root = tmp_path_factory.mktemp("kitchen")
    site = kitchen_sink_distribution(root / "site")
    events = root / "events.jsonl"
    env = coral_env(data_dir, PYTHONPATH=str(site), KITCHEN_EVENTS=str(events))
    result = run_coral("run", "--plugin", "arith", "--out", str(root / "run"), "--json", env=env)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    return {"summary": json.loads(result.stdout), "events": lines, "env": env, "root": root}


def test_hook_coral_register_datasets(kitchen_run):
    summary = kitchen_run["summary"]
    assert summary["dataset"] == "arith"
    assert [p["problem"] for p in summary["problems"]] == ["double", "square"]
    listed = json.loads(run_coral("datasets", "list", "--json", env=kitchen_run["env"]).stdout)
    assert {"name": "arith", "plugin": "kitchen"}.items() <= next(
        d for d in listed if d["name"] == "arith").items()


def test_hook_coral_register_models(kitchen_run):
    summary = kitchen_run["summary"]
    assert summary["model"] == "doubler"
    by_problem = {p["problem"]: p for p in summary["problems"]}
    assert by_problem["double"]["c"] == 2 and by_problem["square"]["c"] == 0
    assert summary["fixed"] == 1


def test_hook_coral_register_evaluators(kitchen_run):
    summary = kitchen_run["summary"]
    assert set(summary["objectives"]) == {"bugfix", "shortness"}
    assert summary["objectives"]["shortness"] == pytest.approx(0.5)


def test_hook_coral_register_search_strategies(kitchen_run):
    tells = [e for e in kitchen_run["events"] if e["event"] == "tell"]
    assert len(tells) == 1 and tells[0]["count"] == 2
    trials = {e["trial"] for e in kitchen_run["events"] if e["event"] == "record"}
    assert trials == {0, 1}


def test_hook_coral_register_experiments(kitchen_run):
    summary = kitchen_run["summary"]
    assert summary["samples"] == 2 and summary["split"] == "all"
    config = (kitchen_run["root"] / "run" / "config.toml").read_text()
    assert 'strategy = "two-temperatures"' in config


def test_hook_coral_run_started(kitchen_run):
    started = [e for e in kitchen_run["events"] if e["event"] == "started"]
    assert started == [{"event": "started", "run_dir": str(kitchen_run["root"] / "run"),
                        "resumed": False, "split": "all"}]
    assert kitchen_run["events"][0]["event"] == "started"


def test_hook_coral_record_written(kitchen_run):
    records = [e for e in kitchen_run["events"] if e["event"] == "record"]
    # 2 trials x 2 problems x 2 samples, one generation and one evaluation record each
    assert len(records) == 16
    assert sorted({(r["kind"], r["trial"]) for r in records}) == [
        ("evaluation", 0), ("evaluation", 1), ("generation", 0), ("generation", 1)]


def test_hook_coral_run_finished(kitchen_run):
    assert kitchen_run["events"][-1] == {"event": "finished", "fixed": 1,
                                         "objectives": ["bugfix", "shortness"]}


# -------------------------------------------------------------- discovery and blocking

def test_third_party_plugin_is_listed_with_its_distribution(kitchen_run):
    listed = json.loads(run_coral("plugins", "list", "--json", env=kitchen_run["env"]).stdout)
    kitchen = next(p for p in listed if p["name"] == "kitchen")
    assert kitchen["source"] == "coral-kitchen-sink 2.3.4"
    assert kitchen["models"] == ["doubler"] and kitchen["objectives"] == ["shortness"]
    assert len(kitchen["hooks"]) == len(HOOKS)
    builtin = {p["name"] for p in listed if p["source"] == "builtin"}
    assert {"quixbugs", "baseline", "hf", "openai", "tests", "style", "security", "syntax",
            "runtime", "single"} <= builtin


def test_disabled_plugins_are_not_loaded(kitchen_run, data_dir):
    env = {**kitchen_run["env"], "CORAL_DISABLE_PLUGINS": "style, kitchen"}
    names = {p["name"] for p in json.loads(run_coral("plugins", "list", "--json", env=env).stdout)}
    assert "style" not in names and "kitchen" not in names and "security" in names
    result = run_coral("run", "--plugin", "quixbugs", "--out", str(kitchen_run["root"] / "x"),
                       env=env)
    assert result.returncode == 2 and "unknown evaluator 'style'" in result.stderr


def test_two_plugins_registering_one_name_is_an_error(tmp_path, data_dir):
    site = make_distribution(tmp_path / "site", "coral-impostor", {"coral_impostor": '''
        from coral_core.hookspecs import hookimpl

        @hookimpl
        def coral_register_evaluators(register):
            register("tests", object)
    '''}, {"impostor": "coral_impostor"})
    result = run_coral("plugins", "list", env=coral_env(data_dir, PYTHONPATH=str(site)))
    assert result.returncode == 2
    assert "evaluators name 'tests' is registered by both" in result.stderr
    assert "'impostor'" in result.stderr and "CORAL_DISABLE_PLUGINS" in result.stderr


def test_plugin_that_fails_to_import_is_named(tmp_path, data_dir):
    site = make_distribution(tmp_path / "site", "coral-broken", {"coral_broken": "import nope\n"},
                             {"broken": "coral_broken"})
    result = run_coral("plugins", "list", env=coral_env(data_dir, PYTHONPATH=str(site)))
    assert result.returncode == 2 and "plugin 'broken' failed to load" in result.stderr
