"""fim_tests: an infilling completion put back into its program and run against the
program's tests in the sandbox (FIM tasks with `source = "quixbugs"`, or any data set whose
FIM tasks carry an execution spec).

infill_pass is the fraction of the tests the reassembled program passes (1.0: all of them,
which is what a task's success and pass@k count); a completion that breaks the program's
syntax scores 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coral_core.errors import UserError
from coral_core.hookspecs import hookimpl
from coral_core.types import Candidate, Evaluation

if TYPE_CHECKING:  # the sandbox is imported when a candidate is scored, not at start-up
    from coral_core.execution import ExecutionContext


class FimTestsEvaluator:
    name = "fim_tests"
    objectives = ("infill_pass",)
    __test__ = False

    def evaluate(self, candidate: Candidate, context: ExecutionContext) -> Evaluation:
        task = candidate.task
        if task.execution is None or task.prompt.kind != "infill":
            raise UserError(f"the fim_tests evaluator runs infilling tasks that have tests; "
                            f"task '{task.id}' of {task.dataset} has none (use "
                            "[dataset.options] source = \"quixbugs\")")
        program = f"{task.prompt.prefix or ''}{candidate.code}{task.prompt.suffix or ''}"
        execution = context.execution(Candidate(task, program, candidate.label))
        counts = execution.counts
        score = counts["passed"] / counts["total"] if counts["total"] else 0.0
        return Evaluation({"infill_pass": score}, {
            "tests": counts, "load_error": execution.result.load_error,
            "failing": [[o.name, o.status, o.detail] for o in execution.outcomes
                        if o.status != "pass"][:10]})


@hookimpl
def coral_register_evaluators(register):
    register("fim_tests", FimTestsEvaluator)
