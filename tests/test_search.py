"""Searches that search: every trial runs with its own configuration, grid and random
strategies, trials and best in the summary, common random numbers across trials."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import coral_env, run_coral, store_sql
from plugin_kit import echo_model_distribution

WEIGHTS = {"bugfix": 0.30, "security": 0.25, "syntax": 0.20, "style": 0.15, "runtime": 0.10}


@pytest.fixture(scope="module")
def env(tmp_path_factory, data_dir):
    site = echo_model_distribution(tmp_path_factory.mktemp("site"))
    return coral_env(data_dir, PYTHONPATH=str(site), CORAL_PLUGINS="echo")


def _run(tmp_path: Path, env: dict[str, str], toml: str, *extra: str, name: str = "run"):
    config = tmp_path / f"{name}.toml"
    config.write_text(toml)
    out = tmp_path / name
    result = run_coral("run", "--plugin", "quixbugs", "--model", "echo", "--config",
                       str(config), "--out", str(out), "--json", *extra, env=env)
    return result, out


def _generations(run_dir: Path) -> list[tuple]:
    with sqlite3.connect(run_dir / "coral.sqlite") as db:
        return db.execute("SELECT trial, task_id, sample, params, text FROM generations "
                          "ORDER BY trial, task_id, sample").fetchall()


BASE = '[dataset]\nproblems = ["sieve", "wrap"]\n[run]\nsamples = 2\n'


def test_each_override_takes_effect(tmp_path, env):
    toml = BASE + """[search]
strategy = "grid"
[search.space]
"dataset.problems" = [["sieve"], ["wrap", "to_base"]]
"model.temperature" = [0.0, 1.5]
"evaluators.weights.bugfix" = [0.3, 0.0]
"""
    result, out = _run(tmp_path, env, toml)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    trials = summary["trials"]
    assert len(trials) == 8
    assert [t["overrides"]["model.temperature"] for t in trials] == [0.0, 0.0, 1.5, 1.5] * 2

    # dataset.problems: each trial scored exactly its own problems
    with sqlite3.connect(out / "coral.sqlite") as db:
        tasks = dict(db.execute("SELECT trial, group_concat(task_id) FROM "
                                "(SELECT * FROM tasks ORDER BY trial, task_id) GROUP BY trial"))
    assert [tasks[t] for t in range(8)] == ["sieve"] * 4 + ["to_base,wrap"] * 4

    # model.temperature: the samples of each trial were asked for at its own temperature
    for trial, _, _, params, _ in _generations(out):
        assert json.loads(params)["temperature"] == trials[trial]["overrides"]["model.temperature"]

    # evaluators.weights.bugfix: fitness follows that trial's weights, by hand
    for trial in trials:
        weights = {**WEIGHTS, "bugfix": trial["overrides"]["evaluators.weights.bugfix"]}
        expected = sum(weights[k] * v for k, v in trial["objectives"].items()) / sum(
            weights.values())
        assert trial["fitness"] == pytest.approx(expected, abs=2e-6)
    zero, full = trials[1], trials[0]
    measured = ("runtime",)  # timed, so it varies between scorer instances
    assert ({k: v for k, v in zero["objectives"].items() if k not in measured}
            == {k: v for k, v in full["objectives"].items() if k not in measured})
    if full["objectives"]["bugfix"] != 0:
        assert zero["fitness"] != full["fitness"]


def test_seeds_do_not_depend_on_the_trial(tmp_path, env):
    """Common random numbers: trials that differ only in scoring see the same samples."""
    toml = BASE + ('[search]\nstrategy = "grid"\n[search.space]\n'
                   '"evaluators.weights.style" = [0.0, 1.0]\n')
    result, out = _run(tmp_path, env, toml)
    assert result.returncode == 0, result.stderr
    rows = _generations(out)
    by_trial = {t: [(task, s, text) for tr, task, s, _, text in rows if tr == t] for t in (0, 1)}
    assert len(by_trial[0]) == 4 and by_trial[0] == by_trial[1]
    # ... and differ from sample to sample (the seed is per sample, not per run)
    assert len({text for _, _, text in by_trial[0]}) > 1


def test_best_and_rank_by(tmp_path, env):
    toml = BASE + """[search]
strategy = "grid"
rank_by = "style"
[search.space]
"model.max_new_tokens" = [64, 128]
"evaluators.use" = [["tests", "syntax"], ["tests", "style", "syntax"]]
[evaluators]
weights = {bugfix = 1.0}
"""
    result, _ = _run(tmp_path, env, toml)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    # only trials 1 and 3 produce "style"; the earlier of equal values wins
    assert "style" not in summary["trials"][0]["objectives"]
    assert summary["best"]["trial"] == 1
    assert summary["best"]["rank_by"] == "style"
    assert summary["objectives"] == summary["trials"][1]["objectives"]


def test_random_search_is_seeded(tmp_path, env):
    toml = BASE + """[search]
strategy = "random"
budget = 3
[search.space]
"model.temperature" = {low = 0.1, high = 1.0}
"model.top_k" = {choices = [0, 5, 50]}
"""
    first, _ = _run(tmp_path, env, toml, "--seed", "3", name="first")
    second, _ = _run(tmp_path, env, toml, "--seed", "3", name="second")
    other, _ = _run(tmp_path, env, toml, "--seed", "4", name="other")
    for result in (first, second, other):
        assert result.returncode == 0, result.stderr
    draws = [[t["overrides"] for t in json.loads(r.stdout)["trials"]]
             for r in (first, second, other)]
    assert len(draws[0]) == 3 and draws[0] == draws[1] and draws[0] != draws[2]
    for overrides in draws[0]:
        assert 0.1 <= overrides["model.temperature"] <= 1.0
        assert overrides["model.top_k"] in (0, 5, 50)


@pytest.mark.parametrize("space, fragment", [
    ('"model.temprature" = [0.1]', "model.temprature"),
    ('"run.samples" = [1, 2]', "run.samples"),
    ('"model.top_p" = [0.5, 2.0]', "model.top_p"),
    ('"model.spec" = ["baseline", "gpt9:x"]', "unknown model 'gpt9'"),
    ('"model.adapter" = ["/tmp/adapter"]', "cannot apply adapters"),
    ('"dataset.problems" = [["sieve"], ["gcd"]]', "contamination"),
    ('"evaluators.use" = [["style"]]', "evaluators.use"),
])
def test_a_space_that_cannot_run_is_refused_before_the_run(tmp_path, env, space, fragment):
    # the model in the file, not as --model: a flag would take model.spec out of the space
    toml = (BASE + '[model]\nspec = "echo"\n'
            + f'[search]\nstrategy = "grid"\n[search.space]\n{space}\n')
    config, out = tmp_path / "run.toml", tmp_path / "run"
    config.write_text(toml)
    result = run_coral("run", "--plugin", "quixbugs", "--config", str(config), "--out",
                       str(out), "--json", env=env)
    assert result.returncode == 2
    assert fragment in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_single_strategy_refuses_a_space(tmp_path, env):
    result, out = _run(tmp_path, env, BASE + '[search.space]\n"model.temperature" = [0.1]\n')
    assert result.returncode == 2 and "takes no space" in result.stderr
    assert not out.exists()


def test_report_prints_the_trial_table(tmp_path, env):
    toml = BASE + '[search]\nstrategy = "grid"\n[search.space]\n"model.temperature" = [0.2, 0.9]\n'
    result, out = _run(tmp_path, env, toml)
    assert result.returncode == 0, result.stderr
    report = run_coral("report", str(out), env={**env, "COLUMNS": "200"})
    assert report.returncode == 0, report.stderr
    assert "trials (best by fitness)" in report.stdout
    assert 'temperature=0.2' in report.stdout and 'temperature=0.9' in report.stdout
    assert "best trial" in report.stdout  # the paired comparison with the runner-up
    assert json.loads(result.stdout)["best"]["runner_up"] is not None


def _trial_rows(run_dir: Path) -> list[tuple]:
    with sqlite3.connect(run_dir / "coral.sqlite") as db:
        return db.execute("SELECT * FROM generations ORDER BY trial, task_id, sample").fetchall()


def _comparable(summary: dict) -> list[tuple]:
    deterministic = ("bugfix", "style", "security", "syntax")  # runtime is timed (issue 8)
    return [(t["trial"], t["overrides"], t["status"], t.get("pass_at_k"),
             {k: t["objectives"][k] for k in deterministic}) for t in summary["trials"]]


def test_kill_9_mid_grid_then_resume_equals_uninterrupted(tmp_path, env):
    toml = BASE.replace("samples = 2", "samples = 4") + """[model]
batch_size = 2
[model.options]
delay = 0.05
[search]
strategy = "grid"
rank_by = "bugfix"
[search.space]
"model.temperature" = [0.1, 0.5, 0.9]
"""
    whole, _ = _run(tmp_path, env, toml, name="whole")
    assert whole.returncode == 0, whole.stderr
    expected = json.loads(whole.stdout)

    config = tmp_path / "killed.toml"
    config.write_text(toml)
    out = tmp_path / "killed"
    process = subprocess.Popen(
        [str(Path(sys.executable).with_name("coral")), "run", "--plugin", "quixbugs",
         "--model", "echo", "--config", str(config), "--out", str(out)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while True:  # kill inside trial 1, after trial 0 finished
        try:
            done = store_sql(out / "coral.sqlite", "SELECT COUNT(*) FROM generations "
                             "WHERE trial = 1", read_only=True)[0][0]
        except sqlite3.Error:
            done = 0
        if done >= 2 or process.poll() is not None:
            break
        assert time.monotonic() < deadline
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    before = _trial_rows(out)
    assert {row[0] for row in before} == {0, 1} and len(before) < 24, "kill missed trial 1"

    resumed = run_coral("run", "--resume", str(out), "--json", env=env)
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert _comparable(summary) == _comparable(expected)
    assert summary["best"]["trial"] == expected["best"]["trial"]
    assert summary["best"]["overrides"] == expected["best"]["overrides"]
    after = _trial_rows(out)
    assert len(after) == 3 * 2 * 4 and set(before) <= set(after)  # nothing redone
    texts = {(r[0], r[1], r[2]): r[6] for r in _trial_rows(tmp_path / "whole")}
    assert {(r[0], r[1], r[2]): r[6] for r in after} == texts
