"""Which verdicts of a session still hold after the code or the tests changed.

A mutant is known by its key: the module, the operator, the function it is in (its
outermost function, decorators included, by name and text), where in that function it is
and what it changes. Its verdict depends on what its tests ran, summed up in its
dependencies: the tests that reach it (their ids, and each test's file), every function of
the module that those tests ran in the baseline, the module's code outside functions, and
the environment (the project's other files that the tests imported, conftest.py files and
helper modules among them, and pytest's configuration files). A verdict is reused when a
mutant with the same key had the same dependencies. Installed packages and data files are
not watched (mutmut 3 does not watch them either).
"""

from __future__ import annotations

import ast
import bisect
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from coral_core import parsing

CONFIG_FILES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini")


@dataclass(frozen=True)
class Function:
    """An outermost function (a method counts: classes are walked into): its lines, with
    decorators, its qualified name and the digest of its text."""

    first: int
    last: int
    name: str
    digest: str


def _sha(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def _outermost_nodes(tree: ast.AST) -> Iterable[tuple[str, ast.AST]]:
    """(qualified name, node) of each outermost function; classes are walked into."""
    def walk(node: ast.AST, prefix: str) -> Iterable[tuple[str, ast.AST]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield prefix + child.name, child
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)

    return walk(tree, "")


def _first_line(node: ast.AST) -> int:
    return min([node.lineno] + [d.lineno for d in node.decorator_list])


def outermost_functions(source: str) -> list[Function]:
    """The module's outermost functions, in line order."""
    lines = source.split("\n")
    found = []
    for name, node in _outermost_nodes(parsing.parse(source)):
        first, last = _first_line(node), node.end_lineno or node.lineno
        found.append(Function(first, last, name, _sha("\n".join(lines[first - 1:last]))))
    return sorted(found, key=lambda f: f.first)


def outside_functions(source: str, functions: list[Function]) -> str:
    """The digest of the module's lines outside its functions (blank lines aside): imports,
    constants, class bodies, code run at import."""
    inside = set()
    for function in functions:
        inside.update(range(function.first, function.last + 1))
    kept = [line for number, line in enumerate(source.split("\n"), 1)
            if number not in inside and line.strip()]
    return _sha(kept)


def enclosing(functions: list[Function], first: int, last: int | None = None
              ) -> Function | None:
    """The function holding lines first..last (None: module-level code)."""
    last = first if last is None else last
    starts = [f.first for f in functions]
    index = bisect.bisect_right(starts, first) - 1
    if index >= 0 and functions[index].first <= first and last <= functions[index].last:
        return functions[index]
    return None


def mutant_key(module: str, operator: str, source: str, mutated: str,
               functions: list[Function]) -> str | None:
    """The mutant's key, or None for one outside every function (it runs at import)."""
    before, after = source.split("\n"), mutated.split("\n")
    head = 0
    while head < min(len(before), len(after)) and before[head] == after[head]:
        head += 1
    tail = 0
    while (tail < min(len(before), len(after)) - head
           and before[-1 - tail] == after[-1 - tail]):
        tail += 1
    removed, added = before[head:len(before) - tail], after[head:len(after) - tail]
    function = enclosing(functions, head + 1, max(head + 1, len(before) - tail))
    if function is None:
        return None
    return _sha([module, operator, function.name, function.digest, head + 1 - function.first,
                 removed, added])


def ran_functions(lines: Iterable[int], functions: list[Function]) -> set[tuple[str, str]]:
    """(name, digest) of every function holding one of `lines`."""
    starts = [f.first for f in functions]
    out = set()
    for line in lines:
        index = bisect.bisect_right(starts, line) - 1
        if index >= 0 and line <= functions[index].last:
            out.add((functions[index].name, functions[index].digest))
    return out


def referenced(source: str, functions: list[Function]) -> dict[str, set[tuple[str, str]]]:
    """{function name: (name, digest) of the module's functions its text names}: a mutant
    can make its function call one that the baseline never reached."""
    by_short: dict[str, list[Function]] = {}
    for function in functions:
        by_short.setdefault(function.name.rsplit(".", 1)[-1], []).append(function)
    out = {}
    for name, node in _outermost_nodes(parsing.parse(source)):
        names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        names |= {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
        # same-named functions (a property's getter and setter) share one set
        out.setdefault(name, set()).update(
            (f.name, f.digest) for short in names for f in by_short.get(short, ()))
    return out


def dependencies(tests: list[str], ran: dict[str, set[tuple[str, str]]],
                 test_files: dict[str, str | None], outside: str, environment: str,
                 named: set[tuple[str, str]] = frozenset()) -> str | None:
    """What a mutant's verdict rests on, as one digest: its tests and their files, the
    functions they ran, those its own function names (`named`), the module's code outside
    functions and the environment. None where a test's files are unknown (such a verdict is
    never reused)."""
    if not tests or any(test_files.get(test) is None for test in tests):
        return None
    functions = sorted(set(named).union(*(ran.get(test, set()) for test in tests)))
    return _sha([sorted((test, test_files[test]) for test in tests), functions, outside,
                 environment])


def file_digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def files_digest(project: Path, names: Iterable[str]) -> str | None:
    """One digest of several files of the project (None when one cannot be read)."""
    digests = [(name, file_digest(project / name)) for name in sorted(set(names))]
    return None if any(d is None for _, d in digests) else _sha(digests)


def environment(project: Path, watched: dict[str, str | None]) -> str:
    """The digest of the project's files the tests imported (`watched`: path relative to
    the project -> digest) and of pytest's configuration files there."""
    config = {name: file_digest(project / name) for name in CONFIG_FILES
              if (project / name).is_file()}
    return _sha(sorted({**watched, **config}.items()))


def tests_digest(project: Path, tests: Iterable[str]) -> str:
    """The digest of every Python file under the test paths (relative to the project) and
    of pytest's configuration files: what tells a session that its tests changed."""
    files: set[Path] = set()
    for test in tests:
        path = project / test
        if path.is_dir():
            files.update(p for p in path.rglob("*.py")
                         if not any(part.startswith(".") or part == "__pycache__"
                                    for part in p.relative_to(path).parts))
        elif path.is_file():
            files.add(path)
    files.update(project / name for name in CONFIG_FILES if (project / name).is_file())
    return _sha([(str(p.relative_to(project)), file_digest(p)) for p in sorted(files)])
