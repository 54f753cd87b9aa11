"""Switches in the environment: one reading of yes and no for every one of them, and a
value that is neither refused in one line rather than read as "no" without a word (a
fuzzing pass set CORAL_REQUIRE_BWRAP=yes and got no bubblewrap check)."""

from __future__ import annotations

import os

from coral_core.errors import UserError

ON = ("1", "true", "yes", "on")
OFF = ("", "0", "false", "no", "off")
SWITCHES = ("CORAL_REQUIRE_BWRAP", "CORAL_DISABLE_PLUGIN_AUTOLOAD", "SKIP_MUTATION")
# Switches that change what a run computes: a run records them, and is resumed only with
# the same (a resume with SKIP_MUTATION set mixed scores with and without mutation testing).
RESULT_SWITCHES = ("SKIP_MUTATION",)


def switch(name: str) -> bool:
    """Whether the switch `name` is on; unset or empty is off."""
    value = os.environ.get(name, "").strip().lower()
    if value in ON:
        return True
    if value in OFF:
        return False
    raise UserError(f"{name}={os.environ[name]!r}: give 1 or 0 (or true/false, yes/no, "
                    "on/off)")


def check_switches() -> None:
    """Every switch Coral reads, checked when a command starts."""
    for name in SWITCHES:
        switch(name)


def result_switches() -> dict[str, bool]:
    """The RESULT_SWITCHES as they are now."""
    return {name: switch(name) for name in RESULT_SWITCHES}
