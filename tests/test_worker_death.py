"""A sandbox worker that dies between jobs, or while jobs wait behind it, is replaced: no
other candidate ever sees its death."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest

from coral_core.execution import ExecutionContext
from coral_core.sandbox import Sandbox, SandboxPolicy
from coral_core.sandbox.policy import SandboxUnavailable, bwrap_available, bwrap_program
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


@pytest.mark.timeout(120)
def test_a_worker_that_cannot_be_started_stops_the_job_with_one_line(tmp_path, data_dir,
                                                                     monkeypatch):
    """bubblewrap gone after the probe (as a worker that cannot start at all): the job's
    caller hears why at once; before, the job waited for ever and the run hung. The binary
    is found on Coral's own PATH, not on the workers' scrubbed one (a GPU image had it in a
    folder of its own)."""
    if not bwrap_available()[0]:
        pytest.skip("bubblewrap does not work here")
    copy = tmp_path / "bin" / "bwrap"
    copy.parent.mkdir()
    shutil.copy2(shutil.which("bwrap"), copy)
    monkeypatch.setenv("PATH", f"{copy.parent}{os.pathsep}{os.environ['PATH']}")
    bwrap_program.cache_clear()
    task = QuixBugs(data_dir=str(data_dir)).task("gcd")
    try:
        assert bwrap_program() == str(copy)
        with Sandbox(SandboxPolicy(timeout=5.0, isolation="bwrap"), workers=1) as sandbox:
            context = ExecutionContext(sandbox)
            assert context.execution(Candidate(task, task.reference)).passed  # the copy works
            for pid in _workers():
                os.kill(pid, signal.SIGKILL)
            copy.unlink()
            with pytest.raises(SandboxUnavailable, match="cannot start a worker here: .*bwrap"):
                context.execution(Candidate(task, task.reference + "\n# 2\n"))
    finally:
        bwrap_program.cache_clear()
