"""Asking the analysis workers about a candidate, from an evaluator: the analyzer of the
evaluation context's sandbox (`analyzer_for`), and the parse check two objectives share
(`syntax_valid`)."""

from __future__ import annotations

import atexit
import threading
from typing import Any

from coral_core.sandbox.analysis import Analyzer
from coral_core.sandbox.policy import SandboxPolicy
from coral_core.sandbox.pool import Sandbox

_DEFAULT: list[Any] = []
_DEFAULT_LOCK = threading.Lock()


def analyzer_for(context: Any) -> Analyzer:
    """The analyzer of the evaluation context's sandbox; without one (an evaluator used on
    its own), one default sandbox's, closed when Python exits."""
    sandbox = getattr(context, "sandbox", None)
    if not isinstance(sandbox, Sandbox):
        with _DEFAULT_LOCK:
            if not _DEFAULT:
                _DEFAULT.append(Sandbox(SandboxPolicy(), workers=1))
                atexit.register(_DEFAULT[0].close)
            sandbox = _DEFAULT[0]
    return sandbox.analyzer()


def syntax_valid(candidate: Any, context: Any = None) -> bool:
    """Parses, and (where the task names one) defines its entry point at module level: the
    syntax objective's test, and the bugfix objective's partial credit when no test passes.
    Parsed by an analysis worker, never in this process (a deep expression crashes a
    parser)."""
    reply = analyzer_for(context).ask("parse", candidate.code)
    if "error" in reply or not reply["parses"]:
        return False
    entry = candidate.task.metadata.get("entry_point")
    if not entry:
        return reply["statements"] > 0
    return entry in reply["functions"]
