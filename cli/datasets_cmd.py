"""`coral datasets list|fetch`."""

from __future__ import annotations

import typer
from rich.table import Table

from coral_core import plugins
from coral_core.data import fetched_dir
from coral_core.errors import UserError

from .output import print_json, stdout

app = typer.Typer(help="Data sets: list them, fetch them.", no_args_is_help=True)


@app.command("list")
def list_datasets(json_output: bool = typer.Option(False, "--json")) -> None:
    """Registered data sets, their splits, and whether a fetched copy is cached."""
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
        })
    if json_output:
        print_json(rows)
        return
    table = Table(title="Coral data sets")
    for column in ("name", "splits", "cached copy", "description"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["name"], ", ".join(row["splits"]),
                      "yes" if row["cached"] else ("no (coral datasets fetch)" if row["fetchable"]
                                                   else "n/a"),
                      row["description"])
    stdout.print(table)


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
