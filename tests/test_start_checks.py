"""What can be checked before a run directory exists is checked there: a model that cannot
answer the run's tasks, or a server that does not answer at all, leaves no run directory
that no resume could ever finish."""

from __future__ import annotations

import socket
import time

from conftest import coral_env, run_coral


def test_a_model_that_cannot_answer_the_tasks_is_refused_before_the_run(tmp_path, data_dir):
    out = tmp_path / "run"
    for args in (("--dry-run",), ("--out", str(out))):
        result = run_coral("run", "--plugin", "testgen", "--model", "reference", "--limit",
                           "2", *args, env=coral_env(data_dir))
        assert result.returncode == 2, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
        assert "no reference solution" in result.stderr and "--model hf:" in result.stderr
    assert not out.exists()


def test_a_server_that_does_not_answer_is_refused_before_the_run(tmp_path, data_dir):
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    out = tmp_path / "run"
    started = time.monotonic()
    result = run_coral("run", "--plugin", "quixbugs", "--model", "openai:m", "--base-url",
                       f"http://127.0.0.1:{port}/v1", "--limit", "1", "--out", str(out),
                       env=coral_env(data_dir))
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "does not answer" in result.stderr
    assert time.monotonic() - started < 60 and not out.exists()
