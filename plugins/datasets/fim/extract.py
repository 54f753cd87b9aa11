"""Turning a model's FIM reply into the middle it proposes.

Strategies (`[dataset.options] extract = "..."`; "auto" picks by the task's language):

- `python`: seed 003's contextual extraction: cut where the reply starts repeating the
  suffix, stop at statement boundaries (a blank line followed by a `def`/`class`/dedent
  below the first line's level, three newlines) and, for a middle that ends inside a line
  (the suffix continues that line), at the first line end where brackets balance;
- `java`: seed 003's aggressive extraction: the same suffix cut, then stop where the braces
  close below the starting level, at a declaration after a blank line, and for a one-line
  middle at the first `;`, `{` or `}` at bracket depth 0;
- `statement`: the first complete statement (CrossCodeEval's rule);
- `none`: the reply as it is.

The ground truth is never used (seed 003 sized its cut by the ground truth's length).
A third party adds a strategy with `register_extractor(name, function)`, where
`function(reply, prefix, suffix, language) -> str`.
"""

from __future__ import annotations

import re
from typing import Callable

Extractor = Callable[[str, str, str, str], str]
EXTRACTORS: dict[str, Extractor] = {}
_OPEN, _CLOSE = "([{", ")]}"
# A string literal; an unclosed one runs to the end of the line (a scan for a closer that
# never comes, retried from every later quote, is quadratic on a long hostile line).
_LITERAL = re.compile(r"\"(?:\\[\s\S]|[^\"\\])*(?:\"|\Z)|'(?:\\[\s\S]|[^'\\])*(?:'|\Z)")


def register_extractor(name: str, function: Extractor) -> None:
    EXTRACTORS[name] = function


def _cut_suffix_echo(reply: str, suffix: str) -> str:
    """Drop what follows the point where the reply starts writing the suffix again."""
    head = next((ln.strip() for ln in suffix.splitlines() if ln.strip()), "")
    if len(head) < 4:
        return reply
    lines = reply.splitlines(keepends=True)
    kept = []
    for i, line in enumerate(lines):
        if i > 0 and line.strip() == head:
            break
        kept.append(line)
    return "".join(kept)


def _depth_changes(line: str) -> int:
    code = _LITERAL.sub("", line)
    code = re.sub(r"(#|//).*", "", code)
    return sum(code.count(c) for c in _OPEN) - sum(code.count(c) for c in _CLOSE)


def _inline(prefix: str, suffix: str) -> bool:
    """The middle ends inside a line: the suffix continues the line the middle ends on."""
    return bool(suffix) and not suffix.startswith("\n")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def extract_python(reply: str, prefix: str, suffix: str, language: str = "python") -> str:
    text = _cut_suffix_echo(reply, suffix)
    text = text.split("\n\n\n")[0]
    lines = text.split("\n")
    start_col = len(prefix.rsplit("\n", 1)[-1])
    base = start_col if not prefix.rsplit("\n", 1)[-1].strip() else None
    out: list[str] = []
    depth = 0
    for i, line in enumerate(lines):
        stripped = line.strip()
        if i > 0 and stripped:
            level = _indent(line)
            if base is not None and level < base and depth <= 0 and not stripped.startswith(
                    (")", "]", "}", "else", "elif", "except", "finally")):
                break
            if stripped.startswith(("def ", "class ", "if __name__")) and out and \
                    not out[-1].strip() and (base is None or level <= base):
                break
        out.append(line)
        depth += _depth_changes(line)
        if depth < 0:
            break
        if _inline(prefix, suffix) and depth <= 0 and i == 0 and len(lines) > 1:
            break
    return "\n".join(out).rstrip()


def extract_java(reply: str, prefix: str, suffix: str, language: str = "java") -> str:
    text = _cut_suffix_echo(reply, suffix)
    text = text.split("\n\n\n")[0]
    out: list[str] = []
    depth = 0
    for i, line in enumerate(text.split("\n")):
        stripped = line.strip()
        if i > 0 and out and not out[-1].strip() and re.match(
                r"(public|private|protected|class|interface|static|@)\b", stripped):
            break
        out.append(line)
        depth += _depth_changes(line)
        if depth < 0:
            break
        if _inline(prefix, suffix) and i == 0:
            break
    return "\n".join(out).rstrip()


def extract_statement(reply: str, prefix: str, suffix: str, language: str = "python") -> str:
    """Up to the end of the first complete statement."""
    depth = 0
    for i, ch in enumerate(reply):
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
        if depth <= 0:
            if language == "java" and ch in ";{}":
                return reply[:i + 1]
            if language != "java" and ch == "\n" and reply[:i].strip() and \
                    not reply[:i].rstrip().endswith((":", "\\", ",")):
                return reply[:i]
    return reply


def extract_none(reply: str, prefix: str, suffix: str, language: str = "python") -> str:
    return reply


for _name, _function in (("python", extract_python), ("java", extract_java),
                         ("statement", extract_statement), ("none", extract_none)):
    register_extractor(_name, _function)
