"""What `coral run` and `coral report` print when not on a terminal, and the run directory."""

from __future__ import annotations

import json
import sqlite3
import tomllib

from conftest import coral_env, run_coral
from plugin_kit import echo_model_distribution


def test_plain_progress_table_run_directory_and_report(tmp_path, data_dir):
    env = coral_env(data_dir, PYTHONPATH=str(echo_model_distribution(tmp_path / "site")),
                    COLUMNS="200")
    run_dir = tmp_path / "run"
    result = run_coral("run", "--plugin", "quixbugs", "--model", "echo", "--samples", "3",
                       "--seed", "5", "--out", str(run_dir), env=env)
    assert result.returncode == 0, result.stderr
    assert "generate: 24/24" in result.stderr and "evaluate: 24/24" in result.stderr
    assert "kheapsort" in result.stdout and "overall:" in result.stdout
    assert "\x1b[" not in result.stdout + result.stderr, "no terminal codes in a pipe"

    config = tomllib.loads((run_dir / "config.toml").read_text())
    assert config["model"]["spec"] == "echo" and config["run"]["seed"] == 5
    assert config["run"]["samples"] == 3 and config["dataset"]["split"] == "test"
    summary = json.loads((run_dir / "summary.json").read_text())
    with sqlite3.connect(run_dir / "coral.sqlite") as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("SELECT COUNT(*) FROM generations").fetchone()[0] == 24
        assert db.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0] == 24

    report = run_coral("report", str(run_dir), "--json", env=env)
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout) == {**summary, "status": "finished"}
    table = run_coral("report", str(run_dir), env=env)
    assert "overall:" in table.stdout and "not finished" not in table.stdout


def test_json_mode_prints_only_the_document(tmp_path, data_dir):
    env = coral_env(data_dir, PYTHONPATH=str(echo_model_distribution(tmp_path / "site")))
    result = run_coral("run", "--plugin", "quixbugs", "--model", "echo", "--samples", "2",
                       "--out", str(tmp_path / "run"), "--json", env=env)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)  # the whole of stdout is one JSON document
    assert summary["samples"] == 2 and len(summary["problems"]) == 8
    assert set(summary["pass_at_k"]) == {"1", "2"} and "fixed" in summary
    assert all({"problem", "n", "c", "pass_at_k", "objectives"} <= set(p)
               for p in summary["problems"])
    assert "generate:" not in result.stderr


def test_an_empty_out_is_the_default_run_directory(tmp_path, data_dir):
    """A red-team pass: `--out ''` made the current folder the run directory (typer read
    it as the path '.'); "" means runs/DATASET-MODEL-TIMESTAMP, as in a config file."""
    result = run_coral("run", "--plugin", "quixbugs", "--model", "reference", "--split",
                       "train", "--problems", "gcd", "--samples", "1", "--out", "",
                       env=coral_env(data_dir), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "config.toml").exists()
    made = list((tmp_path / "runs").iterdir())
    assert len(made) == 1 and made[0].name.startswith("quixbugs-reference-")
    assert (made[0] / "summary.json").is_file()
