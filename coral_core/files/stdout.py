"""Standard output that says in one line why it cannot be written (a full disk, a device
error) instead of a traceback from wherever the write happened (a red-team pass: `coral
export RUN >/dev/full`). A reader that has gone (`| head`) is left to Python's own handling."""

from __future__ import annotations

import os
from typing import Any, Iterable

from coral_core.errors import UserError


class UnwritableOutput(UserError):
    """Standard output refused a write."""


class GuardedStream:
    """Wraps a text stream: a failed write or flush raises UnwritableOutput, once; what is
    still buffered then goes to /dev/null, so the flush at exit does not fail again."""

    def __init__(self, stream: Any, name: str = "standard output") -> None:
        self._stream = stream
        self._name = name

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as error:
            self._fail(error)
            return 0

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as error:
            self._fail(error)

    def _fail(self, error: OSError) -> None:
        silence(self._stream)
        raise UnwritableOutput(f"cannot write to {self._name}: "
                               f"{error.strerror or error}") from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def silence(stream: Any) -> None:
    """Point the stream's descriptor at /dev/null (what it still buffers is dropped there)."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    try:
        os.dup2(null, stream.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    finally:
        os.close(null)
