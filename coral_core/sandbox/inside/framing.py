"""The worker's side of the host pipes: one request read exactly, length-prefixed frames back.

Host -> worker, per job: a 24-byte head (b"%011d %011d\\n": control and body lengths), the
control JSON (job id, step count, timeouts, limits: nothing of the candidate), then the body
JSON (the candidate's code, the support modules, the steps and their inputs). The worker
reads the head and the control with exact, unbuffered reads, and moves the body into its
memfd with splice(2): the body never enters the worker's memory, and nothing after it (the
next job, which the host may already have written) is ever read ahead. Each child of the job
reads the memfd: exactly its own job, and nothing else (it is emptied for the next job).

Worker -> host: frames of one kind byte, a 4-byte big-endian length and the payload:
  H hello (JSON)      R a recorded value (the child's JSON text, forwarded as it came)
  D detail (text) for the next S, F     S a step ended (JSON: step, status, seconds, ...)
  L loaded (JSON)     F loading failed: every step from `first` is an error (JSON)
  o / e the tails of stdout / stderr    Z the job is done (JSON: id)
"""

from __future__ import annotations

import json
import os
import struct

HEAD = 24
MAX_CONTROL = 1 << 20


def read_exact(fd, size):
    """Exactly `size` bytes from `fd` (only heads and control JSON: nothing of a candidate);
    b"" at a clean end of file before the first byte."""
    parts, left = [], size
    while left:
        chunk = os.read(fd, left)
        if not chunk:
            if left == size:
                return b""
            raise EOFError("the host closed the pipe mid-request")
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def next_request(fd):
    """(control, body length) of the next job, or None when the host has closed the pipe."""
    head = read_exact(fd, HEAD)
    if not head:
        return None
    sizes = head.split()
    control_size, body_size = int(sizes[0]), int(sizes[1])
    if not 0 < control_size <= MAX_CONTROL or body_size < 0:
        raise ValueError("malformed request head")
    return json.loads(read_exact(fd, control_size)), body_size


def body_file(fd, size, pad, memfd):
    """Move the next `size` bytes of `fd` into `memfd` (emptied first: one memfd serves every
    job, made before the seccomp filter), with splice(2) where the kernel allows it (the bytes
    never reach this process), else through the scratchpad (wiped)."""
    os.ftruncate(memfd, 0)
    os.lseek(memfd, 0, os.SEEK_SET)
    moved = 0
    try:
        while moved < size:
            count = os.splice(fd, memfd, size - moved)
            if not count:
                raise EOFError("the host closed the pipe mid-request")
            moved += count
    except OSError:
        if moved:
            raise
        _copy_through(fd, memfd, size, pad)
    return memfd


def _copy_through(fd, memfd, size, pad):
    moved = 0
    try:
        while moved < size:
            pad.start = pad.end = 0
            count = os.readv(fd, [pad.view[:min(size - moved, pad.size)]])
            if not count:
                raise EOFError("the host closed the pipe mid-request")
            pad.high = max(pad.high, count)
            _write_all(memfd, pad.view[:count])
            moved += count
    finally:
        pad.wipe()


def _write_all(fd, view):
    while len(view):
        view = view[os.write(fd, view):]


class Frames:
    """Writes frames to the host (stdout); payloads may be memoryviews of the scratchpad.

    While `held`, frames wait in a list of parts (the payloads still views of the
    scratchpad, never copies) and go out in one writev at `flush()`: what a child reports
    at once reaches the host in one write, which wakes the host once. The holder flushes
    before the scratchpad is reused."""

    MAX_PARTS = 512  # below the kernel's IOV_MAX (1024)

    def __init__(self, fd):
        self.fd = fd
        self.held = False
        self._parts = []

    def send(self, kind, payload=b""):
        self._parts += [struct.pack(">cI", kind, len(payload)), payload]
        if not self.held or len(self._parts) >= self.MAX_PARTS:
            self.flush()

    def flush(self):
        parts, self._parts = self._parts, []
        total = sum(len(part) for part in parts)
        written = 0
        while written < total:
            written += os.writev(self.fd, _rest(parts, written))

    def json(self, kind, value):
        self.send(kind, json.dumps(value, separators=(",", ":")).encode())

    def text(self, kind, text):
        self.send(kind, text.encode("utf-8", "replace"))


def _rest(parts, skip):
    """The parts after the first `skip` bytes, as memoryviews (no copies)."""
    rest = []
    for part in parts:
        if skip >= len(part):
            skip -= len(part)
            continue
        rest.append(memoryview(part)[skip:])
        skip = 0
    return rest
