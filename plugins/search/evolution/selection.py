"""NSGA-II selection through Optuna's `NSGAIISampler` (ask/tell), and the front's measures.

The study lives in memory and is a pure function of the run's seed and of what it was told:
`Selection` asks a generation of `population` trials (the first generation's are enqueued,
CA-seeded), and is told each genome's objective vector and gate constraints. A resumed
search replays its saved generations into a fresh study: Optuna then proposes exactly the
genomes it proposed before (checked, genome by genome), and the sampler's random state is
checked against the digest saved with the population.
"""

from __future__ import annotations

import hashlib
import logging
import warnings
from typing import Any, Mapping, Sequence

import numpy as np

from coral_core.errors import UserError
from coral_core.seeds import numpy_seed

CONSTRAINTS_ATTR = "coral_constraints"


def _constraints(trial: Any) -> Sequence[float]:
    return trial.user_attrs.get(CONSTRAINTS_ATTR, [])


class Selection:
    """One Optuna study driven by NSGA-II, all objectives maximised."""

    def __init__(self, distributions: Mapping[str, Any], objectives: Sequence[str],
                 population: int, seed: int, gated: bool):
        import optuna
        from optuna.samplers import NSGAIISampler

        optuna.logging.set_verbosity(logging.WARNING)
        self.distributions = dict(distributions)
        self.objectives = list(objectives)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # constraints_func is "experimental" in Optuna
            self.sampler = NSGAIISampler(population_size=population, seed=numpy_seed(seed),
                                         constraints_func=_constraints if gated else None)
            self.study = optuna.create_study(directions=["maximize"] * len(self.objectives),
                                             sampler=self.sampler)
        self._pending: list[Any] = []

    def ask(self, enqueued: Sequence[Mapping[str, Any]] = (), count: int = 0,
            ) -> list[dict[str, Any]]:
        """A generation: the `enqueued` genomes as they are, or `count` genomes NSGA-II
        breeds from the population so far."""
        if self._pending:
            raise RuntimeError("a generation is still waiting to be told")
        for params in enqueued:
            self.study.enqueue_trial(dict(params))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._pending = [self.study.ask(self.distributions)
                             for _ in range(len(enqueued) or count)]
        return [dict(trial.params) for trial in self._pending]

    def tell(self, values: Sequence[Sequence[float]],
             constraints: Sequence[Sequence[float]]) -> None:
        """Tell the pending generation, genome by genome, in the order asked."""
        if len(values) != len(self._pending):
            raise RuntimeError("told a generation of another size than asked")
        for trial, vector, limits in zip(self._pending, values, constraints):
            trial.set_user_attr(CONSTRAINTS_ATTR, [float(v) for v in limits])
            self.study.tell(trial, [float(v) for v in vector])
        self._pending = []

    def rng_digest(self) -> str:
        """A digest of the sampler's random state (NSGA-II's own and its random
        sampler's), saved with each generation and checked on resume."""
        digest = hashlib.sha256()
        for holder in (self.sampler, getattr(self.sampler, "_random_sampler", None)):
            state = getattr(getattr(holder, "_rng", None), "rng", None)
            if state is None:
                continue
            name, keys, pos, has_gauss, cached = state.get_state()
            digest.update(np.asarray(keys, dtype=np.uint32).tobytes())
            digest.update(repr((name, int(pos), int(has_gauss), float(cached))).encode())
        return digest.hexdigest()


def replay_mismatch(generation: int, index: int) -> UserError:
    return UserError(f"cannot resume the evolution search: Optuna proposes another genome "
                     f"{index} in generation {generation + 1} than the interrupted run did "
                     "(was Optuna upgraded?)")


def non_dominated(points: np.ndarray) -> np.ndarray:
    """A boolean mask of the rows no other row dominates (all objectives maximised; equal
    rows are all kept)."""
    points = np.asarray(points, dtype=float)
    if len(points) == 0:
        return np.zeros(0, dtype=bool)
    ge = np.all(points[:, None, :] >= points[None, :, :], axis=2)
    gt = np.any(points[:, None, :] > points[None, :, :], axis=2)
    dominated_by = ge & gt  # [i, j]: i dominates j
    return ~dominated_by.any(axis=0)


def hypervolume(points: Sequence[Sequence[float]]) -> float:
    """The volume that the points dominate above the origin (objectives in [0, 1],
    maximised), computed by Optuna's exact WFG algorithm."""
    from optuna._hypervolume import compute_hypervolume

    array = np.clip(np.asarray(points, dtype=float), 0.0, None)
    if array.size == 0:
        return 0.0
    front = array[non_dominated(array)]
    front = np.unique(front, axis=0)
    return round(float(compute_hypervolume(-front, np.zeros(front.shape[1]),
                                           assume_pareto=True)), 9)
