"""Running a model-written test file against one version of a program, in the sandbox.

Each run is a hosted job of its own (a fresh fork of a clean worker, then two processes):
the test file runs in one (inside/tests_side.py), where the program is a module of call
proxies (inside/proxy.py); the program version (the correct one, the buggy one, or a
mutant) is loaded only in the other (inside/host.py), from the job's private part, with
the run's private settings. The test file's process is given the same thing in every run
of the file: only the program's answers differ. Nothing of one run reaches the next, so a
test file that edits the proxies, or keeps state, fools only the run it is in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from coral_core.hosted import source_of
from coral_core.scoring.program_tests import Case, ExecutionSpec, Step
from coral_core.sandbox import JobTemplate, Sandbox, SandboxPolicy

INSIDE = Path(__file__).with_name("inside")
TESTS_SIDE, HOST = "coral_testgen_tests_side", "coral_testgen_host"
PRELOAD = ("pytest", "coverage")
# The harness, loaded once by each worker (`Sandbox(harness_policy(...))`); a run in any
# other sandbox sends it along and pays for compiling it.
# The codec is the core's (coral_core/hosted), shared with other two-process harnesses.
SOURCES = (("coral_testgen_codec", source_of("codec")),
           *((f"coral_testgen_{name}", (INSIDE / f"{name}.py").read_text(encoding="utf-8"))
             for name in ("proxy", "collection", "host", "tests_side")))
STATUSES = ("pass", "fail", "timeout", "error", "skip")
MAX_TESTS = 500
# CPU seconds the sandbox's own limit lies beyond a run's: the program's process, whose
# accounting names the test that ran out, ends an overlong run first, whatever the load.
BACKSTOP = 1.0
# Seconds a run's tests' process may spend asleep or stopped, in all (inside/host.py): no
# CPU budget ends a test that sleeps, and the wall-clock limit is minutes.
IDLE = 2.0


@dataclass(frozen=True)
class TestResult:
    name: str
    status: str
    cpu: float = 0.0
    detail: str = ""

    __test__ = False  # not a pytest class


@dataclass(frozen=True)
class SuiteRun:
    """One run of a test file: the tests that finished, in order; whether the run got to
    its end (`finished`) or stopped early on purpose (`stopped`); in coverage mode, per
    line of the program, the tests that executed it ("" = while loading); `error` when
    the file did not load, the run was cut short, or its record was not the harness's."""

    tests: tuple[TestResult, ...] = ()
    lines: Mapping[int, tuple[str, ...]] | None = None
    error: str = ""
    finished: bool = False
    loaded: bool = True
    cpu: float = 0.0
    collected: int | None = None
    stdout: str = field(default="", repr=False)

    def counted(self) -> list[TestResult]:
        return [t for t in self.tests if t.status != "skip"]

    def passed(self) -> list[str]:
        return [t.name for t in self.tests if t.status == "pass"]


def harness_policy(policy: SandboxPolicy) -> SandboxPolicy:
    """`policy` with the harness and what it needs loaded in every worker."""
    return replace(policy, preload=PRELOAD, preload_sources=SOURCES)


def _setup(module: str) -> str:
    return ("import sys as _sys\n"
            "def run():\n"
            f"    _sys.modules[{TESTS_SIDE!r}].run(_sys.modules[{module!r}])\n")


def run_suite(sandbox: Sandbox, code: str, program: tuple[str, str],
              support: Sequence[tuple[str, str]] = (), *, coverage: bool = False,
              budgets: Sequence[float] = (), stop_on: Sequence[bool] = (),
              budget: float = 2.0, timeout: float = 30.0,
              ceiling: float | None = None, seed: int = 0) -> SuiteRun:
    """Run the test file `code` against `program` = (module name, source): every test in
    order, the i-th with CPU budget `budgets[i]` (else `budget`), stopping after the i-th
    if `stop_on[i]` and it did not pass; the run as a whole gets `timeout` CPU seconds.
    `ceiling` (the sandbox's own limit is BACKSTOP beyond it; default `timeout`) and
    `seed` (of `random` in the tests' process) must be the same for every run of a file:
    the test file's process can see them."""
    name, source = program
    tests_config = {"program": name, "budget": budget, "limit": MAX_TESTS, "seed": seed}
    # Every run measures coverage and holds MAX_TESTS budgets: what the program's process
    # does and allocates (which the tests' process could time, or read in /proc) is then
    # the same in the correct run and the others, but for the program's own work.
    padding = MAX_TESTS - min(len(budgets), MAX_TESTS)
    host_config = {"report_lines": coverage, "program_file": f"{name}.py", "budget": budget,
                   "variant": bool(budgets),
                   "budgets": [float(b) for b in budgets][:MAX_TESTS] + [budget] * padding,
                   "stop_on": [bool(s) for s in stop_on][:MAX_TESTS]
                   + [False] * (MAX_TESTS - min(len(stop_on), MAX_TESTS)),
                   "timeout": timeout, "idle": IDLE}
    harness = () if sandbox.policy.preload_sources == SOURCES else SOURCES
    module = f"test_{name}"
    spec = ExecutionSpec(
        module=module, cases=(Case("suite", Step(script="run"), ()),),
        support=(*harness, *support), setup=_setup(module), host=HOST,
        prepare=(TESTS_SIDE, "start", (tuple(sorted(tests_config.items())),)))
    private = {"config": host_config, "support": [[name, source]]}
    template = JobTemplate(spec, sandbox.policy, [(ceiling or timeout) + BACKSTOP])
    result = sandbox.run(template.job(code, private))
    if result.load_error:
        return SuiteRun(error=f"the test file did not load: {result.load_error}",
                        loaded=False, stdout=result.stdout)
    step = result.steps[0] if result.steps else None
    if step is None:
        return SuiteRun(error="the run did not start", loaded=False, stdout=result.stdout)
    try:
        run = _parse(step.records, result.stdout)
    except (ValueError, TypeError, OverflowError, RecursionError):
        return SuiteRun(error="the run's records were not the harness's", stdout=result.stdout)
    cpu = step.cpu if step.cpu >= 0 else step.seconds
    run = replace(run, cpu=cpu)
    if step.status != "ok" and not run.error:
        return replace(run, finished=False,
                       error=f"the run did not finish ({step.status}: {step.detail})")
    if run.collected is None and not run.error:
        return replace(run, error="the run recorded nothing")
    return run


def _parse(records: Sequence[Any], stdout: str) -> SuiteRun:
    """The harness's records, checked: one row per finished test, then (when the run got to
    its end) {"done", "lines"}. Any other shape is an error: the test file may have
    tampered with the harness in its own process."""
    tests, seen = [], set()
    finished, parsed, collected = False, None, None
    for position, value in enumerate(records[:MAX_TESTS + 2]):
        if position == 0:
            if isinstance(value, dict) and "collected" not in value and len(records) == 1:
                break  # the run ended before its tests were collected (the step says why)
            if not (isinstance(value, dict) and type(value.get("collected")) is int
                    and 0 <= value["collected"] <= MAX_TESTS):
                raise ValueError("collected")
            collected = value["collected"]
            continue
        if isinstance(value, dict) and position == len(records) - 1:
            finished = True
            lines = value.get("lines")
            if lines is not None:
                if not isinstance(lines, dict):
                    raise ValueError("lines")
                parsed = {}
                for key, names in lines.items():
                    if not (isinstance(key, str) and key.isascii() and key.isdigit()
                            and len(key) < 9 and isinstance(names, list)):
                        raise ValueError("lines")
                    parsed[int(key)] = tuple(n for n in names if isinstance(n, str))
            continue
        if not (isinstance(value, list) and len(value) == 4 and isinstance(value[0], str)
                and value[1] in STATUSES and type(value[2]) in (int, float)
                and math.isfinite(value[2]) and isinstance(value[3], str)) \
                or value[0] in seen or len(value[0]) > 300:
            raise ValueError("row")
        seen.add(value[0])
        tests.append(TestResult(value[0], value[1], max(0.0, float(value[2])),
                                value[3][:300]))
    if len(tests) > (collected or 0):
        raise ValueError("more tests than collected")
    return SuiteRun(tuple(tests), parsed, "", finished, True, 0.0, collected, stdout)
