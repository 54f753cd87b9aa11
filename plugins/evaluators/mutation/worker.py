"""A pre-warmed mutation worker: `python -m coral_plugins.evaluators.mutation.worker`.

It starts pytest once on the user's tests (so pytest, the test modules and the module under
test are imported and collected once), then serves requests read as JSON lines from a pipe,
forking one child per request, so each child starts from the same pristine, unmutated state:

- `baseline`: run every test on the unmutated code; per test its outcome, seconds and the
  lines of the module under test it executed (the coverage that selects tests per mutant),
  and what the audit hook saw (audit.py: a test that reads the module's file or starts a
  process).
- `mutant` in `swap` mode: the mutant lies inside function bodies that ran neither at import
  nor at collection; the child replaces those functions' code objects in place (every
  reference to them, `from mod import f` included, sees the mutant) and runs the selected,
  already collected tests.
- `mutant` in `reload` mode (module-level code, code run at import or collection): the child
  forgets the project's modules, an import hook serves the module's file with the mutant's
  text (inmemory.py), and a fresh pytest session runs the selected tests, as a fresh
  `python -m pytest -x` would. A module the tests import only inside a test (none did at
  collection) is served the same way: there is no live code to swap.
- the exact path (`exact` in a request, or `mode` "exact"): the mutant is written into the
  worker's private copy of the project (exact.py) and the child execs a fresh
  `python -m pytest` there, as `cosmic-ray exec` does. It follows an in-memory run that
  survived (`exact`: the tests that see the disk), or replaces one during which the audit
  hook saw the disk (`recheck`).

A child's verdict follows `cosmic-ray exec`: exit status 0 survived, anything else killed. The
worker learns that the child ended from the child itself (a pidfd), never from the end of
its pipe, which a process forked by a test may hold; then it kills every process the run
left (it is their subreaper: procs.py). It kills a child at the request's deadline: killed
(timeout). The deadline is CPU time (`cpu_limit`: the child's and its descendants', and
its reaped children's, as the baseline measures each test), which a busy machine does not
stretch, with a wall-clock limit (`timeout`) for a child that waits without computing;
without `cpu_limit` (the seed's rule), wall-clock time alone. The user's file is never
written.
"""

from __future__ import annotations

import fcntl
import functools
import importlib.util
import json
import linecache
import os
import resource
import select
import shutil
import signal
import sys
import tempfile
import threading
import time

import pytest

from coral_core.files.scratch import make_scratch, remove_tree
from coral_core.mutation.annotations import mutant_annotations
from coral_plugins.evaluators.mutation import (exact, follow, hypothesis_runs, inmemory, probe,
                                               procs, readers)
from coral_plugins.evaluators.mutation.audit import Audit, json_lines
from coral_plugins.evaluators.mutation.workers import SCRATCH

TICK = 0.05  # seconds between readings of a child's CPU time
EVENTS_PLUGIN = "coral_plugins.evaluators.mutation.exact_report"


def _cpu_now() -> float:
    """CPU seconds of this process and its reaped children (what wait4 reports of it)."""
    own, children = (resource.getrusage(w) for w in (resource.RUSAGE_SELF,
                                                     resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _cpu_tree() -> float:
    """_cpu_now() and the CPU time of this process's live descendants: what a mutant's
    limit counts (procs.tree_cpu), so a test's baseline is measured the same way."""
    return _cpu_now() + procs.live_cpu(os.getpid())


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


class _Phases:
    """pytest hooks that tell the audit hook which phase of a test runs: an event while a
    test's own body runs concerns that test; one in a fixture's set-up or tear-down may
    reach every test that shares the fixture."""

    audit: Audit

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        self.audit.phase = "setup"

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(self, item):
        self.audit.phase = "call"

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_teardown(self, item, nextitem):
        self.audit.phase = "teardown"

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_makereport(self, item, call):
        self.audit.phase = "report"


class _Recorder(_Phases):
    """A pytest plugin for nested (reload-mode) sessions: reports each test's outcome."""

    def __init__(self, worker: "Worker"):
        self.worker = worker
        self.audit = worker.audit

    def pytest_runtest_logstart(self, nodeid, location):
        self.audit.test, self.audit.phase = nodeid, "start"

    def pytest_runtest_logreport(self, report):
        if report.failed or (report.when == "call" and report.passed):
            self.worker.emit({"test": report.nodeid, "failed": bool(report.failed)})


class Worker(_Phases):
    """The pytest plugin that turns the collected session into a request loop."""

    def __init__(self, module_path: str, requests: int, replies: int, pytest_args: list[str],
                 audit: Audit, scratch: str):
        self.module_path = os.path.realpath(module_path)
        self.requests = os.fdopen(requests, "rb", buffering=0)
        self.replies = replies
        self.pytest_args = pytest_args
        self.audit = audit
        self.scratch = scratch
        self.project = os.path.realpath(os.getcwd())
        self.environ = dict(os.environ)  # the exact path's pytest gets the user's own
        self.tracer = _Lines(self.module_path)
        self.collect_lines: set[int] = set()
        self.module = None
        self.swap: inmemory.Swap | None = None
        self.failed = False  # a failed report (a test's, or a subtest's) in this child
        self.items: list = []
        self.collect_errors: list[str] = []
        self.disk: list[str] = []  # why no mutant is proven in memory (collection)
        self.keep: set = set()  # processes started at collection: they live with the worker
        self.child_pid = 0
        self.events_fd = -1
        self.copy: str | None = None
        self.original = b""
        self.hypothesis = False  # the tests use Hypothesis (hypothesis_runs)

    # -- pytest hooks ---------------------------------------------------------------------
    def pytest_collectreport(self, report):
        if report.failed:
            text = str(report.longrepr).strip().splitlines()
            self.collect_errors.append(f"{report.nodeid}: {text[-1] if text else 'error'}")

    def pytest_runtest_logreport(self, report):
        if report.failed and not hasattr(report, "wasxfail"):
            self.failed = True  # what makes pytest's exit status 1: subtests' reports too

    def pytest_collection_finish(self, session):
        self.tracer.stop()
        self.hypothesis = hypothesis_runs.seed_collected()
        self.collect_lines = set(self.tracer.lines)
        self.items = list(session.items)
        names = []
        for name, module in list(sys.modules.items()):
            path = getattr(module, "__file__", None)
            if path and os.path.realpath(path) == self.module_path:
                names.append(name)
                if self.module is None:
                    self.module = module
        self.audit.phase = "idle"
        self.disk = self.audit.judge(self.module) + [e["why"] for e in self.audit.since(0)
                                                     if "why" in e]
        self.audit.unimported = self.module is None
        if len(names) > 1:
            self.disk.append(f"the module is imported under {len(names)} names "
                             f"({', '.join(sorted(names))})")
        self.audit.on = False  # the worker's own reading of the module is not a test's
        if self.module is not None:
            with open(self.module_path, "rb") as handle:
                text = importlib.util.decode_source(handle.read())
            self.swap = inmemory.Swap(self.module.__file__, text, self.audit.copied)
        for path in (self.module_path, getattr(self.module, "__file__", None)):
            linecache.cache.pop(path, None)  # a test's inspect.getsource must open the file

    def pytest_runtestloop(self, session):
        if session.testsfailed or self.collect_errors:
            _send(self.replies, {"error": "collection", "detail": "; ".join(
                self.collect_errors) or f"{session.testsfailed} error(s) while collecting"})
            return True
        self.keep = procs.snapshot(os.getpid())
        _send(self.replies, {"ready": True, "module": getattr(self.module, "__name__", None),
                             "tests": [item.nodeid for item in self.items],
                             "test_files": {item.nodeid: self._test_files(item)
                                            for item in self.items},
                             "collect_lines": sorted(self.collect_lines),
                             "disk": self.disk, "startup_cpu": _cpu_now()})
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
                reply = self.serve(request)
                try:
                    _send(self.replies, reply)
                except OSError:  # the runner is gone
                    return True

    # -- requests -------------------------------------------------------------------------
    def serve(self, request: dict) -> dict:
        if request["op"] == "baseline" or request.get("mode") != "exact":
            first = self.run_child(lambda write: self.child(request), request,
                                   request.get("timeout"), request.get("cpu_limit"), audit=True)
            if request["op"] in ("baseline", "readers") or first.get("aborted"):
                return first
            seen = first["disk"]
            if seen:  # the mutant's own run saw the disk: its verdict is not proven
                spec, how, first = request.get("recheck") or {
                    "tests": None, "timeout": 3 * float(request.get("timeout") or 60)}, \
                    "dynamic", None
            elif first["exit"] != 0 or first["timeout"] or not request.get("exact"):
                return first
            else:
                spec, how = request["exact"], "planned"
        else:
            spec, how, first, seen = request["exact"], "planned", None, []
        second = self.run_exact(request["source"], spec or {})
        second["exact"], second["seen"], second["id"] = how, seen, request.get("id")
        if first is not None:
            second["events"] = first["events"] + second["events"]
            second["seconds"] += first["seconds"]
            second["cpu"] += first["cpu"]
        return second

    def run_exact(self, source: str, spec: dict) -> dict:
        """One run the way cosmic-ray runs it: the mutant written into the copy, a fresh
        `python -m pytest` there (this worker's child, so it is supervised the same way)."""
        if self.copy is None:  # kept once whole: a half-made copy is never used
            copy = os.path.join(self.scratch, "project")
            exact.copy_project(self.project, copy, own=self.module_path)
            with open(self.module_path, "rb") as handle:
                self.original = handle.read()
            self.copy = copy
        target = os.path.join(self.copy, os.path.relpath(self.module_path, self.project))
        tests = spec.get("tests")
        args = list(self.pytest_args) if tests is None else \
            [arg for arg in self.pytest_args if arg.startswith("-")] + list(tests)
        argv = [sys.executable, "-m", "pytest", *args, "-p", "no:cacheprovider",
                "-p", EVENTS_PLUGIN, "--tb=no"]
        copy = self.copy

        def run(write: int) -> int:
            os.chdir(copy)
            os.set_inheritable(write, True)
            env = dict(self.environ, CORAL_MUTATION_EVENTS_FD=str(write), PWD=copy,
                       CORAL_MUTATION_COPY=json.dumps([self.project, copy]))
            env[hypothesis_runs.STORAGE] = os.environ[hypothesis_runs.STORAGE]  # this child's
            if self.hypothesis:
                env[hypothesis_runs.USED] = "1"
            if env.get("PYTHONPATH"):  # an entry into the project: the same one in the copy
                env["PYTHONPATH"] = os.pathsep.join(
                    exact.in_copy(entry, self.project, copy)
                    for entry in env["PYTHONPATH"].split(os.pathsep))
            os.execve(sys.executable, argv, env)
            return 3  # not reached

        exact.write_mutant(target, source)
        try:
            reply = self.run_child(run, {"id": None}, spec.get("timeout"),
                                   spec.get("cpu_limit"), audit=False)
        finally:
            exact.restore(target, self.original)
        reply["ran"] = list(tests) if tests is not None else \
            [item.nodeid for item in self.items]
        return reply

    def emit(self, message: dict) -> None:
        """Send an event to the worker, from the child only: a process a test forked that
        goes on running pytest's code does not speak for the child."""
        if os.getpid() == self.child_pid and self.events_fd >= 0:
            _send(self.events_fd, message)

    def _enter_child(self, read: int, write: int, audit: bool) -> None:
        self.child_pid, self.events_fd = os.getpid(), write
        os.setpgid(0, 0)
        os.close(read)
        devnull = os.open(os.devnull, os.O_RDWR)
        for target in (0, 1, 2):
            os.dup2(devnull, target)
        os.close(devnull)
        os.register_at_fork(after_in_child=_closer([write]))  # a test's fork: not its pipe
        hypothesis_runs.fresh_storage(self._storage(os.getpid()))
        self.audit.test, self.audit.phase = "", "start"
        self.audit.on = audit

    def _storage(self, pid: int) -> str:
        """The folder a child's run may store in (Hypothesis's examples): its own."""
        return os.path.join(self.scratch, "storage", str(pid))

    def run_child(self, body, request: dict, timeout, cpu_limit, audit: bool) -> dict:
        """Fork a child that runs `body(write)` and exits with what it returns; supervise it
        to its end or deadline; kill what it left. The reply holds its exit status, events,
        seconds, CPU time and the audit events of its run."""
        start = time.perf_counter()
        offset = self.audit.offset()
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            code = 3
            try:
                self._enter_child(read, write, audit)
                code = body(write)
            except BaseException as error:  # noqa: B902 - report anything, then exit
                try:
                    self.emit({"crash": f"{type(error).__name__}: {error}"})
                except OSError:
                    pass
            finally:
                os._exit(code)
        os.close(write)
        try:
            reply = self._supervise(pid, read, start, timeout, cpu_limit)
        finally:
            os.close(read)
            procs.kill_descendants(os.getpid(), self.keep)
            shutil.rmtree(self._storage(pid), ignore_errors=True)
        seen = self.audit.since(offset)
        reply["disk"] = [event for event in seen if "fork" not in event]
        forked = len(reply["disk"]) < len(seen)  # what a test's fork read is unseen
        untold = self._judge_followed(reply) if self.audit.follow is not None else True
        unknown = forked or untold  # or a process could not tell whose annotations it read
        for event in reply.get("events", []):
            if "census" in event and unknown:
                event["census"]["untouched"] = event["census"]["watchable"] = []
        reply["id"], reply["unknown"] = request.get("id"), unknown
        return reply

    def _judge_followed(self, reply: dict) -> bool:
        """Settle the run's followed processes (follow.py): their lines join their test's
        coverage (and `child_lines`, in the baseline); a process not followed stays an
        event (a disk test in the baseline, the exact way under a mutant). True when a
        process could not tell whose annotations it read."""
        followed = follow.judge(reply["disk"], self.audit.follow.collect())
        reply["disk"] = followed.events
        for event in reply.get("events", []):
            if "census" in event:  # annotations its processes read count as read, and
                census = event["census"]  # which of their tests read them is not known
                census["touched"] = sorted({tuple(k) for k in census["touched"]}
                                           | followed.touched)
                census["watchable"] = sorted({tuple(k) for k in census["watchable"]}
                                             - followed.touched)
            ran = followed.lines.get(event.get("test"))
            if ran is not None and "lines" in event:
                event["lines"] = sorted(set(event["lines"]) | ran)
                event["child_lines"] = sorted(ran)
                event["followed"] = True  # what its processes import is not watched
        return followed.census_unknown

    def _supervise(self, pid: int, read: int, start: float, timeout, cpu_limit) -> dict:
        deadline = start + float(timeout or 1e9)
        cpu_limit = float(cpu_limit or 0.0)
        try:
            exited = os.pidfd_open(pid)
        except (AttributeError, OSError):
            exited = None  # then poll: the pipe's end proves nothing
        watch = [read, self.requests.fileno()] + ([exited] if exited is not None else [])
        buffer, timed_out, aborted, status, usage = b"", False, False, None, None
        try:
            while True:
                remaining = deadline - time.perf_counter()
                if remaining <= 0 or cpu_limit and procs.tree_cpu(pid) >= cpu_limit:
                    timed_out = True
                    break
                wait = min(remaining, TICK if cpu_limit or exited is None else 1.0)
                ready, _, _ = select.select(watch, [], [], wait)
                if read in ready:
                    chunk = os.read(read, 65536)
                    if chunk:
                        buffer += chunk
                    else:
                        watch.remove(read)
                if self.requests.fileno() in ready:  # stop, or the runner is gone
                    aborted = True
                    break
                if exited is not None:
                    if exited in ready:
                        break
                else:
                    done, status, usage = os.wait4(pid, os.WNOHANG)
                    if done:
                        break
                    status = None
        finally:
            if exited is not None:
                os.close(exited)
        if timed_out or aborted:
            for kill in (os.killpg, os.kill):
                try:
                    kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        if status is None:
            _, status, usage = os.wait4(pid, 0)
        os.set_blocking(read, False)
        while True:  # what the child wrote before it ended is in the pipe now
            try:
                chunk = os.read(read, 65536)
            except (BlockingIOError, OSError):
                break
            if not chunk:
                break
            buffer += chunk
        cpu = usage.ru_utime + usage.ru_stime
        if cpu_limit and cpu >= cpu_limit:
            timed_out = True  # over it as it ended, between two readings: the same verdict
        events = json_lines(buffer)
        return {"exit": os.waitstatus_to_exitcode(status), "timeout": timed_out,
                "aborted": aborted, "events": events,
                "seconds": time.perf_counter() - start, "cpu": cpu}

    def child(self, request: dict) -> int:
        if request["op"] == "baseline":
            if self.audit.follow is not None:
                self.audit.follow.take_census()
            code = self.run_items(self.items, trace=True)
            self.emit({"imported": self._project_files()})
            self.emit({"census": self._census()})
            return code
        if request["op"] == "readers":  # which tests read these functions' annotations
            watch = readers.Watch(readers.by_key(self.swap.functions)
                                  if self.swap is not None else {}, request["keys"])
            self.emit({"watched": watch.keys})
            return self.run_items(self.items, trace=False, watch=watch)
        wanted = request.get("tests")
        if self.audit.follow is not None:  # the processes its tests start import the mutant
            self.audit.follow.serve(request["source"])
        if request["mode"] in ("swap", "annotate"):
            applied = self.swap is not None and (
                self._swap(request["source"]) if request["mode"] == "swap"
                else self._annotate(request["source"], request.get("annotations") or []))
            if not applied:
                self.emit({"fallback": "reload"})
                return self.reload(request)
            chosen = set(wanted) if wanted is not None else None
            items = [item for item in self.items if chosen is None or item.nodeid in chosen]
            if items:  # a failure is a verdict here, never read: formatting its traceback
                # (source lookups, inspect.getmodule) cost ~50 ms a failing test
                items[0].config.option.tbstyle = "no"
            return self.run_items(items, trace=False, first=not request.get("every"))
        return self.reload(request)

    def _census(self) -> dict:
        """Whose annotations the baseline left unread (coral_core.mutation.annotations), and
        (`watchable`) those read whose readers a `readers` run may find (readers.py):
        none is known where the module's live code is not what its text compiles to
        (an import hook such as typeguard's may evaluate annotations in the code), or where
        the project's own pytest hooks run after the last test (this child ends before)."""
        filename = getattr(self.module, "__file__", None)
        census = probe.annotation_census(lambda f: f == filename) if filename else None
        if census is None or self.swap is None:
            return {"untouched": [], "touched": [], "watchable": []}
        untouched, touched = census
        late = ("pytest_sessionfinish", "pytest_terminal_summary", "pytest_unconfigure")
        config = self.items[0].config if self.items else None
        plugins = config.pluginmanager.get_plugins() if config is not None else ()
        watchable = touched
        if any(self._inside(getattr(plugin, "__file__", None)) and any(
                hasattr(plugin, hook) for hook in late) for plugin in plugins):
            untouched = watchable = []
        rebuilt = self.swap.rebuilt
        return {"untouched": [k for k in untouched if tuple(k) not in rebuilt],
                "touched": touched,
                "watchable": [k for k in watchable if tuple(k) not in rebuilt]}

    def _inside(self, path: str | None) -> str | None:
        """`path` relative to the project, or None outside it (a virtual environment inside
        the project counts as outside: installed code is not the project's)."""
        if not path:
            return None
        real = os.path.realpath(path)
        if not real.startswith(self.project + os.sep) or real.startswith(self.installed):
            return None
        return os.path.relpath(real, self.project)

    @functools.cached_property
    def installed(self) -> tuple[str, ...]:
        """The folders of installed code inside the project (a virtual environment there)."""
        roots = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, *sys.path)
                 if p and (p in (sys.prefix, sys.base_prefix) or "site-packages" in p)}
        return tuple(sorted(r + os.sep for r in roots if r.startswith(self.project + os.sep)))

    def _test_files(self, item) -> list[str] | None:
        """The files a test's code comes from: its own, the file of its function (a method
        inherited from a base class elsewhere) and those of its fixtures' functions; None
        when one of them lies outside the project (a verdict then is never reused)."""
        paths = [str(getattr(item, "path", None) or item.fspath)]
        function = getattr(item, "function", None)
        paths.append(getattr(getattr(function, "__code__", None), "co_filename", None))
        info = getattr(item, "_fixtureinfo", None)
        for definitions in getattr(info, "name2fixturedefs", {}).values():
            for definition in definitions:
                code = getattr(getattr(definition, "func", None), "__code__", None)
                if code is not None:
                    paths.append(code.co_filename)
        found = [self._inside(path) for path in paths if path]
        if found and found[0] is None:
            return None
        return sorted({f for f in found if f is not None})

    def _project_files(self) -> list[str]:
        """The project's files that are imported now (besides the module under test): what
        an incremental run watches (coral_core.mutation.fingerprint)."""
        found = set()
        for module in list(sys.modules.values()):
            relative = self._inside(getattr(module, "__file__", None))
            if relative is not None and os.path.realpath(module.__file__) != self.module_path:
                found.add(relative)
        return sorted(found)

    def _swap(self, source: str) -> bool:
        """The mutant compiled under the warning filters that the import at collection had
        (`filterwarnings = error` turns a SyntaxWarning of the mutant into an import error,
        as in cosmic-ray's run); such a mutant is reloaded, to fail as that import does."""
        from _pytest.warnings import catch_warnings_for_item

        config = self.items[0].config if self.items else None
        if config is None:
            return self.swap.apply(source)
        try:
            with catch_warnings_for_item(config, ihook=config.hook, when="collect", item=None):
                return self.swap.apply(source)
        except Exception:  # noqa: B902 - a warning made an error: import it for real
            return False

    def _annotate(self, source: str, keys: list) -> bool:
        """Give the functions of `keys`, whose annotations alone the mutant changes (the
        plan found them), the annotations it gives them (readers.py); False where that
        cannot be done."""
        values = mutant_annotations(source, {tuple(key) for key in keys}) if keys else None
        return values is not None and readers.annotate(
            readers.by_key(self.swap.functions), values)

    def run_items(self, items: list, trace: bool, first: bool = False,
                  watch: readers.Watch | None = None) -> int:
        """Run `items` through pytest's whole runtest protocol (its warning filters,
        logging, subtests and plugins apply as in a plain run); with `first`, stop at the
        first failing test, as `pytest -x` does; `watch`: note the watched annotations each
        test read, and whether it replaced them (readers.py)."""
        failed = False
        for index, item in enumerate(items):
            nextitem = items[index + 1] if index + 1 < len(items) else None
            tracer = _Lines(self.module_path) if trace else None
            begin, begin_cpu = time.perf_counter(), _cpu_tree()
            self.audit.test, self.audit.phase = item.nodeid, "start"
            self.failed = False
            if watch is not None:
                watch.take()
            if tracer:
                tracer.start()
            try:
                item.ihook.pytest_runtest_protocol(item=item, nextitem=nextitem)
            finally:
                if tracer:
                    tracer.stop()
            self.audit.phase = "between"
            bad = self.failed
            failed = failed or bad
            event = {"test": item.nodeid, "failed": bad,
                     "seconds": time.perf_counter() - begin,
                     "cpu": max(0.0, _cpu_tree() - begin_cpu)}
            if tracer:
                event["lines"] = sorted(tracer.lines)
            if watch is not None:
                event["read"], event["replaced"] = watch.take(), watch.replaced()
            self.emit(event)
            if bad and first:
                break
        return 1 if failed else 0

    def reload(self, request: dict) -> int:
        """A fresh pytest session on the mutant: the project's modules forgotten, the module's
        file served with the mutant's text, so everything imports as a new process would."""
        inmemory.forget(self.project)
        inmemory.install_finder(self.module_path, request["source"])
        inmemory.defer_rewriting(self.module_path)
        wanted = request.get("tests")
        args = list(self.pytest_args) if wanted is None else \
            [arg for arg in self.pytest_args if arg.startswith("-")] + list(wanted)
        recorder = _Recorder(self)
        extra = ([] if request.get("every") else ["-x"]) + ["--tb=no"]  # a verdict, unread
        self.audit.phase = "collect"  # until the first test: plugins' housekeeping is theirs
        code = pytest.main(args + ["-p", "no:cacheprovider"] + extra, plugins=[recorder])
        return int(code)

    def close(self) -> None:
        """The worker ends: every process its tests left goes, and its copy of the project
        (the runner removes it too, should the worker be killed)."""
        procs.kill_descendants(os.getpid())
        if self.scratch:
            remove_tree(self.scratch)


def _closer(fds: list[int]):
    """A function that closes `fds` where they are still these descriptors (by identity:
    in a forked process their numbers may have been reused since)."""
    known = []
    for fd in fds:
        info = os.fstat(fd)
        known.append((fd, info.st_dev, info.st_ino))

    def close() -> None:
        for fd, device, inode in known:
            try:
                info = os.fstat(fd)
                if (info.st_dev, info.st_ino) == (device, inode):
                    os.close(fd)
            except OSError:
                pass

    return close


def _audit_file() -> int:
    """An unnamed temporary file opened for appending: forked processes share it."""
    handle = tempfile.TemporaryFile()
    fd = os.dup(handle.fileno())
    handle.close()
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_APPEND)
    return fd


def main(argv: list[str]) -> int:
    module_path, requests, replies = argv[0], int(argv[1]), int(argv[2])
    pytest_args = json.loads(argv[3])
    scratch = argv[4] if len(argv) > 4 and argv[4] else None
    os.set_inheritable(requests, False)  # no process a test starts may hold the runner's pipes
    os.set_inheritable(replies, False)
    procs.set_subreaper()
    # Every process forked here (each mutant's child, a helper a test forks) loses the
    # runner's pipes: none may hold them open after this worker ends.
    os.register_at_fork(after_in_child=_closer([requests, replies]))
    audit = Audit(module_path, _audit_file())
    scratch = scratch or make_scratch(SCRATCH)
    hypothesis_runs.fresh_storage(os.path.join(scratch, "storage", "worker"))  # collection's
    worker = Worker(module_path, requests, replies, pytest_args, audit, scratch)
    # after the Worker kept the user's environment (the exact path's): the processes the
    # tests start from here on report what they run (follow.py)
    audit.follow = follow.Follow(module_path, scratch)
    audit.follow.install(os.environ)
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    sys.dont_write_bytecode = True
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    # What the module sees of the command line is a `python -m pytest TESTS`'s, as in the
    # exact path (and `cosmic-ray exec`), not this worker's arguments.
    sys.argv = [os.path.join(os.path.dirname(pytest.__file__), "__main__.py"), *pytest_args]
    audit.install()
    audit.on = True
    worker.tracer.start()
    devnull = os.open(os.devnull, os.O_RDWR)
    saved = os.dup(1)
    os.dup2(devnull, 1)
    try:
        code = pytest.main(pytest_args + ["-p", "no:cacheprovider"], plugins=[worker])
    finally:
        worker.tracer.stop()
        audit.on = False
        os.dup2(saved, 1)
        worker.close()
    if int(code) not in (0,) and worker.module is None:
        _send(replies, {"error": "pytest", "exit": int(code)})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
