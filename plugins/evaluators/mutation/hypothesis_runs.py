"""Hypothesis tests in a mutation run: the same examples in every run, and no example
database carried from one run to the next.

Left alone, Hypothesis draws fresh random examples in every process and saves each failing
example in `.hypothesis/` in the project, replaying it first in every later run. A mutant's
verdict would then depend on chance, on which mutants ran before it (on another worker, at
the same time) and on what the baseline happened to cover, which decides the tests each
mutant runs. So, in every run of the tests (the baseline, each mutant in memory or the exact
way): Hypothesis's own `--hypothesis-seed` option is set to SEED unless the project sets it
(in its ini `addopts`), and its storage folder, where the example database lives, is a fresh
one of the run's own (removed after it), so every run starts from the same empty database
and nothing is written into the project. A profile of the project's that names a database
of its own keeps it. Nothing here imports Hypothesis: without it, nothing changes.
"""

from __future__ import annotations

import os
import sys
from typing import Any

SEED = "0"
STORAGE = "HYPOTHESIS_STORAGE_DIRECTORY"  # Hypothesis reads it when it first needs storage


def seed(config: Any) -> None:
    """In `pytest_configure`, before Hypothesis's plugin reads its options (tryfirst)."""
    if hasattr(config.option, "hypothesis_seed") and config.option.hypothesis_seed is None:
        config.option.hypothesis_seed = SEED


def fresh_storage(folder: str) -> None:
    """In a run's own process before its tests: `folder` (not yet made) holds whatever
    Hypothesis stores. Hypothesis imported already (at collection) has settled its folder:
    it is told; one imported later, or a fresh `python -m pytest`, reads the variable."""
    os.environ[STORAGE] = folder
    configuration = sys.modules.get("hypothesis.configuration")
    setter = getattr(configuration, "set_hypothesis_home_dir", None)
    if setter is not None:
        setter(folder)
