"""random: `budget` trials drawn from `[search.space]` with the run's seed.

A key's space is a list (one value drawn uniformly), `{choices = [...]}` (the same), or a
range `{low = A, high = B}` drawn uniformly, log-uniformly with `log = true`, as an
integer with `int = true`. Draws are made per ask, at most `MAX_BATCH` at a time (never
the whole budget at once), and the generator's state is saved with the run, so a resumed
search draws what the uninterrupted one would have.
"""

from __future__ import annotations

import math
import random
from typing import Any, Mapping, Sequence

from coral_core.config.schema import MAX_BATCH, MAX_TRIALS, MAX_VALUES, OptionInvalid
from coral_core.errors import UserError
from coral_core.hookspecs import hookimpl

DEFAULT_BUDGET = 10


def _check_range(key: str, spec: Mapping[str, Any]) -> None:
    low, high = spec.get("low"), spec.get("high")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high)):
        raise UserError(f"random: '[search.space] {key}' needs numbers low and high, "
                        "or choices")
    try:
        finite = math.isfinite(float(high) - float(low))  # inf or nan for either end too
    except OverflowError:  # an integer past what a float holds
        finite = False
    if not finite:
        raise UserError(f"random: '[search.space] {key}' needs a finite range (low, high "
                        "and high - low)")
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
            elif not isinstance(spec["choices"], list) or not (
                    0 < len(spec["choices"]) <= MAX_VALUES):
                raise UserError(f"random: '[search.space] {key}' needs 1 to {MAX_VALUES} "
                                "choices")
            self.space[key] = dict(spec)
        if isinstance(budget, bool) or not isinstance(budget, int) or not (
                0 <= budget <= MAX_TRIALS):
            raise OptionInvalid(("search", "budget"), f"random: budget = {budget!r} must be "
                                f"in [1, {MAX_TRIALS}] (or 0 for {DEFAULT_BUDGET} trials)")
        self.budget = budget or DEFAULT_BUDGET
        self._rng = random.Random(seed)
        self._asked = 0

    def _draw(self, spec: Mapping[str, Any]) -> Any:
        if "choices" in spec:
            return spec["choices"][self._rng.randrange(len(spec["choices"]))]
        low, high = spec["low"], spec["high"]
        if spec.get("int"):
            if spec.get("log"):  # within the range: exp(log(x)) is x only to a float's digits
                drawn = round(math.exp(self._rng.uniform(math.log(low), math.log(high))))
                return min(int(high), max(int(low), int(drawn)))
            return self._rng.randint(int(low), int(high))
        if spec.get("log"):
            return min(high, max(low, math.exp(self._rng.uniform(math.log(low), math.log(high)))))
        return self._rng.uniform(low, high)

    def ask(self) -> list[Mapping[str, Any]]:
        """The next draws, at most `MAX_BATCH`: drawn in one sequence whatever the batches,
        so the trials are those one batch of `budget` would give."""
        count = max(0, min(MAX_BATCH, self.budget - self._asked))
        batch = [{key: self._draw(spec) for key, spec in self.space.items()}
                 for _ in range(count)]
        self._asked += count
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
