"""`coral mutation run --resume` after the module, its tests or a file they import changed:
only the mutants whose code or dependencies changed run again, and every verdict equals a
fresh session's on the changed code (coral_core.mutation.fingerprint)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from coral_core.mutation.fingerprint import (dependencies, mutant_key, outermost_functions,
                                             outside_functions, ran_functions, referenced)

pytest.importorskip("cosmic_ray")

CORAL = [sys.executable, "-m", "coral_cli.app"]

CALC = '''from helper import twice


def add(a, b):
    return a + b


def sub(a, b):
    return a - b


def scale(a):
    return twice(a) * 3


class Box:
    limit = 10

    def clamp(self, x, low=0):
        if x < low:
            return low
        if x > self.limit:
            return self.limit
        return x
'''
TEST_ADD = '''from calc import add, sub


def test_add():
    assert add(2, 3) == 5


def test_sub():
    assert sub(5, 3) == 2
'''
TEST_MORE = '''from calc import Box, scale


def test_scale():
    assert scale(1) == 6


def test_clamp():
    assert Box().clamp(5) == 5
    assert Box().clamp(-1) == 0
'''


# -- the fingerprint, without a process ---------------------------------------------------
def test_a_key_names_the_function_and_the_change_not_the_line():
    before = outermost_functions(CALC)
    assert [(f.name, f.first) for f in before] == [
        ("add", 4), ("sub", 8), ("scale", 12), ("Box.clamp", 19)]
    mutated = CALC.replace("return a - b", "return a + b")
    key = mutant_key("calc.py", "core/ReplaceBinaryOperator_Sub_Add", CALC, mutated, before)
    shifted = "import os\n\n\n" + CALC
    after = outermost_functions(shifted)
    moved = mutant_key("calc.py", "core/ReplaceBinaryOperator_Sub_Add", shifted,
                       "import os\n\n\n" + mutated, after)
    assert key is not None and key == moved
    other = CALC.replace("return a - b", "return a * b")
    assert mutant_key("calc.py", "core/ReplaceBinaryOperator_Sub_Mul", CALC, other,
                      before) != key
    edited = CALC.replace("return a - b", "c = a - b\n    return c")
    assert mutant_key("calc.py", "core/ReplaceBinaryOperator_Sub_Add", edited,
                      edited.replace("c = a - b", "c = a + b"),
                      outermost_functions(edited)) != key
    at_import = CALC.replace("limit = 10", "limit = 11")
    assert mutant_key("calc.py", "core/NumberReplacer", CALC, at_import, before) is None


def test_dependencies_follow_what_the_tests_ran():
    functions = outermost_functions(CALC)
    outside = outside_functions(CALC, functions)
    ran = {"t::add": ran_functions([5], functions), "t::box": ran_functions([20, 22], functions)}
    files = {"t::add": "a" * 64, "t::box": "b" * 64}
    deps = dependencies(["t::add"], ran, files, outside, "env")
    assert deps == dependencies(["t::add"], ran, files, outside, "env")
    assert deps != dependencies(["t::add"], ran, {**files, "t::add": "c" * 64}, outside, "env")
    assert deps != dependencies(["t::add"], ran, files, outside, "other env")
    assert deps != dependencies(["t::add", "t::box"], ran, files, outside, "env")
    assert dependencies(["t::add"], ran, {"t::add": None}, outside, "env") is None
    assert outside_functions(CALC.replace("limit = 10", "limit = 9"), functions) != outside
    spaced = CALC.replace("def sub", "\n\ndef sub")
    assert outside_functions(spaced, outermost_functions(spaced)) == outside


def test_a_function_the_mutant_can_call_is_a_dependency_even_if_never_ran():
    """A mutant may flip a branch into a call the baseline never made: the functions its
    own function names are in its dependencies."""
    source = ("def helper(x):\n    return x + 1\n\n\n"
              "def f(x):\n    if x > 100:\n        return helper(x)\n    return x\n")
    functions = outermost_functions(source)
    names = referenced(source, functions)
    assert {name for name, _ in names["f"]} == {"helper"}
    edited = source.replace("x + 1", "x + 2")
    edited_names = referenced(edited, outermost_functions(edited))
    ran = {"t::f": ran_functions([6, 8], functions)}  # the test never reaches helper
    files = {"t::f": "a" * 64}
    outside = outside_functions(source, functions)
    assert dependencies(["t::f"], ran, files, outside, "env", names["f"]) != \
        dependencies(["t::f"], ran, files, outside, "env", edited_names["f"])


# -- sessions ---------------------------------------------------------------------------
def _mutate(project: Path, session: str, *extra: str) -> dict:
    done = subprocess.run(CORAL + ["mutation", "run", "--module", "calc.py", "--tests", "tests",
                                   "--session", session, "--workers", "2", "--json", *extra],
                          cwd=project, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _verdicts(summary: dict) -> dict:
    return {(m["operator"], m["occurrence"]): m["verdict"] for m in summary["mutants"]}


def _same_as_fresh(project: Path, summary: dict) -> None:
    (project / "fresh.sqlite").unlink(missing_ok=True)
    fresh = _mutate(project, "fresh.sqlite")
    assert _verdicts(summary) == _verdicts(fresh)
    assert summary["counts"] == fresh["counts"]


@pytest.fixture()
def project(tmp_path) -> Path:
    (tmp_path / "tests").mkdir()
    (tmp_path / "calc.py").write_text(CALC)
    (tmp_path / "helper.py").write_text("def twice(x):\n    return 2 * x\n")
    (tmp_path / "conftest.py").write_text(
        "import os\nimport sys\n\nsys.path.insert(0, os.path.dirname(__file__))\n")
    (tmp_path / "tests" / "test_add.py").write_text(TEST_ADD)
    (tmp_path / "tests" / "test_more.py").write_text(TEST_MORE)
    return tmp_path


def test_a_resume_after_edits_reruns_only_what_changed(project):
    first = _mutate(project, "s.sqlite")
    assert first["reused"] == 0 and first["changed"] == []
    again = _mutate(project, "s.sqlite", "--resume")  # nothing changed: a plain resume
    assert again["changed"] == [] and _verdicts(again) == _verdicts(first)

    calc = project / "calc.py"  # one function edited, one added above the others
    calc.write_text(CALC.replace("    return a - b", "    c = a - b\n    return c")
                    .replace("def add", "def neg(a):\n    return -a\n\n\ndef add"))
    edited = _mutate(project, "s.sqlite", "--resume")
    assert edited["changed"] == ["the module changed"]
    in_sub = [m for m in edited["mutants"] if 13 <= m["line"] <= 15]
    elsewhere = [m for m in edited["mutants"] if m["mode"] == "swap" and m["line"] > 15]
    assert in_sub and not any(m["reused"] for m in in_sub)
    assert elsewhere and all(m["reused"] for m in elsewhere)
    assert edited["reused"] == len([m for m in edited["mutants"] if m["reused"]])
    _same_as_fresh(project, edited)

    more = project / "tests" / "test_more.py"  # a test added in one file
    more.write_text(TEST_MORE + "\n\ndef test_clamp_high():\n    assert Box().clamp(11) == 10\n")
    retested = _mutate(project, "s.sqlite", "--resume")
    assert retested["changed"] == ["the tests changed"]
    by_add = [m for m in retested["mutants"] if m["mode"] == "swap" and m["line"] <= 15]
    by_more = [m for m in retested["mutants"] if m["mode"] == "swap" and m["line"] > 15]
    assert by_add and all(m["reused"] for m in by_add)
    assert by_more and not any(m["reused"] for m in by_more)
    _same_as_fresh(project, retested)

    (project / "helper.py").write_text("def twice(x):\n    return x + x\n")
    helped = _mutate(project, "s.sqlite", "--resume")
    assert helped["changed"] == ["helper.py changed"] and helped["reused"] == 0
    assert _verdicts(helped) == _verdicts(retested)


def test_an_incremental_resume_that_stops_early_keeps_what_it_could_reuse(project):
    """The module edited and a test broken: the resume is refused (the tests fail on the
    unmutated code) after the session was enumerated afresh; with the test mended, the next
    resume still reuses the verdicts from before the edit."""
    first = _mutate(project, "s.sqlite")
    calc = CALC.replace("    return a - b", "    c = a - b\n    return c")
    (project / "calc.py").write_text(calc)
    more = project / "tests" / "test_more.py"
    more.write_text(TEST_MORE.replace("== 6", "== 7"))
    refused = subprocess.run(CORAL + ["mutation", "run", "--module", "calc.py", "--tests",
                                      "tests", "--session", "s.sqlite", "--workers", "2",
                                      "--resume"], cwd=project, capture_output=True, text=True,
                             timeout=600)
    assert refused.returncode == 2 and "fail on the unmutated code" in refused.stderr
    more.write_text(TEST_MORE)
    mended = _mutate(project, "s.sqlite", "--resume")
    assert mended["reused"] > 0 and mended["reused"] >= first["mutation_num"] // 2
    _same_as_fresh(project, mended)
