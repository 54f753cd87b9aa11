"""The host's side of a worker's pipes: jobs written as head, control and body, frames read
back in linear time (see inside/framing.py for the format and why it is split so)."""

from __future__ import annotations

import errno
import json
import os
import select
import struct
import time
from dataclasses import dataclass, field
from typing import Any

from coral_core.scoring.program_tests import ExecutionSpec
from coral_core.sandbox.policy import SandboxPolicy

FRAME_HEAD = 5  # kind byte, 4-byte big-endian length
PRIVATE_BLOCK = 1 << 16  # a hosted job's private part is padded to a multiple of this


@dataclass(frozen=True)
class Job:
    """A candidate program and the steps to run.

    `payload` is everything but the code (budgets, steps), for the host; `control` is what
    the worker may know (no code, inputs or results); `body` is what only the job's
    children read."""

    payload: dict[str, Any] = field(hash=False)
    control: bytes = field(hash=False, repr=False)
    body: bytes = field(hash=False, repr=False)

    @classmethod
    def build(
        cls, spec: ExecutionSpec, code: str, policy: SandboxPolicy,
        timeouts: list[float] | None = None, count: bool = False,
    ) -> "Job":
        return JobTemplate(spec, policy, timeouts, count).job(code)

    def wire(self, job_id: int) -> bytes:
        control = b'{"id":%d,%s' % (job_id, self.control)
        return b"%011d %011d\n" % (len(control), len(self.body)) + control + self.body

    def __len__(self) -> int:
        return len(self.body) + len(self.control) + 40


class JobTemplate:
    """A task's job without the candidate's code, serialised once: only the code changes
    from one candidate to the next."""

    def __init__(self, spec: ExecutionSpec, policy: SandboxPolicy,
                 timeouts: list[float] | None = None, count: bool = False):
        steps = [
            {"call": c.step.call, "args": list(c.step.args), "project": c.step.project,
             "script": c.step.script}
            for c in spec.cases
        ]
        timeouts = list(timeouts or [policy.timeout] * len(steps))
        self.payload = {
            "module": spec.module, "support": [list(s) for s in spec.support],
            "prepare": list(spec.prepare), "setup": spec.setup, "steps": steps,
            "timeouts": timeouts, "load_timeout": policy.load_timeout,
            "limits": policy.limits(len(steps), timeouts), "count": count,
        }
        self._control = json.dumps({
            "steps": len(steps), "timeouts": timeouts, "load_timeout": policy.load_timeout,
            "limits": self.payload["limits"]})[1:].encode()  # '"steps": ..., ...}'
        self.host = spec.host
        self._rest = json.dumps({
            "module": spec.module, "support": self.payload["support"],
            "prepare": self.payload["prepare"], "setup": spec.setup, "steps": steps,
            "count": count, "host": spec.host})[1:].encode()

    def job(self, code: str, private: dict[str, Any] | None = None) -> Job:
        """The job for `code`; a hosted spec's also takes its `private` part, which only
        the host's process reads. It is padded, so that neither its length nor the body's
        tells one private part from another of similar size; its head gives the length of
        the rest, so that the host's process reads no padding."""
        body = b'{"code":' + json.dumps(code).encode() + b"," + self._rest
        if not self.host:
            if private is not None:
                raise ValueError("only a hosted job has a private part")
            return Job(self.payload, self._control, body)
        if private is None:
            raise ValueError("a hosted job needs its private part")
        hidden = json.dumps(private).encode()
        hidden = b"%011d\n" % len(hidden) + hidden
        size = (len(hidden) // PRIVATE_BLOCK + 1) * PRIVATE_BLOCK
        control = self._control[:-1] + b',"public":%d}' % len(body)
        return Job(self.payload, control, body + hidden.ljust(size))


class WorkerGone(Exception):
    """The worker died, closed its pipe, or did not answer in time."""


class Pipes:
    """A worker's stdin and stdout: writes never block (they are flushed while reading, so a
    worker busy writing results and a host busy writing the next job cannot deadlock), and
    frames are read from one growing buffer, each byte examined once."""

    def __init__(self, stdin: int, stdout: int):
        self.stdin, self.stdout = stdin, stdout
        os.set_blocking(stdin, False)
        self._out = bytearray()
        self._in = bytearray()
        self._pos = 0

    def write(self, data: bytes) -> None:
        self._out += data
        self._flush()

    def _flush(self) -> None:
        while self._out:
            try:
                written = os.write(self.stdin, self._out[:1 << 20])
            except BlockingIOError:
                return
            except OSError as error:
                raise WorkerGone(f"sandbox worker exited ({error.strerror})") from None
            del self._out[:written]

    def frame(self, deadline: float, limits: dict[bytes, int]) -> tuple[bytes, bytes]:
        """The next (kind, payload); payloads longer than `limits[kind]` are refused."""
        while True:
            available = len(self._in) - self._pos
            if available >= FRAME_HEAD:
                kind, size = struct.unpack_from(">cI", self._in, self._pos)
                if kind not in limits or size > limits[kind]:
                    raise WorkerGone(f"sandbox worker sent an unexpected frame ({kind!r}, "
                                     f"{size} bytes)")
                if available >= FRAME_HEAD + size:
                    start = self._pos + FRAME_HEAD
                    payload = bytes(self._in[start:start + size])
                    self._pos = start + size
                    if self._pos > (1 << 20) and self._pos * 2 > len(self._in):
                        del self._in[:self._pos]
                        self._pos = 0
                    return kind, payload
            self._wait(deadline)

    def _wait(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise WorkerGone("sandbox worker stopped answering")
        writers = [self.stdin] if self._out else []
        try:
            readable, writable, _ = select.select([self.stdout], writers, [], remaining)
        except OSError as error:
            raise WorkerGone(f"sandbox worker pipe failed ({error.strerror})") from None
        if writable:
            self._flush()
        if readable:
            try:
                chunk = os.read(self.stdout, 1 << 20)
            except OSError as error:
                if error.errno == errno.EAGAIN:
                    return
                raise WorkerGone(f"sandbox worker pipe failed ({error.strerror})") from None
            if not chunk:
                raise WorkerGone("sandbox worker exited")
            self._in += chunk
