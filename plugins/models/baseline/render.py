"""Turning edits into program texts, and comparing programs by their syntax trees.

A variant keeps the program's own text (comments, layout, the docstring after the
function) everywhere but at the edit: only the edited node is re-rendered with
`ast.unparse` and spliced in. The splice is accepted only if the result parses to
exactly the edited tree; otherwise it is parenthesised, then the whole top-level
statement is re-rendered, then the whole module. Variants that do not compile are
dropped, as are those equal to the input or that add a degenerate construct (see
`_degenerate`); variants with equal texts, or equal up to layout and the direction of
comparisons (`a < b` is `b > a`), are merged into one.
"""

from __future__ import annotations

import ast
import contextlib
import warnings
from dataclasses import dataclass, field
from typing import Iterator

from coral_core import parsing

from .edits import Edit, enumerate_edits
from .sites import Slot, slots


@dataclass(frozen=True)
class Origin:
    """The features of one edit that produced a variant (what the prior weighs)."""

    kind: str
    loop_exit: bool = False


@dataclass(frozen=True)
class Variant:
    """A whole program one edit away from the input; `origins` lists every edit (of
    possibly different kinds) that makes this same program, in enumeration order."""

    text: str
    origins: tuple[Origin, ...]
    # `normalized(text)`, made while enumerating, for labelling to compare with the fix's
    # ("" where not kept: model.py's cache of variants keeps the texts alone)
    canonical: str = field(default="", compare=False, repr=False)


class _Source:
    """The input text, addressable by the (line, UTF-8 column) positions of `ast`."""

    def __init__(self, text: str):
        self.data = text.encode("utf-8")
        self.starts = [0]
        for line in text.encode("utf-8").splitlines(keepends=True):
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, line: int, column: int) -> int:
        return self.starts[line - 1] + column

    def splice(self, start: int, end: int, new: str) -> str:
        return (self.data[:start] + new.encode("utf-8") + self.data[end:]).decode("utf-8")

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (self.offset(node.lineno, node.col_offset),
                self.offset(node.end_lineno, node.end_col_offset))

    def line_span(self, node: ast.AST) -> tuple[int, int] | None:
        """The whole lines of a statement, when nothing else shares them."""
        start, end = self.span(node)
        first, after = self.starts[node.lineno - 1], self.starts[node.end_lineno]
        if self.data[first:start].strip() or self.data[end:after].strip():
            return None
        return first, after


@contextlib.contextmanager
def _applied(slot: Slot, replacement: tuple[ast.AST, ...]) -> Iterator[None]:
    """The edit made in place on the original tree, undone on exit."""
    parent = slot.parent
    if slot.pos is None:
        old = getattr(parent, slot.field)
        setattr(parent, slot.field, replacement[0])
        try:
            yield
        finally:
            setattr(parent, slot.field, old)
        return
    items = getattr(parent, slot.field)
    saved = list(items)
    items[slot.pos:slot.pos + 1] = list(replacement) or (
        [] if len(items) > 1 else [ast.Pass()]
    )
    try:
        yield
    finally:
        items[:] = saved


def _parse(text: str) -> ast.Module | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return parsing.parse(text)
    except (SyntaxError, ValueError):
        return None


def _compiles(tree: ast.Module) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            parsing.compile_tree(tree, "<baseline variant>", "exec")
    except (SyntaxError, ValueError, TypeError, RecursionError):
        return False
    return True


def _attempts(source: _Source, tree: ast.Module, slot: Slot, edit: Edit,
              top: ast.stmt) -> Iterator[str]:
    """Renderings of the edited tree, from the least to the most reformatting."""
    node = slot.node
    if not edit.replacement:
        lines = source.line_span(node)
        if lines is not None:
            yield source.splice(*lines, "")
        yield source.splice(*source.span(node), "pass")
    else:
        new = ast.unparse(edit.replacement[0])
        if isinstance(node, ast.stmt):
            indent = " " * node.col_offset
            new = new.replace("\n", "\n" + indent)
            yield source.splice(*source.span(node), new)
        else:
            yield source.splice(*source.span(node), new)
            yield source.splice(*source.span(node), f"({new})")
    if top is not None:
        yield source.splice(*source.span(top), ast.unparse(top))
    yield ast.unparse(tree)


def _render(source: _Source, tree: ast.Module, slot: Slot, edit: Edit,
            top: ast.stmt) -> tuple[str, ast.Module] | None:
    """The first rendering that parses back to exactly the edited tree."""
    with _applied(slot, edit.replacement):
        wanted = ast.dump(tree)
        for text in _attempts(source, tree, slot, edit, top):
            parsed = _parse(text)
            if parsed is not None and ast.dump(parsed) == wanted:
                return text, parsed
        text = ast.unparse(tree)
    parsed = _parse(text)
    return (text, parsed) if parsed is not None else None


_SELF_CANCELLING = (ast.Sub, ast.Div, ast.FloorDiv, ast.Mod, ast.BitXor)


def _degenerate(tree: ast.Module) -> int:
    """Constructs no bug fix would write: `x = x`, `a < a`, `x - x`, a comprehension
    that ignores its own variable (a variant that adds one is dropped)."""
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            count += ast.unparse(node.targets[0]) == ast.unparse(node.value)
        elif isinstance(node, ast.Compare):
            operands = [ast.unparse(n) for n in [node.left, *node.comparators]]
            count += any(a == b for a, b in zip(operands, operands[1:]))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, _SELF_CANCELLING):
            count += ast.unparse(node.left) == ast.unparse(node.right)
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            bound = {n.id for g in node.generators for n in ast.walk(g.target)
                     if isinstance(n, ast.Name)}
            used = {n.id for n in ast.walk(node.elt) if isinstance(n, ast.Name)}
            used |= {n.id for g in node.generators for c in g.ifs
                     for n in ast.walk(c) if isinstance(n, ast.Name)}
            count += not bound & used
    return count


def _top_level(tree: ast.Module) -> dict[int, ast.stmt]:
    """Each node's top-level statement."""
    owner: dict[int, ast.stmt] = {}
    for statement in tree.body:
        for node in ast.walk(statement):
            owner[id(node)] = statement
    return owner


def enumerate_variants(program: str) -> list[Variant]:
    """Every compiling single-edit variant of `program`, in enumeration order.

    Raises SyntaxError if `program` itself does not parse.
    """
    tree = parsing.parse(program)
    source = _Source(program)
    all_slots = slots(tree)
    owner = _top_level(tree)
    original = _canonical_dump(parsing.parse(program))
    degenerate = _degenerate(tree)
    found: dict[str, list[Origin]] = {}  # by text, then by canonical tree (first text kept)
    texts: dict[str, str] = {}
    rejected: set[str] = set()
    for edit in enumerate_edits(tree):
        slot = all_slots[edit.index]
        rendered = _render(source, tree, slot, edit, owner.get(id(slot.node)))
        if rendered is None or rendered[0] in rejected:
            continue
        text, parsed = rendered
        origin = Origin(edit.kind, edit.loop_exit)
        if text not in texts:
            if _degenerate(parsed) > degenerate or not _compiles(parsed):
                rejected.add(text)
                continue
            key = _canonical_dump(parsed)
            if key == original:
                rejected.add(text)
                continue
            texts[text] = key
        origins = found.setdefault(texts[text], [])
        if origin not in origins:
            origins.append(origin)
    first_text = {key: text for text, key in reversed(texts.items())}
    return [Variant(first_text[key], tuple(origins), key) for key, origins in found.items()]


class _Canonical(ast.NodeTransformer):
    """Drops no-op string statements (docstrings) and writes `a > b` as `b < a`."""

    _FLIPPED = {ast.Gt: ast.Lt, ast.GtE: ast.LtE}

    def generic_visit(self, node: ast.AST) -> ast.AST:
        for name, value in ast.iter_fields(node):
            if isinstance(value, list) and value and all(isinstance(v, ast.stmt) for v in value):
                kept = [v for v in value if not _is_string_statement(v)]
                setattr(node, name, kept or [ast.Pass()])
        return super().generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        if len(node.ops) == 1 and type(node.ops[0]) in self._FLIPPED:
            flipped = self._FLIPPED[type(node.ops[0])]()
            return ast.Compare(node.comparators[0], [flipped], [node.left])
        return node


def _is_string_statement(node: ast.stmt) -> bool:
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str))


def _canonical_dump(tree: ast.Module) -> str:
    """Consumes `tree` (rewrites it in place)."""
    return ast.dump(_Canonical().visit(tree))


def normalized(program: str) -> str | None:
    """A key equal for programs that differ only in layout, comments, docstrings or the
    direction of a comparison; None if the program does not parse."""
    tree = _parse(program)
    return None if tree is None else _canonical_dump(tree)
