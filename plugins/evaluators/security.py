"""security: bandit through its Python API (seed 000's formula).

1.0 - 0.3 x high-severity issues - 0.1 x medium-severity issues, clamped to [0, 1].
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import warnings

from coral_core.hookspecs import hookimpl
from coral_core.types import Candidate, Evaluation


def security_score(high: int, medium: int) -> float:
    return min(1.0, max(0.0, 1.0 - 0.3 * high - 0.1 * medium))


class SecurityEvaluator:
    name = "security"
    objectives = ("security",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._config = None
        self._scratch = tempfile.TemporaryDirectory(prefix="coral-security-")  # removed with us
        self._dir = self._scratch.name

    def evaluate(self, candidate: Candidate, context: object) -> Evaluation:
        for name in ("bandit", "stevedore"):  # optional report formatters it cannot load
            logging.getLogger(name).setLevel(logging.CRITICAL)
        with warnings.catch_warnings():  # stevedore's deprecation notices, not ours
            warnings.simplefilter("ignore", DeprecationWarning)
            from bandit.core import config, manager

        path = os.path.join(self._dir, f"{candidate.task.id}.py")
        with self._lock:
            if self._config is None:
                self._config = config.BanditConfig()
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(candidate.code)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                bandit = manager.BanditManager(self._config, "file", quiet=True)
            bandit.discover_files([path])
            bandit.run_tests()
            issues = bandit.get_issue_list()
        high = sum(1 for issue in issues if issue.severity == "HIGH")
        medium = sum(1 for issue in issues if issue.severity == "MEDIUM")
        tests = sorted({issue.test_id for issue in issues})
        return Evaluation({"security": security_score(high, medium)},
                          {"high": high, "medium": medium, "low": len(issues) - high - medium,
                           "tests": tests})


@hookimpl
def coral_register_evaluators(register):
    register("security", SecurityEvaluator)
