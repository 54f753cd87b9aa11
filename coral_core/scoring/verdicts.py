"""Judging a step: the candidate's recorded values against expectations held by the parent.

The values are plain builtins (coral_core/sandbox/decode.py), bounded in size and depth, but
their contents are the candidate's choice: no comparison here may raise (a returned 10**400
cannot be converted to a float), and what is shown of a value is cut short before it is
built, so a detail is always a short plain string.
"""

from __future__ import annotations

import math
import reprlib
from dataclasses import dataclass
from typing import Any

from coral_core.sandbox import StepResult
from coral_core.scoring.program_tests import Case, Expect


@dataclass(frozen=True)
class Outcome:
    """One test's verdict; `detail` is for people, never shown to the candidate."""

    name: str
    status: str
    detail: str = ""


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxlong, _REPR.maxother = 4, 80, 60, 60
for _name in ("maxlist", "maxtuple", "maxset", "maxfrozenset", "maxdict"):
    setattr(_REPR, _name, 8)


def _short(value: Any, limit: int = 120) -> str:
    """At most `limit` characters of repr(value), without building the whole repr."""
    try:
        text = _REPR.repr(value)
    except Exception:  # RecursionError, ValueError (int digits), ...
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _close(actual: Any, expected: float, tolerance: float) -> bool:
    """|actual - expected| <= tolerance for an int or float; False, never an error, for
    anything else (an int too large for a float, inf, nan)."""
    if type(actual) not in (int, float):
        return False
    try:
        number = float(actual)
        return math.isfinite(number) and abs(number - expected) <= tolerance
    except (OverflowError, ValueError, TypeError):
        return False


def _holds(expect: Expect, values: tuple[Any, ...]) -> bool:
    try:
        return _check(expect, values)
    except (ArithmeticError, RecursionError, TypeError, ValueError, MemoryError):
        return False


def _check(expect: Expect, values: tuple[Any, ...]) -> bool:
    actual = values[0]
    if expect.kind == "eq":
        return bool(actual == expect.value)
    if expect.kind == "approx":
        return _close(actual, expect.value, expect.tolerance)
    if expect.kind == "truthy":
        return bool(actual)
    if expect.kind == "falsy":
        return not actual
    if expect.kind == "same":
        return bool(values[0] == values[1])
    raise LookupError(f"unknown expectation kind {expect.kind!r}")


def _explain(expect: Expect, values: tuple[Any, ...]) -> str:
    if expect.kind in ("eq", "approx"):
        return f"expected {_short(expect.value)}, got {_short(values[0])}"
    if expect.kind == "same":
        return f"expected the same object, got {_short(values[0])} and {_short(values[1])}"
    return f"expected a {expect.kind} value, got {_short(values[0])}"


def judge_case(case: Case, step: StepResult) -> Outcome:
    """Apply the expectations in order, as the upstream assertions would run.

    The first failed expectation fails the test even if the step later crashed or timed
    out (upstream stops at the first failing assert). A step that ends normally must
    have recorded exactly what the expectations consume.
    """
    records = step.records
    position = 0
    for expect in case.expects:
        needed = expect.records
        if position + needed > len(records):
            break
        values = tuple(records[position: position + needed])
        position += needed
        if not _holds(expect, values):
            return Outcome(case.name, "fail", _explain(expect, values))
    if step.status == "timeout":
        return Outcome(case.name, "timeout", step.detail)
    if step.status != "ok":
        return Outcome(case.name, "error", step.detail or "error")
    if position != len(records) or position != sum(e.records for e in case.expects):
        return Outcome(case.name, "error", "recorded values do not match the test's assertions")
    return Outcome(case.name, "pass")


def tally(outcomes: list[Outcome]) -> dict[str, int]:
    counts = {"total": len(outcomes), "passed": 0, "failed": 0, "timeout": 0, "error": 0}
    key = {"pass": "passed", "fail": "failed", "timeout": "timeout", "error": "error"}
    for outcome in outcomes:
        counts[key[outcome.status]] += 1
    return counts
