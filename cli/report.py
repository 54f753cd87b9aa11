"""`coral report RUN_DIR`: the tables (or JSON) of a finished or interrupted run."""

from __future__ import annotations

from pathlib import Path

import typer

from coral_core.errors import UserError


def report(
    run_dir: Path = typer.Argument(..., metavar="RUN_DIR", help="A run directory."),
    json_output: bool = typer.Option(False, "--json", help="Print the summary JSON."),
    per_problem: bool = typer.Option(False, "--per-problem",
                                     help="A row for every problem, however many."),
) -> None:
    """Per-problem and overall results of a run (read-only: safe beside a live run)."""
    from coral_core.results.reporting import SHAPE_ERRORS, load_report
    from coral_core.results.summary_tables import partial_note

    from .output import note, print_json, show_results

    summary = load_report(run_dir)
    if json_output:
        print_json(summary)
        return
    try:
        show_results(summary, every_problem=per_problem)
    except SHAPE_ERRORS as error:
        # check_summary covers what every table reads; a plugin's table may read more
        raise UserError(f"{run_dir}: the summary has an unexpected shape "
                        f"({type(error).__name__}: {error})") from None
    if summary.get("partial"):
        note(partial_note(summary), style="yellow")
