"""`coral report RUN_DIR`: the tables (or JSON) of a finished or interrupted run."""

from __future__ import annotations

from pathlib import Path

import typer

from coral_core.reporting import load_report

from .output import print_json, stdout, summary_table


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
    if summary.get("status") != "finished":
        stdout.print(f"[yellow]run not finished ({summary.get('status')}): "
                     f"'coral run --resume {run_dir}' continues it[/yellow]")
