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

Nothing of a candidate ever enters this process's memory, so no child (a fork of it)
inherits a sibling's code, inputs or results: the job's body goes from the host's pipe to a
memfd that only the job's children read (framing.py), and what a child sends, like its captured
output, passes through one buffer that is zeroed after every job (scratchpad.py).

Child -> worker: lines on a private pipe: ``L <cpu> <cost>`` (loaded), ``R<json>`` (a
recorded value), ``E<step> <cpu> <cost> [detail]`` (step finished), ``X<detail>`` (failed to
load). Worker -> host: frames (framing.py). The modules beside this one are the rest of it.
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import sys
import time

from . import child, cleanup, framing, keyrings, processes, seccomp
from .child import run_child
from .limits import WALL_FACTOR
from .privileges import die_with_parent, drop_privileges, harden
from .scratchpad import Scratchpad


PREIMPORT = (
    "array", "bisect", "collections", "copy", "dataclasses", "decimal", "enum", "fractions",
    "functools", "heapq", "itertools", "math", "operator", "random", "re", "statistics",
    "string", "textwrap", "types", "typing",
)
SEED = 0  # `random`'s, which every child inherits (see _preload)


DETAIL_BYTES = 1200  # of a child's error message (it sends at most 300 characters)
LINE_SLACK = 64 << 10  # the scratchpad holds one record line of record_bytes, plus this
_R, _X, _L, _E = b"RXLE"


class JobRelay:
    """Relays one job's children and enforces its deadlines."""

    def __init__(self, control, body, scratch, frames, pad, writable=(), filtered=False,
                 keep=None):
        self.writable = writable
        self.keep = keep or {}  # mounts inside the writable places (cleanup.mounts_within)
        self.filtered = filtered  # nothing of a job can outlive it but files then
        self.id = control["id"]
        self.control = control
        self.body = body
        self.scratch = scratch
        self.frames = frames
        self.pad = pad
        self.steps = control["steps"]
        self.timeouts = control["timeouts"]
        self.limits = control["limits"]
        self.max_record = self.limits["record_bytes"]
        self.max_records = self.limits.get("records", 1000)

    def run(self):
        """Run every step (a fresh child after a timeout or crash), streaming the results."""
        os.makedirs(self.scratch, exist_ok=True)
        self.files_base = processes.files_in_use(self.writable)
        first = 0
        pid = None
        while first < self.steps:
            first, pid = self._run_child(first)
        for name, kind in (("stdout", b"o"), ("stderr", b"e")):
            cleanup.send_tail(os.path.join(self.scratch, name), self.limits["output_bytes"],
                              self.pad, self.frames, kind)
        self.frames.json(b"Z", {"id": self.id})
        # Reaping and cleaning overlap with the host reading the report; the next job is
        # read only afterwards. If this fails the worker exits: the host then retries the
        # next job once on a fresh worker, so only a job that breaks a worker twice fails.
        try:
            processes.kill_all(pid)
            for root in self.writable:
                cleanup.clean(root, self.keep)
            if processes.IS_INIT:
                cleanup.remove_mqueues()
            if not self.filtered:  # under the filter no job can create either
                if processes.IS_INIT:
                    cleanup.remove_ipc()
                keyrings.janitor()
            self.pad.wipe()
        except BaseException:
            os._exit(1)

    def _run_child(self, first):
        read_fd, write_fd = os.pipe()
        started = time.monotonic()
        pid = processes.fork(started + self.control["load_timeout"])
        if pid is None:
            os.close(read_fd)
            os.close(write_fd)
            return self._fail_load("the sandbox could not start a process (process limit)",
                                   first), None
        if pid == 0:
            os.close(read_fd)
            run_child(self.control, first, write_fd, self.scratch, self.body)
        os.close(write_fd)
        clock = processes.JobClock(os.getpid())
        try:
            following = self._relay(read_fd, pid, first, started, clock)
        finally:
            os.close(read_fd)
            processes.kill_all(pid, wait=False)  # nothing of this child runs on from here
        if following < self.steps:
            processes.kill_all(pid)  # the job's next child starts in an empty namespace
        return following, pid

    def _relay(self, fd, pid, first, started, clock):
        """Relay one child's messages; a step times out on CPU time, or on wall time x3.

        Counting CPU time keeps a busy machine from failing a slow but correct program;
        the wall-clock backstop catches programs that sleep or block. What one read brings
        is relayed in one write (frames held until the lines read are all handled).
        """
        self.frames.held = True
        try:
            return self._relay_held(fd, pid, first, started, clock)
        finally:
            self.frames.held = False
            self.frames.flush()

    def _relay_held(self, fd, pid, first, started, clock):
        pad = self.pad
        pad.start = pad.end = 0
        step, loaded, count, size = first, False, 0, 0
        step_started = cpu_at_start = 0.0
        deadline = hard = started + self.control["load_timeout"]
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        check = started + processes.MEMORY_PERIOD
        while True:
            now = time.monotonic()
            if now >= check:
                why = processes.over_limits(pid, self.limits, self.writable, self.files_base)
                if why:
                    return self._refuse(step, loaded, first, now - step_started, why)
                check = now + processes.MEMORY_PERIOD
            if now >= deadline:
                # Wall-clock time the job spent waiting for a CPU does not count: the
                # backstop is for programs that sleep or block, not for a busy machine.
                backstop = hard + processes.job_waited(pid)
                if not loaded:
                    if now < backstop:
                        deadline = backstop
                        continue
                    return self._fail_load("TimeoutError: loading took longer than %.3g s"
                                           % self.control["load_timeout"], first)
                limit = self.timeouts[step]
                used = clock.read() - cpu_at_start
                if now >= backstop or used >= limit:
                    why = ("%.3g s of CPU time" % limit if used >= limit
                           else "%.3g s of wall-clock time" % (limit * WALL_FACTOR))
                    self._step(step, "timeout", now - step_started, detail="timed out after "
                               + why)
                    return step + 1
                deadline = min(backstop, now + max(0.005, limit - used))
                continue
            if not poller.poll((min(deadline, check) - now) * 1000):
                continue
            if pad.full():
                pad.compact()
                if pad.full():  # one line longer than the largest record allowed
                    return self._refuse(step, loaded, first, now - step_started,
                                        "recorded value too large")
            if not pad.fill(fd):
                status = processes.wait_status(pid)
                if not loaded:
                    return self._fail_load("the program exited while loading (%s)" % status,
                                           first)
                if step < self.steps:
                    self._step(step, "error", time.monotonic() - step_started,
                               detail="the process exited (%s)" % status)
                return step + 1
            while True:
                line = pad.next_line()
                if line is None:
                    break
                start, end = line
                kind = pad.buffer[start]
                now = time.monotonic()
                if kind == _R and loaded:
                    count, size = count + 1, size + end - start - 1
                    if size > self.max_record or count > self.max_records:
                        self._step(step, "error", now - step_started,
                                   detail="recorded values too large or too many")
                        return step + 1
                    self.frames.send(b"R", pad.view[start + 1:end])
                    continue
                if kind == _X and not loaded:
                    return self._fail_load(pad.view[start + 1:min(end, start + DETAIL_BYTES)],
                                           first)
                parsed = self._progress(kind, start + 1, end, loaded, step)
                if parsed is None:
                    return self._refuse(step, loaded, first, now - step_started,
                                        "protocol violation")
                cpu, cost, rest = parsed
                if kind == _L:
                    loaded = True
                    self.frames.json(b"L", {"seconds": round(now - started, 6), "cost": cost})
                else:
                    detail = pad.view[rest:min(end, rest + DETAIL_BYTES)] if rest < end else None
                    self._step(step, "error" if detail else "ok", now - step_started, cost,
                               cpu - cpu_at_start, detail)
                    step, count, size = step + 1, 0, 0
                    if step >= self.steps:
                        return step
                limit = self.timeouts[step]
                step_started, cpu_at_start = now, cpu
                deadline, hard = now + limit, now + limit * WALL_FACTOR
            self.frames.flush()  # before the scratchpad is reused, and before waiting
            if pad.start == pad.end:
                pad.start = pad.end = 0

    def _progress(self, kind, start, end, loaded, step):
        """`L <cpu> <cost>` before loading, `E<step> <cpu> <cost> [detail]` after: (cpu,
        cost, where the detail starts) or None. `cost` is the line count, -1 if none."""
        if kind == _L and not loaded:
            spans = self._tokens(start, end, 2)
        elif kind == _E and loaded:
            spans = self._tokens(start, end, 3)
            if spans is not None:
                if self.pad.number(*spans[0][0]) != step:
                    return None
                spans = (spans[0][1:], spans[1])
        else:
            return None
        if spans is None:
            return None
        (cpu_span, cost_span), rest = spans
        cpu, cost = self.pad.number(*cpu_span), self.pad.number(*cost_span)
        if cpu is None or type(cost) is not int:
            return None
        return float(cpu), max(-1, min(cost, 2 ** 62)), rest

    def _tokens(self, start, end, count):
        """([start, end) of the first `count` space-separated tokens], where the rest starts)."""
        buffer, spans, position = self.pad.buffer, [], start
        for _ in range(count):
            while position < end and buffer[position] == 32:
                position += 1
            stop = buffer.find(b" ", position, end)
            stop = end if stop < 0 else stop
            if stop == position:
                return None
            spans.append((position, stop))
            position = stop
        return spans, min(end, position + 1)

    def _refuse(self, step, loaded, first, seconds, why):
        if not loaded:
            return self._fail_load(why if why.startswith(("MemoryError", "OSError"))
                                   else why + " while loading", first)
        self._step(step, "error", seconds, detail=why)
        return step + 1

    def _step(self, index, status, seconds, cost=-1, cpu=-1.0, detail=None):
        if detail is not None:
            self.frames.send(b"D", detail.encode() if isinstance(detail, str) else detail)
        self.frames.json(b"S", {"step": index, "status": status, "seconds": round(seconds, 6),
                                "cost": cost, "cpu": round(cpu, 6)})

    def _fail_load(self, detail, first):
        self.frames.send(b"D", detail.encode() if isinstance(detail, str) else detail)
        self.frames.json(b"F", {"first": first})
        return self.steps


def _preload(modules, sources):
    """Import `modules` and load `sources` (Coral's own: an error is ours) without the
    at-fork hooks they register: each would run in every child, before its job. In this
    single-threaded process they have nothing to repair (threading's rebuilds its locks,
    for a lock another thread might have held: 0.3 ms a fork), and `random`'s would reseed
    every child from the system's entropy; instead `random` is seeded once, here, so that
    a program that draws from it unseeded draws the same numbers in every job and run."""
    register = os.register_at_fork
    os.register_at_fork = lambda **hooks: None
    try:
        for name in modules:
            try:
                __import__(name)
            except Exception:  # not installed, or broken: a candidate's import fails too
                pass
        for name, source in sources:
            child.load_module(name, source)
    finally:
        os.register_at_fork = register
    if "random" in sys.modules:
        sys.modules["random"].seed(SEED)


def closed_to_us(folders):
    """The import folders this process, now the sandbox user, cannot list: as root without
    bubblewrap, Python or its packages in a folder closed to other users (a 0700 home).
    A candidate cannot import from them what the worker did not import before the drop."""
    closed = []
    for folder in folders:
        try:
            os.listdir(folder)
        except OSError:
            closed.append(folder[:300])
    return closed[:8]


def main(argv):
    """argv: the scratch root, then JSON options: `ids` ([uid, gid] the children run as,
    when started as root), `filter` (install the seccomp filter), `memory_cgroup`,
    `pids_cgroup` (the slot's group bounds its processes), `process_base` (else: the
    sandbox user's tasks on the host when the pool started it),
    `preload` (more modules to import before the first job), `sources` ([name, source]
    modules of Coral's own to load then)."""
    scratch_root = argv[1]
    options = json.loads(argv[2]) if len(argv) > 2 else {}
    writable = [scratch_root]
    if processes.IS_INIT and os.path.isdir("/dev/shm"):
        writable.append("/dev/shm")
    keep = cleanup.mounts_within(writable)
    harden()  # while still root: the interpreter's own files may be readable by root only
    _preload((*PREIMPORT, *options.get("preload", ())), options.get("sources", ()))
    ids = options.get("ids")
    unreadable = []
    if ids and os.geteuid() == 0:
        folders = [p for p in sys.path if p and os.path.isdir(p)]  # while root
        drop_privileges(*ids)
        unreadable = closed_to_us(folders)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a handler would let children signal PID 1
    die_with_parent()  # changing uids cleared bubblewrap's --die-with-parent
    keyrings.janitor()  # whatever an earlier run left in the sandbox user's keyrings
    memfd = os.memfd_create("coral-job", os.MFD_CLOEXEC)  # every job's body, in turn
    child.PROCESS_BASE[0] = (None if options.get("pids_cgroup")
                             else int(options.get("process_base") or 0))
    if options.get("filter", True) and seccomp.install(bool(options.get("memory_cgroup"))):
        child.FILTERED.append(True)
        seccomp.prepare_alone()
    filtered = bool(child.FILTERED)
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])  # consumed by sigtimedwait
    pad = Scratchpad(LINE_SLACK + (1 << 20))
    frames = framing.Frames(1)
    gc.freeze()  # children inherit these objects: the collector must not touch (and copy) them
    frames.json(b"H", {"ready": True, "pid": os.getpid(), "uid": os.getuid(),
                       "filter": filtered, "unreadable": unreadable})
    scratch = os.path.join(scratch_root, "job")
    while True:
        request = framing.next_request(0)
        if request is None:
            return
        control, size = request
        pad.ensure(control["limits"]["record_bytes"] + LINE_SLACK)
        body = framing.body_file(0, size, pad, memfd)
        JobRelay(control, body, scratch, frames, pad, writable, filtered, keep).run()
        os.ftruncate(memfd, 0)  # the job's pages go back to the kernel
