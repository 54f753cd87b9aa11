"""Where data sets live, and fetching a pinned archive into the user cache safely.

An archive passes through networks, proxies and caches, so `fetch_pinned` treats it as
hostile: the download streams to disk under a size cap and a deadline that covers the
whole exchange; the archive is read as a stream, and only the files the content digest
covers are written (regular files under the pinned folders, at most so many bytes each and
in all), each hashed while it is written, never read whole; anything else in the archive
is skipped unread, and links, devices or paths that escape are refused. The digest is
checked before the folder is renamed into the cache, so what is installed is exactly what
was digested. Every failure is a `UserError`. A lock serialises fetches of one data set,
and each fetch removes the scratch folders that a killed fetch left behind.
"""

from __future__ import annotations

import bz2
import contextlib
import fcntl
import functools
import gzip
import hashlib
import http.client
import lzma
import os
import re
import shutil
import socket
import tarfile
import tempfile
import threading
import urllib.error
import urllib.request
import zlib
from pathlib import Path, PurePosixPath
from typing import IO, Any, Iterable, Iterator, Sequence
from urllib.parse import parse_qsl, urlsplit

from coral_core.files.atomic import publish_dir
from coral_core.errors import UserError
from coral_core.shown import one_line
from coral_core.files.fileio import open_plain
from coral_core.data.locate import FetchLimits, cache_folder, fetched_dir

CHUNK = 1 << 20


# ----- the content digest -----

def _digested(relative: PurePosixPath) -> bool:
    """Whether a file under a pinned folder is part of the digest (bytecode is not)."""
    return "__pycache__" not in relative.parts and relative.suffix != ".pyc"


def _combine(entries: Iterable[tuple[PurePosixPath, bytes]]) -> str:
    """sha256 over (relative path, sha256 of the content) in path order."""
    outer = hashlib.sha256()
    for relative, inner in sorted(entries, key=lambda entry: entry[0].parts):
        outer.update(relative.as_posix().encode() + b"\0")
        outer.update(inner)
    return outer.hexdigest()


def _file_sha256(path: Path) -> bytes:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(functools.partial(handle.read, CHUNK), b""):
            digest.update(chunk)
    return digest.digest()


def tree_digest(root: Path, folders: Iterable[str]) -> str:
    """sha256 over (relative path, content digest) of every file under `folders` (read in
    chunks: no file is held in memory whole). The digest `fetch_pinned` checks."""
    entries = []
    for folder in folders:
        base = root / folder
        if not base.is_dir():
            raise UserError(f"{root} has no '{folder}' folder")
        for path in base.rglob("*"):
            relative = PurePosixPath(path.relative_to(root).as_posix())
            if path.is_file() and _digested(relative):
                entries.append((relative, _file_sha256(path)))
    return _combine(entries)


# ----- downloading under a size cap and a deadline -----

class _Watchdog:
    """Shuts down the sockets of one download when its deadline passes.

    A socket timeout bounds each read, not the exchange: a server that sends one byte per
    second (headers or body) never trips it. Shutting the sockets down wakes any blocked
    read at the deadline.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> "_Watchdog":
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def watch(self, sock: socket.socket) -> socket.socket:
        with self._lock:
            self._sockets.append(sock)
        if self.expired.is_set():
            self._expire()
        return sock

    def _expire(self) -> None:
        self.expired.set()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def _watched(connection_class: type[http.client.HTTPConnection], watchdog: _Watchdog,
             ) -> Any:
    """A connection factory whose TCP sockets (before any TLS) the watchdog can shut."""

    def create(*args: Any, **kwargs: Any) -> http.client.HTTPConnection:
        connection = connection_class(*args, **kwargs)

        def create_connection(*a: Any, **k: Any) -> socket.socket:
            return watchdog.watch(socket.create_connection(*a, **k))

        connection._create_connection = create_connection  # type: ignore[attr-defined]
        return connection

    return create


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, watchdog: _Watchdog) -> None:
        super().__init__()
        self._watchdog = watchdog

    def http_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(_watched(http.client.HTTPConnection, self._watchdog), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, watchdog: _Watchdog) -> None:
        super().__init__()
        self._watchdog = watchdog

    def https_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(_watched(http.client.HTTPSConnection, self._watchdog), req,
                            context=self._context)  # type: ignore[attr-defined]


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Follow at most 5 redirects, and only to http(s) (a forge redirects to its CDN)."""

    max_redirections = 5

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> Any:
        if urlsplit(newurl).scheme not in ("http", "https"):
            raise UserError(f"download of {_shown(req.full_url)} redirected to a "
                            f"non-HTTP address; refused")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _clean(text: str, limit: int = 160) -> str:
    """Server- or archive-supplied text (a member's name) for one line on a terminal."""
    return one_line(text, limit, spaces=True)


_SECRET_NAME = re.compile(r"key|token|secret|passw|pwd|auth|sig|credential|session",
                          re.IGNORECASE)


def _shown(url: str) -> str:
    """`url` for messages: user:password@ and secret-looking query values as ***."""
    parts = urlsplit(url)
    if parts.username or parts.password:
        parts = parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2])
    if parts.query:
        parts = parts._replace(query="&".join(
            f"{name}=***" if _SECRET_NAME.search(name) else f"{name}={value}"
            for name, value in parse_qsl(parts.query, keep_blank_values=True)))
    return _clean(parts.geturl())


def _download(url: str, target: Path, limits: FetchLimits) -> None:
    """Stream `url` into `target`: at most `download_bytes`, within `deadline` seconds."""
    shown = _shown(url)
    if urlsplit(url).scheme not in ("https", "http", "file"):
        raise UserError(f"unsupported URL '{shown}' (use https://, http:// or file://)")
    cap = limits.download_bytes
    with _Watchdog(limits.deadline) as watchdog:
        opener = urllib.request.build_opener(_HTTPHandler(watchdog), _HTTPSHandler(watchdog),
                                             _Redirects())
        try:
            response = opener.open(url, timeout=min(limits.deadline, 60.0))
            with response, target.open("wb") as out:
                size = _stream_to(response, out, cap, shown, watchdog)
                missing = getattr(response, "length", None)
        except UserError:
            raise
        except urllib.error.HTTPError as error:
            raise UserError(f"download of {shown} failed: HTTP {error.code} "
                            f"{_clean(str(error.reason), 60)}; nothing was installed") from None
        except (OSError, http.client.HTTPException, ValueError) as error:
            if watchdog.expired.is_set():
                raise _too_slow(shown, limits) from None
            if isinstance(error, http.client.IncompleteRead):
                reason = "the connection closed before the end of the reply"
            else:
                reason = _clean(str(getattr(error, "reason", None) or error)
                                or type(error).__name__)
            raise UserError(f"download of {shown} failed: {reason}; nothing was installed"
                            ) from None
    if watchdog.expired.is_set():
        raise _too_slow(shown, limits)
    if missing:
        raise UserError(f"download of {shown} was cut short: {size} bytes came, "
                        f"{size + missing} were announced; nothing was installed")


def _stream_to(response: Any, out: IO[bytes], cap: int, shown: str,
               watchdog: _Watchdog) -> int:
    """Copy the body chunk by chunk (`read1`: whatever has arrived) under the cap."""
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > cap:
        raise UserError(f"download of {shown} refused: the server announces "
                        f"{int(declared)} bytes, over the {cap}-byte cap; nothing was installed")
    read = getattr(response, "read1", response.read)
    size = 0
    while not watchdog.expired.is_set():
        chunk = read(CHUNK)
        if not chunk:
            break
        size += len(chunk)
        if size > cap:
            raise UserError(f"download of {shown} stopped: over the {cap}-byte cap (an "
                            "archive this large is not the pinned one); nothing was installed")
        out.write(chunk)
    return size


def _too_slow(shown: str, limits: FetchLimits) -> UserError:
    return UserError(f"download of {shown} did not finish within {limits.deadline:g} s; "
                     "nothing was installed")


# ----- unpacking only what the digest covers -----

class _CappedReader:
    """A decompressing reader that fails once it has produced more than `cap` bytes."""

    def __init__(self, inner: IO[bytes], cap: int) -> None:
        self._inner, self._cap, self.total = inner, cap, 0

    def read(self, size: int = -1) -> bytes:
        data = self._inner.read(size if size >= 0 else CHUNK)
        self.total += len(data)
        if self.total > self._cap:
            raise UserError(f"the archive unpacks to more than {self._cap} bytes; refused")
        return data


def _decompressing(archive: Path) -> IO[bytes]:
    """The archive's tar stream, decompressed by its magic bytes (gzip, bzip2, xz, none)."""
    with archive.open("rb") as handle:
        magic = handle.read(6)
    if magic.startswith(b"\x1f\x8b"):
        return gzip.open(archive, "rb")
    if magic.startswith(b"BZh"):
        return bz2.open(archive, "rb")
    if magic.startswith(b"\xfd7zXZ\x00"):
        return lzma.open(archive, "rb")
    return archive.open("rb")


_EXTENDED = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE,
             tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK)


def _bounded_tarinfo(header_bytes: int) -> type[tarfile.TarInfo]:
    """TarInfo that refuses an extended header over `header_bytes` before tarfile reads it
    into memory (its size is whatever the archive says)."""

    class BoundedTarInfo(tarfile.TarInfo):
        def _proc_member(self, tar: tarfile.TarFile) -> tarfile.TarInfo:
            if self.type in _EXTENDED and self.size > header_bytes:
                raise tarfile.HeaderError(f"an extended header of {self.size} bytes")
            return super()._proc_member(tar)  # type: ignore[misc]

    return BoundedTarInfo


def _place(name: str, folders: Sequence[str]) -> tuple[tuple[str, ...], PurePosixPath] | None:
    """(top folder parts, path below it) for a member under a pinned folder, else None.

    The archive may hold the folders at its root or in one top folder (a forge's
    `Repo-<commit>/`). A name that is absolute or climbs out (`..`) is refused.
    """
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts:
        raise UserError(f"archive member {_clean(name)!r} escapes the target folder; refused")
    parts = tuple(part for part in path.parts if part != ".")
    for depth in (0, 1):
        if len(parts) > depth and parts[depth] in folders:
            return parts[:depth], PurePosixPath(*parts[depth:])
    return None


def _copy_member(source: IO[bytes], target: Path, size: int) -> bytes:
    """Write a member to `target` (a new file, mode 0644) and return its sha256."""
    digest = hashlib.sha256()
    written = 0
    with open(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644), "wb") as out:
        for chunk in iter(functools.partial(source.read, CHUNK), b""):
            written += len(chunk)
            if written > size:
                raise UserError(f"archive member {target.name} is longer than it says")
            digest.update(chunk)
            out.write(chunk)
    if written != size:
        raise UserError(f"archive member {target.name} is truncated")
    return digest.digest()


def _install(archive: Path, into: Path, folders: Sequence[str], limits: FetchLimits,
             files: frozenset[str] | None = None) -> str:
    """Write the archive's digested files under `into` (of them only `files`, paths below
    the archive's top folder, where given); return their content digest."""
    into.mkdir(parents=True)
    entries: dict[PurePosixPath, bytes] = {}
    top: tuple[str, ...] | None = None
    installed = 0
    tarinfo = _bounded_tarinfo(limits.header_bytes)
    with _decompressing(archive) as raw, tarfile.open(
            fileobj=_CappedReader(raw, limits.unpacked_bytes),  # type: ignore[arg-type]
            mode="r|", tarinfo=tarinfo) as tar:
        for count, member in enumerate(tar, 1):
            if count > limits.members:
                raise UserError(f"the archive has more than {limits.members} entries; refused")
            placed = _place(member.name, folders)
            if placed is None or member.isdir():
                continue
            prefix, relative = placed
            if top is None:
                top = prefix
            elif prefix != top:
                raise UserError("the archive holds the data folders under several top "
                                f"folders ({'/'.join(top) or '.'} and "
                                f"{_clean('/'.join(prefix)) or '.'}); refused")
            if not _digested(relative) or files is not None \
                    and relative.as_posix() not in files:
                continue
            shown = _clean(relative.as_posix())
            if not member.isreg() or member.issparse():
                kind = ("a link" if member.issym() or member.islnk() else "a device or FIFO"
                        if member.isdev() or member.isfifo() else "a sparse file"
                        if member.issparse() else "not a regular file")
                raise UserError(f"archive member {shown} is {kind}; refused")
            if member.size > limits.file_bytes:
                raise UserError(f"archive member {shown} has {member.size} bytes, over the "
                                f"{limits.file_bytes}-byte cap for one file; refused")
            installed += member.size
            if installed > limits.installed_bytes:
                raise UserError(f"the data folders of the archive hold more than "
                                f"{limits.installed_bytes} bytes; refused")
            if relative in entries:
                raise UserError(f"archive member {shown} appears twice; refused")
            target = into.joinpath(*relative.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            assert source is not None  # a regular file always has content
            entries[relative] = _copy_member(source, target, member.size)
    missing = [f for f in folders if not (into / f).is_dir()]
    if missing:
        raise UserError(f"the archive has no {', '.join(missing)} folder(s); is it the right one?")
    absent = sorted((files or frozenset()) - {r.as_posix() for r in entries})
    if absent:
        raise UserError(f"the archive has no {', '.join(_clean(f) for f in absent)}; is it "
                        "the right one?")
    return _combine(entries.items())


# ----- the fetch -----

@contextlib.contextmanager
def _fetch_lock(parent: Path, name: str) -> Iterator[None]:
    """One fetch of `name` at a time; holding the lock means its scratch folders are stale."""
    descriptor = open_plain(parent / f".{name}.lock", "fetch lock")
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserError(f"another 'coral datasets fetch {name}' is running "
                            f"(lock {parent / f'.{name}.lock'})") from None
        yield
    finally:
        os.close(descriptor)  # releases the lock


def _remove_stale(parent: Path, name: str) -> None:
    """Scratch and replaced folders that a killed fetch of `name` left behind."""
    # `.NAME.scratch-*` exactly: `.humaneval-*` would also match humaneval-infilling's
    for path in list(parent.glob(f".{name}.scratch-*")) + list(parent.glob(f".{name}.old-*")):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)


def fetch_pinned(
    name: str, url: str, digest: str, folders: Iterable[str], *, force: bool = False,
    limits: FetchLimits = FetchLimits(), files: Iterable[str] | None = None,
) -> Path:
    """Download `url`, install its digested files, check the digest, rename into the cache.

    The digest covers the unpacked files that Coral reads (archive bytes produced by a
    forge are not stable across time; their content is), and nothing else is installed:
    every file under `folders`, or only `files` (paths such as "data/HumanEval.jsonl.gz")
    where given. Nothing is left in place unless the check passes.
    """
    folders = sorted(folders)
    target = fetched_dir(name)
    cache_folder("datasets")
    if target.is_dir() and not force:
        with contextlib.suppress(UserError):  # a fetch running now cleans up itself
            with _fetch_lock(target.parent, name):
                _remove_stale(target.parent, name)  # what a killed fetch left behind
        return target
    with _fetch_lock(target.parent, name):
        _remove_stale(target.parent, name)
        with tempfile.TemporaryDirectory(prefix=f".{name}.scratch-", dir=target.parent) as scratch:
            scratch_path = Path(scratch)
            archive = scratch_path / "archive"
            _download(url, archive, limits)
            try:
                found = _install(archive, scratch_path / "unpacked", folders, limits,
                                 None if files is None else frozenset(files))
            except UserError:
                raise
            except (EOFError, OSError, tarfile.TarError, zlib.error, lzma.LZMAError) as error:
                reason = _clean(str(error) or type(error).__name__)
                raise UserError(f"{name} archive from {_shown(url)} is truncated or corrupt "
                                f"({reason}); nothing was installed") from None
            if found != digest:
                raise UserError(
                    f"{name} archive from {_shown(url)} has content digest {found}, expected "
                    f"{digest}; nothing was installed"
                )
            publish_dir(scratch_path / "unpacked", target, replace=True)  # `force`: replace
    return target
