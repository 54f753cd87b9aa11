"""Can a test see the module's file on disk? An audit hook (sys.addaudithook) in the worker.

Coral's mutants live in memory; cosmic-ray's are written to the module's file. A test that
reads that file (open, `inspect.getsource`, `importlib.reload`, `runpy`, an import under
another name) or starts a process (which may import the module from disk) can tell them
apart, so its verdict under an in-memory mutant is not proven to be cosmic-ray's. The hook
notes each such event with the test and phase it happened in; the runner sends the mutants
those tests decide to the exact path (the mutant written into a copy of the project).

Events are appended to a file that forked processes share (a helper forked by a test that
later starts a process is seen too); opens during the worker's collection that are the
module's own first import are judged once collection ends (`judge`). A process that a
library starts before any test with no code of the project on its stack (a plugin reading
version control for its report) is a plugin's own business, not a test's.
"""

from __future__ import annotations

import json
import os
import sys
import types

from coral_plugins.evaluators.mutation.probe import patch_fork_exec

# Events that start a program (the program may import the module from its file).
PROCESS_EVENTS = frozenset({"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn",
                            "os.spawn", "pty.spawn", "os.startfile", "coral.started"})
# Events that change the module's file (or a folder above it) other than by opening it
# (os.replace raises os.rename), with how many of their first arguments are paths.
COPY_EVENTS = frozenset({"code.__new__", "marshal.dumps"})
CHANGE_EVENTS = {"os.rename": 2, "os.remove": 1, "os.truncate": 1, "os.link": 2,
                 "os.symlink": 2, "shutil.rmtree": 1, "shutil.move": 2}
IMPORT_FILE = "<frozen importlib._bootstrap>"
# Standard-library helpers that start fixed system tools (ldconfig, file, uname, ifconfig),
# which cannot import the module: a library calling them on import is not a test that sees
# the file.
TOOLS = ("ctypes/util.py", "platform.py", "uuid.py")


def _words(value, limit: int = 4) -> str:
    if isinstance(value, (list, tuple)):
        text = " ".join(os.fsdecode(v) if isinstance(v, (str, bytes)) else str(v)
                        for v in list(value)[:limit])
        return text + (" ..." if len(value) > limit else "")
    return (os.fsdecode(value) if isinstance(value, (str, bytes)) else str(value))[:80]


def _flags_mode(flags) -> str:
    """os.open's flags as open()'s mode letters: "w" where they write."""
    writes = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
    return "w" if isinstance(flags, int) and flags & writes else "r"


def json_lines(data: bytes) -> list:
    """The JSON values of `data`'s lines; a line cut short by a kill is skipped."""
    found = []
    for line in data.split(b"\n"):
        if line.strip():
            try:
                found.append(json.loads(line))
            except ValueError:
                pass
    return found


class Audit:
    """The hook: off until `on`; `test` and `phase` say what runs now."""

    def __init__(self, module_path: str, fd: int):
        self.path = os.path.realpath(module_path)
        folder, self.base = os.path.split(self.path)
        self.stem = self.base.rsplit(".", 1)[0] + "."
        self.cache = os.path.join(folder, "__pycache__")
        self.fd = fd
        self.owner = os.getpid()
        self.on = False
        self.follow = None  # follow.Follow: the processes a test starts report (follow.py)
        self._test = ""
        self.phase = "collect"
        self.pending: list[tuple[str, object]] = []
        self._busy = False
        self.stdlib = os.path.dirname(os.__file__) + os.sep
        self.warnings = os.path.realpath(sys.modules["warnings"].__file__)
        self.quiet: tuple[str, ...] = ()
        self.unimported = False  # not imported at collection: a test imports it first
        self.tools = {os.path.join(self.stdlib, name) for name in TOOLS}
        self.project = os.path.realpath(os.getcwd()) + os.sep
        self._own: dict[str, bool] = {}
        self.copied = False  # a copy of the module's code was made at collection

    def install(self) -> None:
        import _pytest
        import pluggy

        self.quiet = tuple(os.path.dirname(m.__file__) + os.sep for m in (_pytest, pluggy))
        sys.addaudithook(self)
        # multiprocessing's spawn and forkserver start Python with no audit event, and the
        # pid of what subprocess starts is what a followed process reports under
        patch_fork_exec(lambda args, pid: self(
            "coral.started", (args[0] if args else "?", pid)))

    @property
    def test(self) -> str:
        return self._test

    @test.setter
    def test(self, nodeid: str) -> None:
        """The test that runs now; the processes it starts report as its own."""
        self._test = nodeid
        if self.follow is not None:
            self.follow.set_test(nodeid)

    def __call__(self, event: str, args: tuple) -> None:
        if not self.on or self._busy:
            return
        if event == "open":
            if not isinstance(args[0], (str, bytes)):
                return
            name = os.path.basename(os.fsdecode(args[0]))
            if name != self.base and not (name.startswith(self.stem) and name.endswith(".pyc")):
                return
            self._busy = True
            try:
                # os.open gives no mode, but flags
                mode = args[1] if args[1] is not None else _flags_mode(args[2])
                self._open(os.fsdecode(args[0]), mode)
            finally:
                self._busy = False
        elif event in COPY_EVENTS:
            if self.phase == "collect" and not self.copied:
                self.copied = self._copies_code(event, args)
        elif event in CHANGE_EVENTS:  # rare: each path resolved
            self._busy = True
            try:
                for path in args[:CHANGE_EVENTS[event]]:
                    if isinstance(path, (str, bytes)):
                        real = os.path.realpath(os.fsdecode(path))
                        if real == self.path or self.path.startswith(real + os.sep):
                            self.report(f"wrote {self.base} on disk ({event})")
                            break
            finally:
                self._busy = False
        elif event in ("os.fork", "os.forkpty"):  # shares the mutant; its reads are unseen
            self.write({"test": self.test, "phase": self.phase, "fork": True})
        elif event in PROCESS_EVENTS:
            if event == "subprocess.Popen" and self.follow is not None \
                    and self.phase == "call":
                self.write({"test": self.test, "phase": self.phase, "popen": True})
                return  # its fork_exec (a pid to follow) or posix_spawn comes next
            self._busy = True
            try:
                frame, own = sys._getframe(1), False
                while frame is not None:
                    if frame.f_code.co_filename in self.tools:
                        return
                    own = own or self._project_code(frame.f_code.co_filename)
                    frame = frame.f_back
                if self.phase == "collect" and not own:
                    return  # a plugin's housekeeping before any test (pytest-benchmark's git)
                if event in ("subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn"):
                    what = _words(args[1])
                else:
                    what = _words(args[0])
                if event == "coral.started" and self.follow is not None \
                        and self.phase == "call":  # a test's own body: followed
                    self.write({"test": self.test, "phase": self.phase, "start": what,
                                "pid": args[1]})  # judged when the run ends (follow.py)
                else:
                    self.report(f"started a process ({what})")
            finally:
                self._busy = False

    def _copies_code(self, event: str, args: tuple) -> bool:
        """A copy of a function's code of the module made at import or collection: a
        `code.replace` (a code object built), or its bytes (`marshal.dumps`). A function
        later made from the copy runs the old code under an in-memory mutant."""
        if event == "code.__new__":
            filename, name = args[1], args[2]
        elif isinstance(args[0], types.CodeType):
            filename, name = args[0].co_filename, args[0].co_name
        else:
            return False
        if not isinstance(filename, str) or os.path.basename(filename) != self.base:
            return False
        self._busy = True
        try:
            return name != "<module>" and os.path.realpath(filename) == self.path
        finally:
            self._busy = False

    def _project_code(self, filename: str) -> bool:
        """Code of the project (its tests, conftest files, modules), not of a library
        installed in or beside it."""
        known = self._own.get(filename)
        if known is None:
            real = os.path.realpath(filename)  # "<frozen runpy>" is not a file of the project
            known = os.path.isabs(filename) and real.startswith(self.project) \
                and "site-packages" not in real and "dist-packages" not in real
            self._own[filename] = known
        return known

    def _open(self, path: str, mode) -> None:
        real = os.path.realpath(path)
        if real != self.path and os.path.dirname(real) != self.cache:
            return
        spec, inner, frame = None, None, sys._getframe(2)
        while frame is not None:
            code = frame.f_code
            if code.co_filename == IMPORT_FILE:
                if code.co_name == "_load_unlocked" and spec is None:
                    loading = frame.f_locals.get("spec")
                    origin = getattr(loading, "origin", None)
                    if isinstance(origin, str) and os.path.realpath(origin) == self.path:
                        spec = loading  # an import of the module's file
            elif os.path.realpath(code.co_filename) == self.warnings:
                return  # a warning's source line, shown or recorded
            elif inner is None and not code.co_filename.startswith(self.stdlib) \
                    and not code.co_filename.startswith("<"):
                inner = code.co_filename
            frame = frame.f_back
        if inner is not None and inner.startswith(self.quiet):
            return  # pytest's own report of a failure quotes the source
        verb = "wrote" if any(c in str(mode or "") for c in "wax+") else "read"
        self.report(f"{verb} {self.base} from disk", spec)

    def report(self, why: str, spec=None) -> None:
        if spec is not None and self.unimported:
            return  # the module's first import, in a test: a reloaded mutant serves it
        if spec is not None and self.phase == "collect" and os.getpid() == self.owner:
            self.pending.append((why, spec))  # perhaps the module's own import: judge()
            return
        self.write({"test": self.test, "phase": self.phase, "why": why})

    def write(self, event: dict) -> None:
        try:
            os.write(self.fd, (json.dumps(event) + "\n").encode())
        except OSError:
            pass

    def judge(self, module) -> list[str]:
        """After collection: the imports of the module's file other than its own import."""
        own = getattr(module, "__spec__", None)
        found = [f"{why} (imported again: under another name, or afresh)"
                 for why, spec in self.pending if spec is not own]
        self.pending = []
        return found

    def since(self, offset: int) -> list[dict]:
        """The events written after `offset` (a file position)."""
        end = os.fstat(self.fd).st_size
        data = os.pread(self.fd, max(0, end - offset), offset) if end > offset else b""
        return json_lines(data)

    def offset(self) -> int:
        return os.fstat(self.fd).st_size
