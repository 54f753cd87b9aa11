"""The forked child that loads a candidate and runs its steps; it never returns.

It is forked before its job is read, then reads exactly its own job from the job's memfd:
the worker it was forked from never held any candidate's code, inputs or results.
Everything in this process is the candidate's to tamper with (modules, builtins, these
functions): it only ever reports values, and expected values never reach it."""

from __future__ import annotations

import itertools
import json
import os
import resource
import signal
import sys
import types

from . import keyrings, seccomp
from .encoding import Unrepresentable, encode
from .privileges import drop_fully, prefer_as_oom_victim
from .processes import IS_INIT

FILTERED = []  # [True] once the worker (and so every child) runs under the seccomp filter
# The process rlimit counts every process and thread of the user on the host: where the
# slot's pids cgroup bounds the job, it is left as it is ([None]); else it is the job's
# processes on top of the user's tasks when the worker started ([count]).
PROCESS_BASE = [0]
SPLIT = {}  # in a hosted job: this process's role, its pipe to the other (and its pid)
# What reports the program's results, taken before any program loads: a program may
# rebind `json.dumps` (to indent its own output) or `os.write` at its top level, honestly,
# and its results must still reach the worker as plain lines (a red-team pass).
_dumps, _write, _times, _exit = json.dumps, os.write, os.times, os._exit


def _write_all(fd, data):
    while data:
        written = _write(fd, data)
        data = data[written:]


def _apply_limits(limits):
    pairs = [
        (resource.RLIMIT_AS, limits["memory_bytes"]),
        (resource.RLIMIT_CPU, limits["cpu_seconds"]),
        (resource.RLIMIT_FSIZE, limits["file_bytes"]),
        (resource.RLIMIT_NOFILE, limits["open_files"]),
        (resource.RLIMIT_CORE, 0),
    ]
    if PROCESS_BASE[0] is not None:
        pairs.append((resource.RLIMIT_NPROC, PROCESS_BASE[0] + limits["processes"]))
    for which, value in pairs:
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass


def _read_job(fd, start=0, size=None):
    """The job's body from its memfd: this child's own job, and nothing else (of a hosted
    job, first only the public part: `size` bytes)."""
    if size is None:
        size = os.fstat(fd).st_size - start
    parts, offset = [], start
    while offset < start + size:
        chunk = os.pread(fd, start + size - offset, offset)
        if not chunk:
            break
        parts.append(chunk)
        offset += len(chunk)
    return json.loads(b"".join(parts))


def _split(body_fd, public, result_fd):
    """Fork the candidate's process of a hosted job before anything of the job's private
    part is read, so that no trace of it is in its memory; this process (the host's) then
    reads the private part. Pipes both ways; the candidate's protocol lines go to the host,
    which relays them. (private part or None, the fd this process reports on)."""
    host_reads, tests_write = os.pipe()
    tests_read, host_writes = os.pipe()
    pid = os.fork()
    if pid == 0:  # the candidate's process
        for fd in (body_fd, result_fd, host_reads, host_writes):
            os.close(fd)
        if FILTERED:  # it cannot stop the host's process or change its limits
            seccomp.confine_alone()
        SPLIT.update(role="tests", fd=(tests_read, tests_write))
        return None, tests_write
    for fd in (tests_read, tests_write):
        os.close(fd)
    # the private part's head ("%011d\n") gives its length: the padding is not read
    private = _read_job(body_fd, public + 12, int(os.pread(body_fd, 12, public)))
    os.close(body_fd)
    SPLIT.update(role="program", fd=(host_reads, host_writes), pid=pid)
    return private, result_fd


def run_child(control, first, result_fd, scratch, body_fd):
    """Runs in the forked child; never returns."""
    try:
        prefer_as_oom_victim()
        drop_fully()
        if not FILTERED:  # with it, no candidate can touch a keyring at all
            keyrings.clear_user_keyrings()  # after the drop: they are the real uid's
            keyrings.leave_shared_session()  # and not the host's session keyring
        public = control.get("public")
        job = _read_job(body_fd, 0, public)
        if public is None:
            os.close(body_fd)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if not IS_INIT:  # as PID 1 the worker kills the whole namespace instead
            os.setsid()
        os.chdir(scratch)
        _FOLDER[0] = os.path.abspath(scratch)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        out = os.open("stdout", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        err = os.open("stderr", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(out, 1)
        os.dup2(err, 2)
        kept = sorted({result_fd, body_fd} if public is not None else {result_fd})
        for low, high in zip([2] + kept, kept + [65536]):
            os.closerange(low + 1, high)
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        private = None
        if public is not None:
            private, result_fd = _split(body_fd, public, result_fd)
        _apply_limits(control["limits"])
    except BaseException:  # nothing sensible left to do
        os._exit(70)

    def send(line):
        _write_all(result_fd, line.encode("utf-8", "surrogatepass") + b"\n")

    current = {"ids": {}, "keep": []}

    def encoded(value):
        try:
            data = encode(value, current["ids"], current["keep"])
            return "R" + _dumps(data, separators=(",", ":"))
        except (Unrepresentable, RecursionError, ValueError, TypeError) as error:
            return "R" + _dumps({"x": describe(error)})
        except Exception as error:  # e.g. a __bool__ that raises
            return "R" + _dumps({"x": describe(error)})

    def record(value):  # graph tests: sent at once, so a later timeout keeps it
        send(encoded(value))

    counting = bool(job.get("count"))
    counted = _line_counter() if counting else (lambda: -1)

    loaded = -1
    try:
        for name, source in job["support"]:
            load_module(name, source)
        if private is not None:  # the host's process: it serves the candidate's, then ends
            sys.modules[job["host"]].serve(send, record, private, load_module)
            _flush_output()
            _exit(0)
        if job.get("prepare"):  # the harness's start, in the candidate's process alone
            module_name, function, arguments = job["prepare"]
            getattr(sys.modules[module_name], function)(*arguments)
        if counting:
            counted(start=True)
        try:
            module = load_module(job["module"], job["code"])
        finally:
            loaded = counted()  # precomputing answers while loading is not free
        namespace = {"__name__": "__coral_tests__", "__coral_record__": record}
        if job["setup"]:
            exec(compile(job["setup"], "<tests>", "exec"), namespace)
    except BaseException as error:
        send("X" + describe(error))
        _exit(0)
    send("L %.6f %d" % (_own_cpu(), loaded))
    steps = job["steps"]
    for index in range(first, len(steps)):
        step = steps[index]
        current["ids"], current["keep"] = {}, []
        traced = -1
        try:
            if counting:
                counted(start=True)
            try:
                if step.get("script"):
                    namespace[step["script"]]()
                    result = None
                else:
                    result = getattr(module, step["call"])(*step["args"])
                    if step.get("project") == "list":
                        result = list(result)
            finally:
                traced = counted()
            if step.get("script"):
                line = "E%d %.6f %d" % (index, _own_cpu(), traced)
            else:  # one write
                line = "%s\nE%d %.6f %d" % (encoded(result), index, _own_cpu(), traced)
        except BaseException as error:
            line = "E%d %.6f %d %s" % (index, _own_cpu(), traced, describe(error))
        _flush_output()  # the worker may kill us as soon as the last step reports
        send(line)
    _exit(0)


# What a program could use to hide the lines it runs from the counter, and honest programs
# have no use for: trace and profile functions, the collector's walks over every object
# (to find the counter), ctypes. (Frames are not on the list: namedtuple, dataclasses and
# warnings reach for them in honest programs; a frame whose line events were switched off
# is caught by the tracer itself.)
# Starting a process is on it too: lines run there are not counted, and what the count
# holds then turns on the kernel's timing (whether a child has run yet when the program
# polls it), so the same program counted differently from run to run.
_WATCHED = frozenset(("sys.settrace", "sys.setprofile", "gc.get_objects", "gc.get_referrers",
                      "gc.get_referents", "os.fork", "os.forkpty", "os.posix_spawn",
                      "os.spawn", "os.system", "os.exec", "subprocess.Popen"))
_OTHER_CPU = 0.01  # seconds of CPU time outside the counted thread that void a count


def _line_counter():
    """`counted(start=True)` starts counting the lines Python executes; `counted()` stops
    and returns them, or -1 when they cannot be trusted: the tracer was removed or
    replaced, a frame's line events were switched off (`f_trace_lines = False`, seen when
    it returns) or its tracing removed (`f_trace = None`: its return never comes), the
    program reached for what could hide lines (an audit hook sees it; nothing removes
    one), or it ran code in other threads or processes (their CPU time). The count is a C
    counter that only goes up. What this cannot see: a frame that switches its line events
    off and on again before it returns, or a program that swaps the tracer's own state and
    swaps it back (docs/sandbox.md)."""
    lines = itertools.count()
    watch = {"on": False, "seen": False, "start": 0, "cpu": (0.0, 0.0), "open": 0}

    def tracer(frame, event, arg, _next=next, _lines=lines, _watch=watch):
        if event == "line":
            _next(_lines)
        elif event == "call":
            _watch["open"] += 1
        elif event == "return":
            _watch["open"] -= 1
            if not frame.f_trace_lines or frame.f_trace_opcodes:
                _watch["seen"] = True
        return tracer

    def audit(event, args):
        if watch["on"] and (event in _WATCHED or event.startswith("ctypes.")):
            watch["seen"] = True

    sys.addaudithook(audit)

    def other_cpu():
        whole = resource.getrusage(resource.RUSAGE_SELF)
        main = resource.getrusage(resource.RUSAGE_THREAD)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (whole.ru_utime + whole.ru_stime - main.ru_utime - main.ru_stime,
                children.ru_utime + children.ru_stime)

    def counted(start=False):
        count = _value(lines) - watch["start"]  # first: the one line of ours it counts
        if start:
            watch.update(seen=False, start=_value(lines), cpu=other_cpu(), open=0)
            sys.settrace(tracer)
            watch["on"] = True
            return -1
        watch["on"] = False
        current = sys.gettrace()
        sys.settrace(None)
        honest = current is tracer and tracer.__defaults__ == (next, lines, watch)
        hidden = any(b - a > _OTHER_CPU for a, b in zip(watch["cpu"], other_cpu()))
        # one frame is open: this one, called while the tracer was on
        if not honest or watch["seen"] or watch["open"] > 1 or hidden:
            return -1
        return count

    return counted


def _value(counter):
    """An itertools.count's value, without advancing it."""
    return int(repr(counter)[6:-1])


def _flush_output():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # the candidate may have replaced or broken them
            pass


def _own_cpu():
    times = _times()
    return times.user + times.system + times.children_user + times.children_system


_FOLDER = [""]  # the job's folder, once the child is in it (a guard may remove getcwd)


def load_module(name, source):
    """`__file__` is absolute, in the folder the module runs in, as an imported module's
    is: `inspect.stack()` reads every loaded module's, and a relative one needs
    os.getcwd(), which HumanEval's guard removes. Tracebacks keep the short name."""
    module = types.ModuleType(name)
    relative = name.replace(".", "/") + ".py"
    module.__file__ = os.path.join(_FOLDER[0] or os.getcwd(), relative)
    sys.modules[name] = module
    exec(compile(source, relative, "exec"), module.__dict__)
    return module


def describe(error):
    try:
        text = "%s: %s" % (type(error).__name__, error)
    except BaseException:
        text = "exception"
    return " ".join(text.split())[:300]
