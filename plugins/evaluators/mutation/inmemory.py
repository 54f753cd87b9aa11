"""Applying a mutant in memory, in a forked child of the worker, so that what the tests see is
what they would see had the file been rewritten (as cosmic-ray rewrites it) and imported.

- `Swap`: the mutant changes only code that had not run when the tests were collected. Its
  code objects are paired with the original's (compiled from the same text as the import
  was); every live function whose code changed, wherever it is referenced (a closure that a
  decorator made at import, a method, `from mod import f`, a lambda in a dict), gets the
  mutated code in place, the enclosing functions too (a closure made later is made from the
  mutated code). When that cannot be proven faithful (the trees differ in shape, a changed
  code object is shared, a generator made at import still holds the old code, a closure's
  free variables differ, or no live function changes at all), the caller reloads instead.
- `install_finder`: every module of the project is forgotten and the mutated source is
  served by an import hook for the module's file, so a fresh pytest session imports the
  package as Python would (its `__init__` importing the module, siblings importing each
  other), the mutant compiled where the file would be read.
"""

from __future__ import annotations

import gc
import importlib.abc
import importlib.machinery
import os
import sys
import types
import warnings

from coral_plugins.evaluators.mutation.probe import MutantFinder


def _tree(code: types.CodeType) -> list[types.CodeType]:
    """The code objects nested directly in `code` (its functions, classes, lambdas)."""
    return [const for const in code.co_consts if isinstance(const, types.CodeType)]


def _all(code: types.CodeType) -> list[types.CodeType]:
    found = [code]
    for inner in _tree(code):
        found.extend(_all(inner))
    return found


def changed_codes(original: types.CodeType,
                  mutated: types.CodeType) -> dict[types.CodeType, types.CodeType] | None:
    """{original code: mutated code} for every code object the mutant changes, walking both
    trees in step; None when they differ in shape or a changed code object is ambiguous."""
    pairs: dict[types.CodeType, types.CodeType] = {}

    def walk(old: types.CodeType, new: types.CodeType) -> bool:
        if old == new:
            return True
        olds, news = _tree(old), _tree(new)
        if len(olds) != len(news) or old.co_name != new.co_name:
            return False
        if not all(walk(a, b) for a, b in zip(olds, news)):
            return False
        if old in pairs and pairs[old] != new:
            return False  # two equal code objects changed differently: whose is whose?
        pairs[old] = new
        return True

    return pairs if walk(original, mutated) else None


def _held_codes(functions: list[types.FunctionType]) -> set[types.CodeType]:
    """The live functions' code objects (nested ones too) that something other than a
    function or its enclosing code holds: a code object kept at import (`SAVED =
    f.__code__`, in a tuple, a cell, a frame) makes a function of the old code whenever it
    is used, which no swap reaches (a red-team pass: false survivors)."""
    live = {id(code): code for function in functions for code in _all(function.__code__)}
    codes = list(live.values())
    consts = {id(code.co_consts) for code in codes}
    held: set[types.CodeType] = set()
    here = sys._getframe()
    for referrer in gc.get_referrers(*codes):
        if isinstance(referrer, types.FunctionType) or id(referrer) in consts \
                or referrer is codes or referrer is live or referrer is here or (
                    type(referrer) is tuple and len(referrer) == len(codes)
                    and all(a is b for a, b in zip(referrer, codes))):  # the call's own
            continue
        held.update(live[id(r)] for r in gc.get_referents(referrer) if id(r) in live)
    return held


class Swap:
    """The live code of one module file, found once after collection (in the worker)."""

    def __init__(self, filename: str, source: str, copied: bool = False):
        self.filename = filename
        self.copied = copied  # its code was copied at import (audit.py): no swap is faithful
        with warnings.catch_warnings():  # its warnings were the import's business
            warnings.simplefilter("ignore")
            self.original = compile(source, filename, "exec", dont_inherit=True)
        self.functions: list[types.FunctionType] = []
        self.suspended: list[types.CodeType] = []  # code of generators made and not finished
        self.frozen = gc.get_freeze_count() > 0  # objects gc.freeze() hid from the scan
        gc.collect()  # garbage is not a live function
        for value in gc.get_objects():
            if isinstance(value, types.FunctionType):
                if value.__code__.co_filename == filename:
                    self.functions.append(value)
            elif isinstance(value, (types.GeneratorType, types.CoroutineType,
                                    types.AsyncGeneratorType)):
                code = getattr(value, "gi_code", None) or getattr(value, "cr_code", None) \
                    or getattr(value, "ag_code", None)
                if code is not None and code.co_filename == filename:
                    self.suspended.append(code)
        # Live code of this file that its text does not compile to: a function rebuilt at
        # import (`code.replace`, a decorator that recompiles it). Where a changed function
        # has such a twin, the twin is what the tests call, and it keeps the old code.
        known = set(_all(self.original))
        self.rebuilt = {(f.__code__.co_name, f.__code__.co_firstlineno)
                        for f in self.functions if f.__code__ not in known}
        self.held = _held_codes(self.functions)

    def apply(self, mutated_source: str) -> bool:
        """Give every live function the mutant changes its mutated code; False (nothing
        changed) when that would not be faithful. Compiling may raise (a warning that the
        caller's filters make an error)."""
        mutated = compile(mutated_source, self.filename, "exec", dont_inherit=True)
        pairs = changed_codes(self.original, mutated)
        if self.frozen or not pairs or any(code in pairs for code in self.suspended):
            return False
        # A twin made by `code.replace` may carry any name and line: with one, none swaps.
        if self.copied or self.rebuilt or any(old in self.held for old in pairs):
            return False
        targets = [(function, pairs[function.__code__]) for function in self.functions
                   if function.__code__ in pairs]
        if not targets:
            return False
        for function, code in targets:
            if code.co_freevars != function.__code__.co_freevars:
                return False
        for function, code in targets:
            function.__code__ = code
        return True


def _own(path: str, prefix: str) -> bool:
    real = os.path.realpath(path)
    return real.startswith(prefix) and "site-packages" not in real \
        and "dist-packages" not in real


def forget(project: str) -> None:
    """Drop the project's own modules (not those of a virtual environment inside it), its
    namespace packages and every package above a dropped module, so the next import of each
    runs its file again (a package kept would hand out its old submodule as an attribute)."""
    prefix = os.path.realpath(project) + os.sep
    dropped = set()
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if path:
            mine = _own(path, prefix)
        else:  # a namespace package: its folders
            mine = any(_own(str(entry), prefix) for entry in getattr(module, "__path__", ()))
        if mine:
            dropped.add(name)
    for name in list(dropped):
        parts = name.split(".")
        dropped.update(".".join(parts[:i]) for i in range(1, len(parts)))
    for name in dropped:
        sys.modules.pop(name, None)
    importlib.invalidate_caches()


def install_finder(module_path: str, source: str) -> None:
    """Serve `module_path`'s imports from here on with `source` (the mutant's text)."""
    sys.meta_path.insert(0, MutantFinder(module_path, source))


def defer_rewriting(module_path: str) -> None:
    """pytest's assertion rewriter (which a nested session puts ahead of every finder)
    reads a module it rewrites from disk: the project's own pytest plugins, conftest files,
    modules named to `register_assert_rewrite`. For the mutated file it steps aside, so the
    mutant is served (its asserts plain: they pass and fail as rewritten ones do)."""
    from _pytest.assertion.rewrite import AssertionRewritingHook

    target = os.path.realpath(module_path)
    original = AssertionRewritingHook.find_spec

    def find_spec(self, name, path=None, target_=None):
        spec = original(self, name, path, target_)
        origin = getattr(spec, "origin", None)
        if isinstance(origin, str) and os.path.realpath(origin) == target:
            return None
        return spec

    AssertionRewritingHook.find_spec = find_spec
