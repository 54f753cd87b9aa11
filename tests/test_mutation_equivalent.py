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


@pytest.mark.parametrize("tests", [TESTS, READING], ids=["unread", "read"])
def test_unread_annotations_are_equivalent_and_read_ones_run(tmp_path, tests):
    ours = project(tmp_path / "ours", MODULE, tests)
    theirs = project(tmp_path / "theirs", MODULE, tests)
    expected = cosmic_ray(theirs)
    done = run_coral(ours, "--json")
    assert done.returncode == 0, done.stderr
    assert verdicts(ours / "s.sqlite") == expected
    rows = json.loads(done.stdout)["mutants"]
    on_add = [r for r in rows if r["line"] == 4 and "BitOr" in r["operator"]]
    assert on_add  # `int | str` -> `int + str`, ...
    if tests is TESTS:
        assert {r["mode"] for r in on_add} == {"equivalent"}
        assert {r["verdict"] for r in on_add} == {"survived"}
    else:  # inspect.signature read them: each runs, and the test sees the new text
        assert "equivalent" not in {r["mode"] for r in on_add}
        assert {r["verdict"] for r in on_add} == {"killed"}
        box = [r for r in rows if r["line"] == 9 and "BitOr" in r["operator"]]
        assert box and {r["mode"] for r in box} == {"equivalent"}  # Box.get's: unread
