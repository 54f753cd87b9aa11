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

import gc
import json
import os
import resource
import select
import signal
import stat
import sys
import time
import types

# Imported once here so that candidates find them loaded. Measured (benchmarks/sandbox.py):
# this set makes a job about 1 ms faster than a minimal one, though each fork copies more.
PREIMPORT = (
    "array", "bisect", "collections", "copy", "dataclasses", "decimal", "enum", "fractions",
    "functools", "heapq", "itertools", "math", "operator", "random", "re", "statistics",
    "string", "textwrap", "types", "typing",
)

IS_INIT = os.getpid() == 1
MAX_DEPTH = 100  # nesting of a recorded value (tagged containers count twice)
WALL_FACTOR = 3.0  # a step may take this many times its timeout in wall-clock time
TICKS = os.sysconf("SC_CLK_TCK")


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
        _drop_fully()
        _clear_keyring()  # after the drop: the user keyring is the real uid's
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if not IS_INIT:  # as PID 1 the worker kills the whole namespace instead
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
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        _apply_limits(job["limits"])
    except BaseException:  # nothing sensible left to do
        os._exit(70)

    def send(line):
        _write_all(result_fd, line.encode("utf-8", "surrogatepass") + b"\n")

    current = {"ids": {}, "keep": []}

    def encoded(value):
        try:
            data = encode(value, current["ids"], current["keep"])
            return "R" + json.dumps(data, separators=(",", ":"))
        except (Unrepresentable, RecursionError, ValueError, TypeError) as error:
            return "R" + json.dumps({"x": _describe(error)})
        except Exception as error:  # e.g. a __bool__ that raises
            return "R" + json.dumps({"x": _describe(error)})

    def record(value):  # graph tests: sent at once, so a later timeout keeps it
        send(encoded(value))

    try:
        for name, source in job["support"]:
            _load_module(name, source)
        module = _load_module(job["module"], job["code"])
        namespace = {"__name__": "__coral_tests__", "__coral_record__": record}
        if job["setup"]:
            exec(compile(job["setup"], "<tests>", "exec"), namespace)
    except BaseException as error:
        send("X" + _describe(error))
        os._exit(0)
    send("L %.6f" % _own_cpu())
    steps = job["steps"]
    for index in range(first, len(steps)):
        step = steps[index]
        current["ids"], current["keep"] = {}, []
        try:
            if step.get("script"):
                namespace[step["script"]]()
                line = "E%d %.6f" % (index, _own_cpu())
            else:
                result = getattr(module, step["call"])(*step["args"])
                if step.get("project") == "list":
                    result = list(result)
                line = "%s\nE%d %.6f" % (encoded(result), index, _own_cpu())  # one write
        except BaseException as error:
            line = "E%d %.6f %s" % (index, _own_cpu(), _describe(error))
        _flush_output()  # the worker may kill us as soon as the last step reports
        send(line)
    os._exit(0)


def _flush_output():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # the candidate may have replaced or broken them
            pass


def _own_cpu():
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def _load_module(name, source):
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
                           "stdout": _tail(os.path.join(self.scratch, "stdout"), self.job),
                           "stderr": _tail(os.path.join(self.scratch, "stderr"), self.job)})
        self.emit(head[:-1] + ',"steps":[' + ",".join(self.results) + "]}")
        # Reaping and cleaning overlap with the host reading the report; the next job is
        # read only afterwards. If this fails the worker exits: the host then retries the
        # next job once on a fresh worker, so only a job that breaks a worker twice fails.
        try:
            _kill_all(pid)
            for root in self.writable:
                _clean(root)
            if IS_INIT:
                _remove_ipc()
        except BaseException:
            os._exit(1)

    def _run_child(self, first):
        read_fd, write_fd = os.pipe()
        started = time.monotonic()
        pid = _fork(started + self.job["load_timeout"])
        if pid is None:
            os.close(read_fd)
            os.close(write_fd)
            return self._fail_load("the sandbox could not start a process (process limit)",
                                   first), None
        if pid == 0:
            os.close(read_fd)
            _child(self.job, first, write_fd, self.scratch)
        os.close(write_fd)
        try:
            following = self._relay(read_fd, pid, first, started)
        finally:
            os.close(read_fd)
            _kill_all(pid, wait=False)  # nothing of this child runs on from here
        if following < len(self.steps):
            _kill_all(pid)  # the job's next child starts in an empty namespace
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
        memory_check = started + MEMORY_PERIOD
        while True:
            now = time.monotonic()
            if now >= memory_check:
                if _job_memory(pid) > self.job["limits"]["memory_bytes"]:
                    if not loaded:
                        return self._fail_load("MemoryError: the program's processes took more "
                                               "than its memory limit", first)
                    self._step(step, "error", records, "MemoryError: the program's processes "
                               "took more than its memory limit", now - step_started)
                    return step + 1
                memory_check = now + MEMORY_PERIOD
            if now >= deadline:
                if not loaded:
                    return self._fail_load("TimeoutError: loading took longer than %.3g s"
                                           % self.job["load_timeout"], first)
                limit = self.timeouts[step]
                used = _job_cpu(pid) - cpu_at_start
                if now >= hard or used >= limit:
                    why = ("%.3g s of CPU time" % limit if used >= limit
                           else "%.3g s of wall-clock time" % (limit * WALL_FACTOR))
                    self._step(step, "timeout", records, "timed out after " + why,
                               now - step_started)
                    return step + 1
                deadline = min(hard, now + max(0.005, limit - used))
                continue
            if not poller.poll((min(deadline, memory_check) - now) * 1000):
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
                cpu, detail = parsed
                if kind == b"L":
                    loaded = True
                    self.load_seconds = now - started
                else:
                    self._step(step, "error" if detail else "ok", records, detail,
                               now - step_started)
                    step, records = step + 1, []
                    if step >= len(self.steps):
                        return step
                limit = self.timeouts[step]
                step_started, cpu_at_start = now, cpu
                deadline, hard = now + limit, now + limit * WALL_FACTOR
            if len(buffer) > self.max_record + 64:
                self._step(step, "error", [], "recorded value too large", 0.0)
                return step + 1

    def _step(self, index, status, records, detail, seconds):
        """Records are embedded verbatim: each was checked to be one valid JSON value."""
        self.results.append('{"step":%d,"status":"%s","detail":%s,"seconds":%.6f,"records":[%s]}'
                            % (index, status, json.dumps(detail[:300]), seconds,
                               ",".join(records)))

    def _fail_load(self, detail, first):
        self.load_error = detail[:300]
        for index in range(first, len(self.steps)):
            self._step(index, "error", [], "the program did not load: " + detail, 0.0)
        return len(self.steps)


def _fork(deadline):
    """fork(), retried while the process limit is reached: the sandbox user's process count
    is shared by every slot (when Coral runs as root), so another slot's fork bomb must not
    fail this job; it is killed when its own job ends."""
    while True:
        try:
            return os.fork()
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return None
            signal.sigtimedwait([signal.SIGCHLD], 0.01)


def _parse_progress(kind, payload, loaded, step):
    """`L <cpu>` before loading, `E<step> <cpu> [detail]` after: (cpu, detail) or None."""
    if kind == b"L" and not loaded:
        head, detail = "", payload.strip()
        cpu_text = detail
        detail = ""
    elif kind == b"E" and loaded:
        head, _, rest = payload.partition(" ")
        if head != str(step):
            return None
        cpu_text, _, detail = rest.partition(" ")
    else:
        return None
    try:
        cpu = float(cpu_text)
    except ValueError:
        return None
    return cpu, detail


MEMORY_PERIOD = 0.02  # how often the job's total memory is sampled while it runs
_BASELINE = []


def _anon_kb(entry):
    try:
        with open("/proc/%s/status" % entry, "rb") as handle:
            for line in handle:
                if line.startswith(b"RssAnon:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _job_memory(pid):
    """Anonymous memory of every process of the job (a fork shares the worker's pages at
    first: those count once), in bytes."""
    if not _BASELINE:
        _BASELINE.append(_anon_kb("self"))
    base = _BASELINE[0]
    return (base + sum(max(0, _anon_kb(entry) - base) for entry in _job_pids())) * 1024


def _job_pids():
    """Every process of the job: the whole namespace but us as PID 1, else our descendants."""
    entries = [p for p in os.listdir("/proc") if p.isdigit()]
    if IS_INIT:
        return [p for p in entries if p != "1"]
    children = {}
    for entry in entries:
        try:
            with open("/proc/%s/stat" % entry, "rb") as handle:
                parent = handle.read().rsplit(b")", 1)[1].split()[1].decode()
        except (OSError, IndexError):
            continue
        children.setdefault(parent, []).append(entry)
    found, todo = [], [str(os.getpid())]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def _job_cpu(pid):
    """CPU seconds used so far by the job: every process in the namespace but us (as PID 1),
    otherwise the child and the children it has waited for."""
    pids = [p for p in os.listdir("/proc") if p.isdigit() and p != "1"] if IS_INIT else [str(pid)]
    total = 0
    for entry in pids:
        try:
            with open("/proc/%s/stat" % entry, "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
            total += sum(int(value) for value in fields[11:15])
        except (OSError, IndexError, ValueError):
            continue
    return total / TICKS


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


def _wait_status(pid, grace=0.1):
    """How the child ended; one that closed its pipe but lives on is killed (never block)."""
    deadline = time.monotonic() + grace
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return "status unknown"
        if done:
            break
        if time.monotonic() >= deadline:
            _kill_all(pid)
            return "it closed its result pipe and kept running"
        signal.sigtimedwait([signal.SIGCHLD], 0.005)
    if os.WIFSIGNALED(status):
        return "killed by signal %d" % os.WTERMSIG(status)
    return "exit status %d" % os.WEXITSTATUS(status)


def _kill_all(pid, wait=True):
    """Kill the child and everything it started; with `wait`, reap them all."""
    deadline = time.monotonic() + 5.0
    while True:
        if IS_INIT:
            try:
                os.kill(-1, signal.SIGKILL)  # as PID 1: every other process in the namespace
            except ProcessLookupError:
                pass
        else:
            for target in ([pid] if pid else []) + _descendants():
                for kill in (os.killpg, os.kill):
                    try:
                        kill(target, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
        if _reap() or not wait or time.monotonic() > deadline:
            return
        signal.sigtimedwait([signal.SIGCHLD], 0.01)  # SIGCHLD is blocked: wait for the next


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
    """The end of a captured stream; the child may have replaced the file by anything (a
    FIFO would block us forever, a symlink would make us read for it): regular files only."""
    limit = job["limits"]["output_bytes"]
    try:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode) or info.st_size == 0:
            return ""
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return ""
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return ""
        return os.pread(fd, limit, max(0, info.st_size - limit)).decode("utf-8", "replace")
    except OSError:
        return ""
    finally:
        os.close(fd)


def _clean_quickly(root):
    """The common case: nothing, or only the job folder holding plain files."""
    with os.scandir(root) as found:
        entries = list(found)
    if not entries:
        return True
    if len(entries) != 1 or entries[0].name != "job" or not entries[0].is_dir(
            follow_symlinks=False):
        return False
    with os.scandir(entries[0].path) as found:
        files = list(found)
    if any(not f.is_file(follow_symlinks=False) for f in files):
        return False
    for item in files:
        os.unlink(item.path)
    return True


def _clean(root):
    """Remove everything a job left in the writable places, whatever its permissions."""
    try:
        if _clean_quickly(root):
            return
    except OSError:
        pass
    for entry in os.listdir(root):
        path = os.path.join(root, entry)
        if stat.S_ISDIR(os.lstat(path).st_mode):
            _remove_tree(path)  # any depth, any permissions
        else:
            try:
                os.unlink(path)
            except OSError:
                pass
    if os.listdir(root):
        raise OSError("cannot clean " + root)


def _remove_tree(path):
    """Remove a directory tree of any depth and permissions, iteratively: walking down with
    chdir keeps every path short, and each directory is unlocked before it is entered."""
    home = os.open(".", os.O_RDONLY)
    try:
        os.chdir(os.path.dirname(path))
        stack = [os.path.basename(path)]
        while stack:
            os.chmod(stack[-1], 0o700)
            os.chdir(stack[-1])
            below = None
            for entry in os.listdir("."):
                if stat.S_ISDIR(os.lstat(entry).st_mode):
                    below = entry
                    break
                os.unlink(entry)
            if below is not None:  # we are in its parent, as the loop expects
                stack.append(below)
                continue
            os.chdir("..")
            os.rmdir(stack.pop())
            if stack:
                os.chdir("..")
    finally:
        os.fchdir(home)
        os.close(home)


def _ipc_in_use():
    """Whether any System V object exists: one *_INFO call per kind instead of reading
    /proc/sysvipc (the common case, after every job, is that there is none)."""
    import ctypes
    import struct

    libc = _libc()
    info = ctypes.create_string_buffer(256)
    counts = []
    if libc.shmctl(0, 14, info) >= 0:  # SHM_INFO: shm_info.used_ids
        counts.append(struct.unpack_from("i", info.raw)[0])
    if libc.msgctl(0, 12, info) >= 0:  # MSG_INFO: msginfo.msgpool = queues in use
        counts.append(struct.unpack_from("i", info.raw)[0])
    if libc.semctl(0, 0, 19, info) >= 0:  # SEM_INFO: seminfo.semusz = sets in use
        counts.append(struct.unpack_from("8i", info.raw)[7])
    return len(counts) < 3 or any(counts)


def _remove_ipc():
    """System V IPC objects outlive their processes (shared memory keeps its memory, outside
    any rlimit): as PID 1 of a private IPC namespace, every object in it is the job's."""
    if not _ipc_in_use():
        return
    libc = _libc()
    removers = {"shm": lambda ident: libc.shmctl(ident, 0, None),  # IPC_RMID = 0
                "msg": lambda ident: libc.msgctl(ident, 0, None),
                "sem": lambda ident: libc.semctl(ident, 0, 0)}
    for table, remove in removers.items():
        try:
            with open("/proc/sysvipc/" + table) as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            remove(int(row.split()[1]))


CHILD_IDS = None  # (uid, gid) the children run as, when the worker was started as root
_LIBC = []  # the C library through ctypes, loaded once before any fork (see _libc)


def _libc():
    """ctypes builds classes for every CDLL: load it once, in the worker, not per job."""
    if not _LIBC:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        for name in ("prctl", "syscall", "shmctl", "msgctl", "semctl"):  # resolved once, here
            getattr(libc, name, None)
        _LIBC.append(libc)
    return _LIBC[0]


def _drop_privileges(uid, gid):
    """The worker acts as `uid` (files, /proc) but keeps root as its real and saved uid, so
    that no process running as `uid` (its children, other slots) may signal or trace it."""
    try:
        os.setgroups([])
    except OSError:
        pass
    os.setresgid(gid, gid, gid)
    os.setresuid(0, uid, 0)


def _die_with_parent():
    try:
        _libc().prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (ImportError, OSError, AttributeError):
        pass


def _clear_keyring():
    """The kernel keyring of the sandbox user is shared by all its processes on the host and
    outlives them: each candidate starts with it empty, so no state passes between them.
    Called in the child after it dropped every uid: the worker keeps real uid 0, and the
    user keyring is the real uid's (clearing there would empty root's)."""
    number = {"x86_64": 250, "aarch64": 219}.get(os.uname().machine)  # keyctl(2)
    if number and CHILD_IDS is not None:  # never the keyring of the user who runs Coral
        try:
            _libc().syscall(number, 7, -4)  # KEYCTL_CLEAR, KEY_SPEC_USER_KEYRING
        except (ImportError, OSError, AttributeError):
            pass


def _drop_fully():
    if CHILD_IDS is not None:
        uid, gid = CHILD_IDS
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)


def _harden():
    """No core dumps and no ptrace/proc-mem access from the children (same uid)."""
    try:
        libc = _libc()
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0
        if not IS_INIT:
            libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphans come back to us
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: die with the host
    except (ImportError, OSError, AttributeError):
        pass


def main(argv):
    global CHILD_IDS
    scratch_root = argv[1]
    writable = [scratch_root] + [path for path in ("/dev/shm",) if IS_INIT and os.path.isdir(path)]
    _harden()  # while still root: the interpreter's own files may be readable by root only
    for name in PREIMPORT:
        try:
            __import__(name)
        except ImportError:
            pass
    if len(argv) > 3 and os.geteuid() == 0:
        CHILD_IDS = (int(argv[2]), int(argv[3]))
        _drop_privileges(*CHILD_IDS)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a handler would let children signal PID 1
    _die_with_parent()  # changing uids cleared bubblewrap's --die-with-parent
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


if __name__ == "__main__":
    main(sys.argv)
