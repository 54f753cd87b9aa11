"""Whether a test file tells a version of the program (the buggy one, a mutant) apart from
the correct one, judged from its runs.

Every run of a file runs the same sequence of tests as its run on the correct program (so
what one test leaves behind for the next is the same), each with a CPU budget from its own
time on the correct program, and stops at the first test that passed there and does not
pass now: that test told the versions apart (as cosmic-ray's `pytest -x`: a failure, an
error or a timeout kills a mutant). A run whose sequence of tests differs, or that fails to
load or collect, tells the versions apart only if the version changes code that runs while
loading (module-level code, or code the import or collection executed); otherwise the
difference is the file's own doing (random test ids, work at import near a limit) and
earns nothing.
"""

from __future__ import annotations

from typing import Any

from .mutants import Variant
from .suite import SuiteRun

BUDGET_FLOOR = 0.2  # CPU seconds: the least a test gets on the buggy program or a mutant
LOADING = "(loading)"


class Judge:
    def __init__(self, correct: SuiteRun, test_timeout: float, factor: float,
                 suite_timeout: float, loading: frozenset[int]):
        self.sequence = [t.name for t in correct.tests]
        self.green = [t.status == "pass" for t in correct.tests]
        self.budgets = [min(test_timeout, max(BUDGET_FLOOR, factor * t.cpu))
                        for t in correct.tests]
        self.timeout = min(suite_timeout, max(2.0, factor * correct.cpu + 1.0))
        self.test_timeout = test_timeout
        self.loading = loading

    def options(self) -> dict[str, Any]:
        """How to run the file on another version of the program."""
        return {"budgets": self.budgets, "stop_on": self.green, "budget": self.test_timeout,
                "timeout": self.timeout}

    def changes_loading(self, variant: Variant) -> bool:
        return not variant.in_function or bool(variant.lines & self.loading)

    def unseen(self, variant: Variant, reached: set[int]) -> bool:
        """No passing test executes its lines, and loading is unchanged: it cannot differ."""
        return not self.changes_loading(variant) and not variant.lines & reached

    def told_apart(self, run: SuiteRun, variant: Variant) -> str | None:
        """The test that told `variant` from the correct program (LOADING when loading or
        collecting did), or None."""
        at_loading = LOADING if self.changes_loading(variant) else None
        if not run.loaded or run.collected is None:
            return at_loading
        if run.collected != len(self.sequence):
            return at_loading
        for index, test in enumerate(run.tests):
            if index >= len(self.sequence) or test.name != self.sequence[index]:
                return at_loading
            if self.green[index] and test.status in ("fail", "timeout", "error"):
                return test.name
        if run.finished or not run.error:
            return None
        index = len(run.tests)  # cut short (time, memory, a crash) while this test ran
        if index < len(self.sequence) and self.green[index]:
            return self.sequence[index]
        return None
