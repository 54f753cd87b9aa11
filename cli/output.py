"""Terminal output: rich on a terminal, plain lines otherwise, bare JSON with --json."""

from __future__ import annotations

import json
import sys
import time
from typing import Any, Mapping

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)
from rich.markup import escape
from rich.table import Table

stdout = Console(soft_wrap=True)
stderr = Console(stderr=True, soft_wrap=True)


def print_json(document: Any) -> None:
    sys.stdout.write(json.dumps(document, indent=2) + "\n")
    sys.stdout.flush()


def print_table(title: str, columns: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    table = Table(title=title)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    stdout.print(table)


class RichProgress:
    """Bars with counts and ETA for each phase (generate, evaluate)."""

    def __init__(self) -> None:
        self._progress = Progress(
            TextColumn("{task.description:>9}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(), console=stderr,
            transient=False,
        )
        self._tasks: dict[str, TaskID] = {}

    def __enter__(self) -> "RichProgress":
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def start(self, phase: str, total: int, done: int = 0) -> None:
        if phase in self._tasks:
            self._progress.reset(self._tasks[phase], total=total, completed=done)
        else:
            self._tasks[phase] = self._progress.add_task(phase, total=total, completed=done)

    def advance(self, phase: str, amount: int = 1) -> None:
        self._progress.advance(self._tasks[phase], amount)


class PlainProgress:
    """One line per phase every few seconds and at the end, for logs and pipes."""

    def __init__(self, every: float = 5.0) -> None:
        self.every = every
        self._state: dict[str, list[float]] = {}

    def __enter__(self) -> "PlainProgress":
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def start(self, phase: str, total: int, done: int = 0) -> None:
        self._state[phase] = [total, done, time.monotonic(), 0.0]
        self._line(phase)

    def advance(self, phase: str, amount: int = 1) -> None:
        state = self._state[phase]
        state[1] += amount
        now = time.monotonic()
        if state[1] >= state[0] or now - state[3] >= self.every:
            self._line(phase)

    def _line(self, phase: str) -> None:
        total, done, _, _ = self._state[phase]
        self._state[phase][3] = time.monotonic()
        sys.stderr.write(f"{phase}: {int(done)}/{int(total)}\n")
        sys.stderr.flush()


class QuietProgress(PlainProgress):
    def _line(self, phase: str) -> None:
        pass


def progress_for(json_output: bool) -> RichProgress | PlainProgress:
    if json_output:
        return QuietProgress() if not sys.stderr.isatty() else RichProgress()
    return RichProgress() if sys.stderr.isatty() else PlainProgress()


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def summary_table(summary: Mapping[str, Any]) -> Table:
    problems = summary["problems"]
    names = list(summary.get("objectives", {}))
    succeeds = "pass_at_k" in summary
    ks = [k for k in ("1", "5", "10", "25", "50", "100") if k in summary.get("pass_at_k", {})]
    title = (f"{summary['dataset']} ({summary['split']}) — {summary['model']}, "
             f"{summary['samples']} samples, seed {summary['seed']}")
    if len(summary.get("trials", ())) > 1 and summary.get("best"):
        title += f", best trial {summary['best']['trial']}"
    table = Table(title=escape(title))
    table.add_column("problem")
    table.add_column("c/n" if succeeds else "n", justify="right")
    for k in ks:
        table.add_column(f"pass@{k}", justify="right")
    for name in names:
        table.add_column(escape(name), justify="right")
    table.add_column("fitness", justify="right")
    for row in problems:
        label = row["problem"] + (" (seen in training)" if row.get("seen_in_training") else "")
        count = f"{row['c']}/{row['n']}" if "c" in row else str(row["n"])
        table.add_row(escape(label), count,
                      *[_pct(row.get("pass_at_k", {}).get(k, 0.0)) for k in ks],
                      *[f"{row['objectives'].get(n, 0.0):.3f}" for n in names],
                      f"{row.get('fitness', 0.0):.3f}")
    table.add_section()
    overall = (f"overall: {summary['fixed']}/{len(problems)} fixed" if "fixed" in summary
               else "overall")
    table.add_row(overall, "",
                  *[_pct(summary["pass_at_k"][k]) for k in ks],
                  *[f"{summary['objectives'][n]:.3f}" for n in names],
                  f"{summary.get('fitness', 0.0):.3f}")
    return table


def trials_table(summary: Mapping[str, Any]) -> Table:
    """One row per trial: its overrides, status, pass@1, fitness; the best is marked."""
    best = (summary.get("best") or {}).get("trial")
    rank_by = (summary.get("best") or {}).get("rank_by", "fitness")
    table = Table(title=f"trials (best by {escape(rank_by)})")
    for column in ("trial", "overrides", "status", "pass@1", "fitness"):
        table.add_column(column, justify="right" if column != "overrides" else "left")
    for row in summary.get("trials", ()):
        overrides = ", ".join(f"{k}={json.dumps(v)}" for k, v in row["overrides"].items())
        pass1 = row.get("pass_at_k", {}).get("1")
        table.add_row(f"{row['trial']}{' *' if row['trial'] == best else ''}",
                      escape(overrides or "(base)"), row["status"],
                      _pct(pass1) if pass1 is not None else "-",
                      f"{row['fitness']:.3f}" if "fitness" in row else "-")
    return table
