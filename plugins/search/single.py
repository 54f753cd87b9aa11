"""single: one configuration, the one the user gave (the default search)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from coral_core.hookspecs import hookimpl


class SingleConfiguration:
    """Asks once for no overrides."""

    def __init__(self) -> None:
        self._asked = False

    def ask(self) -> list[Mapping[str, Any]]:
        if self._asked:
            return []
        self._asked = True
        return [{}]

    def tell(self, results: Sequence[tuple[Mapping[str, Any], Mapping[str, float]]]) -> None:
        pass

    def state(self) -> dict[str, Any]:
        return {"asked": self._asked}

    def restore(self, state: Mapping[str, Any]) -> None:
        self._asked = bool(state["asked"])


@hookimpl
def coral_register_search_strategies(register):
    register("single", SingleConfiguration)
