"""cosmic-ray's mutants of a program, enumerated once per program text.

The same enumeration as `coral mutation run` (cosmic-ray's `init` into a WorkDB, then its
`mutate_code`), so the (operator, occurrence) pairs are cosmic-ray's. Only mutants that
compile are kept: one that does not is "killed" by any test file, which would reward a suite
for nothing (`coral mutation run` counts them killed, as cosmic-ray does, for parity).
"""

from __future__ import annotations

import ast
import difflib
import functools
import warnings
from dataclasses import dataclass
from pathlib import Path

from coral_core import parsing
from coral_core.files.scratch import scratch_folder
from coral_core.mutation.plan import function_bodies


@dataclass(frozen=True)
class Variant:
    """A version of the program: its source, the lines of the correct program it changes,
    and whether they all lie inside function bodies (else loading it may differ too)."""

    source: str
    lines: frozenset[int]
    in_function: bool


@dataclass(frozen=True)
class Mutant(Variant):
    operator: str = ""
    occurrence: int = 0


def _inside(lines: frozenset[int], bodies: list[tuple[int, int, str]]) -> bool:
    return bool(lines) and any(all(b[0] <= row <= b[1] for row in lines) for b in bodies)


def _skeleton(source: str) -> str:
    """What loading the program runs, less function bodies and bare string statements
    (docstrings, QuixBugs' trailing alternatives): equal skeletons load alike."""
    tree = parsing.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.body = [ast.Pass()]
        if isinstance(node, (ast.Module, ast.ClassDef)):
            node.body = [s for s in node.body if not (
                isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))] or [ast.Pass()]
    return ast.dump(tree)


def variant_of(correct: str, other: str) -> Variant:
    """`other` (the buggy program) as a variant of `correct`: the lines of the correct
    program's function bodies it changes; `in_function` when loading is unchanged."""
    ours, theirs = correct.splitlines(), other.splitlines()
    changed: set[int] = set()
    matcher = difflib.SequenceMatcher(None, ours, theirs, autojunk=False)
    for tag, i1, i2, _, _ in matcher.get_opcodes():
        if tag != "equal":
            changed.update(range(i1 + 1, max(i2, i1 + 1) + 1))
    bodies = function_bodies(correct)
    lines = frozenset(r for r in changed if any(b[0] <= r <= b[1] for b in bodies))
    try:
        same_loading = _skeleton(correct) == _skeleton(other)
    except (SyntaxError, ValueError, RecursionError):
        same_loading = False
    return Variant(other, lines, same_loading)


@functools.lru_cache(maxsize=256)
def mutants_of(name: str, source: str) -> tuple[Mutant, ...]:
    from coral_core.mutation.apply import Mutator
    from coral_core.mutation.session import Session

    with scratch_folder("coral-testgen-") as folder:
        path = Path(folder) / f"{name}.py"
        path.write_text(source, encoding="utf-8")
        session = Session(Path(folder) / "mutants.sqlite")
        try:
            session.init([path])
            items = session.items()
        finally:
            session.close()
    bodies = function_bodies(source)
    mutator = Mutator(source)
    found = []
    for item in items:
        spec = item.mutations[0]
        try:
            mutated = mutator.mutated(spec.operator_name, spec.operator_args, spec.occurrence)
            if mutated is None:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                compile(mutated, f"{name}.py", "exec")
        except Exception:  # noqa: B902 - incompetent or not compiling: not a mutant here
            continue
        rows = frozenset(range(spec.start_pos[0], spec.end_pos[0] + 1))
        found.append(Mutant(mutated, rows, _inside(rows, bodies), spec.operator_name,
                            spec.occurrence))
    found.sort(key=lambda m: (m.operator, m.occurrence))
    return tuple(found)
