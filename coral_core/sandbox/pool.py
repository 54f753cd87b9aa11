"""Host side of the sandbox: a pool of pre-warmed workers, one job at a time each.

Each slot is one worker process (inside its own bubblewrap sandbox where available), so
candidates in different slots cannot see or signal each other. Jobs are pulled from one
queue by whichever slot is free; a slot whose worker dies or stops answering is restarted
and its job reported as an error.
"""

from __future__ import annotations

import json
import logging
import os
import queue
from collections import deque
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from ..program_tests import ExecutionSpec
from .decode import DecodeError, decode_record
from .inside.worker import WALL_FACTOR
from .policy import (INTERPRETER_FLAGS, NOBODY, WORKER_DIR, SandboxPolicy, bwrap_available,
                     bwrap_command, scrubbed_environment, worker_launcher)

log = logging.getLogger(__name__)
_warned = False


@dataclass(frozen=True)
class StepResult:
    """What one step did: status ok | error | timeout, the values it recorded, its time."""

    status: str
    records: tuple[Any, ...] = ()
    detail: str = ""
    seconds: float = 0.0
    cost: int = -1  # lines executed, where the job counted them; -1: not counted or tampered
    cpu: float = -1.0


@dataclass(frozen=True)
class ExecutionResult:
    steps: tuple[StepResult, ...]
    load_error: str = ""
    load_seconds: float = 0.0
    load_cost: int = -1  # lines executed while loading, where counted
    stdout: str = ""
    stderr: str = ""
    isolated: bool = False

    @property
    def seconds(self) -> float:
        """Load plus every step: precomputing answers while loading cannot hide time."""
        return self.load_seconds + sum(step.seconds for step in self.steps)


@dataclass(frozen=True)
class Job:
    """A candidate program and the steps to run: `wire` is the worker's JSON."""

    payload: dict[str, Any] = field(hash=False)  # everything but the code (budgets, steps)
    wire: str = field(hash=False)

    @classmethod
    def build(
        cls, spec: ExecutionSpec, code: str, policy: SandboxPolicy,
        timeouts: list[float] | None = None, count: bool = False,
    ) -> "Job":
        return JobTemplate(spec, policy, timeouts, count).job(code)


class JobTemplate:
    """A task's job without the candidate's code, serialised once: only the code changes
    from one candidate to the next."""

    def __init__(self, spec: ExecutionSpec, policy: SandboxPolicy,
                 timeouts: list[float] | None = None, count: bool = False):
        steps = [
            {"call": c.step.call, "args": list(c.step.args), "project": c.step.project,
             "script": c.step.script}
            for c in spec.cases
        ]
        timeouts = list(timeouts or [policy.timeout] * len(steps))
        self.payload = {
            "module": spec.module, "support": [list(s) for s in spec.support],
            "setup": spec.setup, "steps": steps, "timeouts": timeouts,
            "load_timeout": policy.load_timeout,
            "limits": policy.limits(len(steps), timeouts), "count": count,
        }
        self._rest = json.dumps(self.payload)[1:]  # '"module": ..., ...}'

    def job(self, code: str) -> Job:
        return Job(self.payload, '{"code":' + json.dumps(code) + "," + self._rest)


class WorkerDied(Exception):
    pass


PIPELINE = 2  # jobs written ahead to each worker


@dataclass
class _InFlight:
    job: Job
    future: "Future[ExecutionResult]"
    job_id: int = 0
    retried: bool = False


class _Slot:
    """One worker process and the thread that feeds it."""

    def __init__(self, sandbox: "Sandbox", index: int):
        self.sandbox = sandbox
        self.index = index
        self.process: subprocess.Popen[bytes] | None = None
        self.scratch: str | None = None
        self.buffer = b""
        self.job_id = 0

    def start(self) -> None:
        policy = self.sandbox.policy
        if self.sandbox.isolated:
            command = bwrap_command(policy, sys.executable)
            cwd = None
        else:
            self.scratch = tempfile.mkdtemp(prefix="coral-sandbox-")
            command = [sys.executable, *INTERPRETER_FLAGS, "-c", worker_launcher(str(WORKER_DIR)),
                       self.scratch]
            if os.geteuid() == 0:
                os.chown(self.scratch, NOBODY, NOBODY)
                command += [str(NOBODY), str(NOBODY)]
            cwd = self.scratch
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=scrubbed_environment(), cwd=cwd, close_fds=True,
        )
        self.buffer = b""
        hello = self._read_line(time.monotonic() + 60)
        if not hello.get("ready"):
            raise WorkerDied("sandbox worker did not start")

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            for stream in (self.process.stdin, self.process.stdout):
                if stream:
                    stream.close()
            self.process = None
        if self.scratch:
            try:
                shutil.rmtree(self.scratch, ignore_errors=True)
            except RecursionError:  # a candidate's tree deeper than Python recurses
                subprocess.run(["rm", "-rf", "--", self.scratch], check=False)
            self.scratch = None

    def send(self, job: Job) -> int:
        """Write a job to the worker (started if needed); the worker queues it."""
        if self.process is None or self.process.poll() is not None:
            self.stop()
            self.start()
        assert self.process is not None and self.process.stdin is not None
        self.job_id += 1
        try:
            self.process.stdin.write(
                ('{"id":%d,"job":%s}\n' % (self.job_id, job.wire)).encode())
            self.process.stdin.flush()
        except OSError as error:
            raise WorkerDied(f"sandbox worker exited ({error.strerror})") from None
        return self.job_id

    def receive(self, job: Job, job_id: int) -> ExecutionResult:
        payload = job.payload
        # The worker enforces every deadline; this only catches a worker that hangs. Its
        # own backstop stretches while the machine is busy, so this one is generous.
        budget = (3 * payload["load_timeout"] + 3 * WALL_FACTOR * sum(payload["timeouts"])
                  + 30.0 + 0.05 * len(payload["steps"]))
        message = self._read_line(time.monotonic() + budget)
        if message.get("id") != job_id or not message.get("done"):
            raise WorkerDied("sandbox worker sent an unexpected message")
        steps = {m["step"]: _step_result(m) for m in message.get("steps", ())}
        ordered = tuple(steps.get(i, StepResult("error", detail="no result"))
                        for i in range(len(payload["steps"])))
        return ExecutionResult(
            steps=ordered, load_error=message.get("load_error", ""),
            load_seconds=float(message.get("load_seconds", 0.0)),
            load_cost=int(message.get("load_cost", -1)),
            stdout=message.get("stdout", ""), stderr=message.get("stderr", ""),
            isolated=self.sandbox.isolated,
        )

    def _read_line(self, deadline: float) -> dict[str, Any]:
        assert self.process is not None and self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WorkerDied("sandbox worker stopped answering")
            if not select.select([fd], [], [], remaining)[0]:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise WorkerDied("sandbox worker exited")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        try:
            return json.loads(line)
        except (ValueError, RecursionError) as error:
            raise WorkerDied(f"sandbox worker sent an unreadable message ({error})") from None


def _step_result(message: dict[str, Any]) -> StepResult:
    status, detail = message["status"], message.get("detail", "")
    try:
        records = tuple(decode_record(raw) for raw in message.get("records", ()))
    except DecodeError as error:
        status, detail, records = "error", f"unrepresentable value: {error}", ()
    return StepResult(status, records, detail, float(message.get("seconds", 0.0)),
                      int(message.get("cost", -1)), float(message.get("cpu", -1.0)))


def _stop_quietly(slot: "_Slot") -> None:
    try:
        slot.stop()
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

    def _choose_isolation(self) -> bool:
        global _warned
        if self.policy.isolation == "none":
            return False
        ok, why = bwrap_available()
        if ok:
            return True
        if self.policy.isolation == "bwrap":
            from ..errors import UserError

            raise UserError(f"sandbox isolation 'bwrap' was asked for, but {why}")
        if os.geteuid() != 0:
            _make_undumpable()
        if not _warned:
            _warned = True
            log.warning(
                "%s: candidates run WITHOUT filesystem, network and PID isolation "
                "(resource limits, scrubbed environment and process-group kill still apply). "
                "Install bubblewrap (apt-get install bubblewrap) to isolate them.", why,
            )
        return False

    def submit(self, job: Job) -> "Future[ExecutionResult]":
        future: Future[ExecutionResult] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("sandbox is closed")
            self._queue.put((job, future))
            if len(self._threads) < self.workers:
                thread = threading.Thread(
                    target=self._serve, args=(len(self._threads),), daemon=True,
                    name=f"coral-sandbox-{len(self._threads)}",
                )
                self._threads.append(thread)
                thread.start()
        return future

    def run(self, job: Job) -> ExecutionResult:
        return self.submit(job).result()

    def _serve(self, index: int) -> None:
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
            while True:
                while len(flight) < PIPELINE and not stopping:
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
            _stop_quietly(slot)

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
        for thread in self._threads:
            thread.join(timeout=30)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
