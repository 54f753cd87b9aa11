"""Mutants that change only annotations that no code reads: equivalent, proven without a run.

Under `from __future__ import annotations` a function's annotations are strings, kept (in
CPython 3.10 to 3.13) as a tuple that becomes the `__annotations__` dict the first time
anything reads it. cosmic-ray mutates them (`str | bytes` -> `str + bytes`), and each such
mutant costs a whole-suite run, in cosmic-ray and in Coral's reload mode alike, to come out
survived. When the baseline (import, collection and every test, in the worker and in every
process a test starts) left the annotations of each changed function unread, a run of the
mutant is the baseline's own run step for step: nothing it does reaches the strings that
differ. Such a mutant is recorded as survived, mode `equivalent` (docs/mutation.md).

Only functions defined at import (in the module's body or its classes' bodies, not inside
another function) qualify: their objects live for the whole run, so the worker sees each
one's annotations as the tests left them (probe.annotation_census).
"""

from __future__ import annotations

import ast
import functools

from coral_core import parsing

Key = tuple[str, int]  # (function name, first line: its first decorator's, else its def's)


def _future_annotations(tree: ast.Module) -> bool:
    return any(isinstance(node, ast.ImportFrom) and node.module == "__future__"
               and any(alias.name == "annotations" for alias in node.names)
               for node in tree.body)


def _defs(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions defined at import: not inside another function or a lambda."""
    found: list = []

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append(child)
            elif not isinstance(child, ast.Lambda):
                walk(child)

    walk(tree)
    return found


def _key(node: ast.FunctionDef | ast.AsyncFunctionDef) -> Key:
    return node.name, min([d.lineno for d in node.decorator_list] + [node.lineno])


def _annotations(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list:
    arguments = node.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
             *(a for a in (arguments.vararg, arguments.kwarg) if a is not None)]
    return [a.annotation for a in every] + [node.returns]


def _stripped(tree: ast.Module) -> str:
    """The tree's dump with the annotations of its import-time functions left out."""
    for node in _defs(tree):
        arguments = node.args
        for argument in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                         *(a for a in (arguments.vararg, arguments.kwarg) if a is not None)]:
            argument.annotation = None
        node.returns = None
    return ast.dump(tree)


@functools.lru_cache(maxsize=8)
def _original(source: str) -> tuple[bool, tuple[Key, ...], tuple[str, ...], str]:
    tree = parsing.parse(source)
    defs = _defs(tree)
    dumps = tuple(ast.dump(ast.Tuple(_as_nodes(_annotations(d)), ast.Load())) for d in defs)
    return _future_annotations(tree), tuple(_key(d) for d in defs), dumps, \
        _stripped(parsing.parse(source))


def _as_nodes(items: list) -> list:
    return [item if item is not None else ast.Constant(None) for item in items]


def changed_annotations(source: str, mutant: str) -> set[Key] | None:
    """The functions whose annotations alone the mutant changes, or None when it changes
    anything else (or the module's annotations are evaluated: no future import)."""
    future, keys, dumps, stripped = _original(source)
    if not future:
        return None
    try:
        tree = parsing.parse(mutant)
    except SyntaxError:
        return None
    defs = _defs(tree)
    if tuple(_key(d) for d in defs) != keys:
        return None
    changed = {key for key, before, node in zip(keys, dumps, defs)
               if ast.dump(ast.Tuple(_as_nodes(_annotations(node)), ast.Load())) != before}
    if not changed or _stripped(tree) != stripped:
        return None
    return changed


def mutant_annotations(mutant: str, keys: set[Key]) -> dict[Key, dict[str, str]] | None:
    """The `__annotations__` each of `keys`' functions has in the mutant: the strings
    CPython's compiler makes of them, got by compiling each def alone with its body,
    defaults and decorators left out (a string depends on its annotation's tree only, so
    nothing of the module runs). None when a key has no def."""
    import __future__

    wanted = {_key(node): node for node in _defs(parsing.parse(mutant))}
    found: dict[Key, dict[str, str]] = {}
    for key in keys:
        node = wanted.get(key)
        if node is None:
            return None
        stub = ast.FunctionDef(
            name=node.name, args=ast.arguments(
                posonlyargs=node.args.posonlyargs, args=node.args.args,
                vararg=node.args.vararg, kwonlyargs=node.args.kwonlyargs,
                kw_defaults=[None] * len(node.args.kwonlyargs), kwarg=node.args.kwarg,
                defaults=[]),
            body=[ast.Pass()], decorator_list=[], returns=node.returns,
            **({"type_params": []} if "type_params" in ast.FunctionDef._fields else {}))
        module = ast.fix_missing_locations(ast.Module(body=[stub], type_ignores=[]))
        code = parsing.compile_tree(module, "<annotations>", "exec",
                                    __future__.annotations.compiler_flag)
        namespace: dict = {}
        exec(code, namespace)  # nosec B102 - a def with a `pass` body and no defaults
        found[key] = dict(namespace[node.name].__annotations__)
    return found
