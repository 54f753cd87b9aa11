"""`coral datasets list|fetch`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from coral_core import plugins
from coral_core.data import fetched_dir, find_dataset_dir
from coral_core.errors import UserError

from .output import print_json, print_table, stdout

app = typer.Typer(help="Data sets: list them, fetch them.", no_args_is_help=True)


def _location(name: str, data_dir: Path | None) -> str | None:
    """Where the data set's files would be read from now, or None."""
    try:
        return str(find_dataset_dir(name, data_dir))
    except UserError:
        return None


@app.command("list")
def list_datasets(
    data_dir: Optional[Path] = typer.Option(None, "--data-dir", help="Folder holding data sets."),
    json_output: bool = typer.Option(False, "--json"),
) -> None:
    """Registered data sets, their splits, and where their data is found."""
    registry = plugins.registry()
    rows = []
    for name in registry.names("datasets"):
        factory = registry.entries["datasets"][name].factory
        rows.append({
            "name": name, "plugin": registry.entries["datasets"][name].plugin,
            "splits": list(getattr(factory, "splits", ())),
            "description": getattr(factory, "description", ""),
            "fetchable": callable(getattr(factory, "fetch", None)),
            "cached": fetched_dir(name).is_dir(),
            "data": _location(name, data_dir),
        })
    if json_output:
        print_json(rows)
        return
    missing = "missing: --data-dir, CORAL_DATA_DIR"
    print_table("Coral data sets", ("name", "splits", "data", "description"), [
        (row["name"], ", ".join(row["splits"]),
         row["data"] or (missing + f" or coral datasets fetch {row['name']}"
                         if row["fetchable"] else missing),
         row["description"])
        for row in rows
    ])


@app.command("fetch")
def fetch(
    name: str = typer.Argument(..., help="Data set to download."),
    force: bool = typer.Option(False, "--force", help="Download again even if cached."),
) -> None:
    """Download a data set's pinned archive, check it, and unpack it into the user cache."""
    factory = plugins.registry().get("datasets", name).factory
    fetch_method = getattr(factory, "fetch", None)
    if not callable(fetch_method):
        raise UserError(f"data set '{name}' cannot be fetched; give its folder with --data-dir")
    path = fetch_method(force=force)
    stdout.print(f"{name}: {path}")
