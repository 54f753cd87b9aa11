"""Mutants that change only annotations (`from __future__ import annotations`): recorded
survived without a run where no code reads them (mode `equivalent`); where tests read them,
run on those tests alone with the mutant's annotations in place (`annotate`), or, where
which tests read them cannot be known, on the whole suite (`reload`); cosmic-ray's verdicts
every time."""

from __future__ import annotations

import copy
import inspect
import json
import pickle
import pprint
import typing

import pytest

from coral_core.mutation.annotations import changed_annotations, mutant_annotations
from coral_plugins.evaluators.mutation.readers import WatchedAnnotations

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
# The first test to read them passes under every mutant; a later one reads them again.
READING = TESTS + '''

def test_names():
    import inspect

    assert list(inspect.signature(calc.add).parameters) == ["a", "b"]


def test_text():
    assert dict(calc.add.__annotations__)["a"] == "int | str"
'''
# Read at collection (functools.wraps copies them): which test uses them cannot be known.
AT_COLLECTION = TESTS + '''
import functools

WRAPPED = functools.wraps(calc.add)(lambda *args: calc.add(*args))


def test_wrapped():
    assert WRAPPED.__annotations__["a"] == "int | str"
'''
# A test that replaces the annotations, with the mutant's strings in them, before another
# reads them: the second's read is not one of the watched dict's.
REPLACED = TESTS + '''

def test_copy():
    calc.add.__annotations__ = dict(calc.add.__annotations__)


def test_text():
    assert calc.add.__annotations__["a"] == "int | str"
'''
# A test that the readers' run itself changes (its dict is not a plain one there).
TYPE = READING + '''

def test_plain():
    assert type(calc.add.__annotations__) is dict
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
# The oracle runs three of the eleven replacements of each annotation's `|` and one of
# `a + b`'s (each of its mutants costs a pytest start); Coral runs all 35, and the modes and
# verdicts of every `|` on line 4 are checked below.
ORACLE_SKIPS = r"core/(NumberReplacer|ReplaceBinaryOperator_(?!BitOr_(Add|BitAnd|Pow)$|Add_Sub$))"
CASES = {"unread": (TESTS, None), "read": (READING, None), "fork": (FORKED, None),
         "process": (CHILD, None), "session_hook": (TESTS, LATE_HOOK),
         "at_collection": (AT_COLLECTION, None), "type": (TYPE, None),
         "replaced": (REPLACED, None)}


def test_mutant_annotations_are_what_the_compiler_makes():
    variants = [("int | str", "int & str"), ("int | str", "int + str"),
                ("dict[str, int]", "dict[str, int] ** 2"), ("-> int", "-> int | None"),
                ("key: str | None", "key: str | (None if 1 else 'x')")]
    for before, after in variants:
        mutant = MODULE.replace(before, after)
        changed = changed_annotations(MODULE, mutant)
        assert changed
        namespace: dict = {}
        exec(compile(mutant, "calc.py", "exec", dont_inherit=True), namespace)
        live = {("add", 4): namespace["add"], ("get", 9): namespace["Box"].get}
        for key, value in mutant_annotations(mutant, changed).items():
            assert list(value.items()) == list(live[key].__annotations__.items())


def test_watched_annotations_note_every_read():
    reads: set = set()

    def add(a: int, b: str) -> int:  # strings: this file imports annotations from the future
        return 0

    add.__annotations__ = WatchedAnnotations(add.__annotations__, ("add", 1), reads)
    ways = [dict, lambda d: {**d}, copy.copy, copy.deepcopy, pickle.dumps, json.dumps, repr,
            str, list, sorted, len, bool, lambda d: "a" in d, lambda d: d == {},
            lambda d: {} | d, lambda d: (lambda **k: k)(**d), lambda d: "{a}".format_map(d),
            pprint.pformat, lambda d: d.get("a"), lambda d: [*d.items()],
            lambda _: inspect.signature(add), lambda _: typing.get_type_hints(add),
            lambda _: inspect.get_annotations(add)]
    for way in ways:
        reads.clear()
        way(add.__annotations__)
        assert reads == {("add", 1)}, way
    reads.clear()
    assert type(copy.copy(add.__annotations__)) is dict and not reads - {("add", 1)}
    assert add.__annotations__ == {"a": "int", "b": "str", "return": "int"}


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
    expected = cosmic_ray(theirs, skip=ORACLE_SKIPS)
    done = run_coral(ours, "--json")
    assert done.returncode == 0, done.stderr
    ran = verdicts(ours / "s.sqlite")
    assert len(ran) == 35 and len(expected) == 7
    assert {key: ran[key] for key in expected} == expected
    rows = json.loads(done.stdout)["mutants"]
    on_add = [r for r in rows if r["line"] == 4 and "BitOr" in r["operator"]]
    assert on_add  # `int | str` -> `int + str`, ...
    if case == "unread":
        assert {r["mode"] for r in on_add} == {"equivalent"}
        assert {r["verdict"] for r in on_add} == {"survived"}
    else:  # something read them: each runs, and sees the new text
        assert {r["mode"] for r in on_add} == {"annotate" if case == "read" else "reload"}
        assert {r["verdict"] for r in on_add} == {"killed"}
    if case == "read":  # the two tests that read them ran, and the second killed it
        assert {tuple(r["killed_by"]) for r in on_add} == {("test_calc.py::test_text",)}
        box = [r for r in rows if r["line"] == 9 and "BitOr" in r["operator"]]
        assert box and {r["mode"] for r in box} == {"equivalent"}  # Box.get's: unread
