"""`coral evaluate`: score one candidate file, a folder of them, or a JSONL file of
samples produced elsewhere (EvalPlus's format)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Optional

import typer

from coral_core import config as configuration
from coral_core.blueprints import DatasetBlueprint, ScoringBlueprint
from coral_core.candidate_files import CandidateFile, evaluate_files, files_in
from coral_core.errors import UserError
from coral_core.factories import build_dataset, build_scoring, experiment_preset
from coral_core.result_tables import number, summary_grid
from coral_core.samples import read_samples, score_samples
from coral_core.tables import Column, Grid

from .output import print_json, reserve_stdout, show


def evaluate(
    plugin: str = typer.Option(..., "--plugin", metavar="NAME",
                               help="Experiment preset (e.g. quixbugs)."),
    problem: Optional[str] = typer.Option(None, "--problem", metavar="NAME",
                                          help="Problem to score --candidate against."),
    candidate: Optional[Path] = typer.Option(None, "--candidate", metavar="FILE",
                                             help="A candidate program."),
    candidate_dir: Optional[Path] = typer.Option(
        None, "--candidate-dir", metavar="DIR", help="Folder of NAME.py / NAME__LABEL.py files."),
    samples: Optional[Path] = typer.Option(
        None, "--samples", metavar="FILE.jsonl",
        help='JSONL lines {"task_id", "solution" | "completion"} (EvalPlus); prints a '
             "run's summary."),
    config: Optional[Path] = typer.Option(None, "--config", metavar="FILE",
                                          help="TOML experiment file."),
    data_dir: Optional[Path] = typer.Option(
        None, "--data-dir", metavar="DIR",
        help="Folder holding the data set (else CORAL_DATA_DIR, else the fetched copy)."),
    json_output: bool = typer.Option(False, "--json", help="Print only JSON on stdout."),
) -> None:
    """Score candidate programs; exit 0 whether or not they pass."""
    if json_output:
        reserve_stdout()  # nothing but the document may reach stdout
    given = [flag for flag, value in (("--candidate", candidate), ("--candidate-dir",
                                      candidate_dir), ("--samples", samples)) if value]
    if len(given) != 1:
        raise UserError("give exactly one of --candidate FILE (with --problem), "
                        "--candidate-dir DIR or --samples FILE.jsonl")
    if candidate is not None and not problem:
        raise UserError("--candidate needs --problem NAME")
    if candidate is None and problem:
        raise UserError(f"{given[0]} takes the problem from each file name or line; "
                        "drop --problem")
    layers = [experiment_preset(plugin)]
    if config is not None:
        layers.append(configuration.read_file(config))
    if data_dir is not None:
        layers.append({"dataset": {"data_dir": str(data_dir)}})
    resolved = configuration.merge(*layers)
    dataset = build_dataset(DatasetBlueprint.of(resolved))
    if samples is not None:
        summary = score_samples(resolved, dataset, read_samples(samples), samples)
        if json_output:
            print_json(summary)
        else:
            show(summary_grid(summary))
        return
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
        show(_grid(doc))


def _grid(doc: Mapping[str, Any]) -> Grid:
    verdict = "PASSED" if doc["passed"] else "FAILED"
    tests = doc["tests"]
    objectives = ", ".join(f"{k} {number(v)}" for k, v in doc["objectives"].items())
    return Grid(f"{doc['file']} - {doc['problem']}: {verdict} "
                f"({tests['passed']}/{tests['total']} tests)",
                (Column("test", key=True), Column("status"), Column("detail")),
                tuple((o["test"], o["status"], o["detail"]) for o in doc["outcomes"]),
                f"{objectives}; fitness {number(doc['fitness'])}")
