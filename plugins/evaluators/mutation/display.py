"""What `coral mutation run` shows a person: a bar with the total and an ETA on a terminal,
the surviving mutants with the lines they change (what `cr-report --show-diff
--surviving-only` and mutmut's `show` give), and the command that resumes a run."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

WIDTH = 80  # the report fits an 80-column terminal


class MutationBar:
    """A rich progress bar on stderr (nothing when not `enabled`: a pipe, --json)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.counts = {"killed": 0, "survived": 0}
        self._progress = None
        self._task = None

    def __enter__(self) -> "MutationBar":
        if self.enabled:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)

            self._progress = Progress(
                TextColumn("mutants"), BarColumn(bar_width=20), MofNCompleteColumn(),
                TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                TextColumn("{task.fields[tally]}", style="dim"),
                console=Console(file=sys.stderr), transient=True)
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def start(self, total: int, done: int) -> None:
        if self._progress is not None:
            self._task = self._progress.add_task("mutants", total=total, completed=done,
                                                 tally="")

    def advance(self, plan, result) -> None:
        from .score import verdict_of

        verdict = verdict_of(result)
        if verdict in self.counts:
            self.counts[verdict] += 1
        if self._progress is not None and self._task is not None:
            tally = f"killed {self.counts['killed']} survived {self.counts['survived']}"
            self._progress.update(self._task, advance=1, tally=tally)


def _fit(text: str, width: int = WIDTH) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def changed_lines(diff: str) -> list[str]:
    """The removed and added lines of a unified diff (its headers and context left out)."""
    found = []
    for line in diff.splitlines():
        if line.startswith(("---", "+++", "@@")):
            continue
        if line.startswith(("-", "+")):
            found.append(line[0] + " " + line[1:].strip())
    return found


def survivor_lines(summary: dict, limit: int) -> list[str]:
    """The surviving mutants, one heading each (file:line operator#occurrence) and the lines
    it changes, at most `limit` of them (-1: all), each line within 80 columns."""
    rows = [row for row in summary.get("mutants", []) if row.get("verdict") == "survived"]
    if not rows or limit == 0:
        return []
    rows.sort(key=lambda r: (r["module"], r["line"], r["operator"], r["occurrence"]))
    shown = rows if limit < 0 else rows[:limit]
    out = [f"surviving mutants ({len(rows)}):"]
    for row in shown:
        where = f"{Path(row['module']).as_posix()}:{row['line']}"
        how = f" ({row['mode']})" if row.get("mode") in ("uncovered", "equivalent") else ""
        out.append(_fit(f"  {where}  {row['operator']}#{row['occurrence']}{how}"))
        out.extend(_fit("    " + line) for line in changed_lines(row.get("diff", "")))
    if len(shown) < len(rows):
        out.append(f"  ... and {len(rows) - len(shown)} more (--survivors -1 lists all; "
                   "--json carries every diff)")
    return out


def resume_command(argv: list[str]) -> str:
    """The command line that continues this run: the same arguments with --resume."""
    args = [arg for arg in argv[1:] if arg not in ("--resume", "--fresh")]
    return " ".join(["coral"] + [shlex.quote(arg) for arg in args] + ["--resume"])
