"""coral_core.mutation.apply.Mutator makes every mutant from one parse, and its text is
cosmic-ray's `mutate_code`'s, byte for byte, for every operator and occurrence."""

from __future__ import annotations

import os
import random
import sysconfig
import tempfile
from pathlib import Path

import pytest

from coral_core.mutation.apply import Mutator
from coral_core.mutation.session import Session

pytest.importorskip("cosmic_ray")

STDLIB = Path(sysconfig.get_paths()["stdlib"])

# Every operator family cosmic-ray has a node for: decorators (removed), for loops, except
# clauses, unary operators, break/continue, booleans, numbers, comparisons, keywords.
EVERY_KIND = '''import functools


@functools.lru_cache(maxsize=None)
@staticmethod
def f(x, *, flag=True):
    total = -x
    for i in range(3):
        if i == 1 and not flag:
            continue
        if i >= 2 or x is None:
            break
        total += i * 2 - 1
    try:
        total = total // (x % 7) ** 2
    except (ZeroDivisionError, ValueError):
        total = 0.5
    except KeyError:
        pass
    while False:
        total |= 1 << 3
    return total if total > 0 else ~total
'''


def _items(source: str) -> list:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "module.py"
        path.write_text(source)
        session = Session(Path(folder) / "s.sqlite")
        try:
            session.init([path])
            return session.items()
        finally:
            session.close()


def _cosmic_ray(source: str, spec) -> tuple[str, object]:
    import cosmic_ray.plugins
    from cosmic_ray.mutating import mutate_code

    operator = cosmic_ray.plugins.get_operator(spec.operator_name)(**(spec.operator_args or {}))
    try:
        return "text", mutate_code(source, operator, spec.occurrence)
    except Exception as error:  # noqa: B902 - incompetent: the same error both ways
        return "raised", type(error).__name__


def _ours(mutator: Mutator, spec) -> tuple[str, object]:
    try:
        return "text", mutator.mutated(spec.operator_name, spec.operator_args, spec.occurrence)
    except Exception as error:  # noqa: B902
        return "raised", type(error).__name__


@pytest.mark.parametrize("name,source,sample", [
    ("every kind", EVERY_KIND, None),
    ("bisect.py", (STDLIB / "bisect.py").read_text(), None),
    ("contextlib.py", (STDLIB / "contextlib.py").read_text(), 60),
])
def test_every_mutant_is_cosmic_rays_text(name, source, sample):
    items = _items(source)
    if sample:
        items = random.Random(0).sample(items, sample)
    mutator = Mutator(source)
    kinds = set()
    for item in items:
        spec = item.mutations[0]
        expected = _cosmic_ray(source, spec)
        assert _ours(mutator, spec) == expected, (spec.operator_name, spec.occurrence)
        kinds.add(spec.operator_name.split("_")[0])
    assert mutator.fallbacks == 0
    if name == "every kind":
        assert {"core/RemoveDecorator", "core/ZeroIterationForLoop", "core/ExceptionReplacer",
                "core/ReplaceUnaryOperator", "core/ReplaceBreakWithContinue",
                "core/NumberReplacer"} <= kinds


def test_an_operator_that_reaches_beyond_its_node_falls_back_to_a_fresh_parse(monkeypatch):
    """No cosmic-ray operator does this (the test above); a third-party one might: the tree
    is checked after every mutant, and such a mutant is made by mutate_code itself."""
    import cosmic_ray.plugins

    real = cosmic_ray.plugins.get_operator("core/NumberReplacer")

    class Meddling(real):
        def mutate(self, node, index):
            node.get_root_node().get_first_leaf().value = "meddled"  # "x" of "x = 1"
            return super().mutate(node, index)

    monkeypatch.setattr(cosmic_ray.plugins, "get_operator", lambda name: Meddling)
    source = "x = 1\ny = 2\n"
    mutator = Mutator(source)
    first = mutator.mutated("core/NumberReplacer", None, 1)
    assert mutator.fallbacks == 1
    from cosmic_ray.mutating import mutate_code

    assert first == mutate_code(source, Meddling(), 1)
    assert mutator.mutated("core/NumberReplacer", None, 3) == mutate_code(source, Meddling(), 3)


def test_a_session_holds_cosmic_rays_own_mutants_read_back_by_cosmic_ray(tmp_path):
    """Session.init stores cosmic-ray's enumeration with one executemany and Session.items
    reads it with one query (its ORM took 15 s and 17 s of a 28,000-mutant module's start):
    cosmic-ray's own init and its ORM see exactly the same mutants."""
    import cosmic_ray.commands
    from cosmic_ray.work_db import WorkDB, use_db

    module = tmp_path / "textwrap.py"
    module.write_text((STDLIB / "textwrap.py").read_text())

    def key(item):
        spec, = item.mutations
        return (str(spec.module_path), spec.operator_name, spec.occurrence, spec.start_pos,
                spec.end_pos, sorted(spec.operator_args.items()), spec.definition_name)

    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        ours = Session(tmp_path / "ours.sqlite")
        ours.init([Path("textwrap.py")])
        read = ours.items()
        ours.close()
        with use_db(str(tmp_path / "theirs.sqlite"), WorkDB.Mode.create) as db:
            cosmic_ray.commands.init([Path("textwrap.py")], db, {})
            theirs = sorted(map(key, db.work_items))
        with use_db(str(tmp_path / "ours.sqlite"), WorkDB.Mode.open) as db:
            by_orm = list(db.work_items)
    finally:
        os.chdir(cwd)
    assert len(theirs) > 500
    assert sorted(map(key, by_orm)) == theirs == sorted(map(key, read))
    assert sorted(read, key=lambda i: i.job_id) == sorted(by_orm, key=lambda i: i.job_id)


@pytest.mark.parametrize("name,source", [
    ("every kind", EVERY_KIND),
    ("bisect.py", (STDLIB / "bisect.py").read_text()),
    ("textwrap.py", (STDLIB / "textwrap.py").read_text()),
])
def test_each_mutants_diff_and_compile_check_are_the_whole_modules(name, source):
    """Changes diffs and compiles only around a mutant's change (a large module's start
    was mostly whole-module compiles and diffs): its answers are the whole module's."""
    import difflib
    import warnings

    from coral_core.mutation.plan import Changes

    changes, mutator = Changes(source), Mutator(source)
    compiled = 0
    for item in _items(source):
        spec = item.mutations[0]
        kind, mutated = _ours(mutator, spec)
        if kind != "text" or mutated is None:
            continue
        whole = "\n".join(["--- mutation diff ---"] + list(difflib.unified_diff(
            source.split("\n"), mutated.split("\n"), fromfile="a/m.py", tofile="b/m.py",
            lineterm="")))
        assert changes.diff(mutated, "m.py") == whole, (spec.operator_name, spec.occurrence)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                compile(mutated, "m.py", "exec")
            expected = True
        except (SyntaxError, ValueError):
            expected = False
        assert changes.compiles(mutated, "m.py", spec.operator_name) is expected, \
            (spec.operator_name, spec.occurrence)
        compiled += expected
    assert compiled > 10


def test_a_change_is_compiled_with_the_modules_future_imports_and_whole_when_it_fails():
    from coral_core.mutation.plan import Changes

    source = ("from __future__ import annotations\n\n\ndef f(x: int) -> Undefined:\n"
              "    for i in x:\n        if i:\n            break\n    return 1\n\n\n"
              "def g():\n    return -1\n")
    changes = Changes(source)
    assert changes.compiles(source.replace("-1", "-2"), "m.py", "core/NumberReplacer")
    assert not changes.compiles(source.replace("break", "break +"), "m.py", "core/X")
    assert not changes.compiles(source.replace("        if i:\n            break\n", ""),
                                "m.py", "core/X")  # `for` without a body
    assert not changes.compiles(source.replace("    return -1", "    return -1\nbreak"),
                                "m.py", "core/X")
