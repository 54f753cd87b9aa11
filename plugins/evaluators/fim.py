"""fim: scores a completion by the FIM metrics of `coral_core.fim.metrics` (no sandbox;
the objectives and both modes are described there and in docs/fim.md)."""

from __future__ import annotations

from typing import Any

from coral_core.errors import UserError
from coral_core.fim.metrics import OBJECTIVES, score
from coral_core.hookspecs import hookimpl
from coral_core.types import Candidate, Evaluation


class FimEvaluator:
    """Scores a completion against the task's ground truth (`task.reference`)."""

    name = "fim"
    objectives = OBJECTIVES

    def __init__(self, mode: str = "coral") -> None:
        if mode not in ("coral", "cceval"):
            raise UserError(f"fim evaluator: mode = '{mode}' (expected 'coral' or 'cceval')")
        self.mode = mode

    def evaluate(self, candidate: Candidate, context: Any) -> Evaluation:
        task = candidate.task
        language = str(task.metadata.get("language", "python"))
        values = score(candidate.code, task.reference, language, self.mode)
        return Evaluation(values, {"mode": self.mode, "prediction_chars": len(candidate.code),
                                   "groundtruth_chars": len(task.reference)})


@hookimpl
def coral_register_evaluators(register):
    register("fim", FimEvaluator)
