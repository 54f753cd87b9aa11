"""`coral report RUN_DIR`: the tables (or JSON) of a finished or interrupted run."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from coral_core.reporting import load_report

from .output import print_json, stdout, summary_table, trials_table


def report(
    run_dir: Path = typer.Argument(..., help="A run directory."),
    json_output: bool = typer.Option(False, "--json", help="Print the summary JSON."),
) -> None:
    """Per-problem and overall results of a run."""
    summary = load_report(run_dir)
    if json_output:
        print_json(summary)
        return
    stdout.print(summary_table(summary))
    if len(summary.get("trials", ())) > 1:
        stdout.print(trials_table(summary))
    if summary.get("partial"):
        counts = summary["counts"]
        state = (f"its process (pid {summary['pid']}) is still running" if summary["process_alive"]
                 else f"'coral run --resume {summary['run_dir']}' continues it")
        stdout.print(escape(
            f"partial: run {summary['status']}, {counts['samples_scored']}/"
            f"{counts['samples_wanted']} samples scored, {counts['trials_finished']}/"
            f"{counts['trials']} trials finished; {state}"), style="yellow")
