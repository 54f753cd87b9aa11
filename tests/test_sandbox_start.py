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
from dataclasses import replace

from coral_core.execution import ExecutionContext
from coral_core.sandbox import Job, Sandbox, SandboxPolicy
from coral_core.sandbox import policy as sandbox_policy
from coral_core.scoring.program_tests import ExecutionSpec
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


def _bitcount(data_dir, cases: int) -> ExecutionSpec:
    """QuixBugs' bitcount with its first `cases` test cases: a program to run in a job."""
    task = QuixBugs(data_dir=str(data_dir)).task("bitcount")
    return replace(task.execution, cases=task.execution.cases[:cases])


def test_a_program_drawing_from_random_unseeded_draws_the_same_in_every_job(data_dir):
    """Every job's process is a fork of a worker whose `random` was seeded once (its at-fork
    reseed is not registered there): the same program gets the same numbers in every job,
    worker and run, as the same seed must give the same run."""
    spec = _bitcount(data_dir, 1)
    program = ("import random\n\n\ndef bitcount(n):\n"
               "    return [random.random(), random.getrandbits(60)]\n")
    policy = SandboxPolicy()
    drawn = []
    for _ in range(2):
        with Sandbox(policy, workers=2) as sandbox:
            jobs = [sandbox.submit(Job.build(spec, program, policy)) for _ in range(4)]
            drawn += [repr(job.result().steps[0].records) for job in jobs]
    assert len(set(drawn)) == 1 and drawn[0], drawn


def test_threads_work_in_a_job_though_the_worker_skipped_threadings_fork_hook(data_dir):
    """threading's at-fork hook rebuilds its locks in a child, for locks another thread
    held at the fork; the worker has no other thread, so it is not registered there. A
    program's threads, a thread pool and a fork of its own still work."""
    spec = _bitcount(data_dir, 2)
    program = (
        "import os, threading\n"
        "from concurrent.futures import ThreadPoolExecutor\n\n\n"
        "def bitcount(n):\n"
        "    seen = []\n"
        "    worker = threading.Thread(target=lambda: seen.append(bin(n).count('1')))\n"
        "    worker.start()\n"
        "    worker.join()\n"
        "    with ThreadPoolExecutor(2) as pool:\n"
        "        pooled = sum(pool.map(lambda b: b == '1', bin(n)))\n"
        "    read, write = os.pipe()\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        done = threading.Thread(target=lambda: os.write(write, b'1'))\n"
        "        done.start()\n"
        "        done.join()\n"
        "        os._exit(0)\n"
        "    os.waitpid(pid, 0)\n"
        "    assert os.read(read, 1) == b'1'\n"
        "    assert threading.current_thread() is threading.main_thread()\n"
        "    return seen[0] if seen[0] == pooled else -1\n")
    policy = SandboxPolicy()
    with Sandbox(policy, workers=1) as sandbox:
        result = sandbox.run(Job.build(spec, program, policy))
    assert [s.status for s in result.steps] == ["ok", "ok"], result
    assert [s.records for s in result.steps] == [
        (bin(case.step.args[0]).count("1"),) for case in spec.cases], result
