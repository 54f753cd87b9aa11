"""Terminal output: rich tables on a terminal, Markdown tables in a file or a pipe, bare
JSON with --json. Tables are never truncated (see coral_core.results.grids)."""

from __future__ import annotations

from typing import Any, Mapping

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from coral_core.results.summary_tables import summary_grid, trials_grid
from coral_core.results.paired import verdict_text
from coral_core.results.search_reports import strategy_report
from coral_core.results.grids import Grid, fit, markdown, vertical
from coral_core.shown import printable
# What plugins' commands print with lives in the core; Coral's own commands share it.
from coral_core.terminal import note, print_json, reserve_stdout, stderr, stdout

__all__ = ["note", "print_json", "reserve_stdout", "show", "show_results", "stderr", "stdout"]


def show(grid: Grid, console: Console | None = None) -> None:
    """Print a table: Markdown unless the console is a terminal; on a terminal, whole, or
    split into parts that fit its width, or one block per row (never a cut cell)."""
    console = console or stdout
    if not console.is_terminal:
        console.file.write(markdown(grid) + "\n")
        console.file.flush()
        return
    parts = fit(grid, console.width)
    if parts is None:
        _vertical(grid, console)
        return
    for number, part in enumerate(parts, 1):
        last = number == len(parts)
        console.print(_rich(part, caption=grid.caption if last else ""), soft_wrap=False)


def _shown(text: str) -> str:
    """Text for a rich table: its markup escaped, its control characters shown as escapes
    (a summary.json's problem name held a red-team's terminal escape sequences)."""
    return escape(printable(text))


def _rich(grid: Grid, caption: str) -> Table:
    table = Table(title=_shown(grid.title) or None, caption=_shown(caption) or None,
                  caption_justify="left")
    for column, width in zip(grid.columns, grid.widths()):
        table.add_column(_shown(column.header), justify=column.align,  # type: ignore[arg-type]
                         no_wrap=True, min_width=width, overflow="fold")
    for index, row in enumerate(grid.rows):
        if index in grid.rules and index:
            table.rows[-1].end_section = True
        table.add_row(*(_shown(cell) for cell in row))
    return table


def _vertical(grid: Grid, console: Console) -> None:
    """One block per row: the key in bold, then 'header: value' lines whose values wrap
    under themselves (a long path folds, never cut)."""
    if grid.title:
        console.print(Text(printable(grid.title), style="bold"), soft_wrap=False)
    label_width = max((len(c.header) for c in grid.columns), default=0) + 1
    for heading, fields in vertical(grid):
        console.print(Text(printable(heading), style="bold"), soft_wrap=False,
                      overflow="fold")
        block = Table.grid(padding=(0, 1))
        block.add_column(width=label_width + 1, no_wrap=True, style="dim")
        block.add_column(overflow="fold")
        for header, value in fields:
            block.add_row(Text(f" {printable(header)}:"), Text(printable(value)))
        console.print(block, soft_wrap=False)
    if grid.caption:
        console.print(Text(printable(grid.caption), style="dim"), soft_wrap=False)


def show_results(summary: Mapping[str, Any], every_problem: bool = False) -> None:
    """What `coral run` and `coral report` print: the best trial's table, the trials, and
    whatever the search strategy renders of its own summary (a Pareto front...)."""
    if summary.get("problems"):
        show(summary_grid(summary, every_problem))
    elif summary.get("partial"):
        scored = (summary.get("counts") or {}).get("samples_scored")
        note("no trial has finished yet, so no problem table is shown (the trials table "
             "has each trial's figures so far)" if scored and len(summary.get("trials", ())) > 1
             else "no problem has a scored sample yet")
    if len(summary.get("trials", ())) > 1:
        show(trials_grid(summary))
        verdict = verdict_text(summary.get("best") or {}, bool(summary.get("partial")))
        if verdict:
            note(verdict)
    search = summary.get("search")
    if isinstance(search, Mapping) and search.get("strategy"):
        for part in strategy_report(str(search["strategy"]), search):
            if isinstance(part, Grid):
                show(part)
            else:
                note(part)
