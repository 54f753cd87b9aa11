"""No kernel object outlives its candidate, even across two separate Coral processes.

A candidate in one `coral` process tries to leave keys in every keyring the sandbox user
keeps on the host (user, user session, persistent, a named session keyring linked into the
user keyring), System V IPC objects and a POSIX message queue; that process exits. Then a
fresh process of the sandbox user on the host sees none of the keys, and a candidate in a
second `coral` process finds nothing either. The keyrings are the case that matters across
processes: they belong to the uid on the whole host, not to any namespace of ours.

Run twice: with the default policy (the seccomp filter refuses every such object), and with
the filter off, where the objects are really made and the cleanup behind the filter removes
them (a janitor empties the sandbox user's keyrings; IPC and queues die with the sandbox's
IPC namespace).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid

import pytest

from coral_core.sandbox.policy import NOBODY, bwrap_available
from conftest import coral_env, run_coral
from test_sandbox_evil import PERSIST_READ, PERSIST_WRITE

pytestmark = pytest.mark.loaded  # make test runs it beside CPU hogs

HAVE_BWRAP = bwrap_available()[0]
REQUIRE_BWRAP = os.environ.get("CORAL_REQUIRE_BWRAP") == "1"

SCRIPT = """
import json, sys
from dataclasses import replace
from coral_core.sandbox import Job, Sandbox, SandboxPolicy
from coral_plugins.datasets.quixbugs import QuixBugs
task = QuixBugs(data_dir=sys.argv[1]).task("bitcount")
spec = replace(task.execution, cases=task.execution.cases[:1])
policy = SandboxPolicy(isolation="bwrap", syscall_filter=sys.argv[2] == "on")
with Sandbox(policy, workers=1) as sandbox:
    result = sandbox.run(Job.build(spec, open(sys.argv[3]).read(), policy))
print(json.dumps({"records": [list(s.records) for s in result.steps],
                  "status": [s.status for s in result.steps], "stdout": result.stdout,
                  "load_error": result.load_error}))
"""


@pytest.fixture(autouse=True)
def _bwrap():
    if not HAVE_BWRAP:
        why = "bubblewrap is not usable here: " + bwrap_available()[1]
        if REQUIRE_BWRAP:
            pytest.fail(why + " (CORAL_REQUIRE_BWRAP=1)")
        pytest.skip(why)


def _programs(tmp_path) -> tuple[str, str, str]:
    run = uuid.uuid4().hex[:12]
    paths = []
    for name, code in (("writer", PERSIST_WRITE), ("reader", PERSIST_READ)):
        path = tmp_path / f"bitcount__{name}.py"
        path.write_text(code.replace("@RUN@", run).replace("@MARK@", f"coral-mark-{run}"))
        paths.append(str(path))
    return run, paths[0], paths[1]


def _persistent_ids() -> set[bytes]:
    """Persistent keyrings the sandbox user sees now (they live for days: one left by an
    earlier run on this machine is not this test's)."""
    ids = {"user": NOBODY, "group": NOBODY} if os.geteuid() == 0 else {}
    done = subprocess.run(["cat", "/proc/keys"], capture_output=True, timeout=60, cwd="/",
                          **ids)
    return {line.split()[0] for line in done.stdout.splitlines() if b"_persistent." in line}


def keys_left(mark: str, before: set[bytes] = frozenset()) -> list[bytes]:
    """Keys holding `mark` (and persistent keyrings not in `before`) that a fresh process of
    the sandbox user sees on the host; the kernel frees unreferenced keys asynchronously,
    so wait a little."""
    ids = {"user": NOBODY, "group": NOBODY} if os.geteuid() == 0 else {}
    deadline = time.monotonic() + 5.0
    while True:
        done = subprocess.run(["cat", "/proc/keys"], capture_output=True, timeout=60, cwd="/",
                              **ids)
        left = [line for line in done.stdout.splitlines()
                if mark.encode() in line
                or (b"_persistent." in line and line.split()[0] not in before)]
        if not left or time.monotonic() > deadline:
            return left


def _script(data_dir, filter_state: str, path: str) -> dict:
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(data_dir), filter_state, path],
                          capture_output=True, text=True, timeout=300,
                          env=coral_env(data_dir))
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


# "off" is the fallback where seccomp is missing: no filter, the janitor removes what a job
# made. (It once missed keys when Coral's venv lived under /tmp: the worker died cleaning the
# bound venv's parent folders before the janitor ran; tests/test_sandbox_paths.py holds that.)
@pytest.mark.parametrize("filter_state", ["on", "off"])
def test_nothing_a_candidate_leaves_reaches_a_later_process(tmp_path, data_dir, filter_state):
    run, writer, reader = _programs(tmp_path)
    before = _persistent_ids()
    wrote = _script(data_dir, filter_state, writer)
    made = json.loads(wrote["stdout"].split("MADE ")[-1].splitlines()[0].replace("'", '"'))
    if filter_state == "on":
        assert made == [], f"the seccomp filter let the candidate create {made}"
    else:
        assert {"user", "user-session", "shm", "mqueue"} <= set(made), made
    assert keys_left(f"coral-evil-{run}", before) == [], "keys outlived the Coral process"
    read = _script(data_dir, filter_state, reader)
    assert read["status"] == ["ok"] and read["records"] == [[[]]], read


def test_two_coral_evaluate_processes(tmp_path, data_dir):
    """The same through the command line: `coral evaluate` twice, the writer then the reader
    (it returns what it found, which the outcome's detail shows: nothing)."""
    run, writer, reader = _programs(tmp_path)
    env = coral_env(data_dir)
    before = _persistent_ids()
    for path in (writer, reader):
        done = run_coral("evaluate", "--plugin", "quixbugs", "--problem", "bitcount",
                         "--candidate", path, "--json", env=env)
        assert done.returncode == 0, done.stderr[-2000:]
        document = json.loads(done.stdout)
        assert keys_left(f"coral-evil-{run}", before) == [], "keys outlived the Coral process"
    details = [o["detail"] for o in document["outcomes"]]
    assert details[0].endswith("got []"), details
