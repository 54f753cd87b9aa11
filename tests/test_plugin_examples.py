"""docs/plugins.md: the example package for every kind is built from the page, installed
and run as documented; every public type's constructor on the page is the real one."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys

import pytest

from conftest import ROOT, coral_env, run_coral
from coral_core import types
from coral_core.scoring import program_tests
from coral_core.run import rundir
from coral_core.scoring import scorer as scoring
from coral_core.run import store

DOCS = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
PUBLIC = (types.Prompt, types.Message, types.Task, types.Success, types.TrainingExample,
          types.GenerationRequest, types.SamplingParams, types.Generation, types.Candidate,
          types.Evaluation, program_tests.ExecutionSpec, program_tests.Case,
          program_tests.Step, program_tests.Expect, scoring.ScoredCandidate, rundir.RunInfo,
          store.GenerationRecord, store.ScoreRecord, store.TaskRecord, store.TrialRecord)


def constructor(cls: type) -> str:
    """'Name(field, field=default, ...)' as docs/plugins.md writes it."""
    parts = []
    for field in dataclasses.fields(cls):
        if field.default is not dataclasses.MISSING:
            default = field.default
            text = (f"{type(default).__name__}()" if dataclasses.is_dataclass(default)
                    else repr(default))
            parts.append(f"{field.name}={text}")
        elif field.default_factory is not dataclasses.MISSING:
            parts.append(f"{field.name}={field.default_factory()!r}")
        else:
            parts.append(field.name)
    return f"{cls.__name__}({', '.join(parts)})"


@pytest.mark.parametrize("cls", PUBLIC, ids=lambda c: c.__name__)
def test_every_public_type_is_documented_with_its_constructor_and_fields(cls):
    assert constructor(cls) in DOCS, f"docs/plugins.md lacks '{constructor(cls)}'"
    text = DOCS.split("## The types a plugin meets", 1)[1].split("\n## ", 1)[0]
    for field in dataclasses.fields(cls):
        assert f"`{field.name}`" in text or field.name in constructor(cls), field.name


def test_the_page_says_what_happens_when_a_plugin_raises():
    section = DOCS.split("## What a plugin may raise, and what happens", 1)[1]
    for words in ("skipped", "UserError", "details[\"error\"]", "--fail-fast", "hook_errors"):
        assert words in section.split("\n## ", 1)[0], words


def _files(package: str) -> dict[str, str]:
    pattern = re.compile(r"File `([^`]+)`:\s*\n\s*```[a-z]*\n(.*?)```\n", re.S)
    return {path: body for path, body in pattern.findall(DOCS) if path.startswith(package)}


@pytest.fixture(scope="module")
def toy(tmp_path_factory, data_dir):
    root = tmp_path_factory.mktemp("toy")
    files = _files("coral-toy/")
    assert set(files) == {"coral-toy/pyproject.toml", "coral-toy/coral_toy.py"}
    for relative, body in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(body)
    site = root / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(site), str(root / "coral-toy")],
        capture_output=True, text=True)
    assert install.returncode == 0, install.stderr
    log = root / "events.jsonl"
    env = coral_env(data_dir, PYTHONPATH=str(site), CORAL_TOY_LOG=str(log))
    return {"root": root, "env": env, "log": log}


def test_toy_data_set_is_listed_as_needing_no_files_and_shows_its_problems(toy):
    listed = json.loads(run_coral("datasets", "list", "--json", env=toy["env"]).stdout)
    row = next(d for d in listed if d["name"] == "toy")
    assert row["needs_data"] is False and row["plugin"] == "toy"
    table = run_coral("datasets", "list", env=toy["env"])
    assert "(needs no files)" in table.stdout
    shown = json.loads(run_coral("datasets", "show", "toy", "--json", env=toy["env"]).stdout)
    assert [(p["problem"], p["split"], p["tests"], p["seen_in_training"]) for p in shown] == [
        ("identity", "train", 2, True), ("double", "test", 3, False),
        ("negate", "test", 2, False)]


def test_reference_model_solves_every_toy_task(toy):
    result = run_coral("run", "--plugin", "toy", "--model", "reference", "--out",
                       str(toy["root"] / "reference"), "--json", env=toy["env"])
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["fixed"] == 3 and summary["pass_at_k"]["1"] == 1.0


def test_toy_preset_runs_model_strategy_and_lifecycle_hooks(toy):
    toy["log"].unlink(missing_ok=True)
    result = run_coral("run", "--plugin", "toy", "--out", str(toy["root"] / "preset"),
                       "--json", env=toy["env"])
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert [t["overrides"] for t in summary["trials"]] == [
        {"model.temperature": 0.2}, {"model.temperature": 0.8}]
    assert {p["problem"]: p["c"] for p in summary["problems"]} == {
        "identity": 2, "double": 0, "negate": 0}
    events = [json.loads(line) for line in toy["log"].read_text().splitlines()]
    assert events[0] == {"event": "started", "run_dir": str(toy["root"] / "preset"),
                         "resumed": False}
    assert sum(e["event"] == "evaluation" for e in events) == 12  # 2 trials x 3 x 2
    assert events[-1] == {"event": "finished", "fixed": 1, "best": 0}


def test_toy_model_option_is_typed_from_its_signature(toy):
    result = run_coral("run", "--plugin", "toy", "--problems", "identity", "--model-arg",
                       "suffix= + 0", "--dry-run", env=toy["env"])
    assert result.returncode == 0, result.stderr
    assert 'suffix = " + 0"' in result.stdout
    wrong = run_coral("run", "--plugin", "toy", "--model-arg", "sufix=1", "--dry-run",
                      env=toy["env"])
    assert wrong.returncode == 2
    assert "model 'echo-arg' has no option 'sufix' (did you mean 'suffix'?)" in wrong.stderr


def test_baseline_says_which_data_sets_it_supports(toy, tmp_path):
    from plugin_kit import kitchen_sink_distribution

    site = kitchen_sink_distribution(tmp_path / "site")
    env = coral_env(None, PYTHONPATH=str(site), CORAL_PLUGINS="kitchen")
    result = run_coral("run", "--plugin", "arith", "--model", "baseline", "--out",
                       str(tmp_path / "run"), env=env)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "baseline: repairs programs of data sets with training " \
        "examples (quixbugs), writes tests for testgen and infills FIM tasks; it has nothing " \
        "for 'arith': try --model reference" in lines[0]
