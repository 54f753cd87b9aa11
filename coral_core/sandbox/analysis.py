"""Parsing and linting candidate code without touching it in the parent.

A very deep expression makes `ast.parse` raise RecursionError, a long one makes pyflakes
crash (and flake8 print onto stdout), a large one makes either run for seconds: none of
that may happen in the process that scores a run. So the syntax, style and security
objectives ask the analysis workers (inside/lint.py): persistent processes, one per slot,
each in a sandbox of its own with resource limits and a CPU timer per request. A request
that crashes, stalls or exhausts a worker costs that worker (it is replaced) and comes back
as {"error": ...}, which the evaluators score as the worst value; nothing a linter prints
reaches our stdout. Replies are checked before use, and cached by content.

A linter that fails for a reason no code can cause is never a score: each worker checks its
linters on a sample once it runs as the sandbox user, and a linter that does not work there
(as root without bubblewrap, a virtual environment the sandbox user cannot read) stops the
run with one line saying why (LinterUnavailable); a request that fails that way later (the
worker could not import a module of its own) raises AnalysisFailed for that candidate.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import struct
import sys
import threading
import time
from collections import OrderedDict
from typing import Any

from coral_core.errors import UserError
from coral_core.sandbox.inside.limits import CPU_SECONDS, MAX_SOURCE
from coral_core.sandbox.policy import (INTERPRETER_FLAGS, WORKER_DIR, SandboxPolicy,
                                       bwrap_command, interpreter, start_worker,
                                       worker_launcher)

START_SECONDS = 120.0  # importing flake8 and bandit on a loaded machine
ANSWER_SECONDS = 3 * CPU_SECONDS + 30.0  # wall time for a request whose CPU time is capped
CACHE = 4096
MAX_REPLY = 1 << 20


class AnalysisFailed(Exception):
    """The worker died, stalled or answered nonsense."""


class LinterUnavailable(UserError):
    """A linter does not work in the analysis workers here (their check on a sample failed):
    every candidate would get its worst score, so the run stops instead."""


def _read(stream: Any, size: int, deadline: float) -> bytes:
    import select

    fd, parts, left = stream.fileno(), [], size
    while left:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            raise AnalysisFailed("the analysis worker stopped answering")
        chunk = os.read(fd, left)
        if not chunk:
            raise AnalysisFailed("the analysis worker exited")
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


class _Worker:
    """One analysis worker process: one request at a time."""

    def __init__(self, policy: SandboxPolicy, isolated: bool):
        self.broken: dict[str, str] = {}  # linter: why it does not work in this worker
        options = policy.worker_options()
        if isolated:
            command = bwrap_command(policy, interpreter(), "lint", options)
        else:
            command = [sys.executable, *INTERPRETER_FLAGS, "-c",
                       worker_launcher(str(WORKER_DIR), "lint"), options]
        self.process = start_worker(command, "/")
        try:
            hello = self._receive(time.monotonic() + START_SECONDS)
            if not hello.get("ready"):
                raise AnalysisFailed("the analysis worker did not start")
            broken = hello.get("broken") or {}
            if not isinstance(broken, dict) or not all(
                    type(k) is str and type(v) is str for k, v in broken.items()):
                raise AnalysisFailed("the analysis worker sent an unreadable reply")
            self.broken = {k[:40]: v[:300] for k, v in broken.items()}
        except BaseException:
            self.stop()
            raise

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None
        data = json.dumps(request).encode()
        try:
            self.process.stdin.write(struct.pack(">I", len(data)) + data)
            self.process.stdin.flush()
        except OSError:
            raise AnalysisFailed("the analysis worker exited") from None
        return self._receive(time.monotonic() + ANSWER_SECONDS)

    def _receive(self, deadline: float) -> dict[str, Any]:
        size = struct.unpack(">I", _read(self.process.stdout, 4, deadline))[0]
        if size > MAX_REPLY:
            raise AnalysisFailed("the analysis worker sent an oversized reply")
        try:
            reply = json.loads(_read(self.process.stdout, size, deadline))
        except ValueError:
            raise AnalysisFailed("the analysis worker sent an unreadable reply") from None
        if not isinstance(reply, dict):
            raise AnalysisFailed("the analysis worker sent an unreadable reply")
        return reply

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream:
                stream.close()


def _valid(kind: str, reply: dict[str, Any]) -> bool:
    """Only the shapes a healthy worker sends: anything else counts as a failure."""
    def count(value: Any) -> bool:
        return type(value) is int and value >= 0

    def names(value: Any) -> bool:
        return isinstance(value, list) and all(type(v) is str and len(v) < 200 for v in value)

    if "error" in reply:
        return type(reply["error"]) is str and type(reply.get("internal", False)) is bool
    if kind == "parse":
        return type(reply.get("parses")) is bool and names(reply.get("functions")) \
            and count(reply.get("statements"))
    if kind == "flake8":
        return count(reply.get("violations")) and names(reply.get("codes"))
    if kind == "bandit":
        return all(count(reply.get(k)) for k in ("high", "medium", "low")) \
            and names(reply.get("tests"))
    if kind == "screen":
        return type(reply.get("ok")) is bool and names(reply.get("reasons")) \
            and count(reply.get("tests"))
    return False


class Analyzer:
    """A pool of analysis workers, started on demand, up to one per slot."""

    def __init__(self, policy: SandboxPolicy, workers: int, isolated: bool):
        self.policy, self.isolated = policy, isolated
        self._idle: queue.LifoQueue[_Worker] = queue.LifoQueue()
        self._free = threading.Semaphore(max(1, workers))
        self._all: set[_Worker] = set()
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple[str, str, str], dict[str, Any]] = OrderedDict()
        self._closed = False

    def ask(self, kind: str, code: str, options: dict[str, Any] | None = None,
            ) -> dict[str, Any]:
        """The worker's reply, or {"error": why}; never raises for what the code is."""
        if len(code) > MAX_SOURCE:
            return {"error": "the program is too large to analyse"}
        key = (kind, json.dumps(options or {}, sort_keys=True),
               hashlib.sha256(code.encode("utf-8", "surrogatepass")).hexdigest())
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        reply = self._ask(kind, {"kind": kind, "code": code, "options": options or {}})
        if not _valid(kind, reply):
            reply = {"error": "the analysis worker sent an unexpected reply"}
        if reply.pop("internal", False):  # never a score, never cached: this candidate's
            # scoring raises, and the run records it as an error and says so
            raise AnalysisFailed(f"{kind} failed in the analysis worker: {reply['error']}")
        with self._lock:
            self._cache[key] = reply
            while len(self._cache) > CACHE:
                self._cache.popitem(last=False)
        return reply

    def _ask(self, kind: str, request: dict[str, Any]) -> dict[str, Any]:
        """A worker that fails is replaced and the request asked once more: a worker can die
        of something else than this request (a crash of the request itself costs twice)."""
        with self._free:
            for attempt in range(2):
                worker = self._take()
                if kind in worker.broken:
                    self._give_back(worker, True)
                    raise LinterUnavailable(self._unavailable(kind, worker.broken[kind]))
                keep = False
                try:
                    reply = worker.ask(request)
                    keep = not reply.pop("retire", False)
                    return reply
                except AnalysisFailed as error:
                    if attempt:
                        return {"error": str(error)}
                finally:
                    self._give_back(worker, keep)
        raise AssertionError("unreachable")

    def _take(self) -> _Worker:
        try:
            worker = self._idle.get_nowait()
            if worker.alive():
                return worker
            self._give_back(worker, False)
        except queue.Empty:
            pass
        with self._lock:
            if self._closed:
                raise RuntimeError("the analysis workers are closed")
        worker = _Worker(self.policy, self.isolated)
        with self._lock:
            self._all.add(worker)
        return worker

    def _unavailable(self, kind: str, why: str) -> str:
        """One line: which linter cannot work here, why, and what to do about it."""
        hint = ("as root without bubblewrap the analysis workers run as nobody, who must be "
                "able to read Python and its packages: install bubblewrap, or keep the "
                "virtual environment where every user can read it"
                if not self.isolated and os.geteuid() == 0 else "see docs/sandbox.md")
        return (f"{kind} does not work in the sandbox's analysis workers here ({why}), so "
                f"it cannot score candidates; {hint}")

    def _give_back(self, worker: _Worker, keep: bool) -> None:
        with self._lock:
            if keep and not self._closed:
                self._idle.put(worker)
                return
            self._all.discard(worker)
        worker.stop()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            workers, self._all = list(self._all), set()
        for worker in workers:
            worker.stop()
