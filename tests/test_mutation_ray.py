"""`coral mutation run --executor ray`: the workers are Ray actors that get the project through
the object store; the verdicts equal the local run's, a killed actor costs nothing, and a
cluster that cannot be reached is one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import io
import tarfile
from pathlib import Path

import pytest

pytest.importorskip("cosmic_ray")
pytest.importorskip("ray")

from test_mutation import MODULE, project, verdicts  # noqa: E402

CORAL = [sys.executable, "-m", "coral_cli.app"]


def coral(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(CORAL + list(args), cwd=cwd, capture_output=True, text=True,
                          env=dict(os.environ), timeout=600)


def test_ray_workers_give_the_local_verdicts(tmp_path):
    local = project(tmp_path / "local")
    remote = project(tmp_path / "remote")
    (remote / ".venv").mkdir()
    (remote / ".venv" / "pyvenv.cfg").write_text("home = /nowhere\n")  # never shipped
    common = ["mutation", "run", "--module", "calc.py", "--tests", "test_calc.py",
              "--session", "s.sqlite", "--workers", "2", "--json"]
    ours = coral(local, *common)
    theirs = coral(remote, *common, "--executor", "ray")
    assert ours.returncode == 0, ours.stderr
    assert theirs.returncode == 0, theirs.stderr
    assert verdicts(remote / "s.sqlite") == verdicts(local / "s.sqlite")
    summary = json.loads(theirs.stdout)
    assert summary["counts"] == json.loads(ours.stdout)["counts"]
    assert (remote / "calc.py").read_text() == MODULE  # never rewritten, here or there


def test_a_killed_actor_is_replaced_and_nothing_is_lost(tmp_path, monkeypatch):
    """The progress callback kills the actor that served the first finished mutant: its
    next mutant is retried on a new actor, and every verdict still equals the local run's.
    The killed actor's copy of the project is removed by the actors still alive."""
    import tempfile

    import ray

    from coral_plugins.evaluators.mutation.campaign import run_mutation

    local = project(tmp_path / "local")
    remote = project(tmp_path / "remote")
    expected = run_mutation(local / "calc.py", [local / "test_calc.py"],
                            session_path=local / "s.sqlite", workers=2, project=local)
    killed = []

    class Killer:
        def start(self, total: int, done: int) -> None:
            pass

        def advance(self, plan, result) -> None:
            if not killed and result.output != "no test covers it":
                names = sorted(a["name"] for a in ray.util.list_named_actors(
                    all_namespaces=True) if a["name"].startswith("coral-mutation-"))
                ray.kill(ray.get_actor(names[0], namespace="coral"))
                killed.append(names[0])

    progress = Killer()

    scratch = tmp_path / "tmp"  # the actors' temporary folder (Ray's workers inherit it)
    scratch.mkdir()
    monkeypatch.setenv("RAY_TMPDIR", tempfile.gettempdir())  # Ray's sockets: short paths
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", None)
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        got = run_mutation(remote / "calc.py", [remote / "test_calc.py"],
                           session_path=remote / "s.sqlite", workers=2, project=remote,
                           progress=progress, executor="ray")
    finally:
        ray.shutdown()
    assert killed
    assert [p.name for p in scratch.iterdir() if p.name.startswith("coral-")] == []
    assert verdicts(remote / "s.sqlite") == verdicts(local / "s.sqlite")
    assert got["counts"] == expected["counts"]


def test_an_unreachable_cluster_is_one_line(tmp_path):
    here = project(tmp_path)
    done = coral(here, "mutation", "run", "--module", "calc.py", "--tests", "test_calc.py",
                 "--executor", "ray", "--ray-address", "127.0.0.1:9")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "cannot reach the Ray cluster" in done.stderr
    assert not (here / "calc.mutation.sqlite").exists()  # refused before anything is written


def test_the_project_archive_leaves_out_environments_caches_and_sessions(tmp_path):
    from coral_plugins.evaluators.mutation.remote import pack_project

    here = project(tmp_path / "p")
    (here / "pkg").mkdir()
    (here / "pkg" / "helper.py").write_text("X = 1\n")
    (here / "env").mkdir()
    (here / "env" / "pyvenv.cfg").write_text("home = /x\n")
    (here / "env" / "big.py").write_text("# not sent\n")
    (here / "__pycache__").mkdir()
    (here / "__pycache__" / "calc.cpython-311.pyc").write_bytes(b"\0")
    (here / "s.sqlite").write_bytes(b"session")
    (here / "link.py").symlink_to(here / "calc.py")
    names = tarfile.open(fileobj=io.BytesIO(pack_project(here, set())), mode="r:gz").getnames()
    assert sorted(names) == ["calc.py", "pkg/helper.py", "test_calc.py"]
