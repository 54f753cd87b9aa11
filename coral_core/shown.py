"""Text from outside (a server, an archive, a library, a candidate) made safe to show:
its control characters, terminal escapes and bidirectional overrides among them, appear as
escapes instead of acting on the terminal."""

from __future__ import annotations


def printable(text: str, keep: str = "\n\t") -> str:
    """Control characters shown as escapes, but for those in `keep` (none for a name on one
    line: a file name's newline forged a verdict line)."""
    return "".join(c if c.isprintable() or c in keep else repr(c)[1:-1] for c in text)


def one_line(text: str, limit: int = 300, spaces: bool = False) -> str:
    """`text` as one short line of an error message: runs of white space made one space
    (kept as they are, but escaped, with `spaces`: a file's name), the rest escaped."""
    if not spaces:
        text = " ".join(text.split())
    text = printable(text, keep="")
    return text if len(text) <= limit else text[:limit] + "..."
