"""Host side of the sandbox: a pool of pre-warmed workers, one job at a time each.

Each slot is one worker process (inside its own bubblewrap sandbox where available, and in
its own memory and pids cgroup where one can be made), so candidates in different slots
cannot see or signal each other. Jobs are pulled from one queue by whichever slot is free;
a slot whose worker dies or stops answering is restarted and its job retried once.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import secrets
from collections import deque
import stat
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from concurrent.futures import Future
from dataclasses import dataclass

from coral_core.errors import UserError
from coral_core.files.scratch import make_scratch, remove_tree
from coral_core.sandbox.analysis import Analyzer
from coral_core.sandbox.cgroups import SlotCgroup, slot_name, user_tasks
from coral_core.sandbox.inside.limits import WALL_FACTOR
from coral_core.sandbox.notices import warn_once
from coral_core.sandbox.policy import (INTERPRETER_FLAGS, NOBODY, WORKER_DIR, SandboxPolicy,
                                       bwrap_available, bwrap_command, interpreter,
                                       start_worker, worker_launcher)
from coral_core.sandbox.results import Assembly, ExecutionResult, ProtocolError, StepResult
from coral_core.sandbox.wire import Job, JobTemplate, Pipes, WorkerGone
from coral_core.switches import switch

log = logging.getLogger(__name__)

__all__ = ["ExecutionResult", "Job", "JobTemplate", "Sandbox", "StepResult"]

WorkerDied = WorkerGone  # the name the pool's callers know
CGROUP_HEADROOM = 64 << 20  # the worker's own memory, on top of the candidate's limit
CGROUP_PROCESSES = 2  # bubblewrap and the worker (without it, the worker alone), on top of
#                      the candidate's processes
RELEASE_SECONDS = 5.0  # for a worker to finish its last cleanup when the sandbox closes


PIPELINE = 2  # jobs written ahead to each worker

_LIVE: "weakref.WeakSet[_Slot]" = weakref.WeakSet()  # slots whose cgroups must go at exit
_EXITING = threading.Event()


@atexit.register
def _release_all() -> None:
    """A Sandbox nobody closed: its workers would die with us, but their cgroups would stay
    (a group is removed only once its processes are gone): kill, then remove."""
    _EXITING.set()
    for slot in list(_LIVE):
        try:
            slot.release()
        except Exception:  # exiting anyway; the next Coral process removes stale groups
            pass


@dataclass
class _InFlight:
    job: Job
    future: "Future[ExecutionResult]"
    job_id: int = 0
    retried: bool = False


def frame_limits(policy: SandboxPolicy) -> dict[bytes, int]:
    """The largest payload of each frame kind a worker of ours sends."""
    control = 1 << 16
    return {b"H": control, b"R": policy.record_bytes, b"D": 1 << 13, b"S": control,
            b"L": control, b"F": control, b"o": policy.output_bytes,
            b"e": policy.output_bytes, b"Z": control}


class _Slot:
    """One worker process and the thread that feeds it."""

    def __init__(self, sandbox: "Sandbox", index: int):
        self.sandbox = sandbox
        self.index = index
        self.process: subprocess.Popen[bytes] | None = None
        self.pipes: Pipes | None = None
        self.scratch: str | None = None
        self.cgroup: SlotCgroup | None = None
        self.cgroup_tried = False
        self.job_id = 0
        self.limits = frame_limits(sandbox.policy)

    def _make_cgroup(self) -> None:
        """Once per slot: the group outlives worker restarts, and goes with the slot."""
        if self.cgroup_tried or not self.sandbox.policy.cgroup:
            return
        self.cgroup_tried = True
        policy = self.sandbox.policy
        self.cgroup = SlotCgroup.create(slot_name(self.index),
                                        (policy.memory_mb << 20) + CGROUP_HEADROOM,
                                        policy.max_processes + CGROUP_PROCESSES
                                        - (not self.sandbox.isolated))
        if self.cgroup is None:
            warn_once("cgroup", "no memory cgroup can be created here: a candidate's memory "
                      "limit is sampled (about every 20 ms) and does not see memory held "
                      "in memfds or kernel objects; see docs/sandbox.md")

    def start(self) -> None:
        if _EXITING.is_set():
            raise RuntimeError("Python is exiting")
        _LIVE.add(self)
        self._make_cgroup()
        self.sandbox.count_start()
        try:
            self._start()
        except WorkerDied:
            if self.cgroup is None:
                raise
            # A group we could make but not enter (some containers): go on without it.
            self.stop()
            self.cgroup.remove()
            self.cgroup = None
            warn_once("cgroup", "the sandbox worker could not enter its cgroup: a "
                      "candidate's memory limit is sampled instead; see docs/sandbox.md")
            self._start()

    def _start(self) -> None:
        policy = self.sandbox.policy
        bounded = self.cgroup is not None and self.cgroup.pids
        options = policy.worker_options(
            memory_cgroup=self.cgroup is not None, pids_cgroup=bounded,
            # without a pids group the process rlimit is the bound, and it counts every
            # process and thread of the sandbox user on the host (a desktop user's browser,
            # another run's sandboxes): the candidate's room is counted from what there is
            process_base=0 if bounded else user_tasks(NOBODY if os.geteuid() == 0
                                                      else os.getuid()))
        if self.sandbox.isolated:
            command = bwrap_command(policy, interpreter(), "worker", options)
            cwd = None
        else:
            self.scratch = make_scratch("coral-sandbox-", _scratch_base(),
                                        owners=(NOBODY,) if os.geteuid() == 0 else ())
            command = [sys.executable, *INTERPRETER_FLAGS, "-c", worker_launcher(str(WORKER_DIR)),
                       self.scratch, options]
            if os.geteuid() == 0:
                os.chown(self.scratch, NOBODY, NOBODY)
            cwd = self.scratch
        self.process = start_worker(command, cwd,
                                    self.cgroup.wrap if self.cgroup is not None else None)
        assert self.process.stdin is not None and self.process.stdout is not None
        self.pipes = Pipes(self.process.stdin.fileno(), self.process.stdout.fileno())
        kind, payload = self.pipes.frame(time.monotonic() + 60, self.limits)
        hello = _hello(kind, payload)
        closed = hello.get("unreadable")
        if closed and isinstance(closed, list):
            warn_once("unreadable", "candidates run as nobody, who cannot read %s (a folder "
                      "closed to other users): a candidate can import only the modules the "
                      "sandbox worker loaded before it dropped root; %skeep Python and its "
                      "packages where every user can read them (see docs/sandbox.md)",
                      ", ".join(str(p)[:300] for p in closed[:8]),
                      "" if self.sandbox.isolated else "install bubblewrap, or ")
        if not hello.get("filter") and policy.syscall_filter:
            warn_once("seccomp", "seccomp filters are not available here: candidates can "
                      "create keyrings and IPC objects (removed after each job) and user "
                      "namespaces; see docs/sandbox.md")

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            for stream in (self.process.stdin, self.process.stdout):
                if stream:
                    stream.close()
            self.process = None
            self.pipes = None
        if self.scratch:
            remove_tree(self.scratch)  # a candidate's tree, however deep or read-only
            self.scratch = None

    def release(self) -> None:
        """The slot is done for good: its worker and its cgroup go. The worker is first
        given end-of-file and a moment to finish cleaning up after its last job (keys in the
        sandbox user's keyrings would otherwise outlive this process)."""
        process = self.process
        if process is not None and process.poll() is None and process.stdin is not None:
            try:
                process.stdin.close()
                process.wait(timeout=RELEASE_SECONDS)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.stop()
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None

    def send(self, job: Job) -> int:
        """Write a job to the worker (started if needed); the worker queues it."""
        if self.process is None or self.process.poll() is not None:
            self.stop()
            self.start()
        assert self.pipes is not None
        # Drawn at random: a job (whose children inherit the worker's memory) must not
        # learn from its id how many jobs came before it on this worker.
        self.job_id = secrets.randbits(48)
        self.pipes.write(job.wire(self.job_id))
        return self.job_id

    def receive(self, job: Job, job_id: int) -> ExecutionResult:
        payload = job.payload
        # The worker enforces every deadline; this only catches a worker that hangs. Its
        # own backstop stretches while the machine is busy, so this one is generous.
        budget = (3 * payload["load_timeout"] + 3 * WALL_FACTOR * sum(payload["timeouts"])
                  + 30.0 + 0.05 * len(payload["steps"]))
        deadline = time.monotonic() + budget
        assembly = Assembly(len(payload["steps"]), self.sandbox.policy.max_records)
        assert self.pipes is not None
        try:
            while not assembly.feed(*self.pipes.frame(deadline, self.limits)):
                pass
        except ProtocolError as error:
            raise WorkerDied(f"sandbox worker sent an unexpected message ({error})") from None
        if assembly.done_id != job_id:
            raise WorkerDied("sandbox worker sent an unexpected message")
        return assembly.result(self.sandbox.isolated)


def _scratch_base() -> str:
    """Where a slot's scratch folder goes without bubblewrap: the temporary folder, unless
    the worker, run as nobody when we are root, could not reach it there (TMPDIR in a
    root-only folder: every job would kill its worker); then /tmp."""
    base = tempfile.gettempdir()
    return base if os.geteuid() != 0 or _passable(base) else "/tmp"


def _passable(path: str) -> bool:
    """Whether other users may pass through `path` and every folder above it."""
    current = os.path.realpath(path)
    while True:
        try:
            if not os.stat(current).st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
        parent = os.path.dirname(current)
        if parent == current:
            return True
        current = parent


def _hello(kind: bytes, payload: bytes) -> dict:
    import json

    try:
        hello = json.loads(payload) if kind == b"H" else {}
    except ValueError:
        hello = {}
    if not isinstance(hello, dict) or not hello.get("ready"):
        raise WorkerDied("sandbox worker did not start")
    return hello


def _stop_quietly(slot: "_Slot", release: bool = False) -> None:
    try:
        slot.release() if release else slot.stop()
    except Exception:  # a slot that cannot be cleaned must not stop the pool
        log.exception("could not stop sandbox slot %d cleanly", slot.index)


def _make_undumpable() -> None:
    """Without bubblewrap a candidate runs as our user and could read /proc/<coral>/environ
    (API keys) or ptrace us; a non-dumpable process refuses both to same-user processes."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0
    except (OSError, AttributeError):
        log.warning("could not make the Coral process non-dumpable")


class Sandbox:
    """Runs candidate programs out of process, in parallel, behind every layer available."""

    def __init__(self, policy: SandboxPolicy | None = None, workers: int | None = None):
        self.policy = policy or SandboxPolicy()
        self.workers = max(1, workers or os.cpu_count() or 1)
        self.isolated = self._choose_isolation()
        self._queue: queue.SimpleQueue[tuple[Job, Future[ExecutionResult]] | None] = (
            queue.SimpleQueue()
        )
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False
        self._analyzer: Analyzer | None = None
        self._started = 0
        self._free = 0  # slots that no queued job is matched with: warming, or waiting

    @property
    def workers_started(self) -> int:
        """Worker processes started so far: one per slot when all is well; more means some
        died or stopped answering and were replaced (the log says why)."""
        return self._started

    def count_start(self) -> None:
        with self._lock:
            self._started += 1

    def _choose_isolation(self) -> bool:
        """bubblewrap where it works. CORAL_REQUIRE_BWRAP=1 (set by CI) makes "auto" mean
        "bwrap": where it cannot isolate, that is an error, never a quiet fallback."""
        if self.policy.isolation == "none":
            return False
        ok, why = bwrap_available()
        if ok:
            return True
        if self.policy.isolation == "bwrap" or switch("CORAL_REQUIRE_BWRAP"):
            raise UserError(f"sandbox isolation 'bwrap' was asked for, but {why}")
        if os.geteuid() != 0:
            _make_undumpable()
        warn_once(
            "bwrap", "%s: candidates run WITHOUT filesystem, network and PID isolation "
            "(resource limits, scrubbed environment and process-group kill still apply). "
            "Install bubblewrap (apt-get install bubblewrap) to isolate them.", why,
        )
        return False

    def analyzer(self) -> "Analyzer":
        """The analysis workers (parsing, flake8, bandit) beside this sandbox's slots,
        started on first use and closed with it."""
        with self._lock:
            if self._closed:
                raise RuntimeError("sandbox is closed")
            if self._analyzer is None:
                self._analyzer = Analyzer(self.policy, self.workers, self.isolated)
            return self._analyzer

    def submit(self, job: Job) -> "Future[ExecutionResult]":
        future: Future[ExecutionResult] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("sandbox is closed")
            self._queue.put((job, future))
            if self._free:  # a slot that is warming or waiting will take it
                self._free -= 1
            elif len(self._threads) < self.workers:  # else a new slot, made for this job
                self._add_slot(prestart=False)
        return future

    def warm(self, slots: int = 1) -> None:
        """Start up to `slots` workers now, in the background, before any job needs them:
        a caller about to wait for something else (a reference solution's runs) overlaps
        the workers' start-up with it. A worker that fails to start here is started again
        for the first job, which then reports why."""
        with self._lock:
            if self._closed:
                return
            while len(self._threads) < min(slots, self.workers):
                self._add_slot(prestart=True)

    def _waiting(self) -> None:
        """A slot is about to wait for a job: the next job submitted is its."""
        with self._lock:
            self._free += 1

    def _add_slot(self, prestart: bool) -> None:
        """(Under the lock.) One more slot and the thread that feeds it: a warmed one is
        free; one made for a job is that job's."""
        if prestart:
            self._free += 1
        thread = threading.Thread(
            target=self._serve, args=(len(self._threads), prestart), daemon=True,
            name=f"coral-sandbox-{len(self._threads)}",
        )
        self._threads.append(thread)
        try:
            thread.start()
        except RuntimeError as error:  # a limit on threads or memory (ulimit -u, -v)
            self._threads.pop()
            if prestart:
                self._free -= 1
            raise UserError(f"the sandbox cannot start a thread ({error}): this process's "
                            "limits are too low (ulimit -v, -u)") from None

    def run(self, job: Job) -> ExecutionResult:
        return self.submit(job).result()

    def _serve(self, index: int, prestart: bool = False) -> None:
        """Feed one slot, keeping PIPELINE jobs in flight so the worker never waits for us.

        A job whose worker dies or stops answering is run once more on a fresh worker (the
        worker may have died cleaning up after the job before it); jobs queued behind it go
        to the fresh worker untouched. Only a job that breaks a worker twice is reported as
        an error, so no other candidate ever sees a worker's death.
        """
        slot = _Slot(self, index)
        flight: deque[_InFlight] = deque()
        stopping = False
        try:
            if prestart:
                try:
                    slot.start()
                except Exception:  # noqa: B902 - the first job starts it again and says why
                    _stop_quietly(slot)
            counted = True  # at first, in self._free (warmed) or matched with its job
            while True:
                while len(flight) < PIPELINE and not stopping:
                    if not flight and not counted:
                        self._waiting()
                    counted = False
                    try:
                        item = self._queue.get_nowait() if flight else self._queue.get()
                    except queue.Empty:
                        break
                    if item is None:
                        stopping = True
                        break
                    job, future = item
                    if future.set_running_or_notify_cancel():
                        self._send(slot, _InFlight(job, future), flight)
                if not flight:
                    if stopping:
                        return
                    continue
                current = flight.popleft()
                try:
                    current.future.set_result(slot.receive(current.job, current.job_id))
                except WorkerDied as error:
                    _stop_quietly(slot)
                    waiting = list(flight)
                    flight.clear()
                    if current.retried:
                        self._fail(current, error)
                    else:
                        current.retried = True
                        self._send(slot, current, flight)
                    for other in waiting:
                        self._send(slot, other, flight)
                except BaseException as error:  # never leave a caller waiting
                    _stop_quietly(slot)
                    current.future.set_exception(error)
        finally:
            for left in flight:
                if not left.future.done():
                    left.future.set_exception(RuntimeError("sandbox closed"))
            _stop_quietly(slot, release=True)

    def _send(self, slot: "_Slot", item: "_InFlight", flight: "deque[_InFlight]") -> None:
        """A worker that died before reading a job is no fault of that job: it goes to a
        fresh worker, and fails only if a fresh worker cannot take it either."""
        for attempt in range(2):
            try:
                item.job_id = slot.send(item.job)
            except WorkerDied as error:
                _stop_quietly(slot)
                if attempt:
                    self._fail(item, error)
                    return
                continue
            except BaseException as error:  # no worker at all (SandboxUnavailable): the
                _stop_quietly(slot)  # caller hears it; a job left waiting hangs the run
                item.future.set_exception(error)
                return
            flight.append(item)
            return

    def _fail(self, item: "_InFlight", error: Exception) -> None:
        steps = tuple(StepResult("error", detail=str(error)) for _ in item.job.payload["steps"])
        item.future.set_result(ExecutionResult(steps, load_error=str(error),
                                               isolated=self.isolated))

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for _ in self._threads:
                self._queue.put(None)
            analyzer, self._analyzer = self._analyzer, None
        for thread in self._threads:
            thread.join(timeout=30)
        if analyzer is not None:
            analyzer.close()

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
