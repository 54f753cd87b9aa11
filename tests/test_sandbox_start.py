"""The sandbox's start-up: workers warmed ahead of their first job, slots added only for
jobs no free slot will take, bubblewrap probed once in the background, and the workers'
modules loaded from bytecode."""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from concurrent.futures import wait

from coral_core.execution import ExecutionContext
from coral_core.sandbox import Sandbox, SandboxPolicy
from coral_core.sandbox import policy as sandbox_policy
from coral_core.types import Candidate
from coral_plugins.datasets.quixbugs import QuixBugs


def _until(condition, seconds: float = 60.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def test_a_warmed_worker_takes_the_first_job_and_a_burst_adds_the_other_slot(data_dir):
    task = QuixBugs(data_dir=str(data_dir)).task("gcd")
    with Sandbox(SandboxPolicy(timeout=5.0), workers=2) as sandbox:
        context = ExecutionContext(sandbox)
        sandbox.warm()
        assert _until(lambda: sandbox.workers_started == 1)
        time.sleep(0.2)  # long enough for a second start to show, were one made
        assert context.execution(Candidate(task, task.reference)).passed
        assert sandbox.workers_started == 1  # the job went to the warm worker
        template = context._templates[next(iter(context._templates))]
        futures = [sandbox.submit(template.job(task.reference)) for _ in range(6)]
        wait(futures, timeout=120)
        assert all(f.result().steps and f.result().steps[0].status == "ok" for f in futures)
        assert sandbox.workers_started == 2  # jobs queued beyond the free slot: one more


def test_relative_timeouts_warm_the_main_sandbox_while_the_reference_runs(data_dir):
    task = QuixBugs(data_dir=str(data_dir)).task("gcd")
    with Sandbox(SandboxPolicy(timeout=5.0), workers=1) as sandbox:
        context = ExecutionContext(sandbox, timeout_factor=10.0)
        try:
            assert context.timeouts(task)  # runs the reference in its own sandbox
            assert _until(lambda: sandbox.workers_started == 1)  # no job has been sent
        finally:
            context.close()


def test_bubblewrap_is_probed_once_however_many_ask_at_once(monkeypatch):
    sandbox_policy._probe.cache_clear()
    calls = []
    real = sandbox_policy.subprocess.run

    def counted(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(sandbox_policy.subprocess, "run", counted)
    try:
        sandbox_policy.probe_soon()
        answers = []
        threads = [threading.Thread(target=lambda: answers.append(
            sandbox_policy.bwrap_available())) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert len(set(answers)) == 1 and len(answers) == 4
        assert len(calls) <= 1  # none where bwrap is not installed
    finally:
        sandbox_policy._probe.cache_clear()


def test_the_workers_modules_get_bytecode_unless_writing_it_is_off(tmp_path, monkeypatch):
    folder = tmp_path / "inside"
    shutil.copytree(sandbox_policy.WORKER_DIR, folder,
                    ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(sandbox_policy, "WORKER_DIR", folder)
    write = sandbox_policy.compile_worker_modules.__wrapped__

    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    write()
    assert not (folder / "__pycache__").exists()

    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    write()
    sources = sorted(p.stem for p in folder.glob("*.py"))
    compiled = sorted(p.name.split(".")[0] for p in (folder / "__pycache__").glob("*.pyc"))
    assert compiled == sources
    worker = next((folder / "__pycache__").glob("worker.*.pyc"))
    before = worker.stat().st_mtime_ns
    write()  # up to date: left alone
    assert worker.stat().st_mtime_ns == before
    source = folder / "worker.py"
    source.write_text(source.read_text() + "\n# changed\n")
    future = time.time() + 5
    os.utime(source, (future, future))
    write()  # stale: written again
    assert worker.stat().st_mtime_ns != before
