"""The configuration reference (docs/configuration.md), generated from the schema.

Every key of `schema.SCHEMA` has a meaning (both come from the table in
`coral_core.config.settings`); `reference()` renders each with its type and default, and a test
checks that the file holds exactly this text, so the documentation cannot drift from what
Coral accepts.
"""

from __future__ import annotations

import json
from typing import Any

from coral_core.config.schema import DEFAULTS, SCHEMA, TYPE_NAMES
from coral_core.config.settings import SETTINGS

SECTIONS = {
    "dataset": "What to evaluate on.",
    "model": "What generates the samples, and how it samples.",
    "evaluators": "How each candidate is scored.",
    "search": "Which configurations are tried (see docs/search.md).",
    "execution": "Where the work runs and the limits a candidate runs under "
                 "(see docs/sandbox.md).",
    "run": "The run itself.",
}

# section -> key -> what it means, from the settings table.
MEANINGS: dict[str, dict[str, str]] = {
    section: {item.key: item.meaning for item in SETTINGS if item.section == section}
    for section in SECTIONS
}

BEGIN = "<!-- generated from coral_core/config/settings.py: do not edit by hand -->"
END = "<!-- end of generated reference -->"


def _default(value: Any) -> str:
    return "`" + json.dumps(value) + "`"


def reference() -> str:
    """The generated part of docs/configuration.md: one table per section."""
    lines = [BEGIN, ""]
    for section, keys in SCHEMA.items():
        lines += [f"## [{section}]", "", SECTIONS[section], "",
                  "| key | type | default | meaning |", "|---|---|---|---|"]
        for key, (kind, _) in keys.items():
            meaning = MEANINGS[section][key].replace("|", "\\|")
            lines.append(f"| `{key}` | {TYPE_NAMES[kind]} | {_default(DEFAULTS[section][key])} "
                         f"| {meaning} |")
        lines.append("")
    lines.append(END)
    return "\n".join(lines) + "\n"
