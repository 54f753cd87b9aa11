"""Finding the program in a model's reply (chat prose, several blocks, odd indentation)."""

from __future__ import annotations

import ast
import re
import textwrap

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_CODE_START = re.compile(r"^\s*(def |async def |class |import |from \S+ import |@)")


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


def _defines(code: str, entry: str | None) -> bool:
    if not entry:
        return True
    return re.search(rf"^\s*(async\s+)?def\s+{re.escape(entry)}\s*\(", code, re.M) is not None


def _trim_to_parse(code: str) -> str:
    """Drop trailing lines (prose after the code) until what is left parses."""
    lines = code.rstrip().splitlines()
    for end in range(len(lines), 0, -1):
        candidate = "\n".join(lines[:end])
        if _parses(candidate):
            return candidate
    return code.strip()


def _blocks(text: str) -> list[tuple[str, str]]:
    return [(lang.lower(), textwrap.dedent(body).strip("\n"))
            for lang, body in _FENCE.findall(text)]


def extract_python(text: str, entry: str | None = None) -> str:
    """The best Python program in `text`.

    Order: a completion that continues an open ```python fence (code, then a closing
    fence); fenced blocks, preferring Python ones that define `entry` and parse, the last
    such block winning (replies often quote the bug first, then the fix); otherwise the
    code from the first definition or import, trimmed of trailing prose.
    """
    stripped = text.lstrip("\n")
    if "```" in stripped and not stripped.lstrip().startswith("```"):
        head = stripped.split("```", 1)[0]
        if _defines(head, entry) and _parses(textwrap.dedent(head)):
            return textwrap.dedent(head).strip("\n")
    blocks = [b for b in _blocks(text) if b[0] in ("", "python", "py", "python3")]
    if blocks:
        ranked = sorted(
            enumerate(blocks),
            key=lambda item: (_defines(item[1][1], entry), _parses(item[1][1]),
                              item[1][0] != "", item[0]),
        )
        return ranked[-1][1][1]
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if _CODE_START.match(line):
            code = textwrap.dedent("\n".join(lines[index:]))
            return _trim_to_parse(code)
    return text.strip()
