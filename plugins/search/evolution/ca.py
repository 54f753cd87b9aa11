"""Cellular-automaton seeding: a genome's CA genes, its history and the features read from it.

An elementary (one-dimensional, two-state, radius-1) automaton on a ring of `grid` cells
runs `steps` updates of Wolfram rule `rule` from an initial state drawn by
`numpy.random.default_rng(init_seed)`. Every update is one vectorised table look-up over
the whole row. Four features in [0, 1] are read from the history:

- complexity: the Shannon entropy of the 3-cell neighbourhoods seen over the history,
  divided by its maximum (3 bits);
- intensity: the fraction of live cells over the history;
- periodicity: 1/p when the final state repeats with period p (a fixed point gives 1),
  0 when no state repeats within the history;
- convergence: the fraction of cells that no longer change over the second half of the run.

The features map deterministically onto a genome's genes (`genome.GeneSpace.from_features`).
Everything here depends only on the integers given: no salted `hash()`, no global RNG.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

FEATURES = ("complexity", "intensity", "periodicity", "convergence")


@dataclass(frozen=True)
class CASeed:
    """The CA genes of one genome."""

    grid: int
    rule: int
    steps: int
    init_seed: int

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def draw_seeds(seed: int, count: int) -> list[CASeed]:
    """`count` CA seeds from one generator seeded with the run's seed."""
    rng = np.random.default_rng([int(seed), 0xCA])
    seeds = []
    for _ in range(count):
        seeds.append(CASeed(grid=int(rng.integers(16, 65)), rule=int(rng.integers(0, 256)),
                            steps=int(rng.integers(16, 65)),
                            init_seed=int(rng.integers(0, 2**31 - 1))))
    return seeds


def run(seed: CASeed) -> np.ndarray:
    """The history, shape (steps + 1, grid), of 0/1 cells (uint8)."""
    table = np.array([(seed.rule >> i) & 1 for i in range(8)], dtype=np.uint8)
    state = np.random.default_rng(seed.init_seed).integers(0, 2, seed.grid, dtype=np.uint8)
    history = np.empty((seed.steps + 1, seed.grid), dtype=np.uint8)
    history[0] = state
    for t in range(1, seed.steps + 1):
        index = (np.roll(state, 1) << 2) | (state << 1) | np.roll(state, -1)
        state = table[index]
        history[t] = state
    return history


def features(history: np.ndarray) -> dict[str, float]:
    """complexity, intensity, periodicity and convergence of a history, each in [0, 1]."""
    rows = history.astype(np.int64)
    patterns = (np.roll(rows, 1, axis=1) << 2) | (rows << 1) | np.roll(rows, -1, axis=1)
    counts = np.bincount(patterns.ravel(), minlength=8).astype(float)
    p = counts[counts > 0] / counts.sum()
    complexity = float(-(p * np.log2(p)).sum() / 3.0)
    intensity = float(rows.mean())
    final = rows[-1]
    periodicity = 0.0
    for period in range(1, len(rows)):
        if np.array_equal(rows[-1 - period], final):
            periodicity = 1.0 / period
            break
    half = rows[len(rows) // 2:]
    steady = np.all(half == half[-1], axis=0)
    convergence = float(steady.mean())
    return {name: round(value, 6) for name, value in zip(
        FEATURES, (complexity, intensity, periodicity, convergence))}
