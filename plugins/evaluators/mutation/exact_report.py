"""A pytest plugin (`-p coral_plugins.evaluators.mutation.exact_report`) for the exact path:
the fresh `python -m pytest` that runs a mutant written on disk reports each test's outcome
to the worker over the descriptor named in CORAL_MUTATION_EVENTS_FD (the kill matrix). The
verdict itself is that process's exit status, as in `cosmic-ray exec`."""

from __future__ import annotations

import json
import os

import pytest

from coral_plugins.evaluators.mutation.hypothesis_runs import seed_option

_FD = int(os.environ.pop("CORAL_MUTATION_EVENTS_FD", "-1"))
_PID = os.getpid()
if _FD >= 0:
    try:
        os.set_inheritable(_FD, False)  # the tests' own processes do not get it
    except OSError:
        _FD = -1


_COPY = os.environ.pop("CORAL_MUTATION_COPY", "")
if _COPY:  # imports of the project's code come from the copy, whichever way they are found
    import sys

    from coral_plugins.evaluators.mutation.exact import IntoCopy, in_copy

    _PROJECT, _WHERE = json.loads(_COPY)
    sys.path[:] = [in_copy(entry, _PROJECT, _WHERE) for entry in sys.path]
    sys.meta_path.insert(0, IntoCopy(_PROJECT, _WHERE))


def _send(message: dict) -> None:
    if _FD < 0 or os.getpid() != _PID:  # a process forked by a test does not speak for it
        return
    data = (json.dumps(message) + "\n").encode()
    try:
        while data:
            data = data[os.write(_FD, data):]
    except OSError:
        pass


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config) -> None:
    seed_option(config)  # Hypothesis's examples: the worker's, every run


def pytest_runtest_logreport(report) -> None:
    if report.failed or (report.when == "call" and report.passed):
        _send({"test": report.nodeid, "failed": bool(report.failed)})
