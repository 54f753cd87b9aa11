"""Crafted QuixBugs archives and a hostile HTTP server that serves them, for fetch tests.

Archives are built from the real data (the QuixBugs folder under CORAL_DATA_DIR) as the
forge serves it (one top folder `QuixBugs-<commit>/`), plus whatever a test asks for:
padding that inflates to gigabytes (repeated gzip members of zeros: a few MiB on the wire),
entries by the hundred thousand, links, devices, sparse files, setuid bits, extended
headers that claim a gigabyte, truncation. Nothing big is ever held in memory here.

The server binds to 127.0.0.1, serves `/NAME` (an archive registered with `put`) in a
manner chosen by the query: `?how=slow` (one byte per second), `endless` (no length, no
end), `short` (closes before its Content-Length), `huge` (announces 10 GB). It stops itself
after `lifetime` seconds.
"""

from __future__ import annotations

import gzip
import http.server
import io
import tarfile
import threading
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator
from urllib.parse import parse_qs, urlsplit

GiB = 1 << 30
MiB = 1 << 20


@dataclass(frozen=True)
class Entry:
    """One archive member: a file (`data`), a folder, or a special member."""

    name: str
    data: bytes = b""
    kind: bytes = tarfile.REGTYPE
    mode: int = 0o644
    link: str = ""


def genuine(data_dir: Path, top: str) -> list[Entry]:
    """The QuixBugs tree as entries under `top/` (folders first, as tar lists them)."""
    root = data_dir / "quixbugs"
    entries = [Entry(f"{top}/", kind=tarfile.DIRTYPE, mode=0o755)]
    for path in sorted(root.rglob("*")):
        if "__pycache__" in path.parts or path.suffix == ".pyc":
            continue
        name = f"{top}/{path.relative_to(root).as_posix()}"
        if path.is_dir():
            entries.append(Entry(name + "/", kind=tarfile.DIRTYPE, mode=0o755))
        else:
            entries.append(Entry(name, path.read_bytes()))
    return entries


def _header(entry: Entry, size: int) -> bytes:
    info = tarfile.TarInfo(entry.name)
    info.type, info.mode, info.linkname = entry.kind, entry.mode, entry.link
    info.size = size if entry.kind in (tarfile.REGTYPE, tarfile.AREGTYPE) else 0
    info.mtime = 1_600_000_000
    if entry.kind in (tarfile.CHRTYPE, tarfile.BLKTYPE):
        info.devmajor, info.devminor = 1, 3  # /dev/null's numbers
    return info.tobuf(format=tarfile.GNU_FORMAT)


def _pad(size: int) -> bytes:
    return b"\0" * (-size % tarfile.BLOCKSIZE)


def _members(entries: list[Entry]) -> bytes:
    out = bytearray()
    for entry in entries:
        out += _header(entry, len(entry.data))
        if entry.kind in (tarfile.REGTYPE, tarfile.AREGTYPE):
            out += entry.data + _pad(len(entry.data))
    return bytes(out)


def sparse_header(name: str, real_size: int, stored: int = tarfile.BLOCKSIZE) -> bytes:
    """An old-GNU sparse member header: `stored` bytes of data at the end of a file of
    `real_size` bytes (all holes before it). tarfile cannot write these; we patch one."""
    info = tarfile.TarInfo(name)
    info.size, info.mtime = stored, 1_600_000_000
    buf = bytearray(info.tobuf(format=tarfile.GNU_FORMAT))
    buf[156:157] = tarfile.GNUTYPE_SPARSE
    buf[345:500] = b"\0" * 155
    buf[386:398] = tarfile.itn(real_size - stored, 12, tarfile.GNU_FORMAT)
    buf[398:410] = tarfile.itn(stored, 12, tarfile.GNU_FORMAT)
    buf[482:483] = b"\0"
    buf[483:495] = tarfile.itn(real_size, 12, tarfile.GNU_FORMAT)
    buf[148:156] = b" " * 8
    buf[148:156] = b"%06o\0 " % tarfile.calc_chksums(bytes(buf))[0]
    return bytes(buf)


def pax_bomb_header(name: str, claimed: int) -> bytes:
    """A pax extended header that says it is `claimed` bytes long (its data is not there)."""
    info = tarfile.TarInfo("././@PaxHeader")
    info.type, info.size, info.mtime = tarfile.XHDTYPE, claimed, 1_600_000_000
    return info.tobuf(format=tarfile.USTAR_FORMAT)


def zeros_gzip(size: int) -> bytes:
    """`size` zero bytes (a multiple of 64 MiB) as concatenated gzip members: 64 KiB each."""
    block = 64 * MiB
    assert size % block == 0
    one = gzip.compress(b"\0" * block, compresslevel=9, mtime=0)
    return one * (size // block)


def tar_gz(*parts: bytes | tuple[str, bytes]) -> bytes:
    """A .tar.gz made of raw tar byte strings (gzip-compressed here) and ("gz", bytes)
    parts already compressed (gzip readers take concatenated members), then the end."""
    out = bytearray()
    for part in parts:
        if isinstance(part, tuple):
            out += part[1]
        else:
            out += gzip.compress(part, mtime=0)
    out += gzip.compress(b"\0" * (2 * tarfile.BLOCKSIZE), mtime=0)
    return bytes(out)


def padded(entries: list[Entry], name: str, size: int) -> bytes:
    """The archive plus a member `name` of `size` zero bytes, a few MiB on the wire."""
    header = _header(Entry(name), size)
    return tar_gz(_members(entries) + header, ("gz", zeros_gzip(size)))


def truncated(archive: bytes) -> bytes:
    return archive[: len(archive) // 2]


def corrupt(archive: bytes) -> bytes:
    return archive[:40] + zlib.compress(b"not the deflate stream you are looking for")[2:]


# ----- the server -----

class ArchiveServer:
    """Serves registered archives on 127.0.0.1 (see the module docstring)."""

    def __init__(self, lifetime: float = 600.0) -> None:
        self.archives: dict[str, bytes] = {}
        self.requests = 0
        self.lifetime = lifetime
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                outer.requests += 1
                parts = urlsplit(self.path)
                how = parse_qs(parts.query).get("how", ["plain"])[0]
                data = outer.archives.get(parts.path.lstrip("/"), b"")
                try:
                    outer.serve(self, how, data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def put(self, name: str, data: bytes) -> str:
        self.archives[name] = data
        return f"{self.base}/{name}"

    def __enter__(self) -> "ArchiveServer":
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        timer = threading.Timer(self.lifetime, self._server.shutdown)
        timer.daemon = True
        timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    @staticmethod
    def serve(handler: http.server.BaseHTTPRequestHandler, how: str, data: bytes) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/gzip")
        if how == "endless":
            handler.send_header("Connection", "close")
            handler.end_headers()
            for chunk in _endless():
                handler.wfile.write(chunk)
            return
        length = {"short": 2 * len(data), "huge": 10 * GiB}.get(how, len(data))
        handler.send_header("Content-Length", str(length))
        handler.end_headers()
        if how == "slow":
            for index in range(len(data)):
                handler.wfile.write(data[index:index + 1])
                handler.wfile.flush()
                time.sleep(1.0)
        elif how != "huge":
            handler.wfile.write(data)
        handler.wfile.flush()
        if how == "short":
            handler.close_connection = True


def _endless() -> Iterator[bytes]:
    chunk = b"\x1f\x8b" + b"\0" * (MiB - 2)
    while True:
        yield chunk
        chunk = b"\0" * MiB


def members_bytes(entries: list[Entry]) -> bytes:
    """Raw tar bytes of `entries` (no end marker), for `tar_gz`."""
    return _members(entries)


def extra_files(top: str, count: int) -> bytes:
    """`count` empty files outside the data folders, as raw tar bytes."""
    buffer = io.BytesIO()
    for index in range(count):
        buffer.write(_header(Entry(f"{top}/extra/{index}.txt"), 0))
    return buffer.getvalue()
