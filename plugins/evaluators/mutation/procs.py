"""Process trees on Linux, from /proc: a mutant's run must not outlive it.

Tests may start processes (a forked helper, `sleep 1000 &`, a daemon that double-forks and
calls setsid). The worker makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so
every orphan of a mutant's run is re-parented to the worker rather than to init, and stays a
descendant of the worker; after each run the worker kills the descendants that run left.
"""

from __future__ import annotations

import os
import signal
import time

PR_SET_CHILD_SUBREAPER = 36
TICKS = os.sysconf("SC_CLK_TCK")


def set_subreaper() -> bool:
    """Make this process the reaper of its descendants' orphans; False where unsupported."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _stat(pid: int) -> list[bytes] | None:
    """The fields of /proc/PID/stat after the command name (field 3, the state, first)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def cpu_of(fields: list[bytes] | None) -> float:
    """utime + stime + cutime + cstime (its own and its reaped children's CPU seconds)."""
    if not fields:
        return 0.0
    try:
        return sum(int(v) for v in fields[11:15]) / TICKS
    except (IndexError, ValueError):
        return 0.0


def children(pid: int) -> list[int] | None:
    """The direct children of `pid` (every thread's), or None where /proc cannot say."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", "rb") as handle:
                found.extend(int(v) for v in handle.read().split())
        except FileNotFoundError:
            if task == str(pid):
                return None  # no CONFIG_PROC_CHILDREN
        except (OSError, ValueError):
            continue
    return found


def tree_cpu(pid: int) -> float:
    """CPU seconds of `pid` and of every live descendant (each with its reaped children):
    a test's subprocess that loops counts before it is reaped."""
    return cpu_of(_stat(pid)) + live_cpu(pid)


def live_cpu(pid: int) -> float:
    """CPU seconds of the live descendants of `pid` (each with its reaped children)."""
    total = 0.0
    pending = children(pid) or []
    seen = {pid}
    while pending:
        child = pending.pop()
        if child in seen:
            continue
        seen.add(child)
        total += cpu_of(_stat(child))
        pending.extend(children(child) or [])
    return total


def descendants(root: int) -> dict[int, tuple[int, bytes, bytes]]:
    """{pid: (parent pid, start time, state)} of every process below `root`."""
    parents: dict[int, tuple[int, bytes, bytes]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = _stat(int(name))
        if fields and len(fields) > 19:
            parents[int(name)] = (int(fields[1]), fields[19], fields[0])
    below: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in parents.items():
        below.setdefault(ppid, []).append(pid)
    found: dict[int, tuple[int, bytes, bytes]] = {}
    pending = list(below.get(root, []))
    while pending:
        pid = pending.pop()
        if pid not in found:
            found[pid] = parents[pid]
            pending.extend(below.get(pid, []))
    return found


def snapshot(root: int) -> set[tuple[int, bytes]]:
    """(pid, start time) of `root`'s descendants now: processes a later clean-up keeps."""
    if children(root) == []:
        return set()
    return {(pid, info[1]) for pid, info in descendants(root).items()}


def kill_descendants(root: int, keep: set[tuple[int, bytes]] = frozenset(),
                     rounds: int = 200) -> int:
    """SIGKILL every descendant of `root` but the kept ones and theirs, until none is left
    (a process forking meanwhile is caught by the next round); reap the ones that are this
    process's children. Returns how many were killed."""
    me = os.getpid()
    killed: set[int] = set()
    for _ in range(rounds):
        if not keep and children(root) == []:
            break
        tree = descendants(root)
        kept = {pid for pid, info in tree.items() if (pid, info[1]) in keep}
        pending = list(kept)
        while pending:  # a kept process's own children are kept too
            pid = pending.pop()
            for other, info in tree.items():
                if info[0] == pid and other not in kept:
                    kept.add(other)
                    pending.append(other)
        targets = {pid: info for pid, info in tree.items() if pid not in kept}
        alive = [pid for pid, info in targets.items() if info[2] != b"Z"]
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except OSError:
                pass
        for pid, info in targets.items():
            if info[0] == me:
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass
        if not alive:
            break
        time.sleep(0.001)
    return len(killed)
