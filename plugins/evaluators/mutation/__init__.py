"""Mutation testing with cosmic-ray's mutants and verdicts.

One concept per module (the core's `coral_core.mutation` holds what testgen shares: `session`,
the cosmic-ray WorkDB and Coral's tables, and `plan`, each mutant's source, mode, tests and
timeout): `worker` (the pre-warmed forking pytest worker), `workers` (talking to them),
`campaign` (`coral mutation run`: every mutant of a module), `score` (scores and intervals),
`gate` (the reliability gate, evaluator `mutation_gate`), `audit` (does a test see the
module's file?), `exact` and `exact_report` (the exact path: the mutant written into a copy
of the project), `procs` (process trees: nothing a test starts outlives its mutant's run),
`hypothesis_runs` (Hypothesis tests: seeded, an example database of each run's own).
Importing this package is cheap:
cosmic-ray and pytest are imported only when mutation testing runs.
"""

from coral_core.hookspecs import hookimpl
from coral_core.lazy import Lazy


@hookimpl
def coral_register_evaluators(register):
    register("mutation_gate", Lazy(f"{__name__}.gate:MutationGate"))


@hookimpl
def coral_register_commands(cli):
    from .command import app  # `coral mutation`; its machinery is imported when it runs

    cli.add_typer(app, name="mutation")
