"""Describing an exception raised by plugin code in one line a user can act on: the file
and line where it was raised (in the plugin, not in Coral or importlib) and the
exception's last line."""

from __future__ import annotations

import os
import traceback

# What a plugin's code may raise that must not end Coral: any error, sys.exit() (a plugin
# that exits at import would otherwise end `coral plugins list` with no message) and a stray
# GeneratorExit. KeyboardInterrupt stays the user's ^C.
PLUGIN_FAULTS = (Exception, SystemExit, GeneratorExit)

_SKIPPED = ("<frozen ", os.sep + "importlib" + os.sep, os.sep + "pluggy" + os.sep)


def where(error: BaseException) -> str:
    """'FILE:LINE' of the deepest frame outside importlib and pluggy ('' if none); for a
    SyntaxError, the offending file and line themselves."""
    if isinstance(error, SyntaxError) and error.filename:
        return f"{error.filename}:{error.lineno or '?'}"
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if not any(part in f.filename for part in _SKIPPED)]
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else ""


def last_line(error: BaseException) -> str:
    """'ExcType: message' as a traceback's last line shows it, on one line."""
    text = traceback.format_exception_only(type(error), error)[-1].strip()
    return " ".join(text.split())


def describe(error: BaseException) -> str:
    """'FILE:LINE: ExcType: message' (or just the last line when no frame is known)."""
    location = where(error)
    return f"{location}: {last_line(error)}" if location else last_line(error)
