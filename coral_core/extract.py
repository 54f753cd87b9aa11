"""Finding the program in a model's reply (chat prose, several blocks, odd indentation).

This runs in the parent, on text a model wrote, so every step is bounded: a parse is tried
only on text up to MAX_PARSE_CHARS long, all parses of one reply together read at most
PARSE_BUDGET characters (trimming trailing prose tries at most MAX_TRIMS endings), every
exception a parse can raise (SyntaxError, but also RecursionError and MemoryError for very
deep expressions) means "does not parse", fences are found in one pass, and every regular
expression is matched at line starts only. Extraction never raises on what the reply
contains, and takes time linear in its length.
"""

from __future__ import annotations

import re
import textwrap

from coral_core import parsing

MAX_PARSE_CHARS = 128 * 1024
PARSE_BUDGET = 512 * 1024
MAX_TRIMS = 128

_LANGUAGE = re.compile(r"[ \t]*([A-Za-z0-9_+-]*)")
_CODE_START = re.compile(r"^[ \t]*(def |async def |class |import |from \S+ import |@)")


class _Budget:
    """Characters left to parse for one reply."""

    def __init__(self, chars: int = PARSE_BUDGET):
        self.left = chars

    def parses(self, code: str) -> bool:
        if len(code) > MAX_PARSE_CHARS or len(code) > self.left:
            return False
        self.left -= len(code)
        try:
            parsing.parse(code)
        except Exception:  # SyntaxError, ValueError, RecursionError, MemoryError, ...
            return False
        return True


# What a pytest file defines: a test function or a Test class.
_TESTS = re.compile(r"^[ \t]*(?:(?:async[ \t]+)?def[ \t]+test\w*[ \t]*\(|class[ \t]+Test\w*)",
                    re.M)


def _defines(code: str, entry: str | None, tests: bool = False) -> bool:
    if tests:
        return _TESTS.search(code) is not None
    if not entry:
        return True
    pattern = rf"^[ \t]*(async[ \t]+)?def[ \t]+{re.escape(entry)}[ \t]*\("
    return re.search(pattern, code, re.M) is not None


def _trim_to_parse(code: str, budget: _Budget) -> str:
    """Drop trailing lines (prose after the code) until what is left parses."""
    lines = code.rstrip().splitlines()
    for end in range(len(lines), max(0, len(lines) - MAX_TRIMS), -1):
        candidate = "\n".join(lines[:end])
        if budget.parses(candidate):
            return candidate
    return code.strip()


def _blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of each fenced block: a ``` fence, its info line, and the text up to
    the next ``` or the end. One pass with str.find (a regex here rescanned the rest of a
    line from every backtick of a reply of backticks: quadratic)."""
    blocks, position = [], 0
    while (start := text.find("```", position)) >= 0:
        end_of_line = text.find("\n", start + 3)
        if end_of_line < 0:  # no body line: no fence after this one has one either
            break
        match = _LANGUAGE.match(text, start + 3, end_of_line)
        language = match.group(1) if match else ""
        close = text.find("```", end_of_line + 1)
        body = text[end_of_line + 1:close if close >= 0 else len(text)]
        blocks.append((language.lower(), textwrap.dedent(body).strip("\n")))
        if close < 0:
            break
        position = close + 3
    return blocks


def extract_python(text: str, entry: str | None = None, *, tests: bool = False) -> str:
    """The best Python program in `text`.

    Order: a completion that continues an open ```python fence (code, then a closing
    fence); fenced blocks, preferring Python ones that define `entry` (with `tests`: a
    test function or a Test class, so that a reply quoting the function under test after
    its tests is scored on the tests) and parse, the last such block winning (replies
    often quote the bug first, then the fix); otherwise the code from the first definition
    or import, trimmed of trailing prose.
    """
    budget = _Budget()
    stripped = text.lstrip("\n")
    if "```" in stripped and not stripped.lstrip().startswith("```"):
        head = stripped.split("```", 1)[0]
        if _defines(head, entry, tests) and budget.parses(textwrap.dedent(head)):
            return textwrap.dedent(head).strip("\n")
    blocks = [b for b in _blocks(text) if b[0] in ("", "python", "py", "python3")]
    if blocks:
        ranked = sorted(
            enumerate(blocks),
            key=lambda item: (_defines(item[1][1], entry, tests), budget.parses(item[1][1]),
                              item[1][0] != "", item[0]),
        )
        return ranked[-1][1][1]
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if _CODE_START.match(line):
            code = textwrap.dedent("\n".join(lines[index:]))
            return _trim_to_parse(code, budget)
    return text.strip()
