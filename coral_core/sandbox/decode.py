"""Rebuild the values a candidate recorded, as plain builtins the parent can trust.

Only builtin types are ever constructed, so comparing them runs no candidate code; objects
that are not plain data arrive as `Opaque` identity tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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


_SEQUENCES = {"t": tuple, "s": set, "fs": frozenset}


def _rebuild(node: Any) -> Any:
    if isinstance(node, list):
        return [_rebuild(item) for item in node]
    if not isinstance(node, dict):
        return node
    if len(node) == 1:
        (tag, body), = node.items()
        if tag in _SEQUENCES and isinstance(body, list):
            return _SEQUENCES[tag](_rebuild(item) for item in body)
        if tag == "d" and isinstance(body, list):
            return {_rebuild(k): _rebuild(v) for k, v in body}
        if tag == "b" and isinstance(body, str):
            return bytes.fromhex(body)
        if tag == "x":
            raise DecodeError(str(body)[:200])
    if set(node) == {"o", "truthy"} and isinstance(node["o"], int):
        return Opaque(node["o"], bool(node["truthy"]))
    raise DecodeError("unknown tag")


def decode_record(node: Any) -> Any:
    """Rebuild one recorded value from its parsed JSON form."""
    try:
        return _rebuild(node)
    except DecodeError:
        raise
    except (ValueError, TypeError, RecursionError) as error:
        raise DecodeError(type(error).__name__) from None
