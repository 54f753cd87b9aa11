"""Hypothesis tests in a mutation run: the same examples in every run, and no example
database carried from one run to the next.

Left alone, Hypothesis draws fresh random examples in every process and saves each failing
example in `.hypothesis/` in the project, replaying it first in every later run. A mutant's
verdict would then depend on chance, on which mutants ran before it (on another worker, at
the same time) and on what the baseline happened to cover, which decides the tests each
mutant runs. So every run of the tests (the baseline, each mutant in memory or the exact
way) draws with seed SEED, as Hypothesis's own `--hypothesis-seed` would make it, unless
the project sets one (in its ini `addopts`); and its storage folder, where the example
database lives, is a fresh one of the run's own (removed after it), so every run starts
from the same empty database and nothing is written into the project. A profile of the
project's that names a database of its own keeps it. Hypothesis is never imported here: a
suite that does not use it pays nothing.
"""

from __future__ import annotations

import os
import sys
from typing import Any

SEED = 0
STORAGE = "HYPOTHESIS_STORAGE_DIRECTORY"  # Hypothesis reads it when it first needs storage
USED = "CORAL_MUTATION_HYPOTHESIS"  # set for the exact path's pytest when the tests use it


def seed_collected() -> bool:
    """After collection, in the worker (its children inherit it): the seed, if the tests
    imported Hypothesis and the project set none. True when they use Hypothesis."""
    core = sys.modules.get("hypothesis.core")
    if core is None:
        return False
    if getattr(core, "global_force_seed", None) is None:
        core.global_force_seed = SEED  # what the plugin's --hypothesis-seed sets
    return True


def seed_option(config: Any) -> None:
    """In the exact path's `pytest_configure`, before Hypothesis's plugin reads its options
    (tryfirst): its seed option, where the worker found the tests using Hypothesis."""
    if os.environ.pop(USED, "") and getattr(config.option, "hypothesis_seed", "") is None:
        config.option.hypothesis_seed = str(SEED)


def fresh_storage(folder: str) -> None:
    """In a run's own process before its tests: `folder` (not yet made) holds whatever
    Hypothesis stores. Hypothesis imported already (at collection) has settled its folder:
    it is told; one imported later, or a fresh `python -m pytest`, reads the variable."""
    os.environ[STORAGE] = folder
    configuration = sys.modules.get("hypothesis.configuration")
    setter = getattr(configuration, "set_hypothesis_home_dir", None)
    if setter is not None:
        setter(folder)
