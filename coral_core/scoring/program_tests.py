"""Tests of a program, run in the sandbox and judged in the parent.

Generic: a data set describes calls of a candidate program (or scripts its setup code
defines) and what the parent expects of the values they record. QuixBugs uses them; any
execution-based task can.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Step:
    """One unit of work run inside the sandbox. It never carries an expected value.

    Either `call` names a function of the candidate module, called with `args` (JSON
    values; the result is projected by `project`: "value" or "list" for generators), or
    `script` names a function defined by the job's setup code (an upstream test function
    whose assertions were turned into recorded values).
    """

    call: str | None = None
    args: tuple[Any, ...] = ()
    project: str = "value"
    script: str | None = None


@dataclass(frozen=True)
class Expect:
    """One expectation, checked in the parent on values recorded by a step.

    kind: "eq" (record == value), "approx" (|record - value| <= tolerance), "truthy",
    "falsy", or "same" (two consecutive records are equal; objects compare by identity).
    """

    kind: str
    value: Any = None
    tolerance: float = 0.0

    @property
    def records(self) -> int:
        return 2 if self.kind == "same" else 1


@dataclass(frozen=True)
class Case:
    """A test case: what the sandbox runs, and what the parent expects of it."""

    name: str
    step: Step
    expects: tuple[Expect, ...]
    slow: bool = False


@dataclass(frozen=True)
class ExecutionSpec:
    """How to run a candidate program against a task's tests.

    The candidate is importable as `module`; `support` modules (name, source) are
    importable too; `setup` runs once after the candidate is imported. With `host` (the
    name of a support module), the job runs in two processes: the candidate's never holds
    the job's private part (`JobTemplate.job(code, private)`), which a second process
    loads and serves through `host`'s `serve` (see sandbox/inside/child.py). `prepare`
    (module, function, arguments: plain data) is called in the candidate's process alone,
    once the support modules are loaded and before the candidate's code: a harness's
    per-job start that the other process need not run, with nothing to compile.
    """

    module: str
    cases: tuple[Case, ...]
    support: tuple[tuple[str, str], ...] = ()
    setup: str = ""
    host: str = ""
    prepare: tuple[str, str, tuple[Any, ...]] | tuple[()] = ()
