"""A sandbox worker that dies between jobs, or while jobs wait behind it, is replaced: no
other candidate ever sees its death."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from coral_core.execution import ExecutionContext
from coral_core.sandbox import Sandbox, SandboxPolicy
from coral_core.types import Candidate
from coral_plugins.datasets.quixbugs import QuixBugs

pytestmark = pytest.mark.loaded  # make test runs it beside CPU hogs


def _workers() -> set[int]:
    """Sandbox workers anywhere below this process (they run the coral_inside package)."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            comm = Path(f"/proc/{entry}/comm").read_text().strip()
        except OSError:
            continue
        if b"coral_inside" in cmdline and comm != "bwrap" and _below_us(int(entry)):
            found.add(int(entry))
    return found


def _below_us(pid: int) -> bool:
    me = os.getpid()
    while pid > 1:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])
        if pid == me:
            return True
    return False


def test_a_worker_killed_between_jobs_is_replaced_unseen(data_dir):
    task = QuixBugs(data_dir=str(data_dir)).task("gcd")
    with Sandbox(SandboxPolicy(timeout=5.0), workers=1) as sandbox:
        context = ExecutionContext(sandbox)
        assert context.execution(Candidate(task, task.reference + "\n# 1\n")).passed
        for pid in _workers():
            os.kill(pid, signal.SIGKILL)
        # the very next jobs are written to a worker that is already dead, two at a time
        for i in range(2, 8):
            execution = context.execution(Candidate(task, task.reference + f"\n# {i}\n"))
            assert execution.passed, [o.detail for o in execution.outcomes]
