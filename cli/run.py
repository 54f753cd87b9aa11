"""`coral run`: a fresh run from preset < config file < flags, or --resume RUN_DIR."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from coral_core import config as configuration
from coral_core.factories import experiment_preset
from coral_core.errors import UserError
from coral_core.runner import (check_new_run_dir, create_run, default_run_dir, execute,
                               open_run, prepare)

from .output import print_json, progress_for, stdout, summary_table


def flag_layer(**flags: Any) -> dict[str, Any]:
    """Command-line flags as a configuration layer (only the ones given)."""
    places = {
        "model": ("model", "spec"), "base_url": ("model", "base_url"),
        "data_dir": ("dataset", "data_dir"), "split": ("dataset", "split"),
        "out": ("run", "out"), "executor": ("execution", "executor"),
        "ray_address": ("execution", "ray_address"), "samples": ("run", "samples"),
        "seed": ("run", "seed"),
    }
    if flags.get("samples") is not None and flags["samples"] < 1:
        raise UserError(f"--samples must be at least 1, got {flags['samples']}")
    if flags.get("seed") is not None and flags["seed"] < 0:
        raise UserError(f"--seed must be >= 0, got {flags['seed']}")
    layer: dict[str, dict[str, Any]] = {}
    for flag, value in flags.items():
        if value is not None:
            section, key = places[flag]
            layer.setdefault(section, {})[key] = str(value) if isinstance(value, Path) else value
    return configuration.validate(layer, "command line")


def run(
    plugin: Optional[str] = typer.Option(
        None, "--plugin", help="Experiment preset to start from (e.g. quixbugs)."),
    config: Optional[Path] = typer.Option(None, "--config", help="TOML experiment file."),
    model: Optional[str] = typer.Option(
        None, "--model", help="baseline | hf:PATH_OR_ID | openai:MODEL"),
    base_url: Optional[str] = typer.Option(
        None, "--base-url", help="OpenAI-compatible server URL."),
    data_dir: Optional[Path] = typer.Option(
        None, "--data-dir", help="Folder holding the data set (or CORAL_DATA_DIR)."),
    split: Optional[str] = typer.Option(None, "--split", help="train | test | extra | all"),
    out: Optional[Path] = typer.Option(None, "--out", help="Run directory to create."),
    executor: Optional[str] = typer.Option(None, "--executor", help="local"),
    ray_address: Optional[str] = typer.Option(None, "--ray-address"),
    samples: Optional[int] = typer.Option(None, "--samples", help="Samples per problem."),
    seed: Optional[int] = typer.Option(None, "--seed"),
    resume: Optional[Path] = typer.Option(None, "--resume", help="Continue an interrupted run."),
    json_output: bool = typer.Option(False, "--json", help="Print only the summary JSON."),
) -> None:
    """Generate and score samples; write the run directory; print the results."""
    if resume is not None:
        given = [name for name, value in (("--plugin", plugin), ("--config", config),
                 ("--model", model), ("--samples", samples), ("--seed", seed),
                 ("--split", split), ("--out", out)) if value is not None]
        if given:
            raise UserError("--resume continues a run as it was configured; "
                            f"drop {', '.join(given)}")
        info = open_run(resume)
        config_used, run_dir = info.config, info.run_dir
    else:
        layers = []
        if plugin is not None:
            layers.append(experiment_preset(plugin))
        if config is not None:
            layers.append(configuration.read_file(config))
        if not layers:
            raise UserError("give --plugin NAME (an experiment preset) and/or --config FILE")
        layers.append(flag_layer(model=model, base_url=base_url, data_dir=data_dir, split=split,
                                 out=out, executor=executor, ray_address=ray_address,
                                 samples=samples, seed=seed))
        config_used = configuration.merge(*layers)
        run_dir = (Path(config_used["run"]["out"]) if config_used["run"]["out"]
                   else default_run_dir(config_used))
        check_new_run_dir(run_dir)
    session = prepare(config_used, run_dir)
    try:
        if resume is None:
            info = create_run(config_used, run_dir)
        with progress_for(json_output) as progress:
            summary = execute(info, session, progress)
    finally:
        session.close()
    if json_output:
        print_json(summary)
    else:
        stdout.print(summary_table(summary))
        stdout.print(f"run directory: {summary['run_dir']}")
