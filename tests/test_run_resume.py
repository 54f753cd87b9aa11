"""A real `coral run` killed with SIGKILL part-way, resumed, equals an uninterrupted run."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from conftest import coral_env, run_coral, store_sql
from plugin_kit import echo_model_distribution

DETERMINISTIC = ("bugfix", "style", "security", "syntax")  # runtime is measured, so it varies


def _rows(run_dir: Path, table: str) -> list[tuple]:
    return store_sql(run_dir / "coral.sqlite",
                     f"SELECT * FROM {table} ORDER BY task_id, sample", read_only=True)


def _count(run_dir: Path, table: str) -> int:
    """Read-only, while a run may be starting: a read-write connect made an empty store
    file in the new run's folder before the run made its own, which the run then refused
    as a store of someone's work (a CI rehearsal)."""
    try:
        return store_sql(run_dir / "coral.sqlite", f"SELECT COUNT(*) FROM {table}",
                         read_only=True)[0][0]
    except sqlite3.Error:
        return 0


def _setup(tmp_path: Path, data_dir: Path) -> tuple[dict[str, str], Path]:
    site = echo_model_distribution(tmp_path / "site")
    config = tmp_path / "experiment.toml"
    config.write_text('[model]\nbatch_size = 4\n[model.options]\ndelay = 0.06\n')
    return coral_env(data_dir, PYTHONPATH=str(site)), config


def _comparable(summary: dict) -> dict:
    return {
        "fixed": summary["fixed"],
        "pass_at_k": summary["pass_at_k"],
        "problems": [(p["problem"], p["n"], p["c"], p["pass_at_k"],
                      {k: p["objectives"][k] for k in DETERMINISTIC}) for p in summary["problems"]],
    }


def test_kill_9_then_resume_equals_uninterrupted_run(tmp_path, data_dir):
    env, config = _setup(tmp_path, data_dir)
    common = ["run", "--plugin", "quixbugs", "--model", "echo", "--config", str(config),
              "--samples", "6", "--seed", "7", "--json"]
    whole = run_coral(*common, "--out", str(tmp_path / "whole"), env=env)
    assert whole.returncode == 0, whole.stderr
    expected = json.loads(whole.stdout)

    killed_dir = tmp_path / "killed"
    process = subprocess.Popen(
        [str(Path(sys.executable).with_name("coral")), *common, "--out", str(killed_dir)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while _count(killed_dir, "evaluations") < 8 and process.poll() is None:
        assert time.monotonic() < deadline, "the run never got going"
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL
    before_generations = _rows(killed_dir, "generations")
    before_evaluations = _rows(killed_dir, "evaluations")
    assert 8 <= len(before_evaluations) < 48, "kill did not land part-way"
    assert not (killed_dir / "summary.json").exists(), "a killed run must not look finished"

    report = run_coral("report", str(killed_dir), "--json", env=env)
    assert report.returncode == 0, report.stderr
    partial = json.loads(report.stdout)
    assert partial["status"] == "stopped" and partial["process_alive"] is False
    assert all(p["n"] > 0 for p in partial["problems"])  # unscored ones are pending, not 0%
    assert len(partial["problems"]) + len(partial["pending_problems"]) == 8

    resumed = run_coral("run", "--resume", str(killed_dir), "--json", env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert _comparable(json.loads(resumed.stdout)) == _comparable(expected)

    after_generations = _rows(killed_dir, "generations")
    after_evaluations = _rows(killed_dir, "evaluations")
    assert len(after_generations) == len(after_evaluations) == 8 * 6
    # nothing finished before the kill was redone: those rows are byte-for-byte the same
    assert set(before_generations) <= set(after_generations)
    assert set(before_evaluations) <= set(after_evaluations)
    # and the generated texts equal the uninterrupted run's, sample by sample
    whole_texts = {(r[1], r[2]): r[5] for r in _rows(tmp_path / "whole", "generations")}
    assert {(r[1], r[2]): r[5] for r in after_generations} == whole_texts

    again = run_coral("run", "--resume", str(killed_dir), env=env)
    assert again.returncode == 2 and "finished run" in again.stderr


def test_sigterm_stops_like_ctrl_c_and_the_report_ranks_nothing_unrun(tmp_path, data_dir):
    env, config = _setup(tmp_path, data_dir)
    grid = tmp_path / "grid.toml"
    grid.write_text(config.read_text() + '[search]\nstrategy = "grid"\n'
                    '[search.space]\n"model.temperature" = [0.2, 0.4, 0.6]\n')
    run_dir = tmp_path / "run"
    process = subprocess.Popen(
        [str(Path(sys.executable).with_name("coral")), "run", "--plugin", "quixbugs",
         "--model", "echo", "--config", str(grid), "--samples", "3", "--out", str(run_dir)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while _count(run_dir, "evaluations") < 4 and process.poll() is None:
        assert time.monotonic() < deadline, "the run never got going"
        time.sleep(0.02)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == ("coral: interrupted; resume with: "
                                               f"coral run --resume {run_dir}")
    report = json.loads(run_coral("report", str(run_dir), "--json", env=env).stdout)
    assert report["status"] == "interrupted" and report["partial"] is True
    assert report["best"] is None  # no trial finished: none is crowned
    assert all("fitness" not in t for t in report["trials"] if t["status"] != "finished"
               and t["trial"] > 0)
    table = run_coral("report", str(run_dir), env=dict(env, COLUMNS="200"))
    assert table.returncode == 0 and "no trial has finished" in table.stdout
    assert "0/0" not in table.stdout
    # samples were scored: what is shown is said to be so far, never "nothing scored"
    assert "no trial has finished yet, so no problem table is shown" in table.stdout
    assert "no problem has a scored sample yet" not in table.stdout
    if "fitness" in report["trials"][0]:
        shown = f"({report['trials'][0]['fitness']:.3f})"
        assert shown in table.stdout and "its figures so far" in table.stdout
