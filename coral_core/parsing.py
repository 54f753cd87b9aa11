"""Parsing Python in Coral's own process, safe across threads.

CPython 3.11 keeps the depth counter of its AST conversion in one per-interpreter place:
two threads converting at once (a garbage collector's finaliser can switch threads in
the middle of one) make a valid program fail with SystemError("AST constructor recursion
depth mismatch"). Coral parses in scoring and generation threads, so every parse and
every compile of a tree on the host side goes through here, one at a time. (Code run in
the sandbox parses in processes of its own.)
"""

from __future__ import annotations

import ast
import threading
from types import CodeType

_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """`ast.parse`, one thread at a time."""
    with _LOCK:
        return ast.parse(source, filename, mode)


def compile_tree(tree: ast.AST, filename: str, mode: str, flags: int = 0) -> CodeType:
    """`compile` of a syntax tree (validated by the same converter), one thread at a time."""
    with _LOCK:
        return compile(tree, filename, mode, flags)
