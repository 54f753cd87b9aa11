"""bugfix: the fraction of the task's tests the candidate passes.

All tests passed -> 1.0; some -> passed / total; none -> 0.2 if the code parses and
defines the entry point, else 0.0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coral_core.hookspecs import hookimpl
from coral_core.types import Candidate, Evaluation

if TYPE_CHECKING:  # the sandbox is imported when a candidate is scored, not at start-up
    from coral_core.execution import ExecutionContext


class TestsEvaluator:
    name = "tests"
    objectives = ("bugfix",)
    __test__ = False  # not a pytest class

    def evaluate(self, candidate: Candidate, context: ExecutionContext) -> Evaluation:
        execution = context.execution(candidate)
        counts = execution.counts
        if counts["total"] and counts["passed"] == counts["total"]:
            score = 1.0
        elif counts["passed"]:
            score = counts["passed"] / counts["total"]
        else:
            from coral_core.sandbox import syntax_valid

            score = 0.2 if syntax_valid(candidate, context) else 0.0
        details = {
            "tests": counts,
            "outcomes": [{"test": o.name, "status": o.status, "detail": o.detail}
                         for o in execution.outcomes],
            "load_error": execution.result.load_error,
            "isolated": execution.result.isolated,
        }
        return Evaluation({"bugfix": score}, details)


@hookimpl
def coral_register_evaluators(register):
    register("tests", TestsEvaluator)
