"""The text a search strategy renders of its own summary (`summary.json`'s `search`).

A strategy class may define a static `report_text(search) -> str`; `coral run` and
`coral report` print it under the tables. Looked up through the registry, so a
third-party strategy's report shows the same way.
"""

from __future__ import annotations

from typing import Any, Mapping

from . import plugins
from .errors import UserError


def strategy_report(name: str, search: Mapping[str, Any]) -> str:
    try:
        factory = plugins.registry().get("search_strategies", name).factory
    except UserError:  # a run made with a strategy that is no longer installed
        return ""
    render = getattr(factory, "report_text", None)
    return str(render(search)) if callable(render) else ""
