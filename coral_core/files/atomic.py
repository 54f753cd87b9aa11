"""Publishing files and folders atomically: a reader sees the old version or the new one,
never half of one, and a crash leaves no partial file in place.

Both helpers write beside the destination (same folder, so the same file system) and
rename into place; renames within one file system are atomic on POSIX.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
from pathlib import Path
from typing import IO, Any, Callable

_EXISTS = (errno.EEXIST, errno.ENOTEMPTY)


def write_text_atomic(path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> None:
    """Write `text` to `path` as `write_bytes_with` does."""
    data = text.encode(encoding)
    write_bytes_with(path, lambda handle: handle.write(data))


def write_bytes_with(path: str | os.PathLike[str], write: Callable[[IO[bytes]], Any]) -> None:
    """`write(handle)` into a new file beside `path` (created exclusively: never a planted
    link or someone else's file), fsynced, then renamed over `path` (a link there is
    replaced, not followed), so a crash leaves the old file or the whole new one. For
    writers that want a file object too: `figure.savefig(handle, ...)`. The temporary file
    is removed if anything fails."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        with open(temporary, "xb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _sync_folder(path.parent)


def publish_dir(staging: str | os.PathLike[str], destination: str | os.PathLike[str], *,
                replace: bool = False) -> Path:
    """Rename the finished folder `staging` to `destination` in one step; return `destination`.

    `staging` must be on the same file system (make it in `destination`'s parent). When
    `destination` already exists, another publisher got there first: `staging` is deleted
    and the published folder kept, unless `replace` is true, in which case the old folder is
    moved aside, `staging` takes its place, and the old one is deleted. (With `replace`, a
    reader may briefly find no `destination` between the two renames.)
    """
    staging, destination = Path(staging), Path(destination)
    old: Path | None = None
    if replace and destination.exists():
        old = destination.with_name(f".{destination.name}.old-{secrets.token_hex(4)}")
        try:
            os.rename(destination, old)
        except FileNotFoundError:  # a concurrent replacer moved it first
            old = None
    try:
        os.rename(staging, destination)
    except OSError as error:
        if error.errno not in _EXISTS or not destination.is_dir():
            if old is not None:  # put the old folder back; keep it if that fails too
                try:
                    os.rename(old, destination)
                except OSError:
                    pass
            raise
        shutil.rmtree(staging, ignore_errors=True)  # a concurrent publisher won
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    _sync_folder(destination.parent)
    return destination


def _sync_folder(folder: Path) -> None:
    """fsync a folder so that a rename in it survives a crash (best effort)."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)
