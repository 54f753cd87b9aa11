"""The probe that follows the Python processes a test starts (follow.py, probe.py): what a
followed process reports, what makes it unfollowable, the mutant it imports, and the
environment's own sitecustomize, which must still run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from coral_plugins.evaluators.mutation.follow import Follow, judge

MODULE = "def add(a, b):\n    return a + b\n\n\ndef unused():\n    return 0\n"


def setup(tmp_path: Path) -> tuple[Follow, dict, Path]:
    (tmp_path / "calc.py").write_text(MODULE)
    follow = Follow(str(tmp_path / "calc.py"), str(tmp_path / "scratch"))
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    follow.install(env)
    follow.set_test("t", env)
    return follow, env, tmp_path


def start(env: dict, cwd: Path, code: str, *flags: str, script: str = "") -> int:
    args = [script] if script else ["-c", code]
    process = subprocess.Popen([sys.executable, *flags, *args], env=env, cwd=cwd,
                               stdout=subprocess.PIPE, text=True)
    process.communicate(timeout=60)
    return process.pid


def test_a_followed_tree_reports_the_lines_it_ran(tmp_path):
    follow, env, root = setup(tmp_path)
    inner = "import calc; calc.add(1, 2)"
    pid = start(env, root, f"import subprocess, sys; subprocess.run([sys.executable, '-c', "
                           f"{inner!r}])")
    followed = judge([{"test": "t", "phase": "call", "start": "python", "pid": pid}],
                     follow.collect())
    assert followed.events == []  # settled: nothing sends a mutant the exact way
    assert followed.lines["t"] >= {1, 2, 5}  # add's body ran; `unused` only defined
    assert 6 not in followed.lines["t"]


def test_what_cannot_be_followed_stays_an_event(tmp_path):
    follow, env, root = setup(tmp_path)
    cases = {
        "read calc.py from disk": start(env, root, "import calc; open(calc.__file__).read()"),
        "not followed": start(env, root, "import calc", "-E"),  # no PYTHONPATH: no probe
        "cannot be followed (os.system)": start(env, root, "import os; os.system('true')"),
        "calc.py from disk": start(env, root, "", script="calc.py"),  # not an import
        "read calc.py": start(env, root, "import runpy; runpy.run_path('calc.py')"),
        # what it did before an exec is not lost by the clean report after it
        "(os.exec)": start(env, root, "import os, sys; os.execv(sys.executable, "
                                      "[sys.executable, '-c', 'import calc'])"),
    }
    reports = follow.collect()
    for why, pid in cases.items():
        followed = judge([{"test": "t", "phase": "call", "start": "python", "pid": pid}],
                         reports)
        assert followed.lines == {}
        [event] = followed.events
        assert event["why"].startswith("started a process (python)") and why in event["why"]
    fixture = judge([{"test": "t", "phase": "setup", "start": "python", "pid": pid}], reports)
    assert [e["phase"] for e in fixture.events] == ["setup"]  # may reach any test
    # a subprocess.Popen whose fork_exec no one saw (a patched-out subprocess): no pid
    unseen = judge([{"test": "t", "phase": "call", "popen": True}], reports)
    assert unseen.lines == {} and "without a pid" in unseen.events[0]["why"]


def test_under_a_mutant_any_read_of_the_file_is_a_trouble(tmp_path):
    """The mutant's loader never opens the file: an open under a mutant, even by an
    importer (a module loaded under another name), would see the unmutated text."""
    follow, env, root = setup(tmp_path)
    follow.serve(MODULE.replace("a + b", "a - b"))
    follow.set_test("t", env)
    again = ("import importlib.util as u; s = u.spec_from_file_location('again', 'calc.py'); "
             "m = u.module_from_spec(s); s.loader.exec_module(m)")
    pid = start(env, root, again)
    [event] = judge([{"test": "t", "phase": "call", "start": "python", "pid": pid}],
                    follow.collect()).events
    assert "read calc.py from disk" in event["why"]
    missing = dict(follow.config, test="t", mutant=str(tmp_path / "gone.txt"))
    env["CORAL_MUTATION_PROBE"] = __import__("json").dumps(missing)
    pid = start(env, root, "import calc")
    [event] = judge([{"test": "t", "phase": "call", "start": "python", "pid": pid}],
                    follow.collect()).events
    assert "could not read the mutant" in event["why"]


def test_under_a_mutant_the_process_imports_it(tmp_path):
    follow, env, root = setup(tmp_path)
    follow.serve(MODULE.replace("a + b", "a - b"))
    follow.set_test("t", env)
    done = subprocess.run([sys.executable, "-c", "import calc; print(calc.add(5, 3))"],
                          env=env, cwd=root, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "2", done.stderr
    assert (root / "calc.py").read_text() == MODULE  # the file is never written


def test_the_environments_own_sitecustomize_still_runs(tmp_path):
    follow, env, root = setup(tmp_path)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nos.environ['SITE_RAN'] = 'yes'\n")
    env["PYTHONPATH"] += os.pathsep + str(site)
    code = ("import os, sys, sitecustomize; print(os.environ.get('SITE_RAN'), "
            "sitecustomize.__file__, any('probe' in p for p in sys.path))")
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=root,
                          capture_output=True, text=True, timeout=60)
    ran, where, probe_on_path = done.stdout.split()
    assert (ran, where, probe_on_path) == ("yes", str(site / "sitecustomize.py"), "False")
    assert done.stderr == ""
