"""grid: every combination of the values in `[search.space]`, in the order written.

`[search.space] "model.temperature" = [0.2, 0.8]` with `"model.top_p" = [0.9, 1.0]` gives
four trials; the last key changes fastest (as nested loops read). The grid is never built:
its size is the product of the axes' lengths, and point `i` is decoded from `i` (mixed
radix, the last axis the least significant digit), so a 60^5 grid with `budget = 1` costs
one point. The grid does not adapt, so it proposes its points in batches of at most
`MAX_BATCH` (the most trials a run can run at once); its state is the next index.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from coral_core.config.schema import MAX_BATCH, MAX_TRIALS, OptionInvalid
from coral_core.errors import UserError
from coral_core.hookspecs import hookimpl


def decode(index: int, axes: Sequence[Sequence[Any]]) -> tuple[Any, ...]:
    """The `index`-th combination of `axes` in nested-loop order (the last axis fastest)."""
    values = []
    for axis in reversed(axes):
        index, digit = divmod(index, len(axis))
        values.append(axis[digit])
    return tuple(reversed(values))


class GridSearch:
    def __init__(self, space: Mapping[str, Any], budget: int = 0) -> None:
        if not space:
            raise UserError("search strategy 'grid' needs [search.space] (key = [values])")
        for key, values in space.items():
            if not isinstance(values, list) or not values:
                raise UserError(f"grid: '[search.space] {key}' must be a non-empty list of "
                                "values (ranges are for the random strategy)")
        if isinstance(budget, bool) or not isinstance(budget, int) or not (
                0 <= budget <= MAX_TRIALS):
            raise OptionInvalid(("search", "budget"), f"grid: budget = {budget!r} must be in "
                                f"[0, {MAX_TRIALS}] (0 = the whole grid)")
        self.keys = list(space)
        self.axes = [list(space[key]) for key in self.keys]
        self.size = math.prod(len(axis) for axis in self.axes)  # computed, never enumerated
        self.limit = min(self.size, budget) if budget else self.size
        if self.limit > MAX_TRIALS:
            raise OptionInvalid(("search", "space"), (
                f"grid: [search.space] has {self.size} combinations, more than the "
                f"{MAX_TRIALS} trials a run may have: set [search] budget (at most "
                f"{MAX_TRIALS}) or give fewer values"))
        self._next = 0

    def point(self, index: int) -> dict[str, Any]:
        """The grid's `index`-th point as overrides (key -> value)."""
        return dict(zip(self.keys, decode(index, self.axes)))

    def ask(self) -> list[Mapping[str, Any]]:
        end = min(self._next + MAX_BATCH, self.limit)
        batch = [self.point(index) for index in range(self._next, end)]
        self._next = max(self._next, end)
        return batch

    def tell(self, results: Sequence[tuple[Mapping[str, Any], Mapping[str, float]]]) -> None:
        pass

    def state(self) -> dict[str, Any]:
        return {"next": self._next}

    def restore(self, state: Mapping[str, Any]) -> None:
        self._next = int(state["next"])


@hookimpl
def coral_register_search_strategies(register):
    register("grid", GridSearch)
