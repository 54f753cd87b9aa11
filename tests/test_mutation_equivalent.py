"""Mutants that change only annotations that no code reads (`from __future__ import
annotations`): recorded survived without a run (mode `equivalent`), with cosmic-ray's
verdicts; a test that reads the annotations (inspect.signature) makes them run, and kill."""

from __future__ import annotations

import json

import pytest

from coral_core.mutation.annotations import changed_annotations

pytest.importorskip("cosmic_ray")

from test_mutation import project, verdicts  # noqa: E402
from test_mutation_hostile import cosmic_ray, run_coral  # noqa: E402

MODULE = '''from __future__ import annotations


def add(a: int | str, b: int) -> int:
    return a + b


class Box:
    def get(self, key: str | None = None) -> dict[str, int]:
        return {"key": 1}
'''
TESTS = '''import calc


def test_add():
    assert calc.add(2, 3) == 5


def test_box():
    assert calc.Box().get() == {"key": 1}
'''
READING = TESTS + '''

def test_signature():
    import inspect

    assert "int | str" in str(inspect.signature(calc.add))
'''
# Reads that the worker's own process never sees: a forked child, a Python process the test
# starts, a pytest hook of the project's after the last test.
FORKED = TESTS + '''

def hints(_):
    return calc.add.__annotations__["a"]


def test_in_a_fork():
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.map(hints, [0]) == ["int | str"]
'''
CHILD = TESTS + '''

def test_in_a_process():
    import os
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", "import calc; print(calc.add.__annotations__)"],
                         capture_output=True, text=True, cwd=os.path.dirname(calc.__file__))
    assert "int | str" in out.stdout
'''
LATE_HOOK = '''import typing


def pytest_sessionfinish(session):
    import calc

    typing.get_type_hints(calc.add)  # `int + str` raises: pytest ends in an error
'''
CASES = {"unread": (TESTS, None), "read": (READING, None), "fork": (FORKED, None),
         "process": (CHILD, None), "session_hook": (TESTS, LATE_HOOK)}


def test_which_mutants_change_annotations_alone():
    mutant = MODULE.replace("a: int | str", "a: int & str")
    assert changed_annotations(MODULE, mutant) == {("add", 4)}
    method = MODULE.replace("key: str | None", "key: str ^ None")
    assert changed_annotations(MODULE, method) == {("get", 9)}
    assert changed_annotations(MODULE, MODULE.replace("a + b", "a - b")) is None
    evaluated = MODULE.replace("from __future__ import annotations\n", "")
    assert changed_annotations(evaluated, evaluated.replace("int | str", "int & str")) is None
    nested = ("from __future__ import annotations\n\n\ndef outer():\n"
              "    def inner(x: int | str):\n        return x\n    return inner\n")
    assert changed_annotations(nested, nested.replace("int | str", "int - str")) is None


@pytest.mark.parametrize("case", list(CASES))
def test_unread_annotations_are_equivalent_and_read_ones_run(tmp_path, case):
    tests, conftest = CASES[case]
    ours = project(tmp_path / "ours", MODULE, tests)
    theirs = project(tmp_path / "theirs", MODULE, tests)
    for root in (ours, theirs) if conftest else ():
        (root / "conftest.py").write_text(conftest)
    expected = cosmic_ray(theirs)
    done = run_coral(ours, "--json")
    assert done.returncode == 0, done.stderr
    assert verdicts(ours / "s.sqlite") == expected
    rows = json.loads(done.stdout)["mutants"]
    on_add = [r for r in rows if r["line"] == 4 and "BitOr" in r["operator"]]
    assert on_add  # `int | str` -> `int + str`, ...
    if case == "unread":
        assert {r["mode"] for r in on_add} == {"equivalent"}
        assert {r["verdict"] for r in on_add} == {"survived"}
    else:  # something read them: each runs, and sees the new text
        assert "equivalent" not in {r["mode"] for r in on_add}
        assert {r["verdict"] for r in on_add} == {"killed"}
    if case == "read":
        box = [r for r in rows if r["line"] == 9 and "BitOr" in r["operator"]]
        assert box and {r["mode"] for r in box} == {"equivalent"}  # Box.get's: unread
