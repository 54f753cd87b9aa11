"""Turning a candidate's return values into plain JSON data, inside the child.

Only the builtin types' own methods are used: a subclass of a builtin is reduced to its
builtin data (its overridden `__eq__` or `__iter__` plays no part), and any other object
becomes an identity token, so the parent compares values without running candidate code.
"""

from __future__ import annotations

MAX_DEPTH = 100  # nesting of a recorded value (tagged containers count twice)


class Unrepresentable(Exception):
    """A value that cannot cross the boundary as plain data."""


_BASES = (bool, int, float, str, bytes, list, tuple, dict, set, frozenset)


def encode(value, ids, keep, depth=0):
    """Turn a value into tagged JSON data using only the builtin types' own methods.

    Subclasses of builtins are reduced to their builtin data (so an overridden ``__eq__``
    or ``__iter__`` plays no part); any other object becomes an identity token, so the
    parent can compare objects by identity without ever calling their methods.
    """
    if depth > MAX_DEPTH:
        raise Unrepresentable("value nested too deeply")
    kind = type(value)
    if value is None or kind is bool or kind is int or kind is float or kind is str:
        return value
    if kind is list:
        return [encode(item, ids, keep, depth + 1) for item in value]
    if kind is tuple:
        return {"t": [encode(item, ids, keep, depth + 1) for item in value]}
    if kind is dict:
        return {"d": [[encode(k, ids, keep, depth + 1), encode(v, ids, keep, depth + 1)]
                      for k, v in dict.items(value)]}
    if kind is set or kind is frozenset:
        tag = "s" if kind is set else "fs"
        return {tag: [encode(item, ids, keep, depth + 1) for item in kind.__iter__(value)]}
    if kind is bytes:
        return {"b": value.hex()}
    for base in _BASES:
        if isinstance(value, base):
            return encode(_as_base(value, base), ids, keep, depth)
    key = id(value)
    if key not in ids:
        ids[key] = len(ids)
        keep.append(value)  # keep it alive so that its id is not reused within the step
    return {"o": ids[key], "truthy": bool(value)}


def _as_base(value, base):
    if base is bool:
        return int.__index__(value) != 0
    if base is int:
        return int.__index__(value)
    if base is float:
        return float.__float__(value)
    if base is str:
        return str.__str__(value)
    if base is bytes:
        return bytes(memoryview(value))
    if base is dict:
        return dict(dict.items(value))
    return base(base.__iter__(value))
