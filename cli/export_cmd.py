"""`coral export RUN_DIR`: one line per sample (prompt, reply, candidate, verdict,
objectives), as JSONL or CSV."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Optional

import typer

from coral_core.errors import UserError

HELP = ("Every sample of a run, one row each: trial, task, sample, split, prompt digest, "
        "prompt, reply, extracted candidate, verdict, error, fitness, objectives and test "
        "counts, as JSONL or CSV. Read-only: safe beside a live run.")


def export(
    run_dir: Path = typer.Argument(..., metavar="RUN_DIR", help="A run directory."),
    fmt: str = typer.Option("jsonl", "--format", metavar="jsonl|csv", show_default=True,
                            help="Output format."),
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", metavar="FILE", help="Write here instead of stdout."),
    trial: Optional[int] = typer.Option(None, "--trial", metavar="N",
                                        help="Only this trial (default: every trial)."),
) -> None:
    """Every sample of a run, one row each (see HELP)."""
    from coral_core.files.outputs import check_output, output_file
    from coral_core.results.export import FORMATS, sample_rows, write
    from coral_core.run.rundir import refuse_run_file

    if fmt not in FORMATS:
        raise UserError(f"--format must be one of {', '.join(FORMATS)}, not '{fmt}'")
    if output is not None:
        refuse_run_file(output, "--output")
        check_output(output, "--output")
    rows = sample_rows(run_dir, trial)
    if output is None:
        _checked(lambda: write(rows, sys.stdout, fmt, terminal=sys.stdout.isatty()), run_dir)
        sys.stdout.flush()
        return
    with output_file(output, "--output") as handle:  # a reader never sees half an export
        count = _checked(lambda: write(rows, handle, fmt), run_dir)
    sys.stderr.write(f"coral: wrote {count} samples to {output}\n")


def _checked(writing: Callable[[], int], run_dir: Path) -> int:
    """The store's rows are checked as they are read; what a row holds inside its JSON (a
    prompt's messages) is checked here, as it is written out."""
    from coral_core.results.reporting import SHAPE_ERRORS

    try:
        return writing()
    except SHAPE_ERRORS as error:
        raise UserError(f"{run_dir}: a stored record has an unexpected shape "
                        f"({type(error).__name__}: {error}); the store is damaged") from None
