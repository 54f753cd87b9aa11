"""Seeded bootstrap intervals over problems for a summary's overall figures.

A run's overall pass@k or objective is a mean over problems; which problems a data set
happens to hold is the main source of its uncertainty, so the interval resamples problems
(with replacement) and takes the 2.5th and 97.5th percentiles of the resampled means. The
generator is seeded from the run's seed: the same run always reports the same interval,
and two runs' intervals say whether their difference could be chance.
"""

from __future__ import annotations

import math
import random
from typing import Any, Mapping, Sequence

from coral_core.seeds import derive_seed

RESAMPLES = 1000
LEVEL = 0.95
# pass@k intervals for these k (and the largest k a summary has): the ones tables show.
SHOWN_K = (1, 2, 5, 10, 20, 25, 50, 100)


def bootstrap(columns: Mapping[str, Sequence[float]], seed: int,
              resamples: int = RESAMPLES, level: float = LEVEL) -> dict[str, list[float]]:
    """{name: [low, high]} for the mean of each column (all columns have one value per
    problem); every column is resampled with the same draws, so the intervals agree with
    one another."""
    sizes = {len(values) for values in columns.values()}
    if not columns or sizes == {0}:
        return {}
    if len(sizes) != 1:
        raise ValueError("every column needs one value per problem")
    size = sizes.pop()
    rng = random.Random(derive_seed("bootstrap", seed))
    population = range(size)
    getters = {name: list(values).__getitem__ for name, values in columns.items()}
    means: dict[str, list[float]] = {name: [] for name in columns}
    for _ in range(resamples):
        drawn = rng.choices(population, k=size)
        for name, value_at in getters.items():  # fsum: exact, whatever the draws' order
            means[name].append(math.fsum(map(value_at, drawn)) / size)
    tail = (1.0 - level) / 2
    low_at, high_at = int(tail * (resamples - 1)), round((1.0 - tail) * (resamples - 1))
    result = {}
    for name, drawn in means.items():
        drawn.sort()
        result[name] = [round(drawn[low_at], 6), round(drawn[high_at], 6)]
    return result


def shown_ks(pass_ks: Sequence[str]) -> list[str]:
    """The pass@k columns a table shows and intervals are drawn for: the SHOWN_K ones and
    the largest k (with 4 samples: pass@1, pass@2 and pass@4)."""
    ordered = sorted(pass_ks, key=int)  # a summary read back may hold them as text-sorted
    return [k for k in ordered if int(k) in SHOWN_K or k == ordered[-1]]


def summary_intervals(problems: Sequence[Mapping[str, Any]], pass_ks: Sequence[str],
                      objectives: Sequence[str], seed: int) -> dict[str, Any]:
    """Intervals for a summary: pass@k (the SHOWN_K ones and the largest) over the problems
    that define success, objectives and fitness over every problem with samples."""
    counted = [p for p in problems if p["n"]]
    succeeding = [p for p in counted if "c" in p]
    wanted = shown_ks(pass_ks)
    pass_columns = {k: [p["pass_at_k"][k] for p in succeeding] for k in wanted}
    other = {f"objective:{name}": [p["objectives"].get(name, 0.0) for p in counted]
             for name in objectives}
    other["fitness"] = [p["fitness"] for p in counted]
    if succeeding and len(succeeding) == len(counted):  # the same problems: one set of draws
        drawn = bootstrap({**{f"pass@{k}": v for k, v in pass_columns.items()}, **other}, seed)
        passes = {k: drawn[f"pass@{k}"] for k in pass_columns}
        others = drawn
    else:
        passes = bootstrap(pass_columns, seed) if succeeding else {}
        others = bootstrap(other, seed) if counted else {}
    return {
        "level": LEVEL, "method": "bootstrap over problems", "resamples": RESAMPLES,
        "seed": seed,
        "pass_at_k": passes,
        "objectives": {name: others[f"objective:{name}"] for name in objectives
                       if f"objective:{name}" in others},
        "fitness": others.get("fitness"),
    }
