"""`coral run`: a fresh run from preset < config file < flags, or --resume RUN_DIR."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from coral_core import config as configuration
from coral_core.errors import UserError
from coral_core.factories import experiment_preset
from coral_core.rundir import check_new_run_dir, create_run, default_run_dir, open_run
from coral_core.runner import Interrupted, execute, prepare

from .output import print_json, progress_for, stdout, summary_table, trials_table

# flag -> (section, key)
PLACES = {
    "model": ("model", "spec"), "base_url": ("model", "base_url"),
    "data_dir": ("dataset", "data_dir"), "split": ("dataset", "split"),
    "out": ("run", "out"), "executor": ("execution", "executor"),
    "ray_address": ("execution", "ray_address"), "samples": ("run", "samples"),
    "seed": ("run", "seed"),
}
# Flags that may relocate a resumed run: they change where things are, not what is computed.
RELOCATING = ("data_dir", "base_url")


def flag_layer(**flags: Any) -> dict[str, Any]:
    """Command-line flags as a configuration layer (only the ones given)."""
    if flags.get("samples") is not None and flags["samples"] < 1:
        raise UserError(f"--samples must be at least 1, got {flags['samples']}")
    if flags.get("seed") is not None and flags["seed"] < 0:
        raise UserError(f"--seed must be >= 0, got {flags['seed']}")
    layer: dict[str, dict[str, Any]] = {}
    for flag, value in flags.items():
        if value is not None:
            section, key = PLACES[flag]
            layer.setdefault(section, {})[key] = str(value) if isinstance(value, Path) else value
    return configuration.validate(layer, "command line")


def _flag_name(name: str) -> str:
    return "--" + name.replace("_", "-")


def run(
    plugin: Optional[str] = typer.Option(
        None, "--plugin", help="Experiment preset to start from (e.g. quixbugs)."),
    config: Optional[Path] = typer.Option(None, "--config", help="TOML experiment file."),
    model: Optional[str] = typer.Option(
        None, "--model", help="baseline | hf:PATH_OR_ID | openai:MODEL"),
    base_url: Optional[str] = typer.Option(
        None, "--base-url", help="OpenAI-compatible server URL (may relocate a resumed run)."),
    data_dir: Optional[Path] = typer.Option(
        None, "--data-dir",
        help="Folder holding the data set (or CORAL_DATA_DIR; may relocate a resumed run)."),
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
    flags = dict(model=model, base_url=base_url, data_dir=data_dir, split=split, out=out,
                 executor=executor, ray_address=ray_address, samples=samples, seed=seed)
    if resume is not None:
        named = {"plugin": plugin, "config": config, **flags}
        given = [_flag_name(n) for n, v in named.items() if v is not None and n not in RELOCATING]
        if given:
            raise UserError("--resume continues a run as it was configured (only --data-dir "
                            f"and --base-url may relocate it); drop {', '.join(given)}")
        layer = flag_layer(data_dir=data_dir, base_url=base_url)
        layer = configuration.absolute_paths(layer, Path.cwd()) if layer else layer
        relocate = {PLACES[n]: layer[PLACES[n][0]][PLACES[n][1]]
                    for n in RELOCATING if flags[n] is not None}
        info, lock = open_run(resume, relocate)
        try:
            session = prepare(info.config, info.run_dir)
        except BaseException:
            lock.release()
            raise
    else:
        layers = []
        if plugin is not None:
            layers.append(experiment_preset(plugin))
        if config is not None:
            layers.append(configuration.read_file(config))
        if not layers:
            raise UserError("give --plugin NAME (an experiment preset) and/or --config FILE")
        layers.append(flag_layer(**flags))
        config_used = configuration.absolute_paths(configuration.merge(*layers), Path.cwd())
        run_dir = (Path(config_used["run"]["out"]) if config_used["run"]["out"]
                   else default_run_dir(config_used))
        check_new_run_dir(run_dir)
        session = prepare(config_used, run_dir)
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
    stdout.print(summary_table(summary))
    if len(summary.get("trials", ())) > 1:
        stdout.print(trials_table(summary))
    stdout.print(f"run directory: {summary['run_dir']}")
