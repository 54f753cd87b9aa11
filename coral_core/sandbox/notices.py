"""Saying, once per process, that this machine lacks a layer of the sandbox."""

from __future__ import annotations

import logging

log = logging.getLogger("coral_core.sandbox")
_said: set[str] = set()


def warn_once(key: str, message: str, *args: object) -> None:
    """Loud, once per process: a layer this machine does not offer (bubblewrap, a memory
    cgroup, seccomp filters), and what that leaves exposed."""
    if key not in _said:
        _said.add(key)
        log.warning(message, *args)
