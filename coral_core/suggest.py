"""Did-you-mean hints for names a user types: problems, plugins, presets, models,
evaluators, configuration keys. One rule everywhere, so every "unknown X" reads alike."""

from __future__ import annotations

import difflib
from typing import Iterable


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """" (did you mean 'x'?)" for the closest known names, or "" when none is close."""
    choices = sorted({str(k) for k in known})
    close = difflib.get_close_matches(name, choices, n=3, cutoff=0.6)
    if not close:  # a prefix or a dotted tail ('style' for 'coral_plugins.evaluators.style')
        lowered = name.lower()
        close = [c for c in choices
                 if lowered and (c.lower().startswith(lowered)
                                 or c.lower().endswith("." + lowered))][:3]
    if not close:
        return ""
    return " (did you mean " + " or ".join(f"'{c}'" for c in close) + "?)"


def unknown(label: str, name: str, known: Iterable[str], hint: str = "") -> str:
    """"unknown LABEL 'name' (did you mean ...?) (known: ...)" with an optional tail hint."""
    known = sorted({str(k) for k in known})
    listing = ", ".join(known) if len(known) <= 12 else ", ".join(known[:12]) + ", ..."
    message = f"unknown {label} '{name}'{did_you_mean(name, known)} (known: {listing or 'none'})"
    return message + (f"; {hint}" if hint else "")
