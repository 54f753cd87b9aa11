"""syntax: 0.9 when the code parses and defines the task's entry point, else 0.0 (seed 000).

The code is parsed by the sandbox's analysis workers, never in this process: a deep
expression that makes the parser raise or crash costs a worker and scores 0.0.
"""

from __future__ import annotations

from coral_core.hookspecs import hookimpl
from coral_core.sandbox import analyzer_for
from coral_core.types import Candidate, Evaluation

VALID = 0.9


def syntax_valid(candidate: Candidate, context: object = None) -> bool:
    """Parses, and (where the task names one) defines its entry point at module level."""
    reply = analyzer_for(context).ask("parse", candidate.code)
    if "error" in reply or not reply["parses"]:
        return False
    entry = candidate.task.metadata.get("entry_point")
    if not entry:
        return reply["statements"] > 0
    return entry in reply["functions"]


class SyntaxEvaluator:
    name = "syntax"
    objectives = ("syntax",)

    def evaluate(self, candidate: Candidate, context: object) -> Evaluation:
        return Evaluation({"syntax": VALID if syntax_valid(candidate, context) else 0.0})


@hookimpl
def coral_register_evaluators(register):
    register("syntax", SyntaxEvaluator)
