"""The sandbox binds the interpreter and packages wherever they live, hidden folders included."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv

import pytest

from coral_core.sandbox.policy import bwrap_available

SCRIPT = """
import json, sys
from coral_core.sandbox import Job, Sandbox, SandboxPolicy
from coral_core.verdicts import judge_case
from coral_plugins.datasets.quixbugs import QuixBugs
task = QuixBugs(data_dir=sys.argv[1]).task("gcd")
policy = SandboxPolicy(isolation="bwrap")
# A candidate that litters /tmp, including the folders that lead to the bound venv, then
# one that looks for the litter: cleaning must empty /tmp around the bind and keep the
# worker (it used to die on every job trying to remove the venv's parent folders).
LITTER = '''import os, sys
for folder in ['/tmp'] + [p for p in (os.path.dirname(sys.prefix),) if p.startswith('/tmp/')]:
    try:
        open(os.path.join(folder, 'coral-litter'), 'w').write('x')
    except OSError:
        pass
'''
LOOK = '''import os, sys
def gcd(a, b):
    found = [p for p in ('/tmp/coral-litter',
                         os.path.join(os.path.dirname(sys.prefix), 'coral-litter'))
             if os.path.exists(p)]
    if found:
        raise RuntimeError(found)
    return a if not b else gcd(b, a % b)
'''
with Sandbox(policy, workers=1) as sandbox:
    result = sandbox.run(Job.build(task.execution, task.reference, policy))
    sandbox.run(Job.build(task.execution, LITTER + task.reference, policy))
    after = sandbox.run(Job.build(task.execution, LOOK, policy))
    started = sandbox.workers_started
print(json.dumps({"prefix": sys.prefix, "isolated": result.isolated,
                  "passed": [judge_case(c, s).status for c, s in
                             zip(task.execution.cases, result.steps)],
                  "after": [judge_case(c, s).status for c, s in
                            zip(task.execution.cases, after.steps)],
                  "started": started}))
"""


@pytest.mark.skipif(not bwrap_available()[0] and os.environ.get("CORAL_REQUIRE_BWRAP") != "1",
                    reason="needs bubblewrap")
def test_sandbox_works_from_a_virtual_environment_under_tmp(tmp_path, data_dir):
    """/tmp is replaced by a private tmpfs inside the sandbox; the venv there is bound on top.
    Where CORAL_REQUIRE_BWRAP=1 (CI) and bubblewrap does not work, this fails instead."""
    assert str(tmp_path).startswith("/tmp/")
    environment = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(environment)
    ours = sysconfig.get_paths()["purelib"]  # coral and its dependencies, via a .pth file
    theirs = subprocess.run([str(environment / "bin" / "python"), "-c",
                             "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                            capture_output=True, text=True, check=True).stdout.strip()
    (tmp_path / "venv" / theirs.split(str(environment) + "/", 1)[1] / "coral.pth").write_text(
        f"import site; site.addsitedir({ours!r})\n")  # runs our .pth files (editable finder)
    result = subprocess.run([str(environment / "bin" / "python"), "-c", SCRIPT, str(data_dir)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    document = __import__("json").loads(result.stdout)
    assert document["prefix"] == str(environment)
    assert document["isolated"] is True
    assert set(document["passed"]) == {"pass"}
    assert set(document["after"]) == {"pass"}, "litter of the job before was still there"
    assert document["started"] == 1, "the worker was replaced: it could not clean /tmp"
    assert sys.prefix != str(environment)
