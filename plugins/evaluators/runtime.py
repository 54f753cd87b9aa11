"""runtime: measured speed against the reference solution, on the tests the candidate passes.

    speed   = min(1, (T_reference + 1 ms) / (T_candidate + 1 ms))
    runtime = speed x passed / total

T is the wall time of loading the program plus running every test, measured by the sandbox
worker around each step (the candidate cannot fake it), with the reference timed as the
median of three runs. The 1 ms term keeps timer noise on microsecond programs from
dominating; scaling by the pass rate keeps a fast wrong answer from scoring well.
"""

from __future__ import annotations

from coral_core.execution import ExecutionContext
from coral_core.hookspecs import hookimpl
from coral_core.types import Candidate, Evaluation

NOISE_SECONDS = 0.001


def runtime_score(candidate_seconds: float, reference_seconds: float, passed: int,
                  total: int) -> float:
    if total == 0 or passed == 0:
        return 0.0
    speed = min(1.0, (reference_seconds + NOISE_SECONDS) / (candidate_seconds + NOISE_SECONDS))
    return speed * passed / total


class RuntimeEvaluator:
    name = "runtime"
    objectives = ("runtime",)

    def evaluate(self, candidate: Candidate, context: ExecutionContext) -> Evaluation:
        execution = context.execution(candidate)
        reference = context.reference(candidate.task)
        counts = execution.counts
        seconds = execution.result.seconds
        score = runtime_score(seconds, reference.seconds, counts["passed"], counts["total"])
        return Evaluation({"runtime": score}, {"seconds": round(seconds, 6),
                                               "reference_seconds": round(reference.seconds, 6)})


@hookimpl
def coral_register_evaluators(register):
    register("runtime", RuntimeEvaluator)
