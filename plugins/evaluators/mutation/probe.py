"""What a Python process that a test starts does with the module under test.

The mutation worker copies this file as `sitecustomize.py` into a folder it puts first on
the PYTHONPATH of the processes its tests start (follow.py), so every Python program a test
runs, and every one those run, reports when it ends: which lines of the module it ran, the
processes it started (by pid), and whether it did anything this cannot vouch for (read the
module's file other than by importing it, started a program some other way, forked, or had
its tracer replaced). A process that never reports (not Python, started with -S/-I/-E, ended
by os._exit or a signal) cannot be vouched for either: the worker counts what it expected.

Standard library only, and nothing of it stays on sys.path: the program sees the path, and
the environment's own sitecustomize, it would have had.
"""

import importlib.abc
import importlib.machinery
import json
import os
import sys

VARIABLE = "CORAL_MUTATION_PROBE"
# Ways of starting a program that report no pid to follow (subprocess's fork_exec does).
OPAQUE = frozenset({"os.system", "os.exec", "os.spawn", "os.posix_spawn", "pty.spawn",
                    "os.fork", "os.forkpty", "os.startfile"})
IMPORTING = "<frozen importlib._bootstrap"


def found_elsewhere(me, fullname, path=None, target=None):
    """The spec the other meta path finders (path entries, editable installs) give, as if
    `me` were not there: a finder that changes where or how a module loads asks them."""
    for finder in sys.meta_path:
        if finder is me or not hasattr(finder, "find_spec"):
            continue
        spec = finder.find_spec(fullname, path, target)
        if spec is not None:
            return spec
    return None


class MutantLoader(importlib.machinery.SourceFileLoader):
    """Loads the module's file with the mutant's text, as if the file held it."""

    def __init__(self, fullname: str, path: str, source: str):
        super().__init__(fullname, path)
        self.mutant = source

    def get_source(self, fullname: str) -> str:
        return self.mutant

    def get_code(self, fullname: str):
        return compile(self.mutant, self.path, "exec", dont_inherit=True)


class MutantFinder(importlib.abc.MetaPathFinder):
    """Asks the other finders (path entries, editable installs) where a module lies; when it
    is the mutated file, its loader serves the mutant: in the worker's reload mode, and in
    every process a test starts under a mutant, as if cosmic-ray had written the file."""

    def __init__(self, path: str, source: str):
        self.path = os.path.realpath(path)
        self.source = source

    def find_spec(self, fullname, path=None, target=None):
        spec = found_elsewhere(self, fullname, path, target)
        if spec is not None and isinstance(spec.origin, str) \
                and os.path.realpath(spec.origin) == self.path:
            spec.loader = MutantLoader(fullname, spec.origin, self.source)
            spec.cached = None
        return spec


def patch_fork_exec(started) -> None:
    """Call `started(args, pid)` after each program subprocess or multiprocessing starts
    (their fork_exec gives the pid; no audit event does). subprocess keeps its own name for
    it (3.11); one imported later takes the patched one."""
    try:
        import _posixsubprocess
    except ImportError:
        return
    original = _posixsubprocess.fork_exec

    def fork_exec(*args, **kwargs):
        pid = original(*args, **kwargs)
        started(args, pid)
        return pid

    _posixsubprocess.fork_exec = fork_exec
    subprocess = sys.modules.get("subprocess")
    if getattr(subprocess, "_fork_exec", None) is original:
        subprocess._fork_exec = fork_exec


_OWN_FIELDS = ("__code__", "__globals__", "__builtins__", "__defaults__", "__kwdefaults__",
               "__closure__", "__name__", "__qualname__", "__doc__", "__module__", "__dict__")


CENSUS_VERSIONS = ((3, 10, 2), (3, 14))  # a tuple until read; 3.10.0-1's C API did not convert


def annotation_census(is_module) -> tuple[list, list] | None:
    """([name, first line] of each live function of the module (`is_module(co_filename)`)
    whose annotations nothing has read, [... of those read]): CPython keeps a function's
    annotations as a tuple until `__annotations__` is first read (3.10.2 to 3.13); the
    garbage collector's view of the function shows which, without reading it. None where
    that cannot be known (another Python)."""
    import gc
    import types

    untouched, touched = set(), set()
    if not CENSUS_VERSIONS[0] <= sys.version_info[:3] < CENSUS_VERSIONS[1]:
        return None
    for value in gc.get_objects():
        if not isinstance(value, types.FunctionType) or not is_module(
                value.__code__.co_filename):
            continue
        key = (value.__code__.co_name, value.__code__.co_firstlineno)
        state = annotations_state(value)
        if state == "read":
            touched.add(key)
        elif state == "unread":
            untouched.add(key)
    return sorted(untouched - touched), sorted(touched)


def annotations_state(function) -> str:
    """"read" (its `__annotations__` is a dict), "unread" (still the compiler's tuple) or ""
    (none kept), told by the garbage collector's view of it, which reads nothing (call
    only where annotation_census can tell: CENSUS_VERSIONS)."""
    import gc

    own = {id(getattr(function, name, None)) for name in _OWN_FIELDS}
    rest = [r for r in gc.get_referents(function) if id(r) not in own]
    if any(isinstance(r, dict) for r in rest):
        return "read"
    return "unread" if any(isinstance(r, tuple) for r in rest) else ""


def _touched(ours) -> list | None:
    """The module's functions whose annotations this process read; None when it cannot
    tell: another Python, or the module loaded by a loader other than the plain source
    loader (an import hook may compile annotations into the code: typeguard's)."""
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and ours(path):
            loader = getattr(getattr(module, "__spec__", None), "loader", None)
            if type(loader) is not importlib.machinery.SourceFileLoader:
                return None
    census = annotation_census(ours)
    return None if census is None else census[1]


def _own_sitecustomize(here: str) -> None:
    """This folder off sys.path, then the sitecustomize that would have run (it takes this
    module's place in sys.modules, as if it had been imported instead)."""
    import importlib.util

    sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


def _follow(config: dict, serving: bool) -> list:
    """Trace and report this process (see the module's docstring); the list of troubles,
    for the caller to add to."""
    import atexit
    import threading

    module, test = config["module"], config["test"]
    folder, stem = os.path.split(module)
    stem = stem.rsplit(".", 1)[0] + "."
    cache = os.path.join(folder, "__pycache__")
    lines: set = set()
    started: list = []
    troubles: list = []
    known: dict = {}
    popens = [0]  # subprocess.Popen calls: each must come with a fork_exec (a pid)

    def ours(filename: str) -> bool:
        mine = known.get(filename)
        if mine is None:
            mine = known[filename] = bool(filename) and not filename.startswith("<") \
                and os.path.realpath(filename) == module
        return mine

    def local(frame, event, arg):
        if event == "line":
            lines.add(frame.f_lineno)
        return local

    def trace(frame, event, arg):
        if ours(frame.f_code.co_filename):
            lines.add(frame.f_lineno)
            return local
        return None

    def report() -> None:
        if sys.gettrace() is not trace:
            troubles.append("its tracer was replaced")
        if popens[0] > len(started):
            troubles.append("started a process without a pid to follow")
        data = {"test": test, "pid": os.getpid(), "lines": sorted(lines),
                "started": started, "troubles": troubles}
        if config.get("census"):  # the baseline: whose annotations it read (None: unknown)
            data["touched"] = _touched(ours)
        name = os.path.join(config["dir"], f"{os.getpid()}-{os.urandom(6).hex()}.json")
        try:
            with open(name + ".part", "w") as handle:
                json.dump(data, handle)
            os.replace(name + ".part", name)
        except OSError:
            pass  # no report: the worker counts this process as not followed

    def hook(event: str, args: tuple) -> None:
        if event == "open" and isinstance(args[0], (str, bytes)):
            path = os.path.realpath(os.fsdecode(args[0]))
            if path != module and not (os.path.dirname(path) == cache and os.path.basename(
                    path).startswith(stem)):
                return
            try:
                caller = sys._getframe(1).f_code
            except ValueError:  # no Python frame: run as a script, or a traceback's lines
                troubles.append(f"read {os.path.basename(module)} from disk (outside Python "
                                "code)")
                return
            if not serving and caller.co_name == "get_data" \
                    and caller.co_filename.startswith(IMPORTING):
                return  # its import (the mutant's loader never opens the file): traced
            troubles.append(f"read {os.path.basename(module)} from disk")
        elif event == "subprocess.Popen":
            popens[0] += 1
        elif event in OPAQUE:
            troubles.append(f"started a program that cannot be followed ({event})")
            if event == "os.exec":  # no exit to report at: say it now, under this pid
                report()

    patch_fork_exec(lambda args, pid: started.append(pid))
    sys.addaudithook(hook)
    atexit.register(report)
    threading.settrace(trace)
    sys.settrace(trace)
    return troubles


def _start() -> None:
    """Follow this process (a test started it), serve the mutant (under one), and in every
    case leave sys.path and the environment's own sitecustomize as they would have been."""
    try:
        try:
            config = json.loads(os.environ.get(VARIABLE) or "{}")
        except ValueError:
            config = {}
        serving = bool(config.get("mutant"))
        troubles = _follow(config, serving) if config.get("test") else []
        if serving:  # the mutant's text, served for the module's file
            try:
                with open(config["mutant"], encoding="utf-8") as handle:
                    sys.meta_path.insert(0, MutantFinder(config["module"], handle.read()))
            except OSError as error:  # this process would import the unmutated file
                troubles.append(f"could not read the mutant ({error.strerror})")
    finally:
        _own_sitecustomize(os.path.dirname(os.path.realpath(__file__)))


if __name__ == "sitecustomize":
    _start()
