"""Which names a HumanEval test takes from the program, and from whom.

Upstream runs `prompt + completion [+ suffix] + test` as one program, so the test reads
the program's globals. Coral runs the test apart (inside/check.py) and gives it, for each
global it uses that the program defines:
- a proxy of the candidate's definition, when the candidate wrote any of it (the entry
  point always; in infilling, a helper whose body holds the hole);
- the benchmark's own definition otherwise (HumanEval/32's `poly`, HumanEval/38's
  `encode_cyclic`): the candidate did not write it, and rebinding it must not change
  what the test checks.
Only the benchmark's text is parsed here (the prompt, the canonical solution, the suffix,
the test), never a candidate's.
"""

from __future__ import annotations

import ast
import builtins
import functools
from dataclasses import dataclass

from coral_core import parsing


@dataclass(frozen=True)
class Plan:
    """How the test reaches the program: `proxies` call the candidate's (the entry point
    first), `helpers` come from `reference` (the benchmark's program), run in the test's
    process."""

    entry_point: str
    proxies: tuple[str, ...]
    helpers: tuple[str, ...] = ()
    reference: str = ""


def _bound(node: ast.stmt) -> set[str]:
    """The module-level names a top-level statement binds."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    names = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
            names.add(child.id)
        elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(child.name)  # defined under an if/try at module level
    return names


def _starts(tree: ast.Module, text: str) -> list[int]:
    """Where each top-level statement starts (its first decorator's line), in characters."""
    lines, position = [0], 0
    for line in text.split("\n"):
        position += len(line) + 1
        lines.append(position)
    return [lines[min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
                  - 1] for node in tree.body]


@functools.lru_cache(maxsize=1024)
def test_globals(test: str) -> frozenset[str]:
    """Names the test reads that it does not bind at module level (nor are builtins).
    Cached: the infilling sets repeat HumanEval's 164 tests over 8,652 tasks (walking
    them all took 1.3 s of the 1.9 s that planning the 5,815 multi-line tasks took)."""
    tree = parsing.parse(test)
    bound = set().union(*(_bound(node) for node in tree.body)) if tree.body else set()
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load)}
    return frozenset(used - bound - set(dir(builtins)))


@functools.lru_cache(maxsize=1024)
def _statements(program: str) -> tuple[tuple[frozenset[str], int, int], ...] | None:
    """Each top-level statement of the benchmark's program: the names it binds, and its
    region, from its start to the next one's (in characters); None where the program does
    not parse. Cached: every infilling task of a problem has the same program (only where
    its hole lies differs)."""
    try:
        tree = parsing.parse(program)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    starts = _starts(tree, program)
    ends = [*starts[1:], len(program)]
    return tuple((frozenset(_bound(node)), start, end)
                 for node, start, end in zip(tree.body, starts, ends))


def make_plan(prompt: str, test: str, entry_point: str, canonical: str | None = None,
              suffix: str = "") -> Plan:
    """The plan for one task. Without a canonical solution, or where the benchmark's
    program does not parse, every name is a proxy (upstream's own semantics)."""
    try:
        wanted = test_globals(test) - {entry_point}
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return Plan(entry_point, (entry_point,))  # the test fails to compile in the check
    canonical = canonical or ""
    reference = prompt + canonical + suffix
    statements = _statements(reference)
    if statements is None:
        return Plan(entry_point, (entry_point, *sorted(wanted)))
    # A statement's region runs from its start to the next one's, both ends included:
    # text the candidate writes there can decorate it or continue its body.
    hole = (len(prompt), len(prompt) + len(canonical))
    written: set[str] = set()  # names the candidate wrote (part of) a definition of
    benchmark: set[str] = set()
    for bound, start, end in statements:
        names = bound & wanted
        if names:
            (written if hole[0] <= end and hole[1] >= start else benchmark).update(names)
    helpers = tuple(sorted(benchmark - written))
    return Plan(entry_point, (entry_point, *sorted(written)), helpers,
                reference if helpers else "")
