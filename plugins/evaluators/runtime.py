"""runtime: the candidate's cost against the reference solution's, on the tests it passes.

Default (`mode = "cost"`), reproducible on a quiet or a loaded machine:

    cost    = lines of Python executed loading the program and running the tests it
              passes (counted in the sandbox with a line tracer); the reference's cost
              over the same tests
    speed   = min(1, reference_cost / candidate_cost)
    runtime = speed x passed / total

A copy of the reference scores exactly 1.0; a quadratic variant of a linear reference
scores lower, by the same amount in every run. Seed 000's string heuristic measured
nothing; EvalPerf counts CPU instructions for the same reason this counts lines (these
machines offer no hardware counters through perf_event_open). A program that removes the
tracer gets no cost, and speed 0. The count is reported by the candidate's own process,
so a program written to forge it can (docs/sandbox.md, "Counting cost"): this ranks
programs written to be fast, not programs written to fool it; verdicts stay honest.

`mode = "time"` measures instead: the minimum wall time of `repeats` interleaved runs of
candidate and reference, speed = min(1, (T_reference + 1 ms) / (T_candidate + 1 ms)). It
moves with the machine's load; use it to see real time, not to rank.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coral_core.config.schema import OptionInvalid
from coral_core.hookspecs import hookimpl
from coral_core.types import Candidate, Evaluation

if TYPE_CHECKING:  # the sandbox is imported when a candidate is scored, not at start-up
    from coral_core.execution import ExecutionContext

NOISE_SECONDS = 0.001
MODES = ("cost", "time")


def cost_score(candidate_cost: int, reference_cost: int, passed: int, total: int) -> float:
    if total == 0 or passed == 0 or candidate_cost < 0 or reference_cost < 0:
        return 0.0
    speed = min(1.0, max(1, reference_cost) / max(1, candidate_cost))
    return speed * passed / total


def runtime_score(candidate_seconds: float, reference_seconds: float, passed: int,
                  total: int) -> float:
    if total == 0 or passed == 0:
        return 0.0
    speed = min(1.0, (reference_seconds + NOISE_SECONDS) / (candidate_seconds + NOISE_SECONDS))
    return speed * passed / total


class RuntimeEvaluator:
    name = "runtime"
    objectives = ("runtime",)

    def __init__(self, mode: str = "cost", repeats: int = 5):
        if mode not in MODES:
            raise OptionInvalid(("evaluators", "options", "runtime", "mode"),
                                f"[evaluators.options.runtime] mode must be one of "
                                f"{', '.join(MODES)}, got {mode!r}")
        if not isinstance(repeats, int) or not 1 <= repeats <= 100:
            raise OptionInvalid(("evaluators", "options", "runtime", "repeats"),
                                "[evaluators.options.runtime] repeats must be an integer "
                                "in [1, 100]")
        self.mode, self.repeats = mode, repeats

    def evaluate(self, candidate: Candidate, context: ExecutionContext) -> Evaluation:
        execution = context.execution(candidate)
        counts = execution.counts
        passed = [i for i, o in enumerate(execution.outcomes) if o.status == "pass"]
        if self.mode == "time":
            return self._timed(candidate, context, counts)
        if not passed:
            return Evaluation({"runtime": 0.0}, {"mode": "cost", "cost": None})
        reference_cost = context.reference_cost(candidate.task).total(passed)
        cost = context.cost(candidate, tuple(passed)).total(passed)
        if reference_cost < 0:
            return Evaluation({"runtime": 0.0}, {"mode": "cost", "cost": None,
                                                 "why": "the reference's cost was not counted"})
        score = cost_score(cost, reference_cost, counts["passed"], counts["total"])
        return Evaluation({"runtime": score}, {
            "mode": "cost", "cost": cost if cost >= 0 else None,
            "reference_cost": reference_cost,
            "seconds": round(execution.result.seconds, 6),
            **({"why": "no honest count: the program removed the line counter or hid "
                       "lines from it (a frame's line events off, a trace or profile "
                       "function, the collector's object walks, ctypes, work in threads or "
                       "processes), or a case it passed did not finish when counted"}
               if cost < 0 else {}),
        })

    def _timed(self, candidate: Candidate, context: ExecutionContext,
               counts: dict[str, int]) -> Evaluation:
        candidate_best, reference_best = context.interleaved_timings(candidate, self.repeats)
        score = runtime_score(candidate_best, reference_best, counts["passed"], counts["total"])
        return Evaluation({"runtime": score}, {
            "mode": "time", "seconds": round(candidate_best, 6),
            "reference_seconds": round(reference_best, 6), "repeats": self.repeats})


@hookimpl
def coral_register_evaluators(register):
    register("runtime", RuntimeEvaluator)
