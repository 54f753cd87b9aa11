"""`coral run` against a real OpenAI-compatible server (`transformers serve`, tiny model)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from conftest import coral_env, run_coral
from fault_proxy import FaultProxy

KEY = "sk-coral-run-canary-7d1e0b9c44"


def _experiment(tmp_path: Path, **options: float) -> Path:
    path = tmp_path / "served.toml"
    lines = ["[model]", "max_new_tokens = 24", "temperature = 0.7", "[model.options]",
             'mode = "completions"'] + [f"{k} = {v}" for k, v in options.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def _stored(run_dir: Path) -> tuple[list[tuple], int]:
    with sqlite3.connect(run_dir / "coral.sqlite") as db:
        generations = db.execute("SELECT task_id, sample, text, params FROM generations").fetchall()
        evaluations = db.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0]
    return generations, evaluations


def _leaks(run_dir: Path, *outputs: str) -> list[str]:
    found = [p.name for p in run_dir.iterdir() if KEY.encode() in p.read_bytes()]
    return found + [f"output {i}" for i, text in enumerate(outputs) if KEY in text]


def test_run_against_a_served_model_records_every_sample(served_tiny_model, tmp_path, data_dir):
    run_dir = tmp_path / "run"
    env = coral_env(data_dir, OPENAI_API_KEY=KEY, CORAL_LOG_LEVEL="DEBUG")
    result = run_coral("run", "--plugin", "quixbugs",
                       "--model", f"openai:{served_tiny_model.model}",
                       "--base-url", served_tiny_model.base_url,
                       "--config", str(_experiment(tmp_path)),
                       "--samples", "2", "--out", str(run_dir), "--json", env=env)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert [p["n"] for p in summary["problems"]] == [2] * 8
    generations, evaluations = _stored(run_dir)
    assert len(generations) == evaluations == 16
    assert all(json.loads(params)["max_new_tokens"] == 24 for *_, params in generations)
    assert not _leaks(run_dir, result.stdout, result.stderr), "the API key was written somewhere"


def test_run_through_a_faulty_proxy_completes_with_bounded_retries(served_tiny_model, tmp_path,
                                                                   data_dir):
    run_dir = tmp_path / "run"
    # The deadline must hold for an honest answer on a busy machine (1.5 s did not beside
    # CPU hogs: a slow answer cost an extra retry); a "slow" fault outlasts it twice over.
    options = {"timeout": 6.0, "max_retries": 8, "backoff_base": 0.05, "backoff_max": 0.5,
               "concurrency": 4}
    with FaultProxy(served_tiny_model.base_url, rate=0.3, seed=11, slow_seconds=12.0) as proxy:
        env = coral_env(data_dir, OPENAI_API_KEY=KEY)
        result = run_coral("run", "--plugin", "quixbugs", "--model",
                           f"openai:{served_tiny_model.model}", "--base-url", proxy.url,
                           "--config", str(_experiment(tmp_path, **options)), "--samples", "3",
                           "--out", str(run_dir), "--json", env=env)
    assert result.returncode == 0, result.stderr
    generations, evaluations = _stored(run_dir)
    assert len(generations) == evaluations == 24
    assert proxy.injected >= 3, "the proxy should have injected faults at a 30% rate"
    posts = len(proxy.bodies)  # the completions; one GET /models checked the server first
    assert posts == 24 + proxy.injected, "each fault cost exactly one retry"
    assert max(proxy.attempts_per_call.values()) <= 1 + options["max_retries"]
    assert proxy.max_in_flight <= options["concurrency"]
    assert not _leaks(run_dir, result.stdout, result.stderr)
