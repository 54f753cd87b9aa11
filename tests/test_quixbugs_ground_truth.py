"""All 80 upstream programs, scored by Coral and by the upstream pytest suite in the same test.

Every correct program passes all its tests, every buggy one fails at least one, and the
per-problem pass counts equal those of `pytest python_testcases` (CPU time per test: 5 s for
the correct programs, 1 s for the buggy ones; slow cases skipped) on the same copy of the data.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from collections import Counter
from pathlib import Path

import pytest

from coral_core.scoring.verdicts import judge_case
from coral_core.sandbox import Job, Sandbox, SandboxPolicy
from coral_plugins.datasets.quixbugs import QuixBugs


# Upstream's per-test timeout, in CPU time as Coral's is (pytest-timeout counts wall-clock
# time, which a busy machine stretches: a correct levenshtein test takes 2 s of CPU). The
# buggy programs get less: 17 of their tests loop, each costing both sides its limit, and
# the slowest buggy test that passes takes 0.03 s (the slowest that ends, 1.8 s, fails
# whichever way it ends): 1 s gives the verdicts of 5 s (each test's, 2026-11-29).
CORRECT_SECONDS, BUGGY_SECONDS = 5.0, 1.0
CPU_TIMEOUT_PLUGIN = """
import os
import signal

import pytest


class CPUTimeout(Exception):
    pass


LIMIT = float(os.environ["CORAL_TEST_CPU_SECONDS"])


def _expired(signum, frame):
    raise CPUTimeout("more than %g s of CPU time" % LIMIT)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    signal.signal(signal.SIGPROF, _expired)
    signal.setitimer(signal.ITIMER_PROF, LIMIT)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
"""


def _upstream(copy: Path, correct: bool) -> subprocess.Popen:
    report = copy / ("correct.xml" if correct else "buggy.xml")
    plugins = copy.parent / "plugins"
    plugins.mkdir(exist_ok=True)
    (plugins / "cpu_timeout.py").write_text(CPU_TIMEOUT_PLUGIN)
    command = [sys.executable, "-m", "pytest", "python_testcases", "-q", "-p", "no:cacheprovider",
               "-p", "no:timeout", "-p", "cpu_timeout", f"--junitxml={report}"]
    command += ["--correct"] if correct else []
    return subprocess.Popen(command, cwd=copy, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1",
                                 "PYTHONPATH": str(plugins), "CORAL_TEST_CPU_SECONDS": str(
                                     CORRECT_SECONDS if correct else BUGGY_SECONDS)})


def _passes(report: Path) -> Counter:
    counts: Counter = Counter()
    for case in ElementTree.parse(report).iter("testcase"):
        problem = case.get("classname", "").rsplit(".", 1)[-1].removeprefix("test_")
        if not any(child.tag in ("failure", "error", "skipped") for child in case):
            counts[problem] += 1
    return counts


@pytest.mark.slow
def test_every_upstream_program_scores_as_upstream_pytest_does(tmp_path, data_dir):
    copy = tmp_path / "quixbugs"
    shutil.copytree(data_dir / "quixbugs", copy)
    # Both count CPU time, so the machine's load changes neither's verdicts.
    assert _upstream(copy, correct=True).wait(timeout=1800) == 0
    upstream = _upstream(copy, correct=False)

    dataset = QuixBugs(data_dir=str(data_dir))
    tasks = dataset.tasks("all")
    assert len(tasks) == 40
    policies = {"buggy": SandboxPolicy(timeout=BUGGY_SECONDS),
                "correct": SandboxPolicy(timeout=CORRECT_SECONDS)}
    coral: dict[str, Counter] = {"buggy": Counter(), "correct": Counter()}
    with Sandbox(policies["correct"], workers=1) as sandbox:
        jobs = [(task, kind, sandbox.submit(Job.build(task.execution, code, policies[kind])))
                for task in tasks for kind, code in (("buggy", task.source),
                                                     ("correct", task.reference))]
        for task, kind, future in jobs:
            result = future.result()
            outcomes = [judge_case(c, s) for c, s in zip(task.execution.cases, result.steps)]
            passed = sum(o.status == "pass" for o in outcomes)
            coral[kind][task.id] = passed
            if kind == "correct":
                failures = [o for o in outcomes if o.status != "pass"]
                assert passed == len(outcomes), (task.id, failures)
            else:
                assert passed < len(outcomes), f"buggy {task.id} passes every test"

    assert upstream.wait(timeout=1800) == 1  # the buggy programs fail
    assert sum(len(t.execution.cases) for t in tasks) == 276
    for kind, report in (("buggy", copy / "buggy.xml"), ("correct", copy / "correct.xml")):
        expected = _passes(report)
        for task in tasks:
            assert coral[kind][task.id] == expected[task.id], (kind, task.id)
