"""The pre-warmed interpreter that runs inside the sandbox (standard library only).

It is started once per sandbox slot, drops privileges, pre-imports common modules and
then forks one child per job, so a candidate costs a fork instead of an interpreter start.
Inside bubblewrap it is PID 1 of its own PID namespace: a candidate cannot kill it, and
after every job it kills every other process in the namespace, which removes orphans and
daemons however they were forked.

Trust boundary: everything in a child is the candidate's to tamper with (modules,
builtins, this file's functions). A child only ever reports *values*; expected values never
reach it, and the parent compares. This process relays what a child reports, enforces the
per-step deadlines, and is the only one that talks to the host.

Host -> worker: one JSON line per job. Worker -> host: one JSON line per job, with every
step's result. Child -> worker: lines on a private pipe: ``L`` (loaded), ``R<json>`` (a
recorded value), ``E<step> [detail]`` (step finished), ``X<detail>`` (failed to load).

The modules beside this one are the rest of it; all use the standard library only.
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import sys
import time

from . import cleanup, processes
from .child import run_child
from .encoding import MAX_DEPTH
from .privileges import die_with_parent, drop_privileges, harden


PREIMPORT = (
    "array", "bisect", "collections", "copy", "dataclasses", "decimal", "enum", "fractions",
    "functools", "heapq", "itertools", "math", "operator", "random", "re", "statistics",
    "string", "textwrap", "types", "typing",
)


WALL_FACTOR = 3.0  # a step may take this many times its timeout in wall-clock time


class Job:
    """Relays one job's children and enforces its deadlines."""

    def __init__(self, job_id, job, scratch, emit, writable=()):
        self.writable = writable
        self.id = job_id
        self.job = job
        self.scratch = scratch
        self.emit = emit
        self.steps = job["steps"]
        self.timeouts = job["timeouts"]
        self.max_record = job["limits"]["record_bytes"]
        self.load_error = ""
        self.load_seconds = 0.0
        self.load_cost = -1

    def run(self):
        """Run every step (a fresh child after a timeout or crash); report once, at the end."""
        os.makedirs(self.scratch, exist_ok=True)
        self.results = []
        first = 0
        pid = None
        while first < len(self.steps):
            first, pid = self._run_child(first)
        head = json.dumps({"id": self.id, "done": True, "load_error": self.load_error,
                           "load_seconds": round(self.load_seconds, 6),
                           "load_cost": self.load_cost,
                           "stdout": cleanup.tail(os.path.join(self.scratch, "stdout"), self.job),
                           "stderr": cleanup.tail(os.path.join(self.scratch, "stderr"), self.job)})
        self.emit(head[:-1] + ',"steps":[' + ",".join(self.results) + "]}")
        # Reaping and cleaning overlap with the host reading the report; the next job is
        # read only afterwards. If this fails the worker exits: the host then retries the
        # next job once on a fresh worker, so only a job that breaks a worker twice fails.
        try:
            processes.kill_all(pid)
            for root in self.writable:
                cleanup.clean(root)
            if processes.IS_INIT:
                cleanup.remove_ipc()
        except BaseException:
            os._exit(1)

    def _run_child(self, first):
        read_fd, write_fd = os.pipe()
        started = time.monotonic()
        pid = processes.fork(started + self.job["load_timeout"])
        if pid is None:
            os.close(read_fd)
            os.close(write_fd)
            return self._fail_load("the sandbox could not start a process (process limit)",
                                   first), None
        if pid == 0:
            os.close(read_fd)
            run_child(self.job, first, write_fd, self.scratch)
        os.close(write_fd)
        try:
            following = self._relay(read_fd, pid, first, started)
        finally:
            os.close(read_fd)
            processes.kill_all(pid, wait=False)  # nothing of this child runs on from here
        if following < len(self.steps):
            processes.kill_all(pid)  # the job's next child starts in an empty namespace
        return following, pid

    def _relay(self, fd, pid, first, started):
        """Relay one child's messages; a step times out on CPU time, or on wall time x3.

        Counting CPU time keeps a busy machine from failing a slow but correct program;
        the wall-clock backstop catches programs that sleep or block.
        """
        step, loaded, records = first, False, []
        step_started = cpu_at_start = 0.0
        deadline = hard = started + self.job["load_timeout"]
        buffer = b""
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        memory_check = started + processes.MEMORY_PERIOD
        while True:
            now = time.monotonic()
            if now >= memory_check:
                if processes.job_memory(pid) > self.job["limits"]["memory_bytes"]:
                    if not loaded:
                        return self._fail_load("MemoryError: the program's processes took more "
                                               "than its memory limit", first)
                    self._step(step, "error", records, "MemoryError: the program's processes "
                               "took more than its memory limit", now - step_started)
                    return step + 1
                memory_check = now + processes.MEMORY_PERIOD
            if now >= deadline:
                # Wall-clock time the job spent waiting for a CPU does not count: the
                # backstop is for programs that sleep or block, not for a busy machine.
                backstop = hard + processes.job_waited(pid)
                if not loaded:
                    if now < backstop:
                        deadline = backstop
                        continue
                    return self._fail_load("TimeoutError: loading took longer than %.3g s"
                                           % self.job["load_timeout"], first)
                limit = self.timeouts[step]
                used = processes.job_cpu(pid) - cpu_at_start
                if now >= backstop or used >= limit:
                    why = ("%.3g s of CPU time" % limit if used >= limit
                           else "%.3g s of wall-clock time" % (limit * WALL_FACTOR))
                    self._step(step, "timeout", records, "timed out after " + why,
                               now - step_started)
                    return step + 1
                deadline = min(backstop, now + max(0.005, limit - used))
                continue
            if not poller.poll((min(deadline, memory_check) - now) * 1000):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                status = processes.wait_status(pid)
                if not loaded:
                    return self._fail_load("the program exited while loading (%s)" % status,
                                           first)
                if step < len(self.steps):
                    self._step(step, "error", records, "the process exited (%s)" % status,
                               time.monotonic() - step_started)
                return step + 1
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                now = time.monotonic()
                kind, payload = line[:1], line[1:].decode("utf-8", "replace")
                if kind == b"R" and loaded:
                    if len(payload) > self.max_record or not _valid_json(payload):
                        self._step(step, "error", [], "recorded value too large or malformed",
                                   now - step_started)
                        return step + 1
                    records.append(payload)
                    continue
                if kind == b"X" and not loaded:
                    return self._fail_load(payload, first)
                parsed = _parse_progress(kind, payload, loaded, step)
                if parsed is None:
                    if not loaded:
                        return self._fail_load("protocol violation while loading", first)
                    self._step(step, "error", [], "protocol violation", now - step_started)
                    return step + 1
                cpu, cost, detail = parsed
                if kind == b"L":
                    loaded = True
                    self.load_seconds = now - started
                    self.load_cost = cost
                else:
                    self._step(step, "error" if detail else "ok", records, detail,
                               now - step_started, cost, cpu - cpu_at_start)
                    step, records = step + 1, []
                    if step >= len(self.steps):
                        return step
                limit = self.timeouts[step]
                step_started, cpu_at_start = now, cpu
                deadline, hard = now + limit, now + limit * WALL_FACTOR
            if len(buffer) > self.max_record + 64:
                self._step(step, "error", [], "recorded value too large", 0.0)
                return step + 1

    def _step(self, index, status, records, detail, seconds, cost=-1, cpu=-1.0):
        """Records are embedded verbatim: each was checked to be one valid JSON value."""
        self.results.append('{"step":%d,"status":"%s","detail":%s,"seconds":%.6f,"cost":%d,'
                            '"cpu":%.6f,"records":[%s]}'
                            % (index, status, json.dumps(detail[:300]), seconds, cost, cpu,
                               ",".join(records)))

    def _fail_load(self, detail, first):
        self.load_error = detail[:300]
        for index in range(first, len(self.steps)):
            self._step(index, "error", [], "the program did not load: " + detail, 0.0)
        return len(self.steps)


def _parse_progress(kind, payload, loaded, step):
    """`L <cpu> <cost>` before loading, `E<step> <cpu> <cost> [detail]` after: (cpu, cost,
    detail) or None. `cost` is the line count, -1 where none was counted."""
    if kind == b"L" and not loaded:
        cpu_text, _, cost_text = payload.strip().partition(" ")
        detail = ""
    elif kind == b"E" and loaded:
        head, _, rest = payload.partition(" ")
        if head != str(step):
            return None
        cpu_text, _, rest = rest.partition(" ")
        cost_text, _, detail = rest.partition(" ")
    else:
        return None
    try:
        cpu, cost = float(cpu_text), int(cost_text)
    except ValueError:
        return None
    return cpu, max(-1, min(cost, 2 ** 62)), detail


def _valid_json(payload):
    """Parseable, and shallow enough that the host can parse the line it is embedded in."""
    try:
        value = json.loads(payload)
    except (ValueError, RecursionError):
        return False
    if len(payload) < 2 * MAX_DEPTH:  # too short to nest that deep
        return True
    stack = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH + 2:
            return False
        if isinstance(node, list):
            stack.extend((item, depth + 1) for item in node)
        elif isinstance(node, dict):
            stack.extend((item, depth + 1) for item in node.values())
    return True


def main(argv):
    """argv: scratch root, then the uid and gid children run as when started as root."""
    scratch_root = argv[1]
    writable = [scratch_root]
    if processes.IS_INIT and os.path.isdir("/dev/shm"):
        writable.append("/dev/shm")
    harden()  # while still root: the interpreter's own files may be readable by root only
    for name in PREIMPORT:
        try:
            __import__(name)
        except ImportError:
            pass
    if len(argv) > 3 and os.geteuid() == 0:
        drop_privileges(int(argv[2]), int(argv[3]))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a handler would let children signal PID 1
    die_with_parent()  # changing uids cleared bubblewrap's --die-with-parent
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])  # consumed by sigtimedwait
    gc.freeze()  # children inherit these objects: the collector must not touch (and copy) them
    out = sys.stdout.buffer

    def emit(message):
        line = message if isinstance(message, str) else json.dumps(message)
        out.write(line.encode("utf-8", "replace") + b"\n")
        out.flush()

    emit({"ready": True, "pid": os.getpid(), "uid": os.getuid()})
    for raw in sys.stdin.buffer:
        request = json.loads(raw)
        scratch = os.path.join(scratch_root, "job")
        Job(request["id"], request["job"], scratch, emit, writable).run()
