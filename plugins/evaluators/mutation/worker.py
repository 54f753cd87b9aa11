"""A pre-warmed mutation worker: `python -m coral_plugins.evaluators.mutation.worker`.

It starts pytest once on the user's tests (so pytest, the test modules and the module under
test are imported and collected once), then serves requests read as JSON lines from a pipe,
forking one child per request, so each child starts from the same pristine, unmutated state:

- `baseline`: run every test on the unmutated code; per test its outcome, seconds and the
  lines of the module under test it executed (the coverage that selects tests per mutant).
- `mutant` in `swap` mode: the mutant lies inside function bodies that ran neither at import
  nor at collection; the child replaces those functions' code objects in place (every
  reference to them, `from mod import f` included, sees the mutant) and runs the selected,
  already collected tests.
- `mutant` in `reload` mode (module-level code, code run at import or collection): the child
  installs the mutated module in `sys.modules`, forgets the project's other modules and runs
  a fresh pytest session on the selected tests, as a fresh `python -m pytest` would.

A child's verdict follows `cosmic-ray exec`: exit status 0 survived, anything else killed; the
worker kills a child (its whole process group) at the request's deadline: killed (timeout).
The deadline is the child's CPU time (`cpu_limit`, its own and its reaped children's, as
the baseline measures each test), which a busy machine does not stretch, with a wall-clock
limit (`timeout`) for a child that waits without computing; without `cpu_limit` (the
seed's rule), wall-clock time alone. The user's file is never written.
"""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import sys
import threading
import time

TRACE_ONLY = "__coral_mutation_target__"
TICK = 0.05  # seconds between readings of a child's CPU time
TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_now() -> float:
    """CPU seconds of this process and its reaped children (what wait4 reports of it)."""
    own, children = (resource.getrusage(w) for w in (resource.RUSAGE_SELF,
                                                     resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _cpu_of(pid: int) -> float:
    """A running child's CPU seconds so far (with its reaped children), from /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return sum(int(v) for v in fields[11:15]) / TICKS
    except (OSError, IndexError, ValueError):
        return 0.0


class _Lines:
    """A sys.settrace line tracer limited to one file (the module under test)."""

    def __init__(self, filename: str):
        self.filename = filename
        self.lines: set[int] = set()

    def _local(self, frame, event, arg):
        if event == "line":
            self.lines.add(frame.f_lineno)
        return self._local

    def _global(self, frame, event, arg):
        if frame.f_code.co_filename == self.filename:
            self.lines.add(frame.f_lineno)
            return self._local
        return None

    def start(self) -> None:
        threading.settrace(self._global)
        sys.settrace(self._global)

    def stop(self) -> None:
        sys.settrace(None)
        threading.settrace(None)


def _send(fd: int, message: dict) -> None:
    data = (json.dumps(message) + "\n").encode()
    while data:
        data = data[os.write(fd, data):]


def _qualname_map(module) -> dict[str, object]:
    """{qualname: function} for the functions defined in `module` (classes walked, wrappers
    such as staticmethod, classmethod, property and functools.wraps unwrapped)."""
    found: dict[str, object] = {}
    seen: set[int] = set()
    filename = module.__file__

    def add(value, depth=0):
        if id(value) in seen or depth > 8:
            return
        seen.add(id(value))
        if isinstance(value, (staticmethod, classmethod)):
            add(value.__func__, depth + 1)
        elif isinstance(value, property):
            for part in (value.fget, value.fset, value.fdel):
                if part is not None:
                    add(part, depth + 1)
        elif isinstance(value, type):
            if getattr(value, "__module__", None) == module.__name__:
                for item in vars(value).values():
                    add(item, depth + 1)
        elif hasattr(value, "__code__") and hasattr(value, "__qualname__"):
            if value.__code__.co_filename == filename:
                found.setdefault(value.__code__.co_qualname, value)
            wrapped = getattr(value, "__wrapped__", None)
            if wrapped is not None:
                add(wrapped, depth + 1)
        else:
            wrapped = getattr(value, "__wrapped__", None)
            if wrapped is not None:
                add(wrapped, depth + 1)

    for value in list(vars(module).values()):
        add(value)
    return found


def _codes(code, out: dict[str, list]) -> dict[str, list]:
    out.setdefault(code.co_qualname, []).append(code)
    for const in code.co_consts:
        if hasattr(const, "co_qualname"):
            _codes(const, out)
    return out


def swap_in(module, source: str, qualnames: list[str]) -> bool:
    """Give the live functions `qualnames` of `module` the code compiled from `source`.
    False when that cannot be done faithfully (the caller then reloads instead)."""
    live = _qualname_map(module)
    new = _codes(compile(source, module.__file__, "exec"), {})
    for name in qualnames:
        target, codes = live.get(name), new.get(name, [])
        if target is None or len(codes) != 1:
            return False
        if len(codes[0].co_freevars) != len(target.__code__.co_freevars):
            return False
    for name in qualnames:
        live[name].__code__ = new[name][0]
    return True


class _Recorder:
    """A pytest plugin for nested (reload-mode) sessions: reports each test's outcome."""

    def __init__(self, fd: int):
        self.fd = fd
        self.failed = False

    def pytest_runtest_logreport(self, report):
        if report.failed or (report.when == "call" and report.passed):
            if report.failed:
                self.failed = True
            _send(self.fd, {"test": report.nodeid, "failed": bool(report.failed)})


class Worker:
    """The pytest plugin that turns the collected session into a request loop."""

    def __init__(self, module_path: str, requests: int, replies: int, pytest_args: list[str]):
        self.module_path = os.path.realpath(module_path)
        self.requests = os.fdopen(requests, "rb", buffering=0)
        self.replies = replies
        self.pytest_args = pytest_args
        self.tracer = _Lines(self.module_path)
        self.collect_lines: set[int] = set()
        self.module = None
        self.items: list = []
        self.collect_errors: list[str] = []

    # -- pytest hooks ---------------------------------------------------------------------
    def pytest_collectreport(self, report):
        if report.failed:
            text = str(report.longrepr).strip().splitlines()
            self.collect_errors.append(f"{report.nodeid}: {text[-1] if text else 'error'}")

    def pytest_collection_finish(self, session):
        self.tracer.stop()
        self.collect_lines = set(self.tracer.lines)
        self.items = list(session.items)
        for module in list(sys.modules.values()):
            path = getattr(module, "__file__", None)
            if path and os.path.realpath(path) == self.module_path:
                self.module = module
                break

    def pytest_runtestloop(self, session):
        if session.testsfailed or self.collect_errors:
            _send(self.replies, {"error": "collection", "detail": "; ".join(
                self.collect_errors) or f"{session.testsfailed} error(s) while collecting"})
            return True
        if self.module is None and self.items:
            _send(self.replies, {"error": "not-imported"})
            return True
        _send(self.replies, {"ready": True, "module": getattr(self.module, "__name__", None),
                             "tests": [item.nodeid for item in self.items],
                             "collect_lines": sorted(self.collect_lines)})
        buffer = b""
        while True:
            chunk = self.requests.read(65536)
            if not chunk:
                return True
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                request = json.loads(line)
                if request.get("op") == "stop":
                    return True
                _send(self.replies, self.serve(request))

    # -- requests -------------------------------------------------------------------------
    def serve(self, request: dict) -> dict:
        start = time.perf_counter()
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(read)
            code = 3
            try:
                os.setpgid(0, 0)
                code = self.child(request, write)
            except BaseException as error:  # noqa: B902 - report anything, then exit
                try:
                    _send(write, {"crash": f"{type(error).__name__}: {error}"})
                except OSError:
                    pass
            finally:
                os._exit(code)
        os.close(write)
        deadline = start + float(request.get("timeout") or 1e9)
        cpu_limit = float(request.get("cpu_limit") or 0.0)
        events, buffer, timed_out, status = [], b"", False, None
        while True:
            remaining = deadline - time.perf_counter()
            if remaining <= 0 or cpu_limit and _cpu_of(pid) >= cpu_limit:
                timed_out = True
                break
            wait = min(remaining, TICK if cpu_limit else 1.0)
            ready, _, _ = select.select([read], [], [], wait)
            if ready:
                chunk = os.read(read, 65536)
                if not chunk:
                    break
                buffer += chunk
        if timed_out:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        _, status, usage = os.wait4(pid, 0)
        os.close(read)
        cpu = usage.ru_utime + usage.ru_stime
        if cpu_limit and cpu >= cpu_limit:
            timed_out = True  # over it as it ended, between two readings: the same verdict
        for line in buffer.split(b"\n"):
            if line.strip():
                try:
                    events.append(json.loads(line))
                except ValueError:
                    pass
        exit_code = os.waitstatus_to_exitcode(status)
        return {"id": request.get("id"), "exit": exit_code, "timeout": timed_out,
                "events": events, "seconds": time.perf_counter() - start, "cpu": cpu}

    def child(self, request: dict, fd: int) -> int:
        devnull = os.open(os.devnull, os.O_RDWR)
        for target in (0, 1, 2):
            os.dup2(devnull, target)
        if request["op"] == "baseline":
            return self.run_items(self.items, fd, trace=True)
        wanted = request.get("tests")
        if request["mode"] == "swap":
            if not swap_in(self.module, request["source"], request["functions"]):
                _send(fd, {"fallback": "reload"})
                return self.reload(request, fd)
            items = [item for item in self.items if wanted is None or item.nodeid in wanted]
            return self.run_items(items, fd, trace=False)
        return self.reload(request, fd)

    def run_items(self, items: list, fd: int, trace: bool) -> int:
        from _pytest.runner import runtestprotocol

        failed = False
        for index, item in enumerate(items):
            nextitem = items[index + 1] if index + 1 < len(items) else None
            tracer = _Lines(self.module_path) if trace else None
            begin, begin_cpu = time.perf_counter(), _cpu_now()
            if tracer:
                tracer.start()
            try:
                reports = runtestprotocol(item, nextitem=nextitem, log=False)
            finally:
                if tracer:
                    tracer.stop()
            bad = any(report.failed for report in reports)
            failed = failed or bad
            event = {"test": item.nodeid, "failed": bad,
                     "seconds": time.perf_counter() - begin, "cpu": _cpu_now() - begin_cpu}
            if tracer:
                event["lines"] = sorted(tracer.lines)
            _send(fd, event)
        return 1 if failed else 0

    def reload(self, request: dict, fd: int) -> int:
        import types

        import pytest

        project = os.path.realpath(os.getcwd())
        name = self.module.__name__
        for key, module in list(sys.modules.items()):
            path = getattr(module, "__file__", None) or ""
            if key != name and os.path.realpath(path).startswith(project + os.sep):
                if "site-packages" not in path:
                    del sys.modules[key]
        fresh = types.ModuleType(name)
        fresh.__file__ = self.module.__file__
        fresh.__spec__ = getattr(self.module, "__spec__", None)
        fresh.__package__ = getattr(self.module, "__package__", None)
        sys.modules[name] = fresh
        try:
            exec(compile(request["source"], self.module.__file__, "exec"), fresh.__dict__)
        except BaseException:  # noqa: B902 - an import error is a collection error: killed
            return 2
        wanted = request.get("tests")
        args = list(self.pytest_args) if wanted is None else \
            [arg for arg in self.pytest_args if arg.startswith("-")] + list(wanted)
        recorder = _Recorder(fd)
        code = pytest.main(args + ["-p", "no:cacheprovider"], plugins=[recorder])
        return int(code)


def main(argv: list[str]) -> int:
    module_path, requests, replies = argv[0], int(argv[1]), int(argv[2])
    pytest_args = json.loads(argv[3])
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    sys.dont_write_bytecode = True
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    import pytest

    worker = Worker(module_path, requests, replies, pytest_args)
    worker.tracer.start()
    devnull = os.open(os.devnull, os.O_RDWR)
    saved = os.dup(1)
    os.dup2(devnull, 1)
    try:
        code = pytest.main(pytest_args + ["-p", "no:cacheprovider"], plugins=[worker])
    finally:
        worker.tracer.stop()
        os.dup2(saved, 1)
    if int(code) not in (0,) and worker.module is None:
        _send(replies, {"error": "pytest", "exit": int(code)})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
