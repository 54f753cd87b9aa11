"""syntax: 0.9 when the code parses and defines the task's entry point, else 0.0.

The code is parsed by the sandbox's analysis workers, never in this process: a deep
expression that makes the parser raise or crash costs a worker and scores 0.0.
"""

from __future__ import annotations

from coral_core.hookspecs import hookimpl
from coral_core.types import Candidate, Evaluation

VALID = 0.9


class SyntaxEvaluator:
    name = "syntax"
    objectives = ("syntax",)

    def evaluate(self, candidate: Candidate, context: object) -> Evaluation:
        from coral_core.sandbox import syntax_valid  # the sandbox when scoring, not at start-up

        return Evaluation({"syntax": VALID if syntax_valid(candidate, context) else 0.0})


@hookimpl
def coral_register_evaluators(register):
    register("syntax", SyntaxEvaluator)
