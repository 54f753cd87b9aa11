"""grid: every combination of the values in `[search.space]`, in the order written.

`[search.space] "model.temperature" = [0.2, 0.8]` with `"model.top_p" = [0.9, 1.0]` gives
four trials; the last key changes fastest (as nested loops read). The grid does not adapt,
so every point is proposed in one batch: an executor that runs trials at once (`ray`) runs
them together; locally they run one after another, in order.
"""

from __future__ import annotations

import itertools
from typing import Any, Mapping, Sequence

from coral_core.errors import UserError
from coral_core.hookspecs import hookimpl


class GridSearch:
    def __init__(self, space: Mapping[str, Any], budget: int = 0) -> None:
        if not space:
            raise UserError("search strategy 'grid' needs [search.space] (key = [values])")
        for key, values in space.items():
            if not isinstance(values, list):
                raise UserError(f"grid: '[search.space] {key}' must be a list of values "
                                "(ranges are for the random strategy)")
        self.keys = list(space)
        self.points = [dict(zip(self.keys, combo))
                       for combo in itertools.product(*(space[k] for k in self.keys))]
        if budget:
            self.points = self.points[:budget]
        self._next = 0

    def ask(self) -> list[Mapping[str, Any]]:
        batch, self._next = self.points[self._next:], len(self.points)
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
