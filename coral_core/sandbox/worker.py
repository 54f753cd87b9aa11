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

Host -> worker: one JSON line per job. Worker -> host: one JSON line per finished step, then
a "done" line. Child -> worker: lines on a private pipe: ``L`` (loaded), ``R<json>`` (a
recorded value), ``E<step> [detail]`` (step finished), ``X<detail>`` (failed to load).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import sys
import time

PREIMPORT = (
    "array", "bisect", "collections", "copy", "dataclasses", "decimal", "enum", "fractions",
    "functools", "heapq", "itertools", "math", "operator", "random", "re", "statistics",
    "string", "textwrap", "types", "typing",
)

IS_INIT = os.getpid() == 1
MAX_DEPTH = 100  # nesting of a recorded value (tagged containers count twice)


# ---------------------------------------------------------------- encoding (child side)

class Unrepresentable(Exception):
    """A value that cannot cross the boundary as plain data."""


_BASES = (bool, int, float, str, bytes, list, tuple, dict, set, frozenset)


def encode(value, ids, keep, depth=0):
    """Turn a value into tagged JSON data using only the builtin types' own methods.

    Subclasses of builtins are reduced to their builtin data (so an overridden ``__eq__``
    or ``__iter__`` plays no part); any other object becomes an identity token, so the
    parent can compare objects by identity without ever calling their methods.
    """
    if depth > MAX_DEPTH:
        raise Unrepresentable("value nested too deeply")
    kind = type(value)
    if value is None or kind is bool or kind is int or kind is float or kind is str:
        return value
    if kind is list:
        return [encode(item, ids, keep, depth + 1) for item in value]
    if kind is tuple:
        return {"t": [encode(item, ids, keep, depth + 1) for item in value]}
    if kind is dict:
        return {"d": [[encode(k, ids, keep, depth + 1), encode(v, ids, keep, depth + 1)]
                      for k, v in dict.items(value)]}
    if kind is set or kind is frozenset:
        tag = "s" if kind is set else "fs"
        return {tag: [encode(item, ids, keep, depth + 1) for item in kind.__iter__(value)]}
    if kind is bytes:
        return {"b": value.hex()}
    for base in _BASES:
        if isinstance(value, base):
            return encode(_as_base(value, base), ids, keep, depth)
    key = id(value)
    if key not in ids:
        ids[key] = len(ids)
        keep.append(value)  # keep it alive so that its id is not reused within the step
    return {"o": ids[key], "truthy": bool(value)}


def _as_base(value, base):
    if base is bool:
        return int.__index__(value) != 0
    if base is int:
        return int.__index__(value)
    if base is float:
        return float.__float__(value)
    if base is str:
        return str.__str__(value)
    if base is bytes:
        return bytes(memoryview(value))
    if base is dict:
        return dict(dict.items(value))
    return base(base.__iter__(value))


# ---------------------------------------------------------------- the child

def _write_all(fd, data):
    while data:
        written = os.write(fd, data)
        data = data[written:]


def _apply_limits(limits):
    import resource

    pairs = (
        (resource.RLIMIT_AS, limits["memory_bytes"]),
        (resource.RLIMIT_CPU, limits["cpu_seconds"]),
        (resource.RLIMIT_NPROC, limits["processes"]),
        (resource.RLIMIT_FSIZE, limits["file_bytes"]),
        (resource.RLIMIT_NOFILE, limits["open_files"]),
        (resource.RLIMIT_CORE, 0),
    )
    for which, value in pairs:
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass


def _child(job, first, result_fd, scratch):
    """Runs in the forked child; never returns."""
    try:
        os.setsid()
        os.chdir(scratch)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        out = os.open("stdout", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        err = os.open("stderr", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.closerange(3, result_fd)
        os.closerange(result_fd + 1, 65536)
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        _apply_limits(job["limits"])
    except BaseException:  # nothing sensible left to do
        os._exit(70)

    def send(line):
        _write_all(result_fd, line.encode("utf-8", "surrogatepass") + b"\n")

    current = {"ids": {}, "keep": []}

    def record(value):
        try:
            data = encode(value, current["ids"], current["keep"])
            text = json.dumps(data, separators=(",", ":"))
        except (Unrepresentable, RecursionError, ValueError, TypeError) as error:
            text = json.dumps({"x": _describe(error)})
        except Exception as error:  # e.g. a __bool__ that raises
            text = json.dumps({"x": _describe(error)})
        send("R" + text)

    import types

    try:
        for name, source in job["support"]:
            _load_module(types, name, source)
        module = _load_module(types, job["module"], job["code"])
        namespace = {"__name__": "__coral_tests__", "__coral_record__": record}
        if job["setup"]:
            exec(compile(job["setup"], "<tests>", "exec"), namespace)
    except BaseException as error:
        send("X" + _describe(error))
        os._exit(0)
    send("L")
    steps = job["steps"]
    for index in range(first, len(steps)):
        step = steps[index]
        current["ids"], current["keep"] = {}, []
        try:
            if step.get("script"):
                namespace[step["script"]]()
            else:
                result = getattr(module, step["call"])(*step["args"])
                if step.get("project") == "list":
                    result = list(result)
                record(result)
            send("E%d" % index)
        except BaseException as error:
            send("E%d %s" % (index, _describe(error)))
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        pass
    os._exit(0)


def _load_module(types, name, source):
    module = types.ModuleType(name)
    module.__file__ = name.replace(".", "/") + ".py"
    sys.modules[name] = module
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


def _describe(error):
    try:
        text = "%s: %s" % (type(error).__name__, error)
    except BaseException:
        text = "exception"
    return " ".join(text.split())[:300]


# ---------------------------------------------------------------- the worker (zygote)

class Job:
    """Relays one job's children and enforces its deadlines."""

    def __init__(self, job_id, job, scratch, emit):
        self.id = job_id
        self.job = job
        self.scratch = scratch
        self.emit = emit
        self.steps = job["steps"]
        self.timeouts = job["timeouts"]
        self.max_record = job["limits"]["record_bytes"]
        self.load_error = ""
        self.load_seconds = 0.0

    def run(self):
        os.makedirs(self.scratch, exist_ok=True)
        first = 0
        while first < len(self.steps):
            first = self._run_child(first)
        self.emit({"id": self.id, "done": True, "load_error": self.load_error,
                   "load_seconds": self.load_seconds,
                   "stdout": _tail(os.path.join(self.scratch, "stdout"), self.job),
                   "stderr": _tail(os.path.join(self.scratch, "stderr"), self.job)})

    def _run_child(self, first):
        read_fd, write_fd = os.pipe()
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            _child(self.job, first, write_fd, self.scratch)
        os.close(write_fd)
        try:
            return self._relay(read_fd, pid, first, started)
        finally:
            os.close(read_fd)
            _kill_all(pid)

    def _relay(self, fd, pid, first, started):
        step, loaded, records = first, False, []
        step_started = started
        deadline = started + self.job["load_timeout"]
        buffer = b""
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if not loaded:
                    return self._fail_load("TimeoutError: loading took longer than %.3g s"
                                           % self.job["load_timeout"], first)
                self._step(step, "timeout", records, "timed out after %.3g s"
                           % self.timeouts[step], time.monotonic() - step_started)
                return step + 1
            if not poller.poll(remaining * 1000):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                status = _wait_status(pid)
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
                kind, payload = line[:1], line[1:]
                if kind == b"L" and not loaded:
                    loaded = True
                    self.load_seconds = now - started
                    step_started, deadline = now, now + self.timeouts[step]
                elif kind == b"R" and loaded:
                    if len(payload) > self.max_record or not _valid_json(payload):
                        self._step(step, "error", [], "recorded value too large or malformed",
                                   now - step_started)
                        return step + 1
                    records.append(payload.decode("utf-8", "replace"))
                elif kind == b"E" and loaded:
                    head, _, detail = payload.decode("utf-8", "replace").partition(" ")
                    if head != str(step):
                        self._step(step, "error", [], "protocol violation", now - step_started)
                        return step + 1
                    self._step(step, "error" if detail else "ok", records, detail,
                               now - step_started)
                    step, records = step + 1, []
                    if step >= len(self.steps):
                        return step
                    step_started, deadline = now, now + self.timeouts[step]
                elif kind == b"X" and not loaded:
                    return self._fail_load(payload.decode("utf-8", "replace"), first)
                elif not loaded:
                    return self._fail_load("protocol violation while loading", first)
                else:
                    self._step(step, "error", [], "protocol violation", now - step_started)
                    return step + 1
            if len(buffer) > self.max_record + 64:
                self._step(step, "error", [], "recorded value too large", 0.0)
                return step + 1

    def _step(self, index, status, records, detail, seconds):
        head = json.dumps({"id": self.id, "step": index, "status": status,
                           "detail": detail[:300], "seconds": round(seconds, 6)})
        self.emit(head[:-1] + ',"records":[' + ",".join(records) + "]}")

    def _fail_load(self, detail, first):
        self.load_error = detail[:300]
        for index in range(first, len(self.steps)):
            self._step(index, "error", [], "the program did not load: " + detail, 0.0)
        return len(self.steps)


def _valid_json(payload):
    """Parseable, and shallow enough that the host can parse the line it is embedded in."""
    try:
        value = json.loads(payload)
    except (ValueError, RecursionError):
        return False
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


def _wait_status(pid):
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return "status unknown"
    if os.WIFSIGNALED(status):
        return "killed by signal %d" % os.WTERMSIG(status)
    return "exit status %d" % os.WEXITSTATUS(status)


def _kill_all(pid):
    """Kill the child and everything it started, then reap them all."""
    deadline = time.monotonic() + 5.0
    while True:
        if IS_INIT:
            try:
                os.kill(-1, signal.SIGKILL)  # as PID 1: every other process in the namespace
            except ProcessLookupError:
                pass
        else:
            for target in (pid, *_descendants()):
                for kill in (os.killpg, os.kill):
                    try:
                        kill(target, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
        if _reap() or time.monotonic() > deadline:
            return
        time.sleep(0.0005)


def _descendants():
    """Processes whose parent is this one (orphans land here: we are a subreaper)."""
    me = str(os.getpid())
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry, "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[1].decode() == me:
            found.append(int(entry))
    return found


def _reap():
    """Collect exited children; True once none is left."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return True
        if pid == 0:
            return False


def _tail(path, job):
    limit = job["limits"]["output_bytes"]
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - limit))
            return handle.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


def _clean(root):
    """Remove everything a job left in the writable places, whatever its permissions."""
    def unlock(function, target, _info):
        try:
            os.chmod(os.path.dirname(target), 0o700)
            os.chmod(target, 0o700)
            function(target)
        except OSError:
            pass

    for entry in os.listdir(root):
        path = os.path.join(root, entry)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, onerror=unlock)
        else:
            try:
                os.unlink(path)
            except OSError:
                pass


def _drop_privileges(uid, gid):
    try:
        os.setgroups([])
    except OSError:
        pass
    os.setgid(gid)
    os.setuid(uid)


def _harden():
    """No core dumps and no ptrace/proc-mem access from the children (same uid)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0
        if not IS_INIT:
            libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphans come back to us
    except (OSError, AttributeError):
        pass


def main(argv):
    scratch_root = argv[1]
    writable = [scratch_root] + [path for path in ("/dev/shm",) if IS_INIT and os.path.isdir(path)]
    if len(argv) > 3 and os.geteuid() == 0:
        _drop_privileges(int(argv[2]), int(argv[3]))
    _harden()
    for name in PREIMPORT:
        try:
            __import__(name)
        except ImportError:
            pass
    if IS_INIT:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    out = sys.stdout.buffer

    def emit(message):
        line = message if isinstance(message, str) else json.dumps(message)
        out.write(line.encode("utf-8", "replace") + b"\n")
        out.flush()

    emit({"ready": True, "pid": os.getpid(), "uid": os.getuid()})
    for raw in sys.stdin.buffer:
        request = json.loads(raw)
        scratch = os.path.join(scratch_root, "job")
        try:
            Job(request["id"], request["job"], scratch, emit).run()
        finally:
            for root in writable:
                _clean(root)


if __name__ == "__main__":
    main(sys.argv)
