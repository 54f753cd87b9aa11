"""Work shared by evaluators: running a candidate's tests once, and the reference's timing."""

from __future__ import annotations

import hashlib
import statistics
import threading
from dataclasses import dataclass, replace
from typing import Callable, Mapping, Sequence, TypeVar

from coral_core.scoring.verdicts import Outcome, judge_case, tally
from coral_core.errors import UserError
from coral_core.once import Once
from coral_core.sandbox import ExecutionResult, JobTemplate, Sandbox, SandboxPolicy, StepResult
from coral_core.types import Candidate, Task

T = TypeVar("T")

# A traced run (counting lines) is several times slower than a plain one: it gets this many
# times the plain timeouts, at most TRACED_CAP seconds of CPU time per case.
TRACED_FACTOR = 20.0
TRACED_CAP = 120.0


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


def _cpu(step: StepResult) -> float:
    return step.cpu if step.cpu >= 0 else step.seconds


@dataclass(frozen=True)
class ReferenceTiming:
    """The reference solution's wall time and each step's CPU time (medians of runs)."""

    seconds: float
    step_seconds: tuple[float, ...]


@dataclass(frozen=True)
class Cost:
    """Lines executed loading a program and in each counted case; -1 where no honest count
    exists (the program removed the counter, or the case did not finish)."""

    load: int
    steps: Mapping[int, int]

    def total(self, steps: Sequence[int]) -> int:
        values = [self.load, *(self.steps.get(i, -1) for i in steps)]
        return -1 if any(v < 0 for v in values) else sum(values)


class ExecutionContext:
    """Caches executions by content, so identical candidates run once.

    timeout_factor > 0 makes each test's timeout relative to the reference solution's
    CPU time for that test: min(policy.timeout, max(timeout_floor, factor x reference)).
    `cost(candidate)` counts the lines a candidate executes (the deterministic cost the
    runtime objective compares) in a run of its own: a line tracer slows a program several
    times, and must never turn a pass into a timeout, so verdicts come from untraced runs.
    """

    REFERENCE_RUNS = 3

    def __init__(
        self, sandbox: Sandbox, *, timeout_factor: float = 0.0, timeout_floor: float = 0.25,
        count_cost: bool = False,
    ):
        self.sandbox = sandbox
        self.policy: SandboxPolicy = sandbox.policy
        self.timeout_factor = timeout_factor
        self.timeout_floor = timeout_floor
        self._lock = threading.Lock()
        self._computed: Once = Once()
        self._reference_sandbox: Sandbox | None = None
        self._preloaded: dict[tuple, Sandbox] = {}
        self._templates: dict[tuple[object, ...], JobTemplate] = {}

    def _once(self, key: tuple[str, ...], compute: Callable[[], T]) -> T:
        """Compute `key` once, whichever thread asks first; others wait for it."""
        return self._computed.get(key, compute)

    def _run(self, task: Task, code: str, timeouts: list[float] | None,
             sandbox: Sandbox | None = None, steps: tuple[int, ...] | None = None,
             count: bool = False) -> ExecutionResult:
        """Run `code` on the task's cases (or the cases numbered `steps`)."""
        if task.execution is None:
            raise UserError(f"task '{task.id}' of {task.dataset} has no executable tests")
        key = (task.dataset, task.id, tuple(timeouts) if timeouts else None, steps, count)
        with self._lock:
            template = self._templates.get(key)
            if template is None:
                spec = task.execution
                if steps is not None:
                    spec = replace(spec, cases=tuple(spec.cases[i] for i in steps))
                template = self._templates[key] = JobTemplate(spec, self.policy, timeouts, count)
        return (sandbox or self.sandbox).run(template.job(code))

    def _references(self) -> Sandbox:
        """Reference solutions run in a sandbox of their own: a worker's memory outlives
        its jobs, and a candidate forked from it must never find the fix there."""
        with self._lock:
            if self._reference_sandbox is None:
                self._reference_sandbox = Sandbox(self.policy, workers=1)
            return self._reference_sandbox

    def preloaded(self, modules: tuple[str, ...],
                  sources: tuple[tuple[str, str], ...] = ()) -> Sandbox:
        """A sandbox like this context's whose workers import `modules` (and load the
        `sources` modules) before their first job (started on first use, as many slots as
        the main one, closed with it)."""
        with self._lock:
            sandbox = self._preloaded.get((modules, sources))
            if sandbox is None:
                policy = replace(self.policy, preload=modules, preload_sources=sources)
                sandbox = Sandbox(policy, workers=self.sandbox.workers)
                self._preloaded[(modules, sources)] = sandbox
            return sandbox

    def close(self) -> None:
        with self._lock:
            sandboxes = [self._reference_sandbox, *self._preloaded.values()]
            self._reference_sandbox, self._preloaded = None, {}
        for sandbox in sandboxes:
            if sandbox is not None:
                sandbox.close()

    def reference(self, task: Task) -> ReferenceTiming:
        """Medians over a few untraced runs of the reference solution, once per context.
        Step times are CPU times (a busy machine does not stretch them), where reported."""
        def measure() -> ReferenceTiming:
            sandbox = self._references()
            runs = [self._run(task, task.reference, None, sandbox)
                    for _ in range(self.REFERENCE_RUNS)]
            steps = tuple(statistics.median(_cpu(run.steps[i]) for run in runs)
                          for i in range(len(runs[0].steps)))
            return ReferenceTiming(statistics.median(run.seconds for run in runs), steps)

        return self._once(("reference", task.dataset, task.id), measure)

    def _traced_timeouts(self, task: Task, steps: tuple[int, ...]) -> list[float]:
        plain = self.timeouts(task) or [self.policy.timeout] * len(task.execution.cases)
        return [min(TRACED_CAP, TRACED_FACTOR * plain[i]) for i in steps]

    def reference_cost(self, task: Task) -> Cost:
        """The reference solution's lines, loading and per case (one traced run: the count
        is deterministic)."""
        def count() -> Cost:
            assert task.execution is not None
            steps = tuple(range(len(task.execution.cases)))
            result = self._run(task, task.reference, self._traced_timeouts(task, steps),
                               self._references(), steps, count=True)
            return Cost(result.load_cost, {i: s.cost for i, s in zip(steps, result.steps)})

        return self._once(("reference-cost", task.dataset, task.id), count)

    def cost(self, candidate: Candidate, steps: tuple[int, ...]) -> Cost:
        """The candidate's lines, loading and on the cases numbered `steps` (those it
        passed), in a traced run with TRACED_FACTOR times the usual timeouts."""
        task = candidate.task

        def count() -> Cost:
            result = self._run(task, candidate.code, self._traced_timeouts(task, steps),
                               steps=steps, count=True)
            costs = {i: s.cost if s.status == "ok" else -1 for i, s in zip(steps, result.steps)}
            return Cost(result.load_cost, costs)

        return self._once(("cost", task.dataset, task.id, code_digest(candidate.code),
                           ",".join(map(str, steps))), count)

    def interleaved_timings(self, candidate: Candidate, repeats: int) -> tuple[float, float]:
        """Minimum wall seconds of the candidate and of the reference over `repeats` runs
        taken in turn (candidate, reference, ...), so a burst of load hits both alike."""
        task = candidate.task
        timeouts = self.timeouts(task)
        references = self._references()
        ours, theirs = [], []
        for _ in range(repeats):
            ours.append(self._run(task, candidate.code, timeouts).seconds)
            theirs.append(self._run(task, task.reference, None, references).seconds)
        return min(ours), min(theirs)

    def timeouts(self, task: Task) -> list[float] | None:
        if self.timeout_factor <= 0:
            return None
        self.sandbox.warm()  # its worker starts while the reference runs
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
