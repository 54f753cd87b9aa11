"""Starting, accounting for and killing a job's processes.

As PID 1 of the sandbox's PID namespace the worker owns every other process there: a job's
processes are all of them. Without bubblewrap it is a child subreaper, and a job's
processes are its descendants."""

from __future__ import annotations

import os
import signal
import time


IS_INIT = os.getpid() == 1


TICKS = os.sysconf("SC_CLK_TCK")


def fork(deadline):
    """fork(), retried while the process limit is reached: the sandbox user's process count
    is shared by every slot (when Coral runs as root), so another slot's fork bomb must not
    fail this job; it is killed when its own job ends."""
    while True:
        try:
            return os.fork()
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return None
            signal.sigtimedwait([signal.SIGCHLD], 0.01)


MEMORY_PERIOD = 0.02  # how often the job's memory and files are sampled while it runs


_BASELINE = []


def _private_kb(entry):
    """Anonymous and shared-memory pages the process has resident (shared anonymous
    mappings and mapped memfds count as RssShmem, not RssAnon)."""
    total = 0
    try:
        with open("/proc/%s/status" % entry, "rb") as handle:
            for line in handle:
                if line.startswith((b"RssAnon:", b"RssShmem:")):
                    total += int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return total


def job_memory(pid):
    """Anonymous and shared memory of every process of the job (a fork shares the worker's
    pages at first: those count once), in bytes. Pages shared between the job's processes
    count once per process: a sample errs on the side of the limit. Where the slot has a
    memory cgroup this is only the early, readable report; the cgroup is the exact limit."""
    if not _BASELINE:
        _BASELINE.append(_private_kb("self"))
    base = _BASELINE[0]
    return (base + sum(max(0, _private_kb(entry) - base) for entry in _job_pids())) * 1024


def files_in_use(roots):
    """Inodes in use on the sandbox's private tmpfs (bubblewrap 0.8 cannot cap nr_inodes);
    None where the writable folder is on the host's file system (it counts other users)."""
    if not IS_INIT or not roots:
        return None
    try:
        info = os.statvfs(roots[0])
    except OSError:
        return None
    return info.f_files - info.f_ffree


def over_limits(pid, limits, roots, files_base):
    """Why the job must stop (memory or files above the limits), or None."""
    if job_memory(pid) > limits["memory_bytes"]:
        return "MemoryError: the program's processes took more than its memory limit"
    if files_base is not None and "files" in limits:
        used = files_in_use(roots)
        if used is not None and used - files_base > limits["files"]:
            return "OSError: the program created more than %d files" % limits["files"]
    return None


def _job_pids():
    """Every process of the job: the whole namespace but us as PID 1, else our descendants."""
    entries = [p for p in os.listdir("/proc") if p.isdigit()]
    if IS_INIT:
        return [p for p in entries if p != "1"]
    children = {}
    for entry in entries:
        try:
            with open("/proc/%s/stat" % entry, "rb") as handle:
                parent = handle.read().rsplit(b")", 1)[1].split()[1].decode()
        except (OSError, IndexError):
            continue
        children.setdefault(parent, []).append(entry)
    found, todo = [], [str(os.getpid())]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def job_cpu(pid):
    """CPU seconds used so far by the job: every process in the namespace but us (as PID 1),
    otherwise the child and the children it has waited for."""
    pids = [p for p in os.listdir("/proc") if p.isdigit() and p != "1"] if IS_INIT else [str(pid)]
    total = 0
    for entry in pids:
        try:
            with open("/proc/%s/stat" % entry, "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
            total += sum(int(value) for value in fields[11:15])
        except (OSError, IndexError, ValueError):
            continue
    return total / TICKS


def job_waited(pid):
    """Seconds the job's processes have spent runnable but waiting for a CPU (the kernel's
    run delay in /proc/PID/schedstat): on a busy machine the wall-clock backstop adds this,
    so that only time a program spends blocked or asleep counts against it."""
    pids = [p for p in os.listdir("/proc") if p.isdigit() and p != "1"] if IS_INIT else [str(pid)]
    total = 0
    for entry in pids:
        try:
            with open("/proc/%s/schedstat" % entry, "rb") as handle:
                total += int(handle.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return total / 1e9


def wait_status(pid, grace=0.1):
    """How the child ended; one that closed its pipe but lives on is killed (never block)."""
    deadline = time.monotonic() + grace
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return "status unknown"
        if done:
            break
        if time.monotonic() >= deadline:
            kill_all(pid)
            return "it closed its result pipe and kept running"
        signal.sigtimedwait([signal.SIGCHLD], 0.005)
    if os.WIFSIGNALED(status):
        return "killed by signal %d" % os.WTERMSIG(status)
    return "exit status %d" % os.WEXITSTATUS(status)


def kill_all(pid, wait=True):
    """Kill the child and everything it started; with `wait`, reap them all."""
    deadline = time.monotonic() + 5.0
    while True:
        if IS_INIT:
            try:
                os.kill(-1, signal.SIGKILL)  # as PID 1: every other process in the namespace
            except ProcessLookupError:
                pass
        else:
            for target in _stopped_tree(pid):
                _signal(target, signal.SIGKILL)
        if _reap() or not wait or time.monotonic() > deadline:
            return
        signal.sigtimedwait([signal.SIGCHLD], 0.01)  # SIGCHLD is blocked: wait for the next


def _stopped_tree(pid, rounds=1000):
    """Every process below us (orphans land here: we are a subreaper), each stopped first:
    a stopped process forks nothing. Killing from the top let a chain of processes that
    each left the process group regrow below faster than it was killed, and outlive the
    job. Walks again until a walk finds no process it has not stopped."""
    stopped = set()
    for _ in range(rounds):
        found = {int(p) for p in _job_pids()} | ({pid} if pid else set())
        fresh = found - stopped
        if not fresh:
            break
        for target in fresh:
            _signal(target, signal.SIGSTOP)
        stopped |= fresh
    return stopped


def _signal(target, number):
    try:
        os.kill(target, number)
    except (ProcessLookupError, PermissionError):
        pass


def _reap():
    """Collect exited children; True once none is left."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return True
        if pid == 0:
            return False
