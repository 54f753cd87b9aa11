"""style: flake8 through its Python API (seed 000's formula).

No violation -> 0.97; else max(0, 0.8 - 0.05 x violations). flake8 runs isolated from any
configuration file, so the score does not depend on the folder Coral runs in.
"""

from __future__ import annotations

import os
import tempfile
import threading

from coral_core.hookspecs import hookimpl
from coral_core.types import Candidate, Evaluation

CLEAN = 0.97


def style_score(violations: int) -> float:
    return CLEAN if violations == 0 else max(0.0, 0.8 - 0.05 * violations)


class StyleEvaluator:
    name = "style"
    objectives = ("style",)

    def __init__(self, max_line_length: int = 79, select: list[str] | None = None):
        self.options = {"max_line_length": max_line_length, "isolated": True, "quiet": 2}
        if select:
            self.options["select"] = list(select)
        self._lock = threading.Lock()
        self._guide = None
        self._totals: dict[str, int] = {}
        self._scratch = tempfile.TemporaryDirectory(prefix="coral-style-")  # removed with us
        self._dir = self._scratch.name

    def _style_guide(self):
        if self._guide is None:
            from flake8.api import legacy

            self._guide = legacy.get_style_guide(**self.options)
        return self._guide

    def evaluate(self, candidate: Candidate, context: object) -> Evaluation:
        path = os.path.join(self._dir, f"{candidate.task.id}.py")
        with self._lock:  # flake8's application object is not thread-safe
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(candidate.code)
            report = self._style_guide().check_files([path])
            totals = _totals(report.get_statistics(""))
            codes = sorted(c for c, n in totals.items() if n > self._totals.get(c, 0))
            self._totals = totals
            count = report.total_errors  # read under the lock: the next check resets it
        return Evaluation({"style": style_score(count)}, {"violations": count, "codes": codes[:20]})


def _totals(lines: list[str]) -> dict[str, int]:
    """flake8's statistics lines ("COUNT CODE message") accumulate across checks."""
    totals: dict[str, int] = {}
    for line in lines:
        count, code = line.split(" ", 2)[:2]
        totals[code] = totals.get(code, 0) + int(count)
    return totals


@hookimpl
def coral_register_evaluators(register):
    register("style", StyleEvaluator)
