"""The sandbox binds the interpreter and packages wherever they live, hidden folders included."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv

import pytest

from coral_core.sandbox.policy import bwrap_available

pytestmark = pytest.mark.loaded  # make test runs it beside CPU hogs

SCRIPT = """
import json, sys
from coral_core.sandbox import Job, Sandbox, SandboxPolicy
from coral_core.scoring.verdicts import judge_case
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


CLEANING = r"""
import json, os, subprocess, sys
from coral_core.sandbox.inside import cleanup
root = sys.argv[1]
subprocess.run(["mount", "-t", "tmpfs", "none", root], check=True)
source = os.path.join(root, "..", "source")
os.makedirs(os.path.join(root, "a", "b", "mnt"))
subprocess.run(["mount", "--bind", "-o", "ro", sys.argv[2], os.path.join(root, "a", "b", "mnt")],
               check=True)
keep = cleanup.mounts_within([root])
seen = {}
# 1. litter only inside a folder that leads to the mount (the quick path must not skip it)
open(os.path.join(root, "a", "stash"), "w").write("x")
open(os.path.join(root, "a", "b", "stash"), "w").write("x")
cleanup.clean(root, keep)
seen["kept folders emptied"] = sorted(os.listdir(os.path.join(root, "a", "b"))) == ["mnt"] and \
    sorted(os.listdir(os.path.join(root, "a"))) == ["b"]
seen["mount untouched"] = os.path.exists(os.path.join(root, "a", "b", "mnt", "marker"))
# 2. a symlink in place of a kept folder is litter, and is not followed
os.rename(os.path.join(root, "a"), os.path.join(root, "real"))
os.symlink(os.path.join(root, "real"), os.path.join(root, "a"))
try:
    cleanup.clean(root, keep)
    seen["symlink"] = "cleaned"
except OSError as error:
    seen["symlink"] = "refused"
seen["symlink gone"] = not os.path.lexists(os.path.join(root, "a"))
# 3. a decoy where the mount was (the real folder renamed away): never kept
os.makedirs(os.path.join(root, "a", "b", "mnt"))
open(os.path.join(root, "a", "b", "mnt", "stash"), "w").write("x")
try:
    cleanup.clean(root, keep)
    seen["decoy"] = "cleaned"
except OSError:
    seen["decoy"] = "refused"
seen["decoy stash gone"] = not os.path.exists(os.path.join(root, "a", "b", "mnt", "stash"))
seen["mount still intact"] = os.path.exists(os.path.join(root, "real", "b", "mnt", "marker"))
print(json.dumps(seen))
"""


def test_cleaning_keeps_mount_points_but_nothing_a_job_hides_near_them(tmp_path):
    """A job may litter the folders that lead to a bound venv, put a symlink in place of
    one, or move the real folder away and build a decoy where the mount was: all of it is
    removed (or the worker refuses, and is replaced), and the mount itself is never
    touched. Runs in a private mount namespace (unshare)."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux)")
    bound = tmp_path / "bound"
    bound.mkdir()
    (bound / "marker").write_text("x")
    (tmp_path / "root").mkdir()
    command = ["unshare", "--mount", "--propagation", "private"]
    if os.geteuid() != 0:
        command[1:1] = ["--user", "--map-root-user"]
    done = subprocess.run([*command, sys.executable, "-c", CLEANING, str(tmp_path / "root"),
                           str(bound)], capture_output=True, text=True, timeout=60)
    if done.returncode != 0 and "unshare" in done.stderr and "Operation not permitted" in (
            done.stderr):
        pytest.skip("mount namespaces are not available here: " + done.stderr.strip())
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout)
    assert seen == {"kept folders emptied": True, "mount untouched": True,
                    "symlink": "refused", "symlink gone": True,
                    "decoy": "refused", "decoy stash gone": True,
                    "mount still intact": True}, seen
