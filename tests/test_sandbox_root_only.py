"""What the workers need, when they run as nobody and nobody cannot read it (round three,
item 8).

As root without bubblewrap, the sandbox and analysis workers drop to nobody. Python, its
packages, Coral's own code or the temporary folder can lie in a folder closed to other users
(a container's /root, a 0700 home): flake8 then found none of its plugins (`KeyError:
'default'`) and style was silently its worst score. Here a virtual environment whose
packages and Coral's code lie in a 0700 folder must give the same objectives as the normal
one, or Coral must say in one line why a linter cannot work; an internal failure of a linter
is never a score.
"""

from __future__ import annotations

import json
import os
import subprocess
import sysconfig
import tempfile
import venv
from pathlib import Path
from typing import Any

import pytest

from coral_core.execution import ExecutionContext
from coral_core.files.scratch import owner_tag
from coral_core.sandbox import Job, Sandbox, SandboxPolicy, analysis, pool
from coral_core.sandbox.analysis import AnalysisFailed
from coral_core.sandbox.policy import NOBODY
from coral_core.types import Candidate
from coral_core.scoring.verdicts import judge_case
from coral_plugins.datasets.quixbugs import QuixBugs
from coral_plugins.evaluators.security import SecurityEvaluator
from coral_plugins.evaluators.style import StyleEvaluator
from coral_plugins.evaluators.syntax import SyntaxEvaluator

pytestmark = pytest.mark.loaded  # make test runs it beside CPU hogs

AS_ROOT = pytest.mark.skipif(os.geteuid() != 0,
                             reason="the workers drop to nobody only when Coral runs as root")
TESTS = Path(__file__).resolve().parent
CODE = "import os\ndef gcd(a,b):\n  eval(str(b))\n  return a if b==0 else gcd(b,a%b)\n"
STYLES: tuple[dict[str, Any], ...] = ({}, {"max_line_length": 100, "select": ["E", "F"]})


def analyse(context: ExecutionContext, task: Any) -> dict[str, Any]:
    """Every objective the analysis workers compute for CODE, with its details (flake8
    with the default options and with others: a guide made after the workers dropped root)."""
    evaluators: list[tuple[str, Any]] = [(f"style {options}", StyleEvaluator(**options))
                                         for options in STYLES]
    evaluators += [("security", SecurityEvaluator()), ("syntax", SyntaxEvaluator())]
    found = {}
    for name, evaluator in evaluators:
        evaluation = evaluator.evaluate(Candidate(task, CODE), context)
        found[name] = [dict(evaluation.objectives), dict(evaluation.details)]
    return found


# Run by the closed environment's interpreter: Coral's code comes from the closed folder too.
SCRIPT = r"""
import json, logging, os, sys
closed, tests, data = sys.argv[1:4]
sys.path[:0] = [os.path.join(closed, "src"), tests]
said = []
class Keep(logging.Handler):
    def emit(self, record):
        said.append(record.getMessage())
logging.getLogger().addHandler(Keep())
import coral_core
from coral_core.execution import ExecutionContext
from coral_core.sandbox import Job, Sandbox, SandboxPolicy
from coral_core.scoring.verdicts import judge_case
from coral_plugins.datasets.quixbugs import QuixBugs
from test_sandbox_root_only import analyse
task = QuixBugs(data_dir=data).task("gcd")
found = {"code": coral_core.__file__, "prefix": sys.prefix}
with Sandbox(SandboxPolicy(isolation="none"), workers=1) as sandbox:
    context = ExecutionContext(sandbox)
    try:
        found["objectives"] = analyse(context, task)
    except Exception as error:
        found["raised"] = [type(error).__name__, str(error)]
    result = sandbox.run(Job.build(task.execution, task.reference, sandbox.policy))
    found["verdicts"] = [judge_case(c, s).status for c, s in zip(task.execution.cases,
                                                                  result.steps)]
    context.close()
found["said"] = said
print(json.dumps(found))
"""


def closed_environment(tmp_path: Path, without: tuple[str, ...] = ()) -> tuple[Path, Path]:
    """(closed folder, its interpreter): a 0700 folder holding a virtual environment whose
    site-packages links to every entry of ours (but `without`), and src/coral_core linking
    to Coral's code. Root reaches all of it; nobody cannot pass the folder."""
    closed = tmp_path / "closed"
    closed.mkdir()
    closed.chmod(0o700)
    environment = closed / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(environment)
    python = environment / "bin" / "python"
    theirs = Path(subprocess.run([str(python), "-c", "import sysconfig; "
                                  "print(sysconfig.get_paths()['purelib'])"],
                                 capture_output=True, text=True, check=True).stdout.strip())
    ours = Path(sysconfig.get_paths()["purelib"])
    for entry in ours.iterdir():
        if entry.name not in without and not (theirs / entry.name).exists():
            (theirs / entry.name).symlink_to(entry)
    (closed / "src").mkdir()
    (closed / "src" / "coral_core").symlink_to(TESTS.parent / "coral_core")
    return closed, python


def run_closed(closed: Path, python: Path, data_dir: Path) -> dict[str, Any]:
    result = subprocess.run([str(python), "-c", SCRIPT, str(closed), str(TESTS), str(data_dir)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def gcd(data_dir: Path) -> Any:
    return QuixBugs(data_dir=str(data_dir)).task("gcd")


@AS_ROOT
def test_a_virtual_environment_in_a_root_only_folder_scores_the_same(tmp_path, data_dir, gcd):
    """Linters, parser and programs from a closed folder, without bubblewrap: the same
    objectives and details as with this environment (bubblewrap where it works), and one
    line naming the folders a candidate cannot import from."""
    closed, python = closed_environment(tmp_path)
    found = run_closed(closed, python, data_dir)
    assert found["prefix"] == str(closed / "venv")
    assert found["code"].startswith(str(closed / "src")), "Coral's code was not the closed one"
    with Sandbox(SandboxPolicy(), workers=1) as sandbox:
        context = ExecutionContext(sandbox)
        expected = analyse(context, gcd)
        context.close()
    assert found.get("objectives") == expected, found
    assert {"F401", "E111"} <= set(found["objectives"]["style {}"][1]["codes"])
    assert set(found["verdicts"]) == {"pass"}
    closed_lines = [line for line in found["said"] if "cannot read" in line]
    assert len(closed_lines) == 1 and "\n" not in closed_lines[0], found["said"]
    assert str(closed / "venv") in closed_lines[0]
    assert not [line for line in found["said"] if "analysis" in line], found["said"]


def test_a_linter_that_cannot_work_stops_the_run_in_one_line(tmp_path, data_dir):
    """flake8 missing from the workers' environment: style is not scored 0 for every
    candidate, the first style request raises one line (a UserError: the run stops) saying
    why; bandit, the parser and the programs still work."""
    closed, python = closed_environment(tmp_path, without=("flake8",))
    found = run_closed(closed, python, data_dir)
    kind, message = found["raised"]
    assert kind == "LinterUnavailable"
    assert message.startswith("flake8 does not work") and "No module named 'flake8'" in message
    assert "\n" not in message
    assert set(found["verdicts"]) == {"pass"}


@AS_ROOT
def test_scratch_folders_leave_a_temporary_folder_nobody_cannot_pass(tmp_path, monkeypatch, gcd):
    """TMPDIR in a root-only folder: each job killed its worker (every test an error).
    Scratch folders then go to /tmp."""
    closed = tmp_path / "closed"
    closed.mkdir()
    closed.chmod(0o700)
    monkeypatch.setattr(tempfile, "tempdir", str(closed))
    policy = SandboxPolicy(isolation="none")
    with Sandbox(policy, workers=1) as sandbox:
        result = sandbox.run(Job.build(gcd.execution, gcd.reference, policy))
        started = sandbox.workers_started
    assert {judge_case(c, s).status for c, s in zip(gcd.execution.cases, result.steps)} == {
        "pass"}
    assert started == 1
    assert not list(closed.iterdir())


@AS_ROOT
def test_scratch_folders_a_killed_coral_left_to_nobody_are_removed(request, monkeypatch, gcd):
    """Without bubblewrap a slot's scratch folder belongs to nobody: the next sandbox removes
    those of a Coral process that has ended, and not those of a live one."""
    base = Path(tempfile.mkdtemp(dir="/var/tmp" if os.path.isdir("/var/tmp") else "/tmp"))
    request.addfinalizer(lambda: subprocess.run(["rm", "-rf", "--", str(base)]))
    base.chmod(0o755)  # a folder nobody can pass (the worker's scratch is in it)
    monkeypatch.setattr(pool, "_scratch_base", lambda: str(base))
    boot, namespace, pid, start = owner_tag().split("_")
    stale = base / f"coral-sandbox-{boot}_{namespace}_{pid}_{int(start) + 1}-abc"  # pid reused
    live = base / f"coral-sandbox-{owner_tag()}-abc"
    for folder in (stale, live):
        (folder / "inner").mkdir(parents=True)
        for path in (folder, folder / "inner"):
            os.chown(path, NOBODY, NOBODY)
    policy = SandboxPolicy(isolation="none")
    with Sandbox(policy, workers=1) as sandbox:
        result = sandbox.run(Job.build(gcd.execution, gcd.reference, policy))
    assert {judge_case(c, s).status for c, s in zip(gcd.execution.cases, result.steps)} == {
        "pass"}
    assert not stale.exists()
    assert sorted(base.iterdir()) == [live]


class _Failing:
    """An analysis worker whose flake8 cannot import a module of its own mid-request."""

    asked = 0

    def __init__(self, policy: SandboxPolicy, isolated: bool):
        self.broken: dict[str, str] = {}

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        type(self).asked += 1
        if request["kind"] == "parse":
            return {"parses": True, "functions": ["gcd"], "statements": 2}
        return {"error": "ModuleNotFoundError: No module named 'pyflakes.messages'",
                "internal": True, "retire": True}

    def alive(self) -> bool:
        return True

    def stop(self) -> None:
        pass


def test_an_internal_linter_failure_is_an_error_not_a_score(monkeypatch, gcd):
    """A reply the worker marks internal raises for that candidate (recorded as an error
    and counted by the run), is not cached, and never becomes the worst score."""
    monkeypatch.setattr(analysis, "_Worker", _Failing)
    monkeypatch.setattr(_Failing, "asked", 0)
    with Sandbox(SandboxPolicy(isolation="none"), workers=1) as sandbox:
        context = ExecutionContext(sandbox)
        for _ in range(2):
            with pytest.raises(AnalysisFailed, match="flake8 failed in the analysis worker"):
                StyleEvaluator().evaluate(Candidate(gcd, CODE), context)
        assert SyntaxEvaluator().evaluate(Candidate(gcd, CODE), context).objectives == {
            "syntax": 0.9}
    assert _Failing.asked == 3, "an internal failure was cached"


def test_the_worker_tells_its_own_failures_from_the_codes(monkeypatch):
    """In the analysis worker: a linter that cannot import or read its files is internal; a
    linter that crashes on the code is the code's (worst score); both retire the worker."""
    from flake8.api import legacy

    from coral_core.sandbox.inside import lint

    monkeypatch.setattr(legacy, "parse_args", legacy.parse_args)  # Linters replaces it
    linters = lint.Linters()
    try:
        assert linters.check() == {}
        request = {"kind": "flake8", "code": CODE, "options": {}}
        assert lint.handle(linters, request)[0]["violations"] > 0
        for error, internal in ((ImportError("No module named 'x'"), True),
                                (PermissionError(13, "Permission denied"), True),
                                (RecursionError("deep"), False)):
            def fail(options: dict[str, Any], error: BaseException = error) -> None:
                raise error

            monkeypatch.setattr(linters, "flake8", fail)
            reply, healthy = lint.handle(linters, request)
            assert reply.get("internal", False) is internal and "error" in reply
            assert not healthy
        linters.broken["bandit"] = "ModuleNotFoundError: No module named 'bandit'"
        reply, healthy = lint.handle(linters, {"kind": "bandit", "code": CODE})
        assert reply == {"error": linters.broken["bandit"], "internal": True} and healthy
    finally:
        os.close(linters.memfd)
