"""Mutation testing with cosmic-ray's mutants and verdicts (SPEC section 8, seed 002).

One concept per module: `session` (the cosmic-ray WorkDB and Coral's tables), `plan` (each
mutant's source, mode, tests and timeout), `worker` (the pre-warmed forking pytest worker),
`pool` (talking to workers), `runner` (`coral mutation run`), `score` (scores and intervals),
`gate` (the reliability gate, evaluator `mutation_gate`), `audit` (does a test see the
module's file?), `exact` and `exact_report` (the exact path: the mutant written into a copy
of the project), `procs` (process trees: nothing a test starts outlives its mutant's run).
Importing this package is cheap:
cosmic-ray and pytest are imported only when mutation testing runs.
"""

from coral_core.hookspecs import hookimpl


@hookimpl
def coral_register_evaluators(register):
    from .gate import MutationGate

    register("mutation_gate", MutationGate)
