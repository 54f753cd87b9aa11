"""The memory and pids cgroup of each sandbox slot (issue 7, class 4): made under Coral's own
cgroup where that is writable, with the limits of the policy, entered by the worker before
the sandbox starts, removed when the sandbox closes, and never a reason for a job to fail."""

from __future__ import annotations

import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from coral_core.sandbox import Job, Sandbox, SandboxPolicy
from coral_core.sandbox import cgroups
from coral_core.sandbox.cgroups import SlotCgroup
from coral_core.sandbox.policy import NOBODY
from coral_core.files.scratch import owner_tag
from coral_plugins.datasets.quixbugs import QuixBugs

POLICY = SandboxPolicy(timeout=2.0, memory_mb=200, max_processes=20)


def _writable() -> bool:
    group = SlotCgroup.create(cgroups.slot_name(0), 64 << 20, 8)
    if group is None:
        return False
    group.remove()
    return True


pytestmark = [pytest.mark.loaded,
              pytest.mark.skipif(not _writable(), reason="no writable cgroup here")]


@pytest.fixture(scope="module")
def task(data_dir):
    return QuixBugs(data_dir=str(data_dir)).task("gcd")


def _groups() -> list[Path]:
    """Our slots' groups in every hierarchy we use."""
    mounts, own = cgroups._mounts(), cgroups._own_paths()
    found = []
    for controller in ("memory", "pids", "unified"):
        if controller in mounts and controller in own:
            parent = mounts[controller] / own[controller].lstrip("/")
            found += sorted(parent.glob(f"coral-{owner_tag()}-*"))
    return found


def test_each_slot_runs_inside_a_group_with_the_policy_limits(task):
    before = set(_groups())  # other sandboxes of this process may still be open
    with Sandbox(POLICY, workers=1) as sandbox:
        result = sandbox.run(Job.build(task.execution, task.reference, POLICY))
        assert {s.status for s in result.steps} == {"ok"}
        groups = set(_groups()) - before
        assert groups, "no cgroup was made for the slot"
        for group in groups:
            procs = (group / "cgroup.procs").read_text().split()
            assert procs, f"{group} holds no process: the worker runs outside it"
            if (group / "memory.limit_in_bytes").exists():
                assert int((group / "memory.limit_in_bytes").read_text()) == (200 + 64) << 20
            if (group / "memory.max").exists():
                assert int((group / "memory.max").read_text()) == (200 + 64) << 20
            if (group / "pids.max").exists():
                assert (group / "pids.max").read_text().strip() == "22"  # + bwrap, worker
    assert set(_groups()) - before == set(), "the slot's cgroups outlived the sandbox"


def test_a_group_that_cannot_be_entered_is_dropped_not_fatal(task, monkeypatch):
    before = set(_groups())
    monkeypatch.setattr(SlotCgroup, "wrap", lambda self, command: ["/bin/sh", "-c", "exit 111"])
    with Sandbox(POLICY, workers=1) as sandbox:
        result = sandbox.run(Job.build(task.execution, task.reference, POLICY))
        assert {s.status for s in result.steps} == {"ok"}, result
    assert set(_groups()) - before == set()


def test_groups_of_a_coral_process_that_died_are_removed(task):
    """A Coral process killed with SIGKILL cannot remove its groups: the next one does."""
    mounts, own = cgroups._mounts(), cgroups._own_paths()
    controller = "memory" if "memory" in mounts else "unified"
    parent = mounts[controller] / own[controller].lstrip("/")
    dead = 2 ** 22 + 12345  # above pid_max on most machines: no such process
    while Path(f"/proc/{dead}").exists():
        dead += 1
    here = "_".join(owner_tag().split("_")[:2])  # this boot, this pid namespace
    # named as this Coral names them (boot, pid namespace, pid, start time), as older did
    stales = [parent / f"coral-{here}_{dead}_1-1-0", parent / f"coral-{dead}-1-0"]
    for stale in stales:
        stale.mkdir()
    try:
        policy = replace(POLICY, isolation="none")
        with Sandbox(policy, workers=1) as sandbox:
            sandbox.run(Job.build(task.execution, task.reference, policy))
        assert not any(stale.exists() for stale in stales)
    finally:
        for stale in stales:
            if stale.exists():
                stale.rmdir()


FORKS_AND_THREADS = '''
import os
import threading


def gcd(a, b):
    thread = threading.Thread(target=lambda: None)
    thread.start()
    thread.join()
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    while b:
        a, b = b, a % b
    return a
'''


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the crowd runs as nobody")
@pytest.mark.parametrize("cgroup", [True, False], ids=["pids cgroup", "process rlimit"])
def test_other_processes_of_the_sandbox_user_never_take_a_candidates_room(task, cgroup):
    """The process rlimit counts every process and thread of the user on the host: with 40
    of the sandbox user's elsewhere (another run's sandboxes; a desktop user's browser), a
    candidate could not start a thread or a process at all, and a correct one failed. The
    slot's pids cgroup bounds the job instead; without one the job's room is counted on top
    of what the user had when the worker started."""
    crowd = [subprocess.Popen(["sleep", "60"], user=NOBODY, group=NOBODY)
             for _ in range(40)]
    try:
        policy = replace(POLICY, cgroup=cgroup)
        with Sandbox(policy, workers=1) as sandbox:
            result = sandbox.run(Job.build(task.execution, FORKS_AND_THREADS, policy))
        assert {s.status for s in result.steps} == {"ok"}, (result.load_error, [
            (s.status, s.detail) for s in result.steps][:3])
    finally:
        for process in crowd:
            process.kill()
            process.wait()
