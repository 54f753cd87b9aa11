"""Which mutants a session leaves out, and why: a line marked `# pragma: no mutate` (mutmut's
and cosmic-ray's `cr-filter-pragma` convention), operators included or excluded by regular
expression (cosmic-ray's operators-filter matches from the start of the name), and line
ranges. A mutant left out is recorded as cosmic-ray's filters record it: skipped."""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field

from coral_core.errors import UserError

PRAGMA = re.compile(r"#\s*pragma:\s*no\s+mutate\b")


def _patterns(values: tuple[str, ...], flag: str) -> tuple[re.Pattern, ...]:
    found = []
    for value in values:
        try:
            found.append(re.compile(value))
        except re.error as error:
            raise UserError(f"{flag} {value!r} is not a regular expression: {error}") from None
    return tuple(found)


def parse_lines(text: str) -> tuple[tuple[int, int], ...]:
    """'10-40,55' -> ((10, 40), (55, 55)); one line for anything else."""
    ranges = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        low, dash, high = part.partition("-")
        try:
            first, last = int(low), int(high if dash else low)
        except ValueError:
            raise UserError(f"--lines {text!r}: expected ranges such as 10-40,55") from None
        if first < 1 or last < first:
            raise UserError(f"--lines {text!r}: {part} is not a range of line numbers")
        ranges.append((first, last))
    return tuple(ranges)


def pragma_lines(source: str) -> frozenset[int]:
    """The lines whose comment says `pragma: no mutate` (comments only, not strings)."""
    lines = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT and PRAGMA.search(token.string):
                lines.add(token.start[0])
    except (tokenize.TokenError, SyntaxError):
        pass
    return frozenset(lines)


@dataclass(frozen=True)
class MutantFilter:
    operators: tuple[str, ...] = ()          # keep only operators matching one of these
    exclude_operators: tuple[str, ...] = ()  # leave out operators matching one of these
    lines: tuple[tuple[int, int], ...] = ()  # keep only mutants starting in these ranges
    pragma: frozenset[int] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        _patterns(self.operators, "--operator")
        _patterns(self.exclude_operators, "--exclude-operator")

    def meta(self) -> dict:
        """What a resumed session must agree on."""
        return {"operators": list(self.operators),
                "exclude_operators": list(self.exclude_operators),
                "lines": [list(r) for r in self.lines]}

    def reason(self, operator: str, first_line: int, last_line: int) -> str | None:
        """Why this mutant is left out, or None."""
        if any(row in self.pragma for row in range(first_line, last_line + 1)):
            return "pragma: no mutate"
        if self.operators and not any(re.match(p, operator) for p in self.operators):
            return "operator not selected (--operator)"
        if any(re.match(p, operator) for p in self.exclude_operators):
            return "operator excluded (--exclude-operator)"
        if self.lines and not any(low <= first_line <= high for low, high in self.lines):
            return "outside --lines"
        return None
