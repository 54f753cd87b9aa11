"""`coral datasets list|show|fetch`."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Optional

import typer

from coral_core.data.locate import FetchLimits
from coral_core.errors import UserError
from coral_core.results.grids import Column, Grid

from .command import CONTEXT, CoralCommand

app = typer.Typer(help="Data sets: list them, show their problems, fetch them.",
                  no_args_is_help=True, context_settings=CONTEXT)

MAX_TIMEOUT = 86400.0  # seconds: a day (inf overflowed the deadline thread; nan never ended)
DATA_DIR_HELP = "Folder holding data sets (else CORAL_DATA_DIR, else the fetched copy)."


@app.command("list", cls=CoralCommand)
def list_datasets(
    data_dir: Optional[Path] = typer.Option(None, "--data-dir", metavar="DIR",
                                            help=DATA_DIR_HELP),
    json_output: bool = typer.Option(False, "--json", help="Print the list as JSON."),
) -> None:
    """Registered data sets, their splits, and where their data is found."""
    from coral_core.data.catalog import data_label, dataset_rows

    from .output import print_json, show

    rows = dataset_rows(data_dir)
    if json_output:
        print_json(rows)
        return
    show(Grid("Coral data sets", (Column("name", key=True), Column("splits"),
                                  Column("data"), Column("description")),
              tuple((row["name"], ", ".join(_sized(s, row) for s in row["splits"]),
                     data_label(row),
                     row["description"]) for row in rows),
              "list a data set's problems with 'coral datasets show NAME'"))


def _sized(split: str, row: dict) -> str:
    """A split and its number of problems, where the data set says."""
    size = row.get("split_sizes", {}).get(split)
    return f"{split} ({size})" if isinstance(size, int) else split


@app.command("show", cls=CoralCommand)
def show_dataset(
    name: str = typer.Argument(..., metavar="NAME", help="A data set (see 'datasets list')."),
    split: Optional[str] = typer.Option(None, "--split", metavar="SPLIT",
                                        help="Only this split (default: every problem)."),
    data_dir: Optional[Path] = typer.Option(None, "--data-dir", metavar="DIR",
                                            help=DATA_DIR_HELP),
    json_output: bool = typer.Option(False, "--json", help="Print the problems as JSON."),
) -> None:
    """A data set's problems: split, number of tests, seen in training."""
    from coral_core import plugins
    from coral_core.data.catalog import problem_rows

    from .output import note, print_json, show

    plugins.registry().get("datasets", name)
    rows = problem_rows(name, split, data_dir)
    if json_output:
        print_json(rows)
        return
    counts = Counter(row["split"] for row in rows)
    show(Grid(f"{name}: {len(rows)} problems" + (f" ({split})" if split else ""),
              (Column("problem", key=True), Column("split"), Column("tests", "right"),
               Column("seen")),
              tuple((row["problem"], row["split"],
                     "-" if row["tests"] is None else str(row["tests"]),
                     "yes" if row["seen_in_training"] else "") for row in rows),
              "splits: " + ", ".join(f"{s} {n}" for s, n in counts.items())
              + ("; seen: the problem is used in training"
                 if any(row["seen_in_training"] for row in rows) else "")))
    if any(not row["reference"] for row in rows):
        note("problems without a reference solution cannot be checked with "
             "--model reference")


@app.command("fetch", cls=CoralCommand)
def fetch(
    name: str = typer.Argument(..., metavar="NAME", help="Data set to download."),
    force: bool = typer.Option(False, "--force", help="Download again even if cached."),
    timeout: Optional[float] = typer.Option(
        None, "--timeout", metavar="SECONDS", min=0.1,
        help=f"Deadline for the whole download (default {FetchLimits().deadline:g})."),
) -> None:
    """Download a data set's pinned archive, check it, and unpack it into the user cache.

    The download is capped in size and time, and only the files that the pinned content
    digest covers are installed (see docs/datasets.md)."""
    from coral_core import plugins
    from coral_core.config.options import accepts

    from .output import note

    factory = plugins.registry().get("datasets", name).factory
    fetch_method = getattr(factory, "fetch", None)
    if not callable(fetch_method):
        raise UserError(f"data set '{name}' cannot be fetched; give its folder with --data-dir")
    options = {}
    if timeout is not None:
        if not math.isfinite(timeout) or timeout > MAX_TIMEOUT:
            raise UserError(f"--timeout {timeout}: give seconds, at most {MAX_TIMEOUT:g}")
        if not accepts(fetch_method, "timeout"):
            raise UserError(f"data set '{name}' does not take --timeout")
        options["timeout"] = timeout
    path = fetch_method(force=force, **options)
    note(f"{name}: {path}")
