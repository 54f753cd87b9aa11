"""syntax: 0.9 when the code parses and defines the task's entry point, else 0.0 (seed 000)."""

from __future__ import annotations

import ast

from coral_core.hookspecs import hookimpl
from coral_core.types import Candidate, Evaluation

VALID = 0.9


def syntax_valid(candidate: Candidate) -> bool:
    """Parses, and (where the task names one) defines its entry point at module level."""
    try:
        tree = ast.parse(candidate.code)
    except (SyntaxError, ValueError):
        return False
    entry = candidate.task.metadata.get("entry_point")
    if not entry:
        return bool(tree.body)
    return any(
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == entry
        for node in tree.body
    )


class SyntaxEvaluator:
    name = "syntax"
    objectives = ("syntax",)

    def evaluate(self, candidate: Candidate, context: object) -> Evaluation:
        return Evaluation({"syntax": VALID if syntax_valid(candidate) else 0.0})


@hookimpl
def coral_register_evaluators(register):
    register("syntax", SyntaxEvaluator)
