"""Cutting generated text at stop sequences: one rule for every model backend.

A backend may stop generating at a stop sequence yet still return it (servers differ;
decoding tokens can run past it), so each one cuts its text here before returning it.
"""

from __future__ import annotations

from typing import Iterable


def cut_at_stop(text: str, stops: Iterable[str]) -> tuple[str, bool]:
    """The text before the earliest occurrence of any stop sequence, and whether one occurred.

    The stop sequence itself is dropped. Empty stop strings are ignored (they would match
    everywhere). Where two stops occur, the one that starts first wins, whatever their
    order in `stops`.
    """
    positions = [text.find(stop) for stop in stops if stop]
    found = [position for position in positions if position >= 0]
    if not found:
        return text, False
    return text[:min(found)], True
