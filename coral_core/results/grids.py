"""Tables as data, and how to fit one to a width without cutting a word a user needs.

A `Grid` is a title, columns, rows of strings and a caption. Output to a file or a pipe is
a plain Markdown table (readable in logs and pasteable, like lm-eval's), whatever the
width. On a terminal, `fit` keeps the table whole when it fits, else splits its value
columns into several tables that each repeat the key columns (the problem name), else
(when even one value column beside the keys does not fit) asks for a vertical layout,
one block per row. Cells are never truncated: a problem name is always printed whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from coral_core.shown import printable


@dataclass(frozen=True)
class Column:
    """`key` columns identify a row and are repeated in every part of a split table."""

    header: str
    align: str = "left"  # left | right
    key: bool = False


@dataclass(frozen=True)
class Grid:
    title: str
    columns: tuple[Column, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""
    rules: tuple[int, ...] = field(default=())  # a rule goes before these row indexes

    def widths(self) -> list[int]:
        """Each column's natural width: its longest line, header included."""
        return [max(len(line) for text in (column.header, *(row[i] for row in self.rows))
                    for line in text.splitlines() or [""])
                for i, column in enumerate(self.columns)]

    def select(self, indexes: list[int], title: str) -> "Grid":
        return replace(self, title=title, columns=tuple(self.columns[i] for i in indexes),
                       rows=tuple(tuple(row[i] for i in indexes) for row in self.rows))


def boxed_width(widths: list[int]) -> int:
    """Width of a boxed table (rich's default: a border and one space each side)."""
    return sum(w + 3 for w in widths) + 1


def fit(grid: Grid, width: int) -> list[Grid] | None:
    """The grid whole, or split into parts that each fit `width` (key columns in every
    part), or None when a vertical layout is needed."""
    widths = grid.widths()
    if boxed_width(widths) <= width:
        return [grid]
    keys = [i for i, c in enumerate(grid.columns) if c.key]
    values = [i for i, c in enumerate(grid.columns) if not c.key]
    groups: list[list[int]] = []
    for index in values:
        if groups and boxed_width([widths[i] for i in keys + groups[-1] + [index]]) <= width:
            groups[-1].append(index)
        elif boxed_width([widths[i] for i in keys + [index]]) <= width:
            groups.append([index])
        else:
            return None
    if len(groups) <= 1:
        return [grid.select(keys + (groups[0] if groups else []), grid.title)]
    return [grid.select(keys + group, f"{grid.title} ({n}/{len(groups)})")
            for n, group in enumerate(groups, 1)]


def _cell(text: str) -> str:
    return " ".join(printable(text).split()).replace("|", "\\|") or " "


def markdown(grid: Grid) -> str:
    """The grid as a GitHub-flavoured Markdown table, title above and caption below."""
    header = [_cell(c.header) for c in grid.columns]
    body = [[_cell(text) for text in row] for row in grid.rows]
    widths = [max(3, *(len(cells[i]) for cells in [header, *body]))
              for i in range(len(header))]
    lines = [printable(grid.title), ""] if grid.title else []
    lines.append("| " + " | ".join(c.ljust(w) for c, w in zip(header, widths)) + " |")
    lines.append("|" + "|".join(("-" * (w + 1) + ":") if c.align == "right" else "-" * (w + 2)
                                for c, w in zip(grid.columns, widths)) + "|")
    for cells in body:
        lines.append("| " + " | ".join(
            cell.rjust(w) if column.align == "right" else cell.ljust(w)
            for cell, column, w in zip(cells, grid.columns, widths)) + " |")
    if grid.caption:
        lines += ["", printable(grid.caption)]
    return "\n".join(lines) + "\n"


def vertical(grid: Grid) -> list[tuple[str, list[tuple[str, str]]]]:
    """One block per row: its key columns as a heading ('problem: gcd  seen: yes'), then
    (header, value) for every other column with a value."""
    keys = [i for i, c in enumerate(grid.columns) if c.key] or [0]
    blocks = []
    for row in grid.rows:
        heading = "  ".join(f"{grid.columns[i].header}: {row[i]}" for i in keys if row[i])
        fields = [(c.header, row[i]) for i, c in enumerate(grid.columns)
                  if i not in keys and row[i]]
        blocks.append((heading, fields))
    return blocks
