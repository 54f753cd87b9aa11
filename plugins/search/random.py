"""random: `budget` trials drawn from `[search.space]` with the run's seed.

A key's space is a list (one value drawn uniformly), `{choices = [...]}` (the same), or a
range `{low = A, high = B}` drawn uniformly, log-uniformly with `log = true`, as an
integer with `int = true`. The generator's state is saved with the run, so a resumed
search draws what the uninterrupted one would have.
"""

from __future__ import annotations

import math
import random
from typing import Any, Mapping, Sequence

from coral_core.errors import UserError
from coral_core.hookspecs import hookimpl

DEFAULT_BUDGET = 10


def _check_range(key: str, spec: Mapping[str, Any]) -> None:
    low, high = spec.get("low"), spec.get("high")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high)):
        raise UserError(f"random: '[search.space] {key}' needs numbers low and high, "
                        "or choices")
    if low > high:
        raise UserError(f"random: '[search.space] {key}' has low > high")
    if spec.get("log") and low <= 0:
        raise UserError(f"random: '[search.space] {key}' is log-uniform, so low must be > 0")


class RandomSearch:
    def __init__(self, space: Mapping[str, Any], seed: int = 0, budget: int = 0) -> None:
        if not space:
            raise UserError("search strategy 'random' needs [search.space]")
        self.space = {}
        for key, spec in space.items():
            if isinstance(spec, list):
                spec = {"choices": spec}
            if "choices" not in spec:
                _check_range(key, spec)
            self.space[key] = dict(spec)
        self.budget = budget or DEFAULT_BUDGET
        self._rng = random.Random(seed)
        self._asked = 0

    def _draw(self, spec: Mapping[str, Any]) -> Any:
        if "choices" in spec:
            return spec["choices"][self._rng.randrange(len(spec["choices"]))]
        low, high = spec["low"], spec["high"]
        if spec.get("int"):
            if spec.get("log"):
                return int(round(math.exp(self._rng.uniform(math.log(low), math.log(high)))))
            return self._rng.randint(int(low), int(high))
        if spec.get("log"):
            return math.exp(self._rng.uniform(math.log(low), math.log(high)))
        return self._rng.uniform(low, high)

    def ask(self) -> list[Mapping[str, Any]]:
        batch = [{key: self._draw(spec) for key, spec in self.space.items()}
                 for _ in range(self.budget - self._asked)]  # in order: the same draws
        self._asked = self.budget
        return batch

    def tell(self, results: Sequence[tuple[Mapping[str, Any], Mapping[str, float]]]) -> None:
        pass

    def state(self) -> dict[str, Any]:
        version, internal, gauss = self._rng.getstate()
        return {"asked": self._asked, "rng": [version, list(internal), gauss]}

    def restore(self, state: Mapping[str, Any]) -> None:
        version, internal, gauss = state["rng"]
        self._rng.setstate((version, tuple(internal), gauss))
        self._asked = int(state["asked"])


@hookimpl
def coral_register_search_strategies(register):
    register("random", RandomSearch)
