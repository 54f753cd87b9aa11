"""Rebuild the values a candidate recorded, as plain builtins the parent can trust.

Only builtin types are ever constructed, so comparing them runs no candidate code; objects
that are not plain data arrive as `Opaque` identity tokens.

Decoding is bounded whatever the candidate sends: the text is parsed once (linear), nesting
is capped, every node counts against a budget, and no set or dict is built from values
whose hashes collide more than a few times (integers, floats and tuples hash the same way
in every process, so a candidate can make thousands of distinct values share one hash, and
building a set of them takes quadratic time). Anything out of bounds is a DecodeError: that
step is an error, and the job goes on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

MAX_DEPTH = 101  # value nesting: the child's encoder refuses deeper values
MAX_NODES = 1_000_000  # values in one record (its text is at most record_bytes anyway)
MAX_EQUAL_HASHES = 16  # values in one set (keys in one dict) that share a hash


class DecodeError(ValueError):
    pass


@dataclass(frozen=True)
class Opaque:
    """An object the candidate returned that is not plain data: equal only to itself."""

    ident: int
    truthy: bool = True

    def __bool__(self) -> bool:
        return self.truthy

    def __repr__(self) -> str:
        return f"<object #{self.ident}>"


class _Budget:
    def __init__(self, nodes: int):
        self.left = nodes

    def spend(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise DecodeError("value too large")


def _hashable_few_collisions(items: list[Any]) -> None:
    """Refuse values a set or dict could only be built from in quadratic time."""
    counts: dict[int, int] = {}
    for item in items:
        try:
            key = hash(item)
        except TypeError:
            raise DecodeError("unhashable value in a set or as a dict key") from None
        counts[key] = counts.get(key, 0) + 1
        if counts[key] > MAX_EQUAL_HASHES:
            raise DecodeError("too many values with equal hashes")


_SEQUENCES = {"t": tuple, "s": set, "fs": frozenset}


def _rebuild(node: Any, depth: int, budget: _Budget) -> Any:
    budget.spend()
    if depth > 2 * MAX_DEPTH + 2:  # tagged containers are two JSON levels
        raise DecodeError("value nested too deeply")
    if isinstance(node, list):
        return [_rebuild(item, depth + 1, budget) for item in node]
    if not isinstance(node, dict):
        return node
    if len(node) == 1:
        (tag, body), = node.items()
        if tag in _SEQUENCES and isinstance(body, list):
            items = [_rebuild(item, depth + 2, budget) for item in body]
            if tag != "t":
                _hashable_few_collisions(items)
            return _SEQUENCES[tag](items)
        if tag == "d" and isinstance(body, list):
            pairs = []
            for pair in body:
                if not (isinstance(pair, list) and len(pair) == 2):
                    raise DecodeError("malformed dict")
                pairs.append((_rebuild(pair[0], depth + 2, budget),
                              _rebuild(pair[1], depth + 2, budget)))
            _hashable_few_collisions([key for key, _ in pairs])
            return dict(pairs)
        if tag == "b" and isinstance(body, str):
            return bytes.fromhex(body)
        if tag == "x":
            raise DecodeError(body[:200] if isinstance(body, str) else "unrepresentable value")
    if set(node) == {"o", "truthy"} and type(node["o"]) is int:
        return Opaque(node["o"], bool(node["truthy"]))
    raise DecodeError("unknown tag")


def decode_record(text: bytes | str) -> Any:
    """Rebuild one recorded value from its JSON text."""
    try:
        return _rebuild(json.loads(text), 0, _Budget(MAX_NODES))
    except DecodeError:
        raise
    except (ValueError, TypeError, RecursionError, MemoryError) as error:
        raise DecodeError(type(error).__name__) from None
