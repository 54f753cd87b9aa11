"""Mutation testing pieces shared by the mutation evaluator and testgen: cosmic-ray's
enumeration of a module's mutants (`plan`) and the WorkDB session that records verdicts
(`session`)."""

from __future__ import annotations

from coral_core.switches import switch


def skip_requested() -> bool:
    """`SKIP_MUTATION=true`: mutation testing (and testgen's judging by it) is skipped, as
    the seed's CI switch asks."""
    return switch("SKIP_MUTATION")
