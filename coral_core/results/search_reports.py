"""The text a search strategy renders of its own summary (`summary.json`'s `search`).

A strategy class may define a static `report_grids(search)` (tables and lines) or
`report_text(search) -> str`; `coral run` and `coral report` print it under the tables.
Looked up through the registry, so a third-party strategy's report shows the same way.
"""

from __future__ import annotations

from typing import Any, Mapping

from coral_core import plugins
from coral_core.errors import UserError
from coral_core.results.grids import Grid


def strategy_report(name: str, search: Mapping[str, Any]) -> list[Grid | str]:
    """Tables (`report_grids(search) -> list[Grid | str]`, drawn for a terminal) where the
    strategy gives them, else its `report_text` as one block; [] when it has neither."""
    try:
        factory = plugins.registry().get("search_strategies", name).factory
    except UserError:  # a run made with a strategy that is no longer installed
        return []
    grids = getattr(factory, "report_grids", None)
    if callable(grids):
        return [part if isinstance(part, Grid) else str(part) for part in grids(search)]
    render = getattr(factory, "report_text", None)
    text = str(render(search)) if callable(render) else ""
    return [text] if text else []
