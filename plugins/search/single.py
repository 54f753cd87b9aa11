"""single: one configuration, the one the user gave (the default search)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from coral_core.hookspecs import hookimpl


class SingleConfiguration:
    """Asks once for no overrides; remembers what it was told."""

    def __init__(self) -> None:
        self._asked = False
        self.results: list[tuple[Mapping[str, Any], Mapping[str, float]]] = []

    def ask(self) -> list[Mapping[str, Any]]:
        if self._asked:
            return []
        self._asked = True
        return [{}]

    def tell(self, results: Sequence[tuple[Mapping[str, Any], Mapping[str, float]]]) -> None:
        self.results.extend(results)


@hookimpl
def coral_register_search_strategies(register):
    register("single", SingleConfiguration)
