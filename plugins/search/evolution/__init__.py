"""evolution: CA-seeded NSGA-II over LoRA/DoRA adapters and sampling knobs.

Modules, one concept each: `ca` (cellular-automaton seeding), `genome` (genes and their
overrides), `training` (one adapter per heavy-gene set, cached), `selection` (Optuna's
NSGA-II, the Pareto front and hypervolume), `gates` (threshold schedules), `ledger` (costs),
`plots` (pareto.png, generations.png), `report` (the text a report prints) and
`strategy` (the search strategy itself). See docs/evolution.md.
"""

from __future__ import annotations

import copy

from coral_core.hookspecs import hookimpl
from coral_core.lazy import Lazy
from coral_core.types import RunFlag

NAME = "evolution"


def preset() -> dict:
    """`coral run --plugin evolution`: QuixBugs' held-out test split, the baseline model,
    a small population (flags and a config file override any of it)."""
    from coral_core.run.factories import experiment_preset

    config = copy.deepcopy(experiment_preset("quixbugs"))
    config["run"] = {**config.get("run", {}), "samples": 10}
    config["search"] = {"strategy": NAME, "options": {"population": 6, "generations": 4}}
    return config


@hookimpl
def coral_register_search_strategies(register):
    register(NAME, Lazy(f"{__name__}.strategy:EvolutionSearch"))


@hookimpl
def coral_register_experiments(register):
    register(NAME, preset)  # called when used: the quixbugs preset is registered by then


@hookimpl
def coral_register_run_flags(register):
    register("population", RunFlag(("search", "options", "population"), int, metavar="P",
                                   least=2, help="Genomes per generation, for the evolution "
                                   "strategy (config: search.options.population)."))
    register("generations", RunFlag(("search", "options", "generations"), int, metavar="G",
                                    least=1, help="Generations, for the evolution strategy "
                                    "(config: search.options.generations)."))
