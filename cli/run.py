"""`coral run`: a fresh run from preset < config file < flags, or --resume RUN_DIR."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import List, Optional

import typer

from coral_core import launch
from coral_core.rundir import check_new_run_dir, create_run, default_run_dir, open_run
from coral_core.runner import Interrupted, check_run, execute, prepare

from .output import note, print_json, reserve_stdout, show_results
from .progress import progress_for

log = logging.getLogger("coral")


def run(
    plugin: Optional[str] = typer.Option(
        None, "--plugin", metavar="NAME",
        help="Experiment preset to start from (e.g. quixbugs); see 'coral plugins list'."),
    config: Optional[Path] = typer.Option(
        None, "--config", metavar="FILE", help="TOML experiment file (docs/configuration.md)."),
    model: Optional[str] = typer.Option(
        None, "--model", metavar="SPEC",
        help="baseline | reference | hf:PATH_OR_ID | openai:MODEL (config: model.spec)"),
    model_arg: Optional[List[str]] = typer.Option(
        None, "--model-arg", metavar="KEY=VALUE",
        help="A model option, typed by the model's options; repeatable "
             "(config: model.options)."),
    base_url: Optional[str] = typer.Option(
        None, "--base-url", metavar="URL",
        help="OpenAI-compatible server URL (may relocate a resumed run) "
             "(config: model.base_url)."),
    temperature: Optional[float] = typer.Option(
        None, "--temperature", metavar="T", help="Sampling temperature (config: "
                                                 "model.temperature, default 0.8)."),
    top_p: Optional[float] = typer.Option(
        None, "--top-p", metavar="P", help="Nucleus sampling (config: model.top_p, "
                                           "default 0.95)."),
    max_new_tokens: Optional[int] = typer.Option(
        None, "--max-new-tokens", metavar="N",
        help="Longest reply in tokens (config: model.max_new_tokens, default 512)."),
    data_dir: Optional[Path] = typer.Option(
        None, "--data-dir", metavar="DIR",
        help="Folder holding the data set (else CORAL_DATA_DIR, else the fetched copy; "
             "may relocate a resumed run)."),
    split: Optional[str] = typer.Option(
        None, "--split", metavar="SPLIT",
        help="Data set split, e.g. train | test | extra | all (config: dataset.split)."),
    problems: Optional[str] = typer.Option(
        None, "--problems", metavar="A,B",
        help="Only these problems, comma-separated (config: dataset.problems)."),
    limit: Optional[int] = typer.Option(
        None, "--limit", metavar="N",
        help="Only the first N problems of the split (config: dataset.limit, 0 = all)."),
    samples: Optional[int] = typer.Option(
        None, "--samples", metavar="N", help="Samples per problem (config: run.samples)."),
    seed: Optional[int] = typer.Option(
        None, "--seed", metavar="S",
        help="Run seed: every sample's seed derives from it (config: run.seed, default 0)."),
    out: Optional[Path] = typer.Option(
        None, "--out", metavar="DIR",
        help="Run directory to create (default: runs/DATASET-MODEL-TIMESTAMP)."),
    executor: Optional[str] = typer.Option(
        None, "--executor", metavar="NAME",
        help="Where work runs: local, or an executor plugin's (config: execution.executor)."),
    ray_address: Optional[str] = typer.Option(
        None, "--ray-address", metavar="ADDR",
        help="Ray cluster address, for --executor ray (config: execution.ray_address)."),
    population: Optional[int] = typer.Option(
        None, "--population", metavar="P",
        help="Genomes per generation, for the evolution strategy "
             "(config: search.options.population)."),
    generations: Optional[int] = typer.Option(
        None, "--generations", metavar="G",
        help="Generations, for the evolution strategy (config: search.options.generations)."),
    fail_fast: bool = typer.Option(
        False, "--fail-fast",
        help="Stop at the first evaluator or hook error instead of recording it and going "
             "on (config: run.fail_fast)."),
    resume: Optional[Path] = typer.Option(
        None, "--resume", metavar="RUN_DIR", help="Continue an interrupted run."),
    dry_run: bool = typer.Option(
        False, "--dry-run",
        help="Check everything, print the resolved configuration as TOML, and exit."),
    json_output: bool = typer.Option(
        False, "--json", help="Print only the summary JSON on stdout."),
) -> None:
    """Generate and score samples; write the run directory; print the results."""
    if json_output:
        reserve_stdout()  # nothing but the summary may reach stdout
    flags = dict(model=model, base_url=base_url, data_dir=data_dir, split=split,
                 problems=launch.split_list(problems), limit=limit, temperature=temperature,
                 top_p=top_p, max_new_tokens=max_new_tokens, out=out, executor=executor,
                 ray_address=ray_address, samples=samples, seed=seed, fail_fast=fail_fast,
                 population=population, generations=generations)
    if resume is not None:
        launch.refuse_with_resume({"plugin": plugin, "config": config, "model_arg": model_arg,
                                   "dry_run": dry_run, **flags})
        info, lock = open_run(resume, launch.relocations(data_dir, base_url))
        try:
            session = prepare(info.config, info.run_dir)
        except BaseException:
            lock.release()
            raise
    else:
        resolved = launch.resolve_fresh(plugin, config, flags, model_arg or ())
        for line in resolved.notes:
            log.warning("%s", line)
        config_used = resolved.config
        run_dir = (Path(config_used["run"]["out"]) if config_used["run"]["out"]
                   else default_run_dir(config_used))
        if dry_run:
            planner, _ = check_run(config_used, run_dir, resolved.where)
            plan = planner.plan(0, {})
            shown = {**config_used, "run": {**config_used["run"], "out": str(run_dir)}}
            sys.stdout.write(launch.dry_run_text(shown, [t.id for t in plan.tasks]))
            return
        check_new_run_dir(run_dir)
        session = prepare(config_used, run_dir, resolved.where)
        try:
            info, lock = create_run(config_used, run_dir)
        except BaseException:
            session.close()
            raise
    try:
        with progress_for(json_output) as progress:
            summary = execute(info, session, progress)
    except Interrupted:
        raise  # the executor was cancelled: closing it would wait for abandoned work
    except BaseException:
        session.close()
        raise
    else:
        session.close()
    finally:
        lock.release()
    if json_output:
        print_json(summary)
        return
    show_results(summary)
    note(f"run directory: {summary['run_dir']}")
