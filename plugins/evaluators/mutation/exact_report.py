"""A pytest plugin (`-p coral_plugins.evaluators.mutation.exact_report`) for the exact path:
the fresh `python -m pytest` that runs a mutant written on disk reports each test's outcome
to the worker over the descriptor named in CORAL_MUTATION_EVENTS_FD (the kill matrix). The
verdict itself is that process's exit status, as in `cosmic-ray exec`."""

from __future__ import annotations

import json
import os

_FD = int(os.environ.pop("CORAL_MUTATION_EVENTS_FD", "-1"))
_PID = os.getpid()
if _FD >= 0:
    try:
        os.set_inheritable(_FD, False)  # the tests' own processes do not get it
    except OSError:
        _FD = -1


def _send(message: dict) -> None:
    if _FD < 0 or os.getpid() != _PID:  # a process forked by a test does not speak for it
        return
    data = (json.dumps(message) + "\n").encode()
    try:
        while data:
            data = data[os.write(_FD, data):]
    except OSError:
        pass


def pytest_runtest_logreport(report) -> None:
    if report.failed or (report.when == "call" and report.passed):
        _send({"test": report.nodeid, "failed": bool(report.failed)})
