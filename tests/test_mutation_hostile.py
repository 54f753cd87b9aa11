"""`coral mutation run` against hostile test suites (issue "Every input is hostile, round
three", item 3): tests that see the module's file on disk (a subprocess, a reload, its source
read) get cosmic-ray's verdicts through the exact path; a helper that a test forks, holding
the worker's descriptors, neither hangs the run nor invents a timeout; no process that a test
starts outlives the run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("cosmic_ray")

from test_mutation import BIN, MODULE, TESTS, coral, project, verdicts  # noqa: E402

# Two functions: `add` is what the hostile test checks (through the disk), `mul` an ordinary
# in-process test checks (so a run mixes in-memory and exact mutants). 22 mutants, of which
# the runs on it take six (SIX): `a + b` -> `a - b`, `a // b` (killed), `a * b`, `a ** b`
# (survivors: add(2, 2) hides them); `a * b` -> `a + b`, `a - b` (killed). The other 16 give
# those verdicts again, each at the cost of a pytest start where it runs the exact way (and
# in cosmic-ray, the oracle, always).
ARITH = '''def add(a, b):
    return a + b


def mul(a, b):
    return a * b
'''
SIX = r"core/(?!ReplaceBinaryOperator_(Add_(Sub|FloorDiv|Mul|Pow)|Mul_(Add|Sub))$)"
HEAD = '''import importlib
import inspect
import os
import runpy
import subprocess
import sys

import pytest

import calc


def test_mul():
    assert calc.mul(2, 3) == 6

'''
# The same assertion on `add`, in process: Coral's in-memory verdicts on it are cosmic-ray's
# (the 97-mutant parity test in test_mutation.py), so a hostile twin must give the same.
BENIGN = HEAD + '''
def test_add():
    assert calc.add(2, 2) == 4
'''
SEEING = {  # each checks add(2, 2) == 4 where only the file on disk can tell
    "subprocess": '''
def test_add():
    out = subprocess.run([sys.executable, "-c", "import calc; print(calc.add(2, 2))"],
                         capture_output=True, text=True, cwd=os.path.dirname(calc.__file__))
    assert out.stdout.strip() == "4"
''',
    "reload": '''
def test_add():
    importlib.reload(calc)
    assert calc.add(2, 2) == 4
''',
    "source": '''
def test_add():
    with open(calc.__file__) as handle:
        namespace = {}
        exec(handle.read(), namespace)
    assert namespace["add"](2, 2) == 4
''',
    "python_m": '''
def test_add(tmp_path):
    (tmp_path / "run_add.py").write_text("from calc import add\\nassert add(2, 2) == 4\\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(calc.__file__))
    assert subprocess.call([sys.executable, "-m", "run_add"], cwd=tmp_path, env=env) == 0
''',
    "runpy": '''
def test_add():
    assert runpy.run_path(calc.__file__)["add"](2, 2) == 4
''',
    "getsource": '''
def test_add():
    namespace = {}
    exec(inspect.getsource(calc.add), namespace)
    assert namespace["add"](2, 2) == 4
''',
    "other_name_at_collection": '''
import importlib.util

SPEC = importlib.util.spec_from_file_location("calc_again", calc.__file__)
AGAIN = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(AGAIN)


def test_add():
    assert AGAIN.add(2, 2) == 4
''',
    "spawn": '''
def check():
    assert calc.add(2, 2) == 4


def test_add():
    import multiprocessing

    process = multiprocessing.get_context("spawn").Process(target=check)
    process.start()
    process.join()
    assert process.exitcode == 0
''',
    "grandchild": '''
def test_add():  # Python starting Python: both followed, both import the mutant
    inner = "import calc; print(calc.add(2, 2))"
    outer = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {inner!r}])"
    out = subprocess.run([sys.executable, "-c", outer], capture_output=True, text=True,
                         cwd=os.path.dirname(calc.__file__))
    assert out.stdout.strip() == "4"
''',
    "at_collection": '''
PRINTED = subprocess.run([sys.executable, "-c", "import calc; print(calc.add(2, 2))"],
                         capture_output=True, text=True,
                         cwd=os.path.dirname(calc.__file__)).stdout  # at import: every test


def test_add():
    assert PRINTED.strip() == "4"
''',
    "fixture": '''
@pytest.fixture(scope="module")
def printed():
    return subprocess.run([sys.executable, "-c", "import calc; print(calc.add(2, 2))"],
                          capture_output=True, text=True).stdout


def test_add(printed):
    assert printed.strip() == "4"
''',
    "reads_in_a_subprocess": '''
def test_add():  # a followed process that reads the file: not followed after all
    code = "import calc; ns = {}; exec(open(calc.__file__).read(), ns); print(ns['add'](2, 2))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=os.path.dirname(calc.__file__))
    assert out.stdout.strip() == "4"
''',
    "python_without_env": '''
def test_add():  # -E: no PYTHONPATH, so no probe: a process it cannot follow
    out = subprocess.run([sys.executable, "-E", "-c", "import calc; print(calc.add(2, 2))"],
                         capture_output=True, text=True, cwd=os.path.dirname(calc.__file__))
    assert out.stdout.strip() == "4"
''',
    "through_a_shell": '''
def test_add():  # a shell between: a program the probe cannot follow
    out = subprocess.run(f"{sys.executable} -c 'import calc; print(calc.add(2, 2))'",
                         shell=True, capture_output=True, text=True,
                         cwd=os.path.dirname(calc.__file__))
    assert out.stdout.strip() == "4"
''',
    "only_under_a_mutant": '''
def test_add():  # the disk is seen only when a mutant changes add: the mutant's own run
    if calc.add(2, 2) != 4:
        out = subprocess.run([sys.executable, "-c", "import calc; print(calc.add(2, 2))"],
                             capture_output=True, text=True,
                             cwd=os.path.dirname(calc.__file__))
        assert out.stdout.strip() == "4"
''',
}


def run_coral(root: Path, *extra: str) -> subprocess.CompletedProcess:
    return coral(root, "mutation", "run", "--module", "calc.py", "--tests", "test_calc.py",
                 "--session", "s.sqlite", "--workers", "2", *extra)


def run_six(root: Path, *extra: str) -> subprocess.CompletedProcess:
    """`run_coral` on ARITH's six mutants (SIX)."""
    return run_coral(root, "--exclude-operator", SIX, *extra)


def ran(session: Path) -> dict:
    """The verdicts of the mutants that ran (not those a filter left out)."""
    return {key: verdict for key, verdict in verdicts(session).items() if verdict != "skipped"}


def cosmic_ray(root: Path, skip: str = "") -> dict:
    """cosmic-ray's own `init` + `exec` (the oracle, as in the parity test). Operators that
    `skip` (a regular expression) matches are left to its own operators filter: they are
    not run (each costs a pytest start) and are not among the verdicts returned."""
    (root / "cr.toml").write_text(
        '[cosmic-ray]\nmodule-path = "calc.py"\ntimeout = 30.0\nexcluded-modules = []\n'
        f'test-command = "env PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {sys.executable} -m pytest'
        ' -x -q -p no:cacheprovider test_calc.py"\n'
        '[cosmic-ray.distributor]\nname = "local"\n'
        f'[cosmic-ray.filters.operators-filter]\nexclude-operators = {json.dumps([skip])}\n')
    cosmic = str(BIN / "cosmic-ray")
    subprocess.run([cosmic, "init", "cr.toml", "cr.sqlite"], cwd=root, check=True)
    if skip:
        subprocess.run([str(BIN / "cr-filter-operators"), "cr.sqlite", "cr.toml"], cwd=root,
                       check=True)
    subprocess.run([cosmic, "exec", "cr.toml", "cr.sqlite"], cwd=root, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return {key: verdict for key, verdict in verdicts(root / "cr.sqlite").items()
            if verdict != "skipped"}


@pytest.fixture(scope="module")
def benign(tmp_path_factory) -> dict:
    root = project(tmp_path_factory.mktemp("benign"), ARITH, BENIGN)
    done = run_six(root, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["exact"] == 0  # nothing in it sees the disk
    found = ran(root / "s.sqlite")
    assert sorted(found.values()) == ["killed"] * 4 + ["survived"] * 2
    return found


@pytest.mark.parametrize("kind", ["subprocess", "reload", "source"])
def test_tests_that_see_the_file_get_cosmic_rays_kills(tmp_path, kind):
    """Mutants lived only in memory: a test that ran the module in a subprocess, reloaded
    it or read its source saw the original, so `a + b -> a - b` survived. The audit hook
    sees such a test, and the mutants it decides are written into a copy of the project."""
    ours = project(tmp_path / "ours", ARITH, HEAD + SEEING[kind])
    theirs = project(tmp_path / "theirs", ARITH, HEAD + SEEING[kind])
    expected = cosmic_ray(theirs, skip=SIX)
    done = run_six(ours, "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert ran(ours / "s.sqlite") == expected
    killed = sum(1 for verdict in expected.values() if verdict == "killed")
    assert summary["counts"]["killed"] == killed == 4  # of 6: add(2, 2) hides * and **
    if kind == "subprocess":  # a Python process, followed: it imports the mutant
        assert summary["exact"] == 0
        assert summary["followed_tests"] == ["test_calc.py::test_add"]
    else:
        assert summary["exact"] >= 4  # every mutant of add
        assert any("test_calc.py::test_add" in why for why in summary["exact_reasons"])
        assert {row["mode"] for row in summary["mutants"]} >= {"exact", "swap"}
    assert (ours / "calc.py").read_text() == ARITH  # the user's file is never written


FOLLOWED = {"only_under_a_mutant", "grandchild"}  # Python processes the probe follows


@pytest.mark.parametrize("kind", ["python_m", "runpy", "getsource", "other_name_at_collection",
                                  "spawn", "fixture", "at_collection", "only_under_a_mutant",
                                  "grandchild",
                                  "reads_in_a_subprocess", "python_without_env",
                                  "through_a_shell"])
def test_every_way_of_seeing_the_file_is_caught(tmp_path, kind, benign):
    """More ways to see the file (python -m with a PYTHONPATH of its own, runpy,
    inspect.getsource, an import under another name at collection, multiprocessing's spawn,
    a fixture, a subprocess started only when a mutant changes the result, a process that
    reads the file, `python -E`, a shell): each gets the verdicts of the same assertion made
    in process. Python processes that the probe follows import the mutant (no exact run);
    every other way takes the exact path, and the terminal says how many mutants did."""
    root = project(tmp_path, ARITH, HEAD + SEEING[kind])
    done = run_six(root)
    assert done.returncode == 0, done.stderr
    assert ran(root / "s.sqlite") == benign
    if kind in FOLLOWED:
        assert "mutants ran the exact way" not in done.stdout, done.stdout
    else:
        assert "mutants ran the exact way" in done.stdout, done.stdout


def _alive(pid: int) -> str | None:
    """The command line of a live, non-zombie process, else None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            if handle.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                return None
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None


def _with(marker: str) -> list[int]:
    """Live processes whose command line holds `marker`."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            line = _alive(int(name))
            if line and marker in line:
                found.append(int(name))
    return found


def _inside(folder: Path) -> list[int]:
    """Live processes working in `folder` (a worker, or what a test started there)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                cwd = os.readlink(f"/proc/{name}/cwd")
            except OSError:
                continue
            if (cwd == str(folder) or cwd.startswith(f"{folder}/")) and _alive(int(name)):
                found.append(int(name))
    return found


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@pytest.mark.loaded
def test_a_forked_helper_holding_the_pipe_changes_nothing(tmp_path):
    """A test forked a helper that slept 25 s holding the child's inherited result pipe: the
    worker waited for the pipe's end, so the mutant was "killed (timeout)" (a score of 100
    where pytest passes every test) and the run took minutes. The worker now learns of the
    child's end from the child (a pidfd) and kills what it left: the verdicts are plain
    pytest's, no mutant waits for the helper, and no helper is left."""
    pids = tmp_path / "pids"
    pids.mkdir()
    helper = f'''

import os
import time


def test_helper():
    pid = os.fork()
    if pid == 0:  # holds every descriptor the test's process had, the result pipe included
        with open(os.path.join({str(pids)!r}, str(os.getpid())), "w"):
            pass
        time.sleep(25)
        os._exit(0)
    assert clamp(50) == 10
'''
    plain = project(tmp_path / "plain", MODULE, TESTS)
    # first in the file: each mutant's run stops at its first failing test (`pytest -x`)
    forking = project(tmp_path / "forking", MODULE, helper + TESTS)
    try:
        done = run_coral(forking, "--json")
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        left = [int(p.name) for p in pids.iterdir() if _alive(int(p.name))]
        assert not left, f"helpers still alive: {left}"
    finally:
        _kill([int(p.name) for p in pids.iterdir()])
    assert len(list(pids.iterdir())) > 5  # the baseline and many mutants forked one
    reference = run_coral(plain, "--json")
    assert reference.returncode == 0, reference.stderr
    expected = json.loads(reference.stdout)
    assert verdicts(forking / "s.sqlite") == verdicts(plain / "s.sqlite")
    assert summary["counts"]["timeout"] == expected["counts"]["timeout"]  # none invented
    assert summary["mutation_score"] == expected["mutation_score"] < 100
    waited = [row for row in summary["mutants"] if row["detail"] != "timeout"
              and row["seconds"] >= 25]
    assert not waited  # a mutant that waited for the helper took its 25 s at least
    assert summary["exact"] == 0  # a fork sees the memory: the in-memory path stays


@pytest.mark.loaded
def test_no_process_a_test_starts_outlives_the_run(tmp_path):
    """A test that left `sleep` running in the background (12 processes after the run),
    whichever way: Popen in a new session, a shell's `&`, nohup, setsid, a daemon that
    forks twice. The worker is their subreaper and kills them as each mutant's run ends; a
    worker whose runner is gone ends too."""
    marker = f"1000.{uuid.uuid4().int % 10 ** 8:08d}"  # `sleep 1000.xxx` is 1000 s
    daemon = ("import os, sys, time\nif os.fork() == 0:\n    os.setsid()\n"
              "    if os.fork() == 0:\n        time.sleep(1000)\n")
    starts = f'''

import os
import subprocess
import sys
import time


def test_background():
    subprocess.Popen(["sleep", "{marker}"], start_new_session=True)
    os.system("sleep {marker} &")
    os.system("nohup sleep {marker} >/dev/null 2>&1 &")
    os.system("setsid sleep {marker} &")
    subprocess.Popen([sys.executable, "-c", {daemon!r}, "{marker}"])
    time.sleep(0.2)
    assert count_up(2) == 2
'''
    root = project(tmp_path, MODULE, TESTS + starts)
    try:
        done = run_coral(root, "--json")
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        assert summary["completed"] == summary["mutation_num"]
        assert not _with(marker), "processes left after the run"
        assert not _inside(root), "processes left after the run"
        # the runner killed with -9 mid-run: its workers end, and what their tests started
        process = subprocess.Popen(
            [sys.executable, "-m", "coral_cli.app", "mutation", "run", "--module", "calc.py",
             "--tests", "test_calc.py", "--session", "k.sqlite", "--workers", "2"],
            cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 120
            while not _with(marker) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert _with(marker)
        finally:
            process.kill()
            process.wait()
        deadline = time.monotonic() + 60
        while (_with(marker) or _inside(root)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _with(marker) and not _inside(root), "left after the runner was killed"
    finally:
        _kill(_with(marker))


WRITES = {  # ways a test changes the module's file (red-team passes found each unseen)
    "open": '''with open(calc.__file__, "a") as handle:
            handle.write("\\nBROKEN = 1 / 0\\n")''',
    "os_open": '''fd = os.open(calc.__file__, os.O_WRONLY | os.O_APPEND)
        os.write(fd, b"\\nBROKEN = 1 / 0\\n")
        os.close(fd)''',
    "replace": '''with open(calc.__file__ + ".new", "w") as handle:
            handle.write("BROKEN = 1 / 0\\n")
        os.replace(calc.__file__ + ".new", calc.__file__)''',
    "link": '''os.remove(calc.__file__)
        os.symlink(VICTIM, calc.__file__)''',
}


@pytest.mark.parametrize("kind", sorted(WRITES))
def test_a_test_that_writes_the_module_leaves_the_users_file_as_it_was(tmp_path, kind):
    """A red-team pass: a test that appends to `calc.__file__` when the answer is wrong (so
    only under a mutant) left `BROKEN = 1/0` in the user's source, which Coral never
    writes; later ones did it with os.open, os.replace, and a link in its place to a file
    outside the project (which putting it back must not write through). Its verdicts still
    come the exact way; the file is put back after each run."""
    victim = tmp_path / "victim.txt"
    victim.write_text("not the project's\n")
    writes = f'''import os

import calc
from calc import count_up

VICTIM = {str(victim)!r}


def test_writes():  # first: under a mutant the first failing test ends the run (-x)
    if count_up(2) != 2:
        {WRITES[kind]}
    assert count_up(2) == 2


'''
    root = project(tmp_path / "project", MODULE, writes + TESTS)
    done = run_coral(root, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["exact"] > 0  # the writes were seen: exact verdicts
    assert not (root / "calc.py").is_symlink() and (root / "calc.py").read_text() == MODULE
    assert victim.read_text() == "not the project's\n"
    assert "it is put back as it was" in done.stderr
    assert not [p for p in root.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("layout", ["big_file", "linked_folder", "linked_file"])
def test_mutants_never_reach_the_users_file_through_a_link(tmp_path, layout):
    """A red-team pass: the copy linked files over 8 MiB to the original, and the exact path
    wrote each mutant into the user's module through that link (a kill mid-run left one
    there). A module reached through a linked folder or file lies outside the project and
    is refused. The original is never written: its mtime does not move."""
    module = ARITH + ("# " + "x" * (9 << 20) + "\n" if layout == "big_file" else "")
    root = project(tmp_path / "project", ARITH, HEAD + SEEING["reload"])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "calc.py").write_text(module)
    if layout == "big_file":
        (root / "calc.py").write_text(module)
        original = root / "calc.py"
    elif layout == "linked_folder":
        (root / "calc.py").unlink()
        (root / "lib").symlink_to(elsewhere)
        (root / "conftest.py").write_text("import os, sys\n"
                                          "sys.path.insert(0, os.path.abspath('lib'))\n")
        original = elsewhere / "calc.py"
    else:
        (root / "calc.py").unlink()
        (root / "calc.py").symlink_to(elsewhere / "calc.py")
        original = elsewhere / "calc.py"
    before = original.stat().st_mtime_ns
    module_arg = "lib/calc.py" if layout == "linked_folder" else "calc.py"
    done = coral(root, "mutation", "run", "--module", module_arg, "--tests", "test_calc.py",
                 "--session", "s.sqlite", "--workers", "2", "--operator",
                 "core/ReplaceBinaryOperator_Add_(Sub|Mul)$", "--json")
    if layout == "big_file":
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        assert summary["exact"] > 0 and summary["counts"]["killed"] > 0, summary
    else:  # a module that lives outside the project is not the project's to mutate
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
        assert "is outside the project folder" in done.stderr
    assert original.read_text() == module
    assert original.stat().st_mtime_ns == before


def test_a_test_that_kills_its_runner_in_the_baseline_is_one_line(tmp_path):
    """A red-team pass: a test that kills the process running it (on the unmutated code)
    was a WorkerDied traceback, exit 1, and left a session that a rerun called taken."""
    kills = '''

import os
import signal


def test_kills():
    os.kill(os.getppid(), signal.SIGKILL)
'''
    root = project(tmp_path, MODULE, TESTS + kills)
    done = run_coral(root)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "coral: error: the tests did not finish on the unmutated code: the mutation worker "
        "exited (does a test end or kill the process that runs it?)"]
    assert not (root / "s.sqlite").exists()


def test_a_session_is_never_a_file_found_in_a_tests_folder(tmp_path):
    """A red-team pass: `--session tests/test_later.py`, an empty test file found only by
    walking `--tests tests`, was overwritten with the session's SQLite database."""
    root = project(tmp_path, MODULE, "")
    (root / "tests").mkdir()
    (root / "test_calc.py").rename(root / "tests" / "test_calc.py")
    (root / "tests" / "test_calc.py").write_text(TESTS)
    (root / "tests" / "test_later.py").write_text("")
    done = coral(root, "mutation", "run", "--module", "calc.py", "--tests", "tests",
                 "--session", "tests/test_later.py")
    assert done.returncode == 2
    assert "is a file the run reads" in done.stderr
    assert (root / "tests" / "test_later.py").read_bytes() == b""


def test_lines_a_test_writes_onto_the_audit_pipe_are_named_and_change_no_verdict(tmp_path,
                                                                                 benign):
    """A red-team pass: a test that wrote JSON onto every inherited descriptor reached the
    audit hook's pipe; every mutant then ran the exact way (right) for an empty reason."""
    junk = BENIGN.replace("def test_add():", '''def test_add():
    for fd in range(3, 256):
        try:
            os.write(fd, b'{"garbage": 1}\\n')
        except OSError:
            pass''')
    root = project(tmp_path, ARITH, junk)
    done = run_six(root, "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["exact"] == len(benign)
    assert any("something a test wrote onto the audit hook's pipe" in reason
               for reason in summary["exact_reasons"]), summary["exact_reasons"]
    assert ran(root / "s.sqlite") == benign


COPIES = {  # a copy of add's code made when the tests are collected, used in the test
    "replace": '''import types

ALIAS = types.FunctionType(calc.add.__code__.replace(co_name="alias"), calc.__dict__)


def test_add():
    assert ALIAS(2, 2) == 4
''',
    "held": '''import types

ADD_CODE = calc.add.__code__


def test_add():
    assert types.FunctionType(ADD_CODE, calc.__dict__)(2, 2) == 4
''',
    "marshal": '''import marshal
import types

ADD_BYTES = marshal.dumps(calc.add.__code__)


def test_add():
    assert types.FunctionType(marshal.loads(ADD_BYTES), calc.__dict__)(2, 2) == 4
''',
}


@pytest.mark.parametrize("kind", sorted(COPIES))
def test_copies_of_the_code_made_at_collection_change_no_verdict(tmp_path, kind, benign):
    """A red-team pass: a function made from a copy of add's code taken at collection
    (`code.replace`, the code object kept, its marshalled bytes) ran the old code under an
    in-memory swap, and every mutant of add 'survived'. Such a module's mutants reload:
    the verdicts are those of the same assertion made on calc.add itself."""
    root = project(tmp_path, ARITH, HEAD + COPIES[kind])
    done = run_six(root, "--json")
    assert done.returncode == 0, done.stderr
    assert ran(root / "s.sqlite") == benign
    modes = {row["mode"] for row in json.loads(done.stdout)["mutants"] if row["line"] == 2}
    assert modes == {"reload"}, modes  # add's; mul's may swap where only add's code is held


@pytest.mark.parametrize("link", ["alias.py", "pkg"])
def test_a_module_a_link_in_the_project_reaches_is_refused(tmp_path, link):
    """A red-team pass: tests that imported the module through a link (`mod.py ->
    real.py`) ran code Coral neither traced nor swapped: every mutant survived. A link to
    the module, or to a folder above it, is one line and exit status 2, before any work."""
    root = project(tmp_path, ARITH, BENIGN)
    if link == "pkg":
        (root / "real").mkdir()
        (root / "calc.py").rename(root / "real" / "calc.py")
        (root / "pkg").symlink_to(root / "real")
        module = "real/calc.py"
    else:
        (root / link).symlink_to(root / "calc.py")
        module = "calc.py"
    done = coral(root, "mutation", "run", "--module", module, "--tests", "test_calc.py",
                 "--session", "s.sqlite", "--workers", "1")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert f"{link} is a link to" in done.stderr and not (root / "s.sqlite").exists()
