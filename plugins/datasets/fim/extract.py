"""Turning a model's FIM reply into the middle it proposes.

Strategies (`[dataset.options] extract = "..."`; "auto" picks by the task's language, and
takes a random span's reply as it is):

- `python`: the FIM design's contextual extraction: cut where the reply starts repeating the
  suffix, stop at statement boundaries (a blank line followed by a `def`/`class`/dedent
  below the first line's level, three newlines) and, for a middle that ends inside a line
  (the suffix continues that line), at the first line end where brackets balance;
- `java`: the FIM design's aggressive extraction: the same suffix cut, then stop where the braces
  close below the starting level, at a declaration after a blank line, and for a one-line
  middle at the first `;`, `{` or `}` at bracket depth 0;
- `statement`: the first complete statement (CrossCodeEval's rule);
- `none`: the reply as it is.

The ground truth is never used (the FIM design sized its cut by the ground truth's length).
A third party adds a strategy with `register_extractor(name, function)`, where
`function(reply, prefix, suffix, language) -> str`.
"""

from __future__ import annotations

import re
from typing import Callable

Extractor = Callable[[str, str, str, str], str]
EXTRACTORS: dict[str, Extractor] = {}
_OPEN, _CLOSE = "([{", ")]}"
_BRACKETS = _OPEN + _CLOSE
# A string literal of one line; an unclosed one runs to the end of the line, a lone
# backslash ending it included. The pattern succeeds once it starts (a literal that needed a
# character after a final backslash failed there and was retried from every later quote:
# quadratic on a long hostile line). It reads the line with its backslash pairs made inert
# (`_unpair`), so a character is escaped exactly when a backslash precedes it: a lazy scan
# with a one-character look-behind, no group repeated per character.
_LITERAL = re.compile(r"\"[\s\S]*?(?:(?<!\\)\"|\Z)|'[\s\S]*?(?:(?<!\\)'|\Z)")
_LINE_COMMENT = re.compile(r"(#|//).*")
# The pieces of a reply that decide where its first statement ends; the rest is skipped.
# Python: newlines (with the blanks after them: the first one decides), runs of brackets
# (counted at once) and runs of other text (their last character is the last one seen).
# Java: runs of `(`/`)`/`[`/`]` (which never end it), and runs of `{`, of `}` and of `;`.
_STATEMENT = {"python": re.compile(r"\n\s*|[()\[\]{}]+|[^\s()\[\]{}]+"),
              "java": re.compile(r"[()\[\]]+|\{+|\}+|;+")}


def register_extractor(name: str, function: Extractor) -> None:
    EXTRACTORS[name] = function


def extractor_for(name: str, language: str, kind: str = "") -> Extractor:
    """The strategy `name`; "auto" is the language's, except for a random span (kind
    "span"): its middle may start and end anywhere and cross lines, so no boundary rule
    fits it (the python rule cut half of QuixBugs' reference spans at their first line),
    and the reply is taken as it is, ended by the stop sequences, as HumanEval-Infilling's
    random-span harness takes it."""
    if name == "auto":
        name = "none" if kind == "span" else language
    return EXTRACTORS[name]


def extracts_to_itself(middle: str, prefix: str, suffix: str, language: str, kind: str,
                       ) -> bool:
    """Whether the default extraction leaves `middle` whole: a site where it would not (a
    middle that holds a line equal to the suffix's first, one that ends inside a line)
    is not made into a task, so that the ground truth scores 1.0 by construction."""
    extracted = extractor_for("auto", language, kind)(middle, prefix, suffix, language)
    return extracted.split() == middle.split()


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


def _unpair(text: str) -> str:
    """`text` with each backslash pair (left to right) made two NULs: an odd run of
    backslashes escapes the next character, and is now one backslash (as inert outside a
    literal as the NULs are)."""
    return text.replace("\\\\", "\0\0")


def _before(text: str, stop: str) -> str:
    """`text` up to the first `stop` (`text.split(stop)[0]` without making every piece)."""
    cut = text.find(stop)
    return text if cut < 0 else text[:cut]


def _depth_changes(line: str) -> int:
    code = _LITERAL.sub("", _unpair(line))
    code = _LINE_COMMENT.sub("", code)
    return sum(code.count(c) for c in _OPEN) - sum(code.count(c) for c in _CLOSE)


def _inline(prefix: str, suffix: str) -> bool:
    """The middle ends inside a line: the suffix continues the line the middle ends on."""
    return bool(suffix) and not suffix.startswith("\n")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def infill_python(reply: str, prefix: str, suffix: str, language: str = "python") -> str:
    text = _before(_cut_suffix_echo(reply, suffix), "\n\n\n")
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
        if _inline(prefix, suffix) and depth <= 0 and i + 1 < len(lines):
            break  # the first line end where the brackets balance (not only the first line's)
    return "\n".join(out).rstrip()


def infill_java(reply: str, prefix: str, suffix: str, language: str = "java") -> str:
    text = _before(_cut_suffix_echo(reply, suffix), "\n\n\n")
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


def infill_statement(reply: str, prefix: str, suffix: str, language: str = "python") -> str:
    """Up to the end of the first complete statement: for Java the first `;`, `{` or `}` at
    bracket depth 0 or less, otherwise the first newline there after some code whose last
    character (before the newline) is not `:`, `\\` or `,`. One scan over runs of alike
    characters (slicing the reply at every newline was quadratic)."""
    if language == "java":
        return _java_statement(reply)
    depth = 0
    last = ""  # the last character seen that is not whitespace
    for match in _STATEMENT["python"].finditer(reply):
        token = match.group()
        if token[0] == "\n":
            if depth <= 0 and last and last not in ":\\,":
                return reply[:match.start()]
            continue
        last = token[-1]
        if token[0] in _BRACKETS:
            depth += sum(map(token.count, _OPEN)) - sum(map(token.count, _CLOSE))
    return reply


def _java_statement(reply: str) -> str:
    """Up to the first `;`, `{` or `}` after which the bracket depth is 0 or less."""
    depth = 0
    for match in _STATEMENT["java"].finditer(reply):
        token, start = match.group(), match.start()
        if token[0] == "{":  # the depth only grows: the first one decides
            if depth + 1 <= 0:
                return reply[:start + 1]
            depth += len(token)
        elif token[0] == "}":  # the first one after which the depth is 0 or less
            first = max(depth - 1, 0)
            if first < len(token):
                return reply[:start + first + 1]
            depth -= len(token)
        elif token[0] == ";":
            if depth <= 0:
                return reply[:start + 1]
        else:
            depth += sum(map(token.count, "([")) - sum(map(token.count, ")]"))
    return reply


def infill_none(reply: str, prefix: str, suffix: str, language: str = "python") -> str:
    return reply


for _name, _function in (("python", infill_python), ("java", infill_java),
                         ("statement", infill_statement), ("none", infill_none)):
    register_extractor(_name, _function)
