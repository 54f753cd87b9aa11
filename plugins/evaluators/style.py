"""style: flake8, run by the sandbox's analysis workers.

No violation -> 0.97; else max(0, 0.8 - 0.05 x violations). flake8 runs isolated from any
configuration file, so the score does not depend on the folder Coral runs in, and ignores
`# noqa` directives (disable_noqa), so a candidate cannot silence its own violations. It
runs out of this process (coral_core/sandbox/analysis.py): code that crashes, stalls or
floods flake8 gets 0.0, the worst score, and nothing it prints reaches our stdout.
"""

from __future__ import annotations

from coral_core.config.schema import OptionInvalid
from coral_core.hookspecs import hookimpl
from coral_core.types import Candidate, Evaluation

CLEAN = 0.97
WORST = 0.0


def style_score(violations: int) -> float:
    return CLEAN if violations == 0 else max(0.0, 0.8 - 0.05 * violations)


class StyleEvaluator:
    name = "style"
    objectives = ("style",)

    def __init__(self, max_line_length: int = 79, select: list[str] | None = None):
        if type(max_line_length) is not int or max_line_length < 1:
            raise OptionInvalid(("evaluators", "options", "style", "max_line_length"),
                                "[evaluators.options.style] max_line_length must be a "
                                "positive integer")
        if select is not None and (not isinstance(select, list)
                                   or not all(isinstance(code, str) for code in select)):
            raise OptionInvalid(("evaluators", "options", "style", "select"),
                                "[evaluators.options.style] select must be a list of codes")
        self.options: dict[str, object] = {"max_line_length": max_line_length}
        if select:
            self.options["select"] = list(select)

    def evaluate(self, candidate: Candidate, context: object) -> Evaluation:
        from coral_core.sandbox import analyzer_for  # the sandbox when scoring

        reply = analyzer_for(context).ask("flake8", candidate.code, self.options)
        if "error" in reply:
            return Evaluation({"style": WORST}, {"violations": None, "codes": [],
                                                 "error": reply["error"]})
        count = reply["violations"]
        return Evaluation({"style": style_score(count)},
                          {"violations": count, "codes": reply["codes"][:20]})


@hookimpl
def coral_register_evaluators(register):
    register("style", StyleEvaluator)
