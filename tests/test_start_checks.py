"""What can be checked before a run directory exists is checked there: a model that cannot
answer the run's tasks, or a server that does not answer at all, leaves no run directory
that no resume could ever finish."""

from __future__ import annotations

import socket
import subprocess
import sys
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


def test_a_web_server_that_is_not_an_openai_api_is_refused_before_the_run(tmp_path,
                                                                          data_dir):
    """python's own http.server (404 on GET /v1/models, 501 on POST): it answers, but a
    run could never get a completion from it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind",
                               "127.0.0.1"], cwd=tmp_path, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        out = tmp_path / "run"
        result = run_coral("run", "--plugin", "quixbugs", "--model", "openai:m", "--base-url",
                           f"http://127.0.0.1:{port}/v1", "--limit", "1", "--out", str(out),
                           env=coral_env(data_dir))
    finally:
        server.kill()
        server.wait()
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "not as an OpenAI-compatible API" in result.stderr
    assert "GET /models: HTTP 404" in result.stderr and "HTTP 501" in result.stderr
    assert not out.exists()
