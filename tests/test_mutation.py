"""`coral mutation run`: cosmic-ray's mutants and verdicts (checked against a real
`cosmic-ray exec`), a real WorkDB, resume after kill -9, and one-line errors."""

from __future__ import annotations

import json
import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import store_sql

pytest.importorskip("cosmic_ray")

BIN = Path(sys.executable).parent
CORAL = [sys.executable, "-m", "coral_cli.app"]

MODULE = '''\
LIMIT = 10


def clamp(x, high=LIMIT):
    if x > high:
        return high
    return x


def count_up(n):
    i = 0
    while i < n:
        i += 1
    return i


def unused(a):
    return -a
'''

TESTS = '''\
from calc import clamp, count_up


def test_clamp():
    assert clamp(50) == 10
    assert clamp(3) == 3


def test_count():
    assert count_up(3) == 3


def test_quiet():
    assert clamp(3) is not None
'''


# The parity module: 97 cosmic-ray mutants, among them one that never ends (`i += 0`:
# killed by timeout) and two incompetent ones: NumberReplacer on a 4,000-digit hex constant
# computes a number that Python will not turn into decimal text (more than 4,300 digits),
# so cosmic-ray's mutation machinery raises.
PARITY_MODULE = MODULE.replace("LIMIT = 10\n", "LIMIT = 10\nMASK = 0x" + "f" * 4000 + "\n") \
    .replace("def unused(a):", """def mean(values):
    total = 0
    for v in values:
        total = total + v
    return total / len(values)


def grade(score):
    if score >= 90:
        return "A"
    if score >= 75 and score < 90:
        return "B"
    return "C"


def is_even(n):
    return n % 2 == 0


def unused(a):""")
PARITY_TESTS = TESTS.replace("from calc import clamp, count_up",
                             "from calc import clamp, count_up, grade, is_even, mean") + \
    """

def test_mean():
    assert mean([2, 4]) == 3


def test_grade():
    assert grade(95) == "A"
    assert grade(80) == "B"
    assert grade(10) == "C"


def test_even():
    assert is_even(4)
    assert not is_even(3)
"""


def project(tmp_path: Path, module: str = MODULE, tests: str = TESTS) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "calc.py").write_text(module)
    (tmp_path / "test_calc.py").write_text(tests)
    return tmp_path


def coral(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(CORAL + list(args), cwd=cwd, capture_output=True, text=True,
                          env=dict(os.environ, **(env or {})), timeout=300)


def verdicts(path: Path) -> dict:
    from cosmic_ray.work_db import WorkDB, use_db

    with use_db(str(path), WorkDB.Mode.open) as db:
        return {(Path(i.mutations[0].module_path).name, i.mutations[0].operator_name,
                 i.mutations[0].occurrence): (r.test_outcome or r.worker_outcome).value
                for i, r in db.completed_work_items}


def test_verdicts_equal_cosmic_ray_exec(tmp_path):
    """cosmic-ray's own sequential run is the oracle, on 97 mutants (a timeout, two
    incompetent, survivors, uncovered and module-level ones). Its timeout is wall-clock
    for the whole test command (pytest's start-up included), so it is set well above what
    a busy machine needs (2 s failed beside CPU hogs: start-up alone took that); Coral's
    verdicts do not depend on load."""
    ours = project(tmp_path / "ours", PARITY_MODULE, PARITY_TESTS)
    theirs = project(tmp_path / "theirs", PARITY_MODULE, PARITY_TESTS)
    (theirs / "cr.toml").write_text(
        '[cosmic-ray]\nmodule-path = "calc.py"\ntimeout = 15.0\nexcluded-modules = []\n'
        # pytest's plugins (timeout, anyio) unloaded: half of each of 97 pytest starts
        f'test-command = "env PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {sys.executable} -m pytest'
        ' -x -q -p no:cacheprovider test_calc.py"\n'
        '[cosmic-ray.distributor]\nname = "local"\n')
    cosmic = str(BIN / "cosmic-ray")
    subprocess.run([cosmic, "init", "cr.toml", "cr.sqlite"], cwd=theirs, check=True)
    subprocess.run([cosmic, "exec", "cr.toml", "cr.sqlite"], cwd=theirs, check=True)
    done = coral(ours, "mutation", "run", "--module", "calc.py", "--tests", "test_calc.py",
                 "--session", "s.sqlite", "--workers", "2", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    expected, got = verdicts(theirs / "cr.sqlite"), verdicts(ours / "s.sqlite")
    assert got == expected and len(expected) >= 90
    assert summary["counts"]["incompetent"] == 2
    assert {row["line"] for row in summary["mutants"] if row["verdict"] == "incompetent"} == {2}
    modes = {row["mode"] for row in summary["mutants"]}
    assert {"swap", "reload", "uncovered"} <= modes  # every path is exercised
    assert summary["counts"]["timeout"] >= 1  # `i += 0` never ends: killed by timeout
    assert summary["counts"]["survived"] >= 1
    killed = summary["counts"]["killed"]
    assert summary["mutation_score"] == pytest.approx(
        100 * killed / (killed + summary["counts"]["survived"]), abs=1e-3)
    assert summary["mutation_num"] == len(expected)
    # the kill matrix: test_quiet kills nothing, the timeout names the test that hung
    assert summary["tests_killing_nothing"] == ["test_calc.py::test_quiet"]
    hung = [row for row in summary["mutants"] if row["detail"] == "timeout"]
    assert all(row["killed_by"] == ["test_calc.py::test_count"] for row in hung)
    # the file was never rewritten, and cosmic-ray's own tools read the session
    assert (ours / "calc.py").read_text() == PARITY_MODULE
    report = subprocess.run([str(BIN / "cr-report"), "s.sqlite"], cwd=ours,
                            capture_output=True, text=True, check=True).stdout
    assert f"complete: {len(expected)} (100.00%)" in report


SPIN_MODULE = "def work(seconds):\n    return seconds\n"
SPIN_TESTS = """import time
from calc import work


def test_spin():
    end = time.process_time() + work(0.01)
    while time.process_time() < end:
        pass


def test_sleep():
    time.sleep(work(0.01))
"""


def test_a_mutants_timeout_is_cpu_time_which_load_does_not_stretch(tmp_path):
    """A relative timeout was wall-clock time: a mutant within 10x its tests' baseline
    was killed as a timeout where a busy machine stretched it past that. It is CPU time
    now (with a long wall-clock limit for a mutant that waits), checked beside CPU hogs."""
    from coral_plugins.evaluators.mutation.workers import start_worker

    root = project(tmp_path, SPIN_MODULE, SPIN_TESTS)
    worker = start_worker(root / "calc.py", ["test_calc.py"], root)

    def mutant(factor: int, test: str, cpu_limit: float) -> dict:
        return worker.ask({"op": "mutant", "id": test, "mode": "swap",
                           "source": f"def work(seconds):\n    return seconds * {factor}\n",
                           "tests": [f"test_calc.py::{test}"],
                           "timeout": 60.0, "cpu_limit": cpu_limit})

    hogs = [subprocess.Popen([sys.executable, "-c", "while True:\n    pass\n"])
            for _ in range(2 * (os.cpu_count() or 1))]
    try:
        within = mutant(100, "test_spin", 2.0)  # 1 s of CPU: about 3 s of wall time here
        over = mutant(400, "test_spin", 2.0)  # 4 s of CPU: stopped at 2
        asleep = mutant(250, "test_sleep", 2.0)  # 2.5 s asleep, no CPU
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
        worker.close()
    assert within["exit"] == 0 and not within["timeout"], within
    assert 1.0 <= within["cpu"] < 2.0
    assert over["timeout"] and 2.0 <= over["cpu"] < 3.0, over
    assert asleep["exit"] == 0 and not asleep["timeout"] and asleep["seconds"] >= 2.5, asleep


def test_relative_limits_come_from_each_tests_cpu_time():
    from coral_core.mutation.plan import (MIN_TIMEOUT, RELATIVE_FACTOR,
                                          WALL_FLOOR, WALL_SLACK, make_plans)
    from cosmic_ray.work_item import MutationSpec, WorkItem

    source = "def f(x):\n    return x + 1\n"
    items = [WorkItem(job_id="j", mutations=(MutationSpec(
        module_path=Path("calc.py"), operator_name="core/ReplaceBinaryOperator_Add_Sub",
        occurrence=0, start_pos=(2, 11), end_pos=(2, 16)),))]
    baseline = {"t::a": {"seconds": 0.9, "cpu": 0.3, "lines": {2}},
                "t::b": {"seconds": 5.0, "cpu": 0.0, "lines": {2}}}  # b sleeps
    [plan] = make_plans(items, source, set(), baseline, "relative", 6.0)
    assert plan.mode == "swap" and plan.tests == ["t::a", "t::b"]
    assert plan.cpu_limit == pytest.approx(RELATIVE_FACTOR * 0.3)
    assert plan.timeout == max(WALL_FLOOR, WALL_SLACK * plan.cpu_limit + RELATIVE_FACTOR * 5.9)
    [seed] = make_plans(items, source, set(), baseline, "seed", 6.0)
    assert seed.cpu_limit == 0 and seed.timeout == 10.0
    baseline["t::a"]["cpu"] = 0.01
    [floor] = make_plans(items, source, set(), baseline, "relative", 6.0)
    assert floor.cpu_limit == MIN_TIMEOUT


def _kill_every_process_naming(text: str) -> None:
    """SIGKILL every process with `text` in its command line (as the OOM killer or a
    container's stop would), and wait until they are gone."""
    for _ in range(100):
        found = []
        for entry in Path("/proc").iterdir():
            try:
                if entry.name.isdigit() and text.encode() in (entry / "cmdline").read_bytes():
                    os.kill(int(entry.name), signal.SIGKILL)
                    found.append(entry.name)
            except OSError:
                pass
        if not found:
            return
        time.sleep(0.05)
    raise AssertionError(f"processes naming {text} outlived SIGKILL")


def test_resume_after_kill_redoes_nothing_finished(tmp_path):
    """...and the scratch folders of the killed run (its worker's copy of the project) are
    removed by the next run, which leaves none of its own."""
    root = project(tmp_path / "project")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {"TMPDIR": str(scratch)}
    args = CORAL + ["mutation", "run", "--module", "calc.py", "--tests", "test_calc.py",
                    "--session", "s.sqlite", "--workers", "1", "--json"]
    process = subprocess.Popen(args, cwd=root, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True,
                               env=dict(os.environ, **env))
    deadline = time.monotonic() + 120
    finished = 0
    while time.monotonic() < deadline and process.poll() is None:
        if (root / "s.sqlite").exists():
            try:
                finished = store_sql(root / "s.sqlite", "SELECT count(*) FROM work_results")[0][0]
            except sqlite3.Error:
                finished = 0
            if finished >= 3:
                break
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    _kill_every_process_naming(str(scratch))  # its worker too (in a session of its own)
    left = sorted(scratch.glob("coral-mutation-*"))
    assert left  # a killed process cannot clean up: what it left is the next run's to remove
    with sqlite3.connect(root / "s.sqlite") as db:
        before = dict(db.execute("SELECT job_id, seconds FROM coral_mutants WHERE job_id IN "
                                 "(SELECT job_id FROM work_results)"))
    assert before
    done = coral(root, "mutation", "run", "--module", "calc.py", "--tests", "test_calc.py",
                 "--session", "s.sqlite", "--resume", "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert list(scratch.glob("coral-*")) == []
    summary = json.loads(done.stdout)
    assert summary["completed"] == summary["mutation_num"]
    with sqlite3.connect(root / "s.sqlite") as db:
        after = dict(db.execute("SELECT job_id, seconds FROM coral_mutants"))
    assert {job: after[job] for job in before} == before  # finished ones were not redone
    fresh = coral(root, "mutation", "run", "--module", "calc.py", "--tests", "test_calc.py",
                  "--session", "fresh.sqlite", "--json")
    assert fresh.returncode == 0, fresh.stderr
    assert verdicts(root / "fresh.sqlite") == verdicts(root / "s.sqlite")


@pytest.mark.parametrize("module,tests,args,message", [
    ("import nonexistent_pkg\n" + MODULE, TESTS, (), "do not import"),
    (MODULE, TESTS.replace("== 10", "== 11"), (), "test_calc.py::test_clamp"),
    (MODULE, "def helper():\n    pass\n", (), "no tests collected"),
    (MODULE, TESTS, ("--module", "/etc/hostname"), "outside the project"),
    (MODULE, TESTS, ("--timeout-mode", "fast"), "--timeout-mode"),
    # a red-team pass: "pytest could not run the tests (exit status 4)", naming nothing
    (MODULE, TESTS, ("conftest",), "(exit status 4): E RuntimeError: boom in conftest"),
    (MODULE, TESTS, ("--module", "test_calc.py"), "is one of the tests (under --tests)"),
    (MODULE, TESTS, ("--session", "no/such/folder/s.sqlite"), "its folder does not exist"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, module, tests, args, message):
    root = project(tmp_path, module, tests)
    if args == ("conftest",):
        (root / "conftest.py").write_text("raise RuntimeError('boom in conftest')\n")
        args = ()
    argv = ["mutation", "run", "--module", "calc.py", "--tests", "test_calc.py"]
    if args and args[0] == "--module":
        argv[3] = args[1]
    elif args:
        argv += list(args)
    done = coral(root, *argv)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr
    assert (root / "calc.py").read_text() == module
    assert not list(root.glob("*.sqlite*"))  # a session refused before any verdict is gone


@pytest.mark.parametrize("head,ok", [
    (b"# -*- coding: latin-1 -*-\n# caf\xe9\n", True),  # Python's coding line, as cosmic-ray
    (b"\xef\xbb\xbf", True),  # a UTF-8 byte-order mark
    (b"# caf\xff\n", False),  # not UTF-8, and no coding line: once a 47-line traceback
])
def test_a_modules_encoding_is_pythons(tmp_path, head, ok):
    root = project(tmp_path)
    (root / "calc.py").write_bytes(head + MODULE.encode())
    done = coral(root, "mutation", "run", "--module", "calc.py", "--tests", "test_calc.py",
                 "--sample", "0.2", "--json")
    if ok:
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["mutation_num"] > 0
    else:
        assert done.returncode == 2
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "not text in the encoding it declares" in lines[0], \
            done.stderr


def test_bad_input_is_refused_before_anything_is_written(tmp_path):
    """A bad-input sweep: --resume with no session created an empty one; SKIP_MUTATION=true
    let a missing module through."""
    root = project(tmp_path)
    done = coral(root, "mutation", "run", "--module", "calc.py", "--tests", "test_calc.py",
                 "--session", "none.sqlite", "--resume")
    assert done.returncode == 2 and "no Coral mutation session" in done.stderr
    assert not (root / "none.sqlite").exists()
    done = coral(root, "mutation", "run", "--module", "nope.py", "--tests", "test_calc.py",
                 env={"SKIP_MUTATION": "true"})
    assert done.returncode == 2 and "nope.py" in done.stderr
    with sqlite3.connect(root / "mine.sqlite") as db:  # a user's own database
        db.execute("CREATE TABLE results (x)")
    done = coral(root, "mutation", "run", "--module", "calc.py", "--tests", "test_calc.py",
                 "--session", "mine.sqlite")
    assert done.returncode == 2 and "a database of something else" in done.stderr
    with sqlite3.connect(root / "mine.sqlite") as db:
        assert [r[0] for r in db.execute("SELECT name FROM sqlite_master")] == ["results"]
    with contextlib.closing(sqlite3.connect(root / "wal.sqlite")) as db:  # a run's store is
        db.execute("PRAGMA journal_mode=WAL")  # in WAL mode: reading it must leave nothing
        db.execute("CREATE TABLE meta (x)")
    done = coral(root, "mutation", "run", "--module", "calc.py", "--tests", "test_calc.py",
                 "--session", "wal.sqlite")
    assert done.returncode == 2 and "a database of something else" in done.stderr
    assert not (root / "wal.sqlite-wal").exists() and not (root / "wal.sqlite-shm").exists()
    (root / "empty.py").write_text("")
    os.mkfifo(root / "fifo")  # SQLite wrote fifo-journal beside a node (a fuzzing pass)
    before = {p.name: p.read_bytes() for p in root.iterdir() if p.is_file()}
    for args in (("--module", "calc.py", "--tests", "test_calc.py", "--session", "calc.py"),
                 ("--module", "empty.py", "--tests", "test_calc.py", "--session", "empty.py"),
                 ("--module", "calc.py", "--tests", "test_calc.py", "--session", "."),
                 ("--module", "calc.py", "--tests", "test_calc.py", "--session", "fifo")):
        done = coral(root, "mutation", "run", *args)  # sqlalchemy's error and SQL, once
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "[SQL" not in done.stderr and "sqlalche.me" not in done.stderr, done.stderr
    assert {p.name: p.read_bytes() for p in root.iterdir() if p.is_file()} == before
    assert not (root / "fifo-journal").exists()
    victim = tmp_path / "victim"  # a red-team pass: the session was written through links
    victim.write_bytes(b"")
    (root / "linked.sqlite").symlink_to(victim)
    os.link(victim, root / "hard.sqlite")
    (root / "journal.sqlite-journal").symlink_to(victim)
    for session, why in (("linked.sqlite", "is a symbolic link"),
                         ("hard.sqlite", "has 2 hard links"),
                         ("journal.sqlite", "journal is a symbolic link")):
        done = coral(root, "mutation", "run", "--module", "calc.py", "--tests",
                     "test_calc.py", "--session", session)
        assert done.returncode == 2 and why.split()[-1] in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    assert victim.read_bytes() == b"" and not (root / "journal.sqlite").exists()


@pytest.mark.slow  # it starts a worker process
def test_a_worker_closed_twice_closes_its_pipes_once(tmp_path):
    """^C while a thread restarted a dead worker: the run closed the old worker a second
    time, and its pipes' descriptor numbers, already given to the new worker's Popen, were
    closed under it (EBADF, a traceback in a CI rehearsal). A second close does nothing."""
    from coral_plugins.evaluators.mutation.workers import start_worker

    root = project(tmp_path)
    worker = start_worker(root / "calc.py", ["test_calc.py"], root)
    numbers = (worker._to_worker, worker._from_worker)
    worker.close()
    keep, spare = os.pipe()
    try:
        for number in numbers:  # the numbers now name pipes of someone else's
            os.dup2(keep, number)
        worker.close()
        for number in numbers:
            os.fstat(number)  # raises EBADF if the second close closed it
    finally:
        for number in {*numbers, keep, spare}:
            with contextlib.suppress(OSError):
                os.close(number)


def test_an_interrupted_run_is_one_line(tmp_path):
    """^C while workers ran: every worker thread printed a traceback (a closed pipe)."""
    slow = TESTS.replace("def test_count():", "def test_count():\n    import time\n"
                         "    time.sleep(0.5)")  # the workers are busy when ^C comes
    root = project(tmp_path, MODULE, slow)
    process = subprocess.Popen(
        CORAL + ["mutation", "run", "--module", "calc.py", "--tests", "test_calc.py",
                 "--session", "s.sqlite", "--workers", "2"],
        cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if store_sql(root / "s.sqlite", "SELECT count(*) FROM work_results")[0][0]:
                break
        except sqlite3.Error:
            pass
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert stderr.strip().splitlines() == [
        "coral: interrupted; resume with: coral mutation run --module calc.py --tests "
        "test_calc.py --session s.sqlite --workers 2 --resume"], stderr


def test_skip_mutation_reports_unavailable(tmp_path):
    root = project(tmp_path)
    done = coral(root, "mutation", "run", "--module", "calc.py", "--tests", "test_calc.py",
                 "--json", env={"SKIP_MUTATION": "true"})
    summary = json.loads(done.stdout)
    assert done.returncode == 0
    assert (summary["mutation_score"], summary["mutation_num"],
            summary["mutation_uncertainty"]) == (-1.0, -1, -1.0)


def test_gate_reasons_and_critique():
    from coral_plugins.evaluators.mutation.gate import BELOW, UNAVAILABLE, gate

    assert gate(90.0, 80.0) == {"passed": True, "reasons": [], "critique": []}
    low = gate(40.0, 80.0)
    assert low["reasons"] == [BELOW]
    assert low["critique"] == ["Improve mutation score from 40.00% toward 80.00%."]
    assert gate(-1.0, 80.0)["reasons"] == [UNAVAILABLE]
    assert gate(-1.0, 0.0)["passed"]


def test_intervals_cr_rate_and_corrected():
    from types import SimpleNamespace

    from coral_plugins.evaluators.mutation.score import summarize

    def result(outcome):
        return SimpleNamespace(test_outcome=outcome, worker_outcome="normal", output="",
                               is_killed=outcome != "survived")

    results = {str(i): result("killed" if i < 6 else "survived") for i in range(10)}
    summary = summarize(results, 40)  # 10 of 40 sampled, 40% survival
    spread = (40 * 60 / 10) ** 0.5 * 1.96
    assert summary["mutation_uncertainty"] == pytest.approx(spread * (1 - 0.5), abs=1e-3)
    assert summary["mutation_uncertainty_fpc"] == pytest.approx(spread * 0.75 ** 0.5, abs=1e-3)
    assert summary["mutation_score"] == pytest.approx(60.0)


def test_an_existing_session_is_resumed_or_started_over_never_replaced_silently(tmp_path):
    root = project(tmp_path)
    args = ("mutation", "run", "--module", "calc.py", "--tests", "test_calc.py",
            "--session", "s.sqlite")
    first = coral(root, *args, "--lines", "5-6")
    assert first.returncode == 0, first.stderr
    before = verdicts(root / "s.sqlite")
    again = coral(root, *args, "--lines", "5-6")
    assert again.returncode == 2
    assert again.stderr.strip().splitlines() == [
        "coral: error: s.sqlite holds a mutation session already: --resume continues it, "
        "--fresh starts it over"]
    assert verdicts(root / "s.sqlite") == before  # untouched
    changed = coral(root, *args, "--lines", "5-7", "--resume")
    assert changed.returncode == 2 and "lines differs" in changed.stderr
    both = coral(root, *args, "--resume", "--fresh")
    assert both.returncode == 2 and "exclude each other" in both.stderr
    plain = tmp_path / "plain.sqlite"  # a session cosmic-ray made: not Coral's, still asked
    from coral_core.mutation.session import Session

    made = Session(plain)
    cwd = os.getcwd()
    os.chdir(root)
    try:
        made.init([Path("calc.py")])
    finally:
        os.chdir(cwd)
        made.close()
    theirs = coral(root, "mutation", "run", "--module", "calc.py", "--tests", "test_calc.py",
                   "--session", str(plain))
    assert theirs.returncode == 2 and "--fresh starts it over" in theirs.stderr
    fresh = coral(root, *args, "--fresh", "--json")
    assert fresh.returncode == 0, fresh.stderr
    assert json.loads(fresh.stdout)["counts"]["skipped"] == 0


def test_mutants_left_out_are_skipped_with_their_reason(tmp_path):
    marked = MODULE.replace("    if x > high:\n", "    if x > high:  # pragma: no mutate\n")
    root = project(tmp_path, marked)
    done = coral(root, "mutation", "run", "--module", "calc.py", "--tests", "test_calc.py",
                 "--exclude-operator", "core/NumberReplacer", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["mutants"]
    reasons = {(row["line"], row["operator"].startswith("core/NumberReplacer")): row["reason"]
               for row in rows if row["verdict"] == "skipped"}
    assert reasons and all(row["verdict"] == "skipped" for row in rows
                           if row["line"] == 5 or row["operator"] == "core/NumberReplacer")
    assert {reason for reason in reasons.values()} == {
        "pragma: no mutate", "operator excluded (--exclude-operator)"}
    assert any(row["verdict"] in ("killed", "survived") for row in rows)
    bad = coral(root, "mutation", "run", "--module", "calc.py", "--tests", "test_calc.py",
                "--operator", "core/(")
    assert bad.returncode == 2 and "--operator 'core/(' is not a regular expression" \
        in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_the_report_lists_survivors_with_their_diff_in_80_columns(tmp_path):
    root = project(tmp_path)
    done = coral(root, "mutation", "run", "--module", "calc.py", "--tests", "test_calc.py",
                 "--survivors", "3")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("surviving mutants ("))
    listed = [line for line in lines[start + 1:] if line.startswith("  calc.py:")]
    assert len(listed) == 3 and "... and" in done.stdout
    assert any(line.startswith("    - ") for line in lines[start:])
    assert any(line.startswith("    + ") for line in lines[start:])
    assert all(len(line) <= 80 for line in lines[start:-1])  # the session path may be long


def test_a_folder_walk_leaves_out_links_out_of_the_project_and_says_when_none_ran(tmp_path):
    """A red-team pass: `--module .` read a link to /etc/passwd as a module ("does not
    parse"), where a file named directly out of the project is refused and a linked
    folder is not walked; and filters that matched no mutant printed "-1.00%"."""
    root = project(tmp_path)
    (root / "passwd.py").symlink_to("/etc/passwd")
    done = coral(root, "mutation", "run", "--module", ".", "--tests", "test_calc.py",
                 "--session", "s.sqlite", "--operator", "no/such/operator")
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith("no mutation score: of ") and "left out by --operator" in first
    assert "passwd" not in done.stdout + done.stderr
