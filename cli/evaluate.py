"""`coral evaluate`: score one candidate file, or a folder of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Optional

import typer
from rich.table import Table

from coral_core import config as configuration
from coral_core.candidate_files import CandidateFile, evaluate_files, files_in
from coral_core.blueprints import DatasetBlueprint, ScoringBlueprint
from coral_core.factories import build_dataset, build_scoring, experiment_preset
from coral_core.errors import UserError

from .output import print_json, stdout


def evaluate(
    plugin: str = typer.Option(..., "--plugin", help="Experiment preset (e.g. quixbugs)."),
    problem: Optional[str] = typer.Option(None, "--problem", help="Problem to score against."),
    candidate: Optional[Path] = typer.Option(None, "--candidate", help="A candidate program."),
    candidate_dir: Optional[Path] = typer.Option(
        None, "--candidate-dir", help="Folder of NAME.py / NAME__LABEL.py files."),
    config: Optional[Path] = typer.Option(None, "--config", help="TOML experiment file."),
    data_dir: Optional[Path] = typer.Option(None, "--data-dir"),
    json_output: bool = typer.Option(False, "--json"),
) -> None:
    """Score candidate programs; exit 0 whether or not they pass."""
    if (candidate is None) == (candidate_dir is None):
        raise UserError("give exactly one of --candidate FILE (with --problem) "
                        "or --candidate-dir DIR")
    if candidate is not None and not problem:
        raise UserError("--candidate needs --problem NAME")
    if candidate_dir is not None and problem:
        raise UserError("--candidate-dir takes the problem from each file name; drop --problem")
    layers = [experiment_preset(plugin)]
    if config is not None:
        layers.append(configuration.read_file(config))
    if data_dir is not None:
        layers.append({"dataset": {"data_dir": str(data_dir)}})
    resolved = configuration.merge(*layers)
    dataset = build_dataset(DatasetBlueprint.of(resolved))
    files = ([CandidateFile(candidate, problem or "")] if candidate is not None
             else files_in(candidate_dir))  # type: ignore[arg-type]
    scoring = build_scoring(ScoringBlueprint.of(resolved), dataset)
    try:
        documents = evaluate_files(dataset, scoring, files)
    finally:
        scoring.close()
    if json_output:
        if candidate is not None:
            single = dict(documents[0])
            single.pop("file")
            print_json(single)
        else:
            print_json(documents)
        return
    for doc in documents:
        stdout.print(_table(doc))


def _table(doc: Mapping[str, Any]) -> Table:
    verdict = "[green]PASSED[/green]" if doc["passed"] else "[red]FAILED[/red]"
    tests = doc["tests"]
    table = Table(title=f"{doc['file']} — {doc['problem']}: {verdict} "
                        f"({tests['passed']}/{tests['total']} tests)")
    table.add_column("test")
    table.add_column("status")
    table.add_column("detail")
    for outcome in doc["outcomes"]:
        table.add_row(outcome["test"], outcome["status"], outcome["detail"])
    objectives = ", ".join(f"{k} {v:.3f}" for k, v in doc["objectives"].items())
    table.caption = f"{objectives}; fitness {doc['fitness']:.3f}"
    return table
