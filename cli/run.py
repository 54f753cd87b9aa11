"""`coral run`: a fresh run from preset < config file < flags, or --resume RUN_DIR."""

from __future__ import annotations

import inspect
import logging
import sys
from contextvars import ContextVar
from pathlib import Path
from typing import Any, List, Optional, Sequence

import typer

from coral_core.config.settings import flag_options  # standard library only: cheap to import

log = logging.getLogger("coral")
# The values of the flags plugins add (coral_register_run_flags), for the run being started.
_PLUGIN_VALUES: ContextVar[dict[str, Any]] = ContextVar("coral_run_flags", default={})


def run(
    plugin: Optional[str] = typer.Option(
        None, "--plugin", metavar="NAME",
        help="Experiment preset to start from (e.g. quixbugs); see 'coral plugins list'."),
    config: Optional[Path] = typer.Option(
        None, "--config", metavar="FILE", help="TOML experiment file (docs/configuration.md)."),
    model: Optional[str] = typer.Option(None, "--model", **flag_options("model.spec")),
    model_arg: Optional[List[str]] = typer.Option(
        None, "--model-arg", metavar="KEY=VALUE",
        help="A model option, typed by the model's options; repeatable "
             "(config: model.options)."),
    base_url: Optional[str] = typer.Option(
        None, "--base-url", **flag_options("model.base_url")),
    temperature: Optional[float] = typer.Option(
        None, "--temperature", **flag_options("model.temperature")),
    top_p: Optional[float] = typer.Option(None, "--top-p", **flag_options("model.top_p")),
    max_new_tokens: Optional[int] = typer.Option(
        None, "--max-new-tokens", **flag_options("model.max_new_tokens")),
    data_dir: Optional[Path] = typer.Option(
        None, "--data-dir", **flag_options("dataset.data_dir")),
    data: Optional[Path] = typer.Option(
        None, "--data", metavar="FILE",
        help="The data set's task file (config: [dataset.options] path), e.g. a set in "
             "HumanEval's shape or FIM tasks."),
    split: Optional[str] = typer.Option(None, "--split", **flag_options("dataset.split")),
    problems: Optional[str] = typer.Option(
        None, "--problems", **flag_options("dataset.problems")),
    limit: Optional[int] = typer.Option(None, "--limit", **flag_options("dataset.limit")),
    samples: Optional[int] = typer.Option(None, "--samples", **flag_options("run.samples")),
    seed: Optional[int] = typer.Option(None, "--seed", **flag_options("run.seed")),
    out: Optional[str] = typer.Option(None, "--out", **flag_options("run.out")),
    executor: Optional[str] = typer.Option(
        None, "--executor", **flag_options("execution.executor")),
    fail_fast: bool = typer.Option(False, "--fail-fast", **flag_options("run.fail_fast")),
    resume: Optional[Path] = typer.Option(
        None, "--resume", metavar="RUN_DIR", help="Continue an interrupted run."),
    dry_run: bool = typer.Option(
        False, "--dry-run",
        help="Check everything, print the resolved configuration as TOML, and exit."),
    json_output: bool = typer.Option(
        False, "--json", help="Print only the summary JSON on stdout."),
) -> None:
    """Generate and score samples; write the run directory; print the results."""
    from coral_core.config import launch
    from coral_core.files.outputs import refuse_read_folders
    from coral_core.run.rundir import (
        check_new_run_dir, create_run, default_run_dir, open_run, record_relocation)
    from coral_core.run.runner import Interrupted, check_resume, check_run, execute, prepare

    from .output import note, print_json, reserve_stdout, show_results
    from .progress import progress_for

    if json_output:
        reserve_stdout()  # nothing but the summary may reach stdout
    flags = dict(model=model, base_url=base_url, data_dir=data_dir, split=split, data=data,
                 problems=launch.split_list(problems, "--problems"), limit=limit,
                 temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, out=out,
                 executor=executor, samples=samples, seed=seed, fail_fast=fail_fast,
                 **_PLUGIN_VALUES.get())
    if resume is not None:
        launch.refuse_with_resume({"plugin": plugin, "config": config, "model_arg": model_arg,
                                   "dry_run": dry_run, **flags})
        relocate = launch.relocations(data_dir, base_url)
        info, lock = open_run(resume, relocate)
        try:
            session = prepare(info.config, info.run_dir)
            try:
                check_resume(info, session)
                record_relocation(info, relocate)  # only what the run accepted
            except BaseException:
                session.close()
                raise
        except BaseException:
            lock.release()
            raise
    else:
        resolved = launch.resolve_fresh(plugin, config, flags, model_arg or ())
        config_used = resolved.config
        run_dir = (Path(config_used["run"]["out"]) if config_used["run"]["out"]
                   else default_run_dir(config_used))
        if dry_run:
            planner, _ = check_run(config_used, run_dir, resolved.where)
            refuse_read_folders(run_dir, "--out")
            _say(resolved.notes)
            plan = planner.plan(0, {})
            shown = {**config_used, "run": {**config_used["run"], "out": str(run_dir)}}
            sys.stdout.write(launch.dry_run_text(shown, [t.id for t in plan.tasks]))
            return
        check_new_run_dir(run_dir)
        session = prepare(config_used, run_dir, resolved.where)
        _say(resolved.notes)  # once the run is sure to start: bad input stays one line
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


def add_plugin_flags(command: Any) -> None:
    """The flags plugins add to `coral run` (coral_register_run_flags), as options of its
    command, once: typer builds and types them from a signature made for them, and the
    command's callback hands their values to `run` through `_PLUGIN_VALUES`."""
    if getattr(command, "coral_plugin_flags", False):
        return
    command.coral_plugin_flags = True
    from coral_core.config import launch

    flags = launch.plugin_flags(
        {"--help", *(opt for param in command.params for opt in param.opts)})
    if not flags:
        return

    def template(**values: Any) -> None:
        """Stands for the plugins' flags while typer makes options of them."""

    template.__signature__ = inspect.Signature([  # type: ignore[attr-defined]
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=Optional[flag.kind],
                          default=typer.Option(None, launch.flag_name(name),
                                               metavar=flag.metavar or None, help=flag.help))
        for name, flag in flags.items()])
    maker = typer.Typer(add_completion=False)
    maker.command()(template)
    command.params.extend(typer.main.get_command(maker).params)
    original = command.callback

    def callback(**values: Any) -> Any:
        token = _PLUGIN_VALUES.set({name: values.pop(name) for name in flags if name in values})
        try:
            return original(**values)
        finally:
            _PLUGIN_VALUES.reset(token)

    command.callback = callback


def _say(notes: Sequence[str]) -> None:
    """What the configuration changed of the preset's search (launch._user_settings_win)."""
    for line in notes:
        log.warning("%s", line)
