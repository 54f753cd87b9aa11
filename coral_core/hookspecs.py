"""Hook specifications: everything a plugin can add to or learn from Coral."""

from pluggy import HookimplMarker, HookspecMarker

hookspec = HookspecMarker("coral")
hookimpl = HookimplMarker("coral")


@hookspec
def coral_register_datasets(register):
    """Call ``register(name, factory)``; ``factory(**options)`` returns a Dataset."""


@hookspec
def coral_register_models(register):
    """Call ``register(prefix, factory)``; ``--model PREFIX:TARGET`` calls
    ``factory(TARGET, **options)``."""


@hookspec
def coral_register_evaluators(register):
    """Call ``register(name, factory)``; ``factory(**options)`` returns an Evaluator."""


@hookspec
def coral_register_search_strategies(register):
    """Call ``register(name, factory)``; ``factory(**options)`` returns a SearchStrategy."""


@hookspec
def coral_register_executors(register):
    """Call ``register(name, factory)``; ``factory(settings)`` gets the resolved
    ``[execution]`` table and returns an Executor."""


@hookspec
def coral_register_experiments(register):
    """Call ``register(name, preset)``; ``preset`` is a configuration mapping (TOML shape),
    or a function returning one, called when the preset is used."""


@hookspec
def coral_register_commands(cli):
    """Add commands to `coral`: ``cli`` is a ``typer.Typer``; use ``@cli.command(...)`` or
    ``cli.add_typer(app, name=...)`` (see docs/plugins.md)."""


@hookspec
def coral_register_run_flags(register):
    """Call ``register(name, flag)`` with a RunFlag: ``coral run --NAME VALUE`` sets the
    key at ``flag.path`` (a plugin's option, e.g. ``search.options.population``)."""


@hookspec
def coral_run_started(run):
    """A run (fresh or resumed) is about to do work; ``run`` is a RunInfo."""


@hookspec
def coral_record_written(run, kind, record):
    """A ``kind`` ("generation" or "evaluation") record was committed to the run store."""


@hookspec
def coral_run_finished(run, summary):
    """The run finished; ``summary`` is the dict written to summary.json."""
