"""Work shared by evaluators: running a candidate's tests once, and the reference's timing."""

from __future__ import annotations

import hashlib
import statistics
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Callable, TypeVar

from .verdicts import Outcome, judge_case, tally
from .errors import UserError
from .sandbox import ExecutionResult, JobTemplate, Sandbox, SandboxPolicy
from .types import Candidate, Task

T = TypeVar("T")


def code_digest(code: str) -> str:
    return hashlib.sha256(code.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Execution:
    """A candidate's run against its task's tests, judged in the parent."""

    result: ExecutionResult
    outcomes: tuple[Outcome, ...]

    @property
    def counts(self) -> dict[str, int]:
        return tally(list(self.outcomes))

    @property
    def passed(self) -> bool:
        return bool(self.outcomes) and all(o.status == "pass" for o in self.outcomes)


@dataclass(frozen=True)
class ReferenceTiming:
    seconds: float
    step_seconds: tuple[float, ...]


class ExecutionContext:
    """Caches executions by content, so identical candidates run once.

    timeout_factor > 0 makes each test's timeout relative to the reference solution's
    time for that test: min(policy.timeout, max(timeout_floor, factor x reference)).
    """

    REFERENCE_RUNS = 3

    def __init__(
        self, sandbox: Sandbox, *, timeout_factor: float = 0.0, timeout_floor: float = 0.25,
    ):
        self.sandbox = sandbox
        self.policy: SandboxPolicy = sandbox.policy
        self.timeout_factor = timeout_factor
        self.timeout_floor = timeout_floor
        self._lock = threading.Lock()
        self._futures: dict[tuple[str, ...], Future] = {}
        self._reference_sandbox: Sandbox | None = None
        self._templates: dict[tuple[object, ...], JobTemplate] = {}

    def _once(self, key: tuple[str, ...], compute: Callable[[], T]) -> T:
        """Compute `key` once, whichever thread asks first; others wait for it."""
        with self._lock:
            future = self._futures.get(key)
            owner = future is None
            if owner:
                future = self._futures[key] = Future()
        if owner:
            try:
                future.set_result(compute())
            except BaseException as error:
                future.set_exception(error)
        return future.result()

    def _run(self, task: Task, code: str, timeouts: list[float] | None,
             sandbox: Sandbox | None = None) -> ExecutionResult:
        if task.execution is None:
            raise UserError(f"task '{task.id}' of {task.dataset} has no executable tests")
        key = (task.dataset, task.id, tuple(timeouts) if timeouts else None)
        with self._lock:
            template = self._templates.get(key)
            if template is None:
                template = self._templates[key] = JobTemplate(task.execution, self.policy,
                                                              timeouts)
        return (sandbox or self.sandbox).run(template.job(code))

    def _references(self) -> Sandbox:
        """Reference solutions run in a sandbox of their own: a worker's memory outlives
        its jobs, and a candidate forked from it must never find the fix there."""
        with self._lock:
            if self._reference_sandbox is None:
                self._reference_sandbox = Sandbox(self.policy, workers=1)
            return self._reference_sandbox

    def close(self) -> None:
        with self._lock:
            sandbox, self._reference_sandbox = self._reference_sandbox, None
        if sandbox is not None:
            sandbox.close()

    def reference(self, task: Task) -> ReferenceTiming:
        """Median of a few runs of the reference solution, once per context."""
        def measure() -> ReferenceTiming:
            sandbox = self._references()
            runs = [self._run(task, task.reference, None, sandbox)
                    for _ in range(self.REFERENCE_RUNS)]
            steps = tuple(
                statistics.median(run.steps[i].seconds for run in runs)
                for i in range(len(runs[0].steps))
            )
            timing = ReferenceTiming(statistics.median(run.seconds for run in runs), steps)
            return timing

        return self._once(("reference", task.dataset, task.id), measure)

    def timeouts(self, task: Task) -> list[float] | None:
        if self.timeout_factor <= 0:
            return None
        reference = self.reference(task)
        return [
            min(self.policy.timeout, max(self.timeout_floor, self.timeout_factor * seconds))
            for seconds in reference.step_seconds
        ]

    def execution(self, candidate: Candidate) -> Execution:
        task = candidate.task

        def run() -> Execution:
            result = self._run(task, candidate.code, self.timeouts(task))
            assert task.execution is not None
            outcomes = tuple(judge_case(c, s) for c, s in zip(task.execution.cases, result.steps))
            return Execution(result, outcomes)

        return self._once(("execution", task.dataset, task.id, code_digest(candidate.code)), run)
