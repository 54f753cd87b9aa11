"""The process's standard streams, made safe before anything else runs.

A closed descriptor 0, 1 or 2 is opened on /dev/null: with 2 closed, the run's lock file
was opened as descriptor 2 and every later write to "stderr" (the sandbox's included) went
into it. Text a stream's encoding cannot hold (PYTHONIOENCODING=ascii, a file name in
another script) is written escaped instead of raising. A stderr whose reader has gone
(`coral run ... 2>&1 | head`) is pointed at /dev/null at the first failed write: progress
and warnings are not worth a stopped run (a red-team pass saw one stop after 0 of 3
samples)."""

from __future__ import annotations

import os
import sys
from typing import Any

from coral_core.files.stdout import GuardedStream


def make_streams_safe() -> None:
    for fd, mode in ((0, os.O_RDONLY), (1, os.O_WRONLY), (2, os.O_WRONLY)):
        try:
            os.fstat(fd)
        except OSError:
            opened = os.open(os.devnull, mode)
            if opened != fd:
                os.dup2(opened, fd)
                os.close(opened)
    if sys.stdin is None:
        sys.stdin = open(0, closefd=False)
    if sys.stdout is None:
        sys.stdout = open(1, "w", closefd=False)
    if sys.stderr is None:
        sys.stderr = open(2, "w", closefd=False)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError):  # replaced by a caller with something else
            pass
    if not isinstance(sys.stderr, _DroppedWhenGone):
        sys.stderr = _DroppedWhenGone(sys.stderr)
    if not isinstance(sys.stdout, GuardedStream):  # a full disk is one line, not a traceback
        sys.stdout = GuardedStream(sys.stdout)


class _DroppedWhenGone:
    """stderr that, once its reader has gone, writes to /dev/null instead of raising."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._gone()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._gone()

    def _gone(self) -> None:
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, self._stream.fileno())
        finally:
            os.close(null)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
