"""`coral mutation run` on projects laid out as real ones are: a src/ package whose
`__init__` re-exports the mutated module, relative imports, `from __future__ import
annotations`, closures a decorator makes at import, subtests, `filterwarnings = error`,
conftest files at two levels. Every verdict must equal cosmic-ray's (mutation_oracle: the
mutant written into a copy, `python -m pytest -x` there). The real libraries from the
package index, as their source distributions lay them out, are in test_mutation_sdists.py."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import types
from pathlib import Path

import pytest

import mutation_oracle

pytest.importorskip("cosmic_ray")

CORAL = [sys.executable, "-m", "coral_cli.app"]

CORE = '''\
from __future__ import annotations

import functools
import warnings

from . import units

LIMIT = 10 ** 2


def checked(fn):
    @functools.wraps(fn)
    def wrapper(*args: int | None) -> float:
        if not (
            all(a is not None for a in args)
        ):
            raise ValueError("missing")
        return fn(*args)
    return wrapper


@checked
def area(w, h):
    return w * h * units.SCALE


@checked
def ratio(a, b):
    return a / b


def scale(x):
    if x < 0:
        warnings.warn("negative", UserWarning)
    return x * 2


class Shape:
    sides = 4

    def perimeter(self, side):
        return self.sides * side
'''

FILES = {
    "pyproject.toml": '[tool.pytest.ini_options]\nfilterwarnings = ["error"]\n'
                      'pythonpath = ["src"]\ntestpaths = ["tests"]\n',
    "conftest.py": "import pytest\n\n\n@pytest.fixture\ndef two():\n    return 2\n",
    "src/shapes/__init__.py": "from .core import LIMIT, Shape, area, ratio, scale\n",
    "src/shapes/units.py": "SCALE = 2\n",
    "src/shapes/core.py": CORE,
    "tests/conftest.py": "import pytest\n\n\n@pytest.fixture\ndef three():\n    return 3\n",
    "tests/test_core.py": '''\
import unittest

import pytest

import shapes


def test_area(two, three):
    assert shapes.area(two, three) == 12


def test_missing():
    with pytest.raises(ValueError):
        shapes.area(None, 1)


def test_ratio(subtests):
    for a, b, want in [(4, 2, 2), (9, 2, 4.5)]:
        with subtests.test(a=a):
            assert shapes.ratio(a, b) == want


def test_limit():
    assert shapes.LIMIT == 100


def test_scale():
    assert shapes.scale(1) == 2


class ShapeTests(unittest.TestCase):
    def test_perimeter(self):
        for side in (1, 2):
            with self.subTest(side=side):
                self.assertEqual(shapes.Shape().perimeter(side), 4 * side)
''',
}


def make_project(root: Path) -> Path:
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def run_coral(root: Path, *args: str) -> dict:
    done = subprocess.run(CORAL + ["mutation", "run", *args, "--workers", "2", "--json"],
                          cwd=root, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYTHONPATH="src"))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_package_layouts_verdicts_equal_cosmic_rays(tmp_path):
    """Before: every module-level mutant was 'killed' by an ImportError of the half-built
    package, subtest failures counted as passes, a mutant in the closure that `checked`
    made at import was never applied, and a warning that `filterwarnings = error` turns
    into a failure was only printed."""
    root = make_project(tmp_path / "shapes")
    # the lines that hold the shapes below, and two more (a mutant costs a nested pytest
    # session on the reload path: the whole module takes twice as long)
    summary = run_coral(root, "--module", "src/shapes/core.py", "--tests", "tests",
                        "--lines", "8,12-14,24,29,33")
    rows = [row for row in summary["mutants"] if row["verdict"] != "skipped"]
    assert {row["line"] for row in rows} == {8, 12, 13, 14, 24, 29, 33}
    # cosmic-ray's verdict costs a pytest start per mutant: a seeded four of each line that
    # holds a shape above, and six of the rest (the assertions below check every mutant on
    # lines 8, 13 and 29, and that one on lines 14 and 33 is killed)
    shapes, seeded = {8, 13, 14, 29, 33}, random.Random(1)
    checked = []
    for line in sorted(shapes) + [None]:
        these = [row for row in rows if row["line"] == line
                 or (line is None and row["line"] not in shapes)]
        checked += seeded.sample(these, min(4 if line else 6, len(these)))
    keys = [(row["operator"], row["occurrence"]) for row in checked]
    expected = mutation_oracle.verdicts(root, "src/shapes/core.py", ["tests"], keys,
                                        env={"PYTHONPATH": "src"})
    got = {(row["operator"], row["occurrence"]): row["verdict"] for row in checked}
    assert got == expected
    modes = {row["mode"] for row in rows}
    assert {"swap", "reload"} <= modes
    by_line = {}
    for row in rows:
        by_line.setdefault(row["line"], []).append(row)
    # the closure's `if not (` (line 14), ratio's subtests (29), scale's warning (33)
    assert any(row["verdict"] == "killed" and row["mode"] == "swap" for row in by_line[14])
    assert all(row["verdict"] == "killed" for row in by_line[29])
    assert any(row["verdict"] == "killed" for row in by_line[33])
    # an annotation under `from __future__ import annotations` is never evaluated
    assert all(row["verdict"] == "survived" for row in by_line[13])
    # module-level code reloads the package for real: LIMIT's mutants are judged by tests
    assert all(row["mode"] == "reload" and row["verdict"] == "killed" for row in by_line[8])
    assert (root / "src/shapes/core.py").read_text() == CORE  # never written


def _closures_module() -> types.ModuleType:
    source = ("def deco(fn):\n    def inner(x):\n        return fn(x) + 1\n    return inner\n\n"
              "@deco\ndef a(x):\n    return x\n\n@deco\ndef b(x):\n    return 2 * x\n")
    module = types.ModuleType("closures_under_test")
    module.__file__ = "/nonexistent/closures_under_test.py"
    exec(compile(source, module.__file__, "exec", dont_inherit=True), module.__dict__)
    module.SOURCE = source
    return module


def test_a_swap_reaches_every_closure_made_at_import():
    """`a` and `b` are two closures of one code object, made by `deco` at import: the
    mutant must reach both (it reached one), and `deco` itself, for closures made later."""
    from coral_plugins.evaluators.mutation.inmemory import Swap

    module = _closures_module()
    swap = Swap(module.__file__, module.SOURCE)
    assert swap.apply(module.SOURCE.replace("fn(x) + 1", "fn(x) - 1"))
    assert (module.a(5), module.b(5)) == (4, 9)
    later = module.deco(lambda x: x)
    assert later(0) == -1


def test_a_swap_that_cannot_be_faithful_is_refused():
    """A generator made at import still runs the old code; a mutant that changes the shape
    of the code tree cannot be paired: both must be reloaded instead."""
    from coral_plugins.evaluators.mutation.inmemory import Swap

    source = "def gen():\n    yield 1\n\n\nLIVE = gen()\n\n\ndef f(x):\n    return x + 1\n"
    module = types.ModuleType("gen_under_test")
    module.__file__ = "/nonexistent/gen_under_test.py"
    exec(compile(source, module.__file__, "exec", dont_inherit=True), module.__dict__)
    swap = Swap(module.__file__, source)
    assert not swap.apply(source.replace("yield 1", "yield 2"))
    assert next(module.LIVE) == 1
    assert swap.apply(source.replace("x + 1", "x - 1")) and module.f(1) == 0
    assert not swap.apply(source.replace("return x + 1", "return (lambda: x)()"))


def test_a_package_folder_is_one_session_with_options_from_pyproject(tmp_path):
    """`module` a folder (cosmic-ray's module-path), given in [tool.coral.mutation]: every
    module of the package in one session; one the tests never import survives uncovered."""
    root = make_project(tmp_path / "shapes")
    (root / "src/shapes/cli.py").write_text("def main(argv):\n    return len(argv) + 1\n")
    (root / "src/shapes/late.py").write_text("FACTOR = 2\n\n\ndef double(x):\n"
                                             "    return x * FACTOR\n")
    with open(root / "tests/test_core.py", "a") as handle:  # imported in a test's body only
        handle.write("\n\ndef test_late():\n    from shapes import late\n\n"
                     "    assert late.double(2) == 4\n")
    with open(root / "pyproject.toml", "a") as handle:
        handle.write('\n[tool.coral.mutation]\nmodule = "src/shapes"\ntests = ["tests"]\n'
                     'exclude-operators = ["core/ReplaceUnaryOperator"]\n')
    summary = run_coral(root)
    rows = summary["mutants"]
    modules = {row["module"] for row in rows}
    assert {"src/shapes/core.py", "src/shapes/units.py", "src/shapes/cli.py"} <= modules
    assert all(row["verdict"] == "skipped" for row in rows
               if row["operator"].startswith("core/ReplaceUnaryOperator"))
    cli = [row for row in rows if row["module"] == "src/shapes/cli.py"]
    assert cli and all(row["verdict"] == "survived" and row["mode"] == "uncovered"
                       for row in cli)
    late = [row for row in rows if row["module"] == "src/shapes/late.py"
            and row["verdict"] != "skipped"]
    assert late and all(row["mode"] in ("reload", "swap") for row in late), [
        (row["line"], row["operator"], row["mode"], row["verdict"]) for row in late]
    assert any(row["verdict"] == "killed" for row in late)
    seeded = random.Random(2)  # cosmic-ray's verdict costs a pytest start: six a module
    for module in ("src/shapes/units.py", "src/shapes/cli.py", "src/shapes/late.py"):
        mine = [row for row in rows if row["module"] == module and row["verdict"] != "skipped"]
        mine = seeded.sample(mine, min(6, len(mine)))
        keys = [(row["operator"], row["occurrence"]) for row in mine]
        expected = mutation_oracle.verdicts(root, module, ["tests"], keys,
                                            env={"PYTHONPATH": "src"})
        assert {(row["operator"], row["occurrence"]): row["verdict"] for row in mine} == \
            expected
    assert any(row["verdict"] == "killed" for row in rows if row["module"].endswith("units.py"))


def test_a_bad_pyproject_table_is_one_line(tmp_path):
    root = make_project(tmp_path / "shapes")
    with open(root / "pyproject.toml", "a") as handle:
        handle.write('\n[tool.coral.mutation]\nmodul = "src/shapes/core.py"\n')
    done = subprocess.run(CORAL + ["mutation", "run", "--tests", "tests"], cwd=root,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "[tool.coral.mutation] has no key 'modul'" in lines[0]
    assert not list(root.glob("*.sqlite"))


def test_a_function_rebuilt_at_import_is_not_swapped():
    """A decorator that rebuilds a function's code (code.replace) leaves the original as
    __wrapped__: swapping that one would change nothing the tests call."""
    from coral_plugins.evaluators.mutation.inmemory import Swap

    source = ("def rebuild(fn):\n    def copy(x):\n        return 0\n"
              "    copy.__code__ = fn.__code__.replace(co_consts=fn.__code__.co_consts + (7,))\n"
              "    copy.__wrapped__ = fn\n    return copy\n\n\n"
              "@rebuild\ndef f(x):\n    return x + 1\n")
    module = types.ModuleType("rebuilt_under_test")
    module.__file__ = "/nonexistent/rebuilt_under_test.py"
    exec(compile(source, module.__file__, "exec", dont_inherit=True), module.__dict__)
    swap = Swap(module.__file__, source)
    assert not swap.apply(source.replace("x + 1", "x - 1"))


def test_forgetting_a_project_drops_its_namespace_packages(tmp_path, monkeypatch):
    """A namespace package (no __init__.py) has no __file__: kept, it handed the old
    submodule to `from ns import mod` after the reload."""
    from coral_plugins.evaluators.mutation.inmemory import forget

    (tmp_path / "coral_ns_probe").mkdir()
    (tmp_path / "coral_ns_probe" / "mod.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import coral_ns_probe.mod  # noqa: F401

    forget(str(tmp_path))
    assert "coral_ns_probe" not in sys.modules and "coral_ns_probe.mod" not in sys.modules
    assert "pytest" in sys.modules  # nothing outside the project


WORDS = {
    "src/words/__init__.py": "",
    "src/words/core.py": 'def pick(x):\n    return "a" if x == "a" else "b"\n',
    "tests/test_core.py": ("from words.core import pick\n\n\ndef test_pick():\n"
                           '    assert pick("a") == "a" and pick("c") == "b"\n'),
    "pytest.ini": "[pytest]\nfilterwarnings = error\n",
}
COSMIC_RAY_IN_PLACE = """
import sys
from pathlib import Path
from cosmic_ray.mutating import mutate_and_test
from cosmic_ray.work_item import MutationSpec
spec = MutationSpec(Path("src/words/core.py"), sys.argv[1], 0, (2, 0), (2, 1))
result = mutate_and_test([spec], sys.executable + " -m pytest -x -q -p no:cacheprovider tests",
                         60)
print(result.test_outcome.value)
"""


@pytest.mark.parametrize("operator", ["core/ReplaceComparisonOperator_Eq_Is",
                                      "core/ReplaceComparisonOperator_Eq_NotEq"])
def test_the_exact_path_tests_the_mutant_where_an_absolute_path_leads(tmp_path, operator):
    """The exact path runs pytest in a copy of the project; an absolute PYTHONPATH entry into
    the project led it back to the unmutated original, so a mutant that `filterwarnings =
    error` turns into a collection error survived (10 of humanize's 811 mutants), where
    cosmic-ray, which writes the mutant in place, kills it."""
    verdicts = {}
    for who in ("coral", "cosmic-ray"):
        root = tmp_path / who
        for name, text in WORDS.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        env = dict(os.environ, PYTHONPATH=str(root / "src"))  # absolute
        if who == "cosmic-ray":
            done = subprocess.run([sys.executable, "-c", COSMIC_RAY_IN_PLACE, operator],
                                  cwd=root, capture_output=True, text=True, env=env,
                                  timeout=300)
            assert done.returncode == 0, done.stderr
            verdicts[who] = done.stdout.split()[-1]
            continue
        done = subprocess.run(CORAL + ["mutation", "run", "--module", "src/words/core.py",
                                       "--tests", "tests", "--operator", operator,
                                       "--workers", "1", "--json"],
                              cwd=root, capture_output=True, text=True, timeout=300, env=env)
        assert done.returncode == 0, done.stderr
        rows = [row for row in json.loads(done.stdout)["mutants"]
                if row["operator"] == operator and row["occurrence"] == 0]
        verdicts[who] = rows[0]["verdict"]
    assert verdicts["coral"] == verdicts["cosmic-ray"]
    assert verdicts["coral"] == "killed"  # "is" with a literal: an error; "!=": a failure


def test_imports_found_in_the_project_by_any_finder_come_from_the_copy(tmp_path, monkeypatch):
    """An editable install's finder maps a package to its absolute folder in the project:
    in the exact path's pytest the same file in the copy is loaded instead."""
    import importlib.util

    from coral_plugins.evaluators.mutation.exact import IntoCopy, in_copy

    project, copy = tmp_path / "project", tmp_path / "copy"
    for root, value in ((project, 1), (copy, 2)):
        (root / "src" / "edpkg").mkdir(parents=True)
        (root / "src" / "edpkg" / "__init__.py").write_text(f"VALUE = {value}\n")
        (root / "src" / "edpkg" / "part.py").write_text(f"PART = {value}\n")

    class Editable:  # as setuptools' __editable___*_finder maps a name to its folder
        def find_spec(self, fullname, path=None, target=None):
            if fullname == "edpkg":
                init = project / "src" / "edpkg" / "__init__.py"
                return importlib.util.spec_from_file_location(
                    fullname, init, submodule_search_locations=[str(init.parent)])
            return None

    real = os.path.realpath(project)
    monkeypatch.setattr(sys, "meta_path", [IntoCopy(real, str(copy)), Editable(),
                                           *sys.meta_path])
    for name in ("edpkg", "edpkg.part"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    import edpkg
    import edpkg.part

    assert (edpkg.VALUE, edpkg.part.PART) == (2, 2)
    assert edpkg.__file__ == str(copy / "src" / "edpkg" / "__init__.py")
    assert in_copy(str(project / "src"), real, str(copy)) == str(copy / "src")
    assert in_copy("/elsewhere", real, str(copy)) == "/elsewhere"
    assert in_copy("", real, str(copy)) == ""
    inside = project / "tmp" / "copy"  # a scratch folder inside the project: mapped once
    assert in_copy(str(inside / "src"), real, str(inside)) == str(inside / "src")
    for name in ("edpkg", "edpkg.part"):
        sys.modules.pop(name, None)
