"""Which tests read a function's annotations, and a mutant's annotations put in place.

A mutant that changes nothing but the annotations of functions defined at import (strings,
under `from __future__ import annotations`) differs from the unmutated module only in what
reading those annotations gives. Where the baseline left them unread it is `equivalent`
(coral_core.mutation.annotations). Where the worker's own tests read them, a `readers` run
(the whole suite once more, in a child) gives each such function's annotations a dict that
notes every use of its contents (WatchedAnnotations): the tests that used them are the
mutant's tests, as the tests that ran a line are a line's. The mutant then runs in
`annotate` mode: the live function gets the mutant's annotations (`annotate`) and only those
tests run, instead of the whole suite in a fresh session (`reload`).
"""

from __future__ import annotations

import types
from typing import Any, Iterable

from coral_plugins.evaluators.mutation import probe

Key = tuple[str, int]

# Every way Python code reaches a dict's contents, and C code that honours a subclass's
# methods (dict(d), {**d}, f(**d), copy, pickle, json and repr go through these).
_READS = ("__getitem__", "__iter__", "__len__", "__contains__", "__eq__", "__ne__",
          "__repr__", "__reversed__", "__or__", "__ror__", "__ior__", "__setitem__",
          "__delitem__", "get", "keys", "values", "items",
          "copy", "pop", "popitem", "setdefault", "update", "clear")


class WatchedAnnotations(dict):
    """A function's annotations that note, in `reads`, each use of their contents."""

    __slots__ = ("_key", "_reads")

    def __init__(self, items: dict, key: Key, reads: set):
        super().__init__(items)
        self._key, self._reads = key, reads

    def __reduce_ex__(self, protocol: Any) -> tuple:  # copy and pickle: a plain dict
        self._reads.add(self._key)
        return dict, (dict(dict.items(self)),)


def _noting(name: str):
    method = getattr(dict, name)

    def noted(self, *args: Any, **kwargs: Any) -> Any:
        self._reads.add(self._key)
        return method(self, *args, **kwargs)

    noted.__name__ = noted.__qualname__ = name
    return noted


for _name in _READS:
    setattr(WatchedAnnotations, _name, _noting(_name))


def by_key(functions: Iterable[types.FunctionType]) -> dict[Key, list[types.FunctionType]]:
    """The live functions of the module by (name, first line), as annotations.py keys them."""
    found: dict[Key, list[types.FunctionType]] = {}
    for function in functions:
        key = (function.__code__.co_name, function.__code__.co_firstlineno)
        found.setdefault(key, []).append(function)
    return found


def _one_unread(functions: dict[Key, list[types.FunctionType]], key: Key):
    """The one live function of `key` whose annotations nothing read yet (at import or
    collection: this runs in a child forked after them), or None."""
    found = functions.get(key, [])
    if len(found) != 1 or probe.annotations_state(found[0]) != "unread":
        return None
    return found[0]


class Watch:
    """A readers run: the functions of `keys` given watched annotations (not one read
    before the tests, nor one that is not alone under its key), and what each test did."""

    def __init__(self, functions: dict[Key, list[types.FunctionType]], keys: Iterable[Key]):
        self.reads: set = set()  # the keys read since the last `take`
        self.held: dict[Key, tuple[types.FunctionType, WatchedAnnotations]] = {}
        for key in map(tuple, keys):
            function = _one_unread(functions, key)
            if function is not None:
                watched = WatchedAnnotations(function.__annotations__, key, self.reads)
                function.__annotations__ = watched
                self.held[key] = (function, watched)

    @property
    def keys(self) -> list[Key]:
        return sorted(self.held)

    def take(self) -> list[Key]:
        """The keys read since the last call."""
        taken = sorted(self.reads)
        self.reads.clear()
        return taken

    def replaced(self) -> bool:
        """A function's watched annotations were replaced (`f.__annotations__ = ...`, or
        deleted): what later tests read of them is not noted (reading the attribute
        itself uses none of the dict's methods)."""
        return any(function.__annotations__ is not watched
                   for function, watched in self.held.values())


def annotate(functions: dict[Key, list[types.FunctionType]],
             values: dict[Key, dict[str, str]]) -> bool:
    """Give each function the mutant's annotations (what reading them gives under the
    mutant); False, and nothing changed, when one is not there unread."""
    chosen = [(_one_unread(functions, key), value) for key, value in values.items()]
    if any(function is None for function, _ in chosen):
        return False
    for function, value in chosen:
        function.__annotations__ = dict(value)
    return True
