"""Warm workers: one `worker.py` process each, talked to over a pair of pipes."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from coral_core.errors import UserError
from coral_core.files.scratch import make_scratch, remove_tree

from .procs import kill_descendants

SCRATCH = "coral-mutation-"  # scratch folders' prefix (those a killed run left are swept)

STARTUP_TIMEOUT = 300.0


class WorkerDied(RuntimeError):
    pass


class NotImported(UserError):
    """The tests never import the module: nothing reaches its mutants."""


class WorkerProcess:
    """A pre-warmed pytest worker (see worker.py) for one module and its tests."""

    def __init__(self, module: Path, pytest_args: list[str], project: Path):
        self._closing = threading.Lock()
        self._closed = False
        to_worker_r, self._to_worker = os.pipe()
        self._from_worker, from_worker_w = os.pipe()
        self._log = tempfile.TemporaryFile()
        self.scratch = make_scratch(SCRATCH)  # its copy for the exact path
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        started = time.perf_counter()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "coral_plugins.evaluators.mutation.worker", str(module),
             str(to_worker_r), str(from_worker_w), json.dumps(pytest_args), self.scratch],
            cwd=str(project), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=self._log, pass_fds=(to_worker_r, from_worker_w), start_new_session=True)
        os.close(to_worker_r)
        os.close(from_worker_w)
        self._buffer = b""
        try:
            self.hello = self._receive(STARTUP_TIMEOUT)
        except WorkerDied:
            self.close()
            raise
        self.startup_seconds = time.perf_counter() - started

    def _receive(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.close()
                raise WorkerDied("no reply from the mutation worker")
            try:
                ready, _, _ = select.select([self._from_worker], [], [], remaining)
                chunk = os.read(self._from_worker, 1 << 20) if ready else None
            except (OSError, ValueError) as error:  # closed under us: the run is ending
                raise WorkerDied(str(error)) from None
            if chunk is not None:
                if not chunk:
                    raise WorkerDied(self.stderr_tail())
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def stderr_tail(self) -> str:
        try:
            self._log.seek(0)
            text = self._log.read().decode(errors="replace").strip().splitlines()
        except (OSError, ValueError):
            return "the mutation worker exited"
        return text[-1] if text else "the mutation worker exited"

    def ask(self, request: dict) -> dict:
        data = (json.dumps(request) + "\n").encode()
        try:
            while data:
                data = data[os.write(self._to_worker, data):]
        except OSError as error:
            raise WorkerDied(str(error)) from None
        # The worker enforces the deadlines itself; this one only guards against a hung worker
        # (its stages' deadlines, and the time to copy the project for the exact path).
        stages = [request] + [request[k] for k in ("exact", "recheck") if request.get(k)]
        guard = sum(float(stage.get("timeout") or 3600) for stage in stages)
        return self._receive(guard + (600 if len(stages) > 1 else 60))

    def close(self) -> None:
        """Stop the worker; once, whichever threads ask: a second close of its pipes closed
        descriptor numbers the system had given to another worker's pipes meanwhile (^C while
        a thread restarted a worker: its Popen failed with EBADF and printed a traceback)."""
        with self._closing:
            if self._closed:
                return
            self._closed = True
        try:
            os.write(self._to_worker, b'{"op": "stop"}\n')
        except OSError:
            pass
        for fd in (self._to_worker, self._from_worker):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:  # hung: what its tests started goes first
            kill_descendants(self.process.pid)
            self.process.kill()
            self.process.wait()
        self._log.close()
        remove_tree(self.scratch)


def start_worker(module: Path, pytest_args: list[str], project: Path) -> WorkerProcess:
    """A ready worker, or a one-line UserError saying why the tests cannot run."""
    try:
        worker = WorkerProcess(module, pytest_args, project)
    except WorkerDied as died:
        raise UserError(f"the tests could not start: {died}") from None
    hello = worker.hello
    if "error" in hello:
        why = worker.stderr_tail()  # pytest's own last line: a conftest's exception...
        worker.close()
        if hello["error"] == "collection":
            raise UserError(f"the tests or {module} do not import: {hello.get('detail', '')}")
        raise UserError(f"pytest could not run the tests (exit status {hello.get('exit')}): "
                        f"{why}")
    if not hello.get("tests"):
        worker.close()
        raise UserError("no tests collected")
    return worker
