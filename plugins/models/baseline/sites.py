"""Where an edit can happen: every node of a module's tree, with what surrounds it.

Nodes are numbered in pre-order (`slots`); an edit names its node by that number, so it
can be applied to the very tree it was proposed on. `Site` bundles what the edit kinds
look at: the node's parent and grandparent, the names the enclosing function sees, and
whether the node sits where a `while` loop makes progress or ends.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Iterator

from .scope import ModuleNames, Scope, function_scope, module_names

FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class Slot:
    """A node and where it hangs: `parent.field`, or `parent.field[pos]` for lists."""

    node: ast.AST
    parent: ast.AST | None
    field: str
    pos: int | None


@dataclass(frozen=True)
class Site:
    """A node inside a function, with the context its edits depend on.

    `above` is the parent's own slot (its parent and field), `loop_exit` says whether
    removing this statement could stop a `while` loop from ending (see `Sites`).
    """

    slot: Slot
    above: Slot
    scope: Scope
    names: ModuleNames
    loop_exit: bool

    @property
    def node(self) -> ast.AST:
        return self.slot.node

    @property
    def parent(self) -> ast.AST | None:
        return self.slot.parent

    @property
    def field(self) -> str:
        return self.slot.field


def slots(tree: ast.AST) -> list[Slot]:
    """Every node in pre-order, the numbering that edits use."""
    out: list[Slot] = []
    stack: list[Slot] = [Slot(tree, None, "", None)]
    while stack:
        slot = stack.pop()
        out.append(slot)
        children: list[Slot] = []
        for name, value in ast.iter_fields(slot.node):
            if isinstance(value, ast.AST):
                children.append(Slot(value, slot.node, name, None))
            elif isinstance(value, list):
                children += [Slot(item, slot.node, name, i)
                             for i, item in enumerate(value) if isinstance(item, ast.AST)]
        stack.extend(reversed(children))
    return out


class Sites:
    """The sites of one module, in pre-order; nodes outside functions are skipped."""

    def __init__(self, tree: ast.Module):
        self.slots = slots(tree)
        self._slot_of = {id(s.node): s for s in self.slots}
        self.names = module_names(tree)
        self._scopes: dict[int, Scope] = {}

    def __iter__(self) -> Iterator[tuple[int, Site]]:
        for index, slot in enumerate(self.slots):
            chain = self._functions(slot.node)
            if not chain or slot.parent is None:
                continue
            yield index, Site(slot, self._slot_of[id(slot.parent)], self._scope(chain),
                              self.names, self._loop_exit(slot.node))

    def _ancestors(self, node: ast.AST) -> Iterator[Slot]:
        slot = self._slot_of[id(node)]
        while slot.parent is not None:
            yield slot
            slot = self._slot_of[id(slot.parent)]

    def _functions(self, node: ast.AST) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, ...]:
        """The functions whose bodies hold `node`, outermost first."""
        return tuple(reversed([s.parent for s in self._ancestors(node)
                               if isinstance(s.parent, FUNCTIONS) and s.field == "body"]))

    def _scope(self, chain: tuple[ast.FunctionDef | ast.AsyncFunctionDef, ...]) -> Scope:
        key = id(chain[-1])
        if key not in self._scopes:
            self._scopes[key] = function_scope(chain, self.names.callables)
        return self._scopes[key]

    def _loop_exit(self, node: ast.AST) -> bool:
        """A statement inside a `while` loop that changes what the loop's condition reads,
        or that holds a break/return: deleting it (or turning a break into continue)
        typically leaves a loop that never ends."""
        if not isinstance(node, ast.stmt):
            return False
        whiles: list[ast.While] = []
        for slot in self._ancestors(node):
            if isinstance(slot.parent, FUNCTIONS):
                break
            if isinstance(slot.parent, ast.While) and slot.field == "body":
                whiles.append(slot.parent)
        if not whiles:
            return False
        reads = {n.id for w in whiles for n in ast.walk(w.test) if isinstance(n, ast.Name)}
        leaves = any(isinstance(n, (ast.Break, ast.Return)) for n in ast.walk(node))
        return leaves or bool(_updated_names(node) & reads)


def _updated_names(statement: ast.stmt) -> set[str]:
    """Names a statement rebinds, or mutates through a method call (`queue.pop()`) or
    an item or attribute assignment."""
    names: set[str] = set()
    for node in ast.walk(statement):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if isinstance(node.func.value, ast.Name):
                names.add(node.func.value.id)
        elif isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(node.ctx, ast.Store):
            if isinstance(node.value, ast.Name):
                names.add(node.value.id)
    return names
