"""What a function can see, for the baseline's name edits.

A replaced name should be one the function could plausibly have meant: a parameter, a
local, a name of an enclosing function, or (in call position) a function it could call.
Names are kept in order of first appearance, so the edits built from them come out in a
deterministic order.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass

# Builtins a buggy program may have confused with each other: one is offered in place of
# the other even if the program never uses it.
RELATED_BUILTINS: dict[str, tuple[str, ...]] = {
    "any": ("all",), "all": ("any",),
    "min": ("max",), "max": ("min",),
    "sorted": ("reversed",), "reversed": ("sorted",),
    "list": ("tuple", "set"), "tuple": ("list",), "set": ("list",),
}
_BUILTINS = frozenset(dir(builtins))


@dataclass(frozen=True)
class Scope:
    """Names visible in one function, each tuple in order of first appearance.

    params: the parameters of the function itself.
    values: parameters and locals of the function and of enclosing functions.
    callables: functions the module defines or imports, and builtins it calls.
    sequences: value names that are indexed, sliced, iterated over, unpacked with a
    starred target or measured with len().
    integers: value names used as indices, slice bounds, range() arguments, or in
    arithmetic or comparisons with an integer literal.
    """

    params: tuple[str, ...]
    values: tuple[str, ...]
    callables: tuple[str, ...]
    sequences: tuple[str, ...]
    integers: tuple[str, ...]

    def alike(self, first: str, second: str) -> bool:
        """Could one name stand for the other? Not when one is only used as a sequence
        and the other only as an integer; names of unknown use are alike to all."""
        roles = [{r for r, names in (("seq", self.sequences), ("int", self.integers))
                  if name in names} for name in (first, second)]
        return not roles[0] or not roles[1] or bool(roles[0] & roles[1])


def _ordered(names: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(names))


def _walk_own(function: ast.AST):
    """Nodes of `function` outside nested function and class definitions."""
    stack = list(reversed(list(ast.iter_child_nodes(function))))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _comprehension_targets(function: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in _walk_own(function):
        if isinstance(node, ast.comprehension):
            names.update(n.id for n in ast.walk(node.target) if isinstance(n, ast.Name))
    return names


def _params(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    args = function.args
    params = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    return params + [a.arg for a in (args.vararg, args.kwarg) if a is not None]


def _bound(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    params = _params(function)
    hidden = _comprehension_targets(function)
    local = [
        node.id for node in _walk_own(function)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id not in hidden
    ]
    return params + local


def _int_like(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


def _literal_role(value: ast.expr) -> str:
    """"seq" or "int" when an assigned value shows what the name holds, else ""."""
    if isinstance(value, (ast.List, ast.ListComp, ast.Tuple, ast.Set, ast.SetComp,
                          ast.Dict, ast.DictComp, ast.JoinedStr)):
        return "seq"
    if isinstance(value, ast.Constant):
        return {int: "int", str: "seq"}.get(type(value.value), "")
    if isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Slice):
        return "seq"
    if isinstance(value, ast.BinOp) and isinstance(value.op, (ast.Add, ast.Mult)):
        roles = {_literal_role(value.left), _literal_role(value.right)}
        return "seq" if "seq" in roles else ""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
        return {"len": "int", "list": "seq", "sorted": "seq", "range": "seq"}.get(
            value.func.id, "")
    return ""


def _arithmetic_names(node: ast.AST) -> list[str]:
    """Names an integer expression is computed from (`i - 1` -> i; not len(x) -> x)."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.BinOp):
        return _arithmetic_names(node.left) + _arithmetic_names(node.right)
    if isinstance(node, ast.UnaryOp):
        return _arithmetic_names(node.operand)
    return []


def _index_names(index: ast.AST) -> list[str]:
    names: list[str] = []
    for part in index.elts if isinstance(index, ast.Tuple) else [index]:
        bounds = (part.lower, part.upper, part.step) if isinstance(part, ast.Slice) else (part,)
        for bound in bounds:
            if bound is not None:
                names += _arithmetic_names(bound)
    return names


def _roles(function: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[list[str], list[str]]:
    """Names used as sequences and as integers (see Scope)."""
    defaults = function.args.defaults
    named = function.args.args[len(function.args.args) - len(defaults):]
    integers = [a.arg for a, d in zip(named, defaults) if _literal_role(d) == "int"]
    sequences = [a.arg for a, d in zip(named, defaults) if _literal_role(d) == "seq"]
    for node in _walk_own(function):
        if isinstance(node, ast.Subscript):
            if isinstance(node.value, ast.Name):
                sequences.append(node.value.id)
            integers += _index_names(node.slice)
        elif isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.iter, ast.Name):
            sequences.append(node.iter.id)
        elif isinstance(node, ast.Assign):
            starred = any(isinstance(n, ast.Starred) for t in node.targets for n in ast.walk(t))
            if starred and isinstance(node.value, ast.Name):
                sequences.append(node.value.id)  # first, *rest = seq
            if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                role = _literal_role(node.value)
                if role:
                    (sequences if role == "seq" else integers).append(node.targets[0].id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "len" and node.args and isinstance(node.args[0], ast.Name):
                sequences.append(node.args[0].id)
            elif node.func.id == "range":
                integers += [name for arg in node.args for name in _arithmetic_names(arg)]
        elif isinstance(node, ast.BinOp) and (_int_like(node.left) or _int_like(node.right)):
            integers += [n.id for n in (node.left, node.right) if isinstance(n, ast.Name)]
        elif isinstance(node, ast.Compare) and any(map(_int_like, [node.left, *node.comparators])):
            integers += [n.id for n in [node.left, *node.comparators] if isinstance(n, ast.Name)]
    return sequences, integers


@dataclass(frozen=True)
class ModuleNames:
    """Names that hold across the module.

    callables: functions defined or imported anywhere, then the builtins the module
    calls, then their related builtins. defined: functions and classes the module itself
    defines. methods / fields: attribute names it calls, and those it reads as values.
    """

    callables: tuple[str, ...]
    defined: frozenset[str]
    methods: tuple[str, ...]
    fields: tuple[str, ...]


def module_names(tree: ast.Module) -> ModuleNames:
    defined: list[str] = []
    imported: list[str] = []
    called: list[str] = []
    methods: list[str] = []
    fields: list[str] = []
    functions = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.append(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imported += [(a.asname or a.name).split(".")[0] for a in node.names]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in _BUILTINS:
                called.append(node.func.id)
        elif isinstance(node, ast.Attribute):
            (methods if id(node) in functions else fields).append(node.attr)
    related = [other for name in called for other in RELATED_BUILTINS.get(name, ())]
    return ModuleNames(
        callables=_ordered(defined + imported + called + related),
        defined=frozenset(defined), methods=_ordered(methods), fields=_ordered(fields),
    )


def function_scope(
    chain: tuple[ast.FunctionDef | ast.AsyncFunctionDef, ...], callables: tuple[str, ...],
) -> Scope:
    """The scope of the innermost function of `chain` (outermost first)."""
    function = chain[-1]
    values: list[str] = []
    for outer in chain:
        values += _bound(outer)
    sequences, integers = _roles(function)
    visible = set(values)
    return Scope(
        params=_ordered(_params(function)),
        values=_ordered(values),
        callables=callables,
        sequences=_ordered([n for n in sequences if n in visible]),
        integers=_ordered([n for n in integers if n in visible]),
    )
