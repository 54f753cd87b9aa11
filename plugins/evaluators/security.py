"""security: bandit, run by the sandbox's analysis workers, with Coral's check for the calls
bandit cannot see (names built at run time: coral_core/sandbox/inside/hidden_calls.py,
medium severity).

1.0 - 0.3 x high-severity issues - 0.1 x medium-severity issues, clamped to [0, 1]. bandit
ignores `# nosec` (ignore_nosec) and reads the text Python runs (a coding declaration cannot
hide the program from it). A program bandit cannot scan (it crashed, or skipped the file)
gets 0.0, the worst score, never the best; see coral_core/sandbox/analysis.py.
"""

from __future__ import annotations

from coral_core.hookspecs import hookimpl
from coral_core.types import Candidate, Evaluation

WORST = 0.0


def security_score(high: int, medium: int) -> float:
    return min(1.0, max(0.0, 1.0 - 0.3 * high - 0.1 * medium))


class SecurityEvaluator:
    name = "security"
    objectives = ("security",)

    def evaluate(self, candidate: Candidate, context: object) -> Evaluation:
        from coral_core.sandbox import analyzer_for  # the sandbox when scoring

        reply = analyzer_for(context).ask("bandit", candidate.code)
        if "error" in reply:
            return Evaluation({"security": WORST}, {"high": None, "medium": None, "low": None,
                                                    "tests": [], "error": reply["error"]})
        high, medium = reply["high"], reply["medium"]
        return Evaluation({"security": security_score(high, medium)},
                          {"high": high, "medium": medium, "low": reply["low"],
                           "tests": reply["tests"]})


@hookimpl
def coral_register_evaluators(register):
    register("security", SecurityEvaluator)
