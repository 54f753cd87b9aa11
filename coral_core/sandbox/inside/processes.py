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
    """Inodes in use on the sandbox's private tmpfs file systems (/tmp, /dev/shm: bubblewrap
    0.8 cannot cap nr_inodes); None where the writable folders are on the host's file
    system (they count other users)."""
    if not IS_INIT or not roots:
        return None
    used = 0
    for root in roots:
        try:
            info = os.statvfs(root)
        except OSError:
            return None
        used += info.f_files - info.f_ffree
    return used


def over_limits(pid, limits, roots, files_base):
    """Why the job must stop (memory or files above the limits), or None."""
    if job_memory(pid) > limits["memory_bytes"]:
        return "MemoryError: the program's processes took more than its memory limit"
    if files_base is not None and "files" in limits:
        used = files_in_use(roots)
        if used is not None and used - files_base > limits["files"]:
            return "OSError: the program created more than %d files" % limits["files"]
    return None


def _job_pids(worker=None):
    """Every process of the job: the whole namespace but PID 1 (the worker) when the worker
    is its init, else the worker's descendants (`worker`: its pid; default us)."""
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
    found, todo = [], [str(worker or os.getpid())]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def _ticks(entry, fields=slice(11, 15)):
    """Clock ticks of CPU time in /proc/ENTRY/stat: by default the process's own (threads
    included) and what it has reaped; 0 once it is gone."""
    try:
        with open("/proc/%s/stat" % entry, "rb") as handle:
            values = handle.read().rsplit(b")", 1)[1].split()[fields]
        return sum(int(value) for value in values)
    except (OSError, IndexError, ValueError):
        return 0


class JobClock:
    """CPU seconds that a job's processes have used since the clock started, whatever they
    do. A process's time moves to whoever reaps it: reading every live process of the job
    (with what it has reaped) plus what the worker has reaped since the start loses no
    process that ends unwaited or leaves its parent (a double fork's grandchild ends as the
    worker's), and counts none twice. Reading only the process that ran the job missed
    every process it started and never waited for (a red-team pass ran 10 s of CPU time in
    two such children of a HumanEval candidate against a 1 s budget).

    `worker`: the worker's pid (PID 1 as the namespace's init, else a subreaper);
    `exclude`: processes of the job whose time is not the job's (the host of a hosted job,
    reading the candidate's side). The first reading takes only `root` (one file: a check
    that ends at once pays nothing more); from the second on, every process is read."""

    def __init__(self, worker, exclude=(), root=None):
        self.worker, self.root = str(worker), None if root is None else str(root)
        self.exclude = {str(pid) for pid in exclude}
        self.reaped = _ticks(self.worker, slice(13, 15))
        self.seconds = 0.0

    def read(self):
        """The job's CPU seconds so far (never less than the last reading)."""
        reaped = _ticks(self.worker, slice(13, 15)) - self.reaped  # first: a process reaped
        if self.root is not None:  # meanwhile is missed now, not counted twice
            members, self.root = [self.root], None
        else:
            members = [p for p in _job_pids(self.worker) if p not in self.exclude]
        total = reaped + sum(_ticks(entry) for entry in members)
        self.seconds = max(self.seconds, total / TICKS)
        return self.seconds


def busy_ns(pid):
    """Nanoseconds the process (its main thread) has run and waited for a CPU, or None:
    what a hosted job's two processes count idleness from (they take turns, so the wall
    time neither spent running or runnable is time the program slept or blocked)."""
    try:
        with open("/proc/%s/schedstat" % pid, "rb") as handle:
            running, waiting = handle.read().split()[:2]
        return int(running) + int(waiting)
    except (OSError, ValueError):
        return None


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
