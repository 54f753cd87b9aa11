"""`--executor ray` on real Ray: a local `ray.init` and a `ray start --head` cluster on
loopback give the same records and summaries as `--executor local`, lose nothing when an
actor is killed mid-run, and fail in one line when the cluster cannot be reached."""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import coral_env, run_coral
from coral_core.reporting import timeless
from coral_plugins.executors.ray.cluster import connect

ray = pytest.importorskip("ray")

RAY = str(Path(sys.executable).with_name("ray"))
GRID = """[dataset]
problems = {problems}
[run]
samples = {samples}
[model]
batch_size = 4
[search]
strategy = "grid"
[search.space]
"model.temperature" = [0.3, 0.9]
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def env(data_dir):
    return coral_env(data_dir)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A real head node on loopback (`ray start --head`), stopped afterwards."""
    port = _free_port()
    started = subprocess.run(
        [RAY, "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1",
         "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats"],
        capture_output=True, text=True, timeout=180)
    assert started.returncode == 0, started.stderr[-2000:]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([RAY, "stop", "--force"], capture_output=True, timeout=120)


def _run(tmp_path: Path, env: dict, name: str, config: str, *extra: str):
    path = tmp_path / f"{name}.toml"
    path.write_text(config)
    out = tmp_path / name
    result = run_coral("run", "--plugin", "quixbugs", "--config", str(path), "--out", str(out),
                       "--json", *extra, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Token authentication is enabled" not in result.stderr  # Ray's notice, each run
    return json.loads(result.stdout), out


def _records(run_dir: Path) -> tuple[list, list]:
    with sqlite3.connect(f"file:{run_dir / 'coral.sqlite'}?mode=ro", uri=True) as db:
        generations = db.execute(
            "SELECT trial, task_id, sample, request_digest, params, text FROM generations "
            "ORDER BY trial, task_id, sample").fetchall()
        evaluations = db.execute(
            "SELECT trial, task_id, sample, code_sha, passed, objectives, fitness "
            "FROM evaluations ORDER BY trial, task_id, sample").fetchall()
    return generations, evaluations


def test_a_grid_on_a_local_ray_equals_the_local_executor(tmp_path, env):
    config = GRID.format(problems='["kheapsort", "lcs_length", "next_palindrome"]', samples=3)
    local, local_dir = _run(tmp_path, env, "local", config)
    on_ray, ray_dir = _run(tmp_path, env, "ray", config, "--executor", "ray")
    assert len(on_ray["trials"]) == 2
    assert timeless(on_ray) == timeless(local)
    assert _records(ray_dir) == _records(local_dir)
    assert len(_records(ray_dir)[1]) == 2 * 3 * 3


def _count(out: Path) -> int:
    try:
        with sqlite3.connect(f"file:{out / 'coral.sqlite'}?mode=ro", uri=True) as db:
            return db.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0]
    except sqlite3.Error:
        return 0


def _kill_mid_run(tmp_path: Path, env: dict, cluster: str, name: str, config: str,
                  endings: tuple[str, ...], restart: bool) -> tuple[subprocess.Popen, Path, int]:
    """Start `coral run --executor ray` on the cluster, wait for its first records, then
    kill its actors whose names end with `endings` (Ray restarts them if `restart`);
    return the running process, its run folder and how many records it had then."""
    path = tmp_path / f"{name}.toml"
    path.write_text(config)
    out = tmp_path / name
    process = subprocess.Popen(
        [str(Path(sys.executable).with_name("coral")), "run", "--plugin", "quixbugs",
         "--config", str(path), "--out", str(out), "--json", "--executor", "ray",
         "--ray-address", cluster], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    connect(cluster)  # this test joins as a driver of its own, as Coral does
    try:
        deadline = time.monotonic() + 300
        while _count(out) < 2:
            assert process.poll() is None, process.communicate()[1][-2000:]
            assert time.monotonic() < deadline, "the run recorded nothing"
            time.sleep(0.02)
        named = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
                 if a["namespace"] == "coral" and a["name"].endswith(endings)]
        assert len(named) == len(endings), named
        for actor in named:
            ray.kill(ray.get_actor(actor, namespace="coral"), no_restart=not restart)
        return process, out, _count(out)
    finally:
        ray.shutdown()


def test_a_cluster_run_survives_killed_actors_and_equals_local(tmp_path, env, cluster):
    """Joined with --ray-address; the evaluation and generation actors are killed (Ray
    restarts them) while the run works: every record arrives once, and the result is the
    local executor's."""
    config = GRID.format(problems="[]", samples=4)
    local, local_dir = _run(tmp_path, env, "local", config)
    total = len(_records(local_dir)[1])
    process, out, at_kill = _kill_mid_run(tmp_path, env, cluster, "cluster", config,
                                          ("-evaluation-0", "-generation-0"), restart=True)
    stdout, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr[-3000:]
    assert at_kill < total, "the run ended before the actors were killed"
    assert timeless(json.loads(stdout)) == timeless(local)
    assert _records(out) == _records(local_dir)  # each once, none lost


def test_an_actor_lost_for_good_stops_the_trial_in_one_line_and_resume_finishes(
        tmp_path, env, cluster):
    """An evaluation actor killed without restart: Ray's failure is not recorded as the
    candidates' errors; the run stops with one line (exit 2), and a resume on the cluster
    finishes with the local executor's records."""
    config = GRID.format(problems="[]", samples=4)
    local, local_dir = _run(tmp_path, env, "local", config)
    process, out, _ = _kill_mid_run(tmp_path, env, cluster, "lost", config,
                                    ("-evaluation-0",), restart=False)
    _, stderr = process.communicate(timeout=600)
    if process.returncode == 0:  # every scoring call had returned before the kill
        pytest.skip("the run finished before the actor was killed")
    assert process.returncode == 2, stderr[-2000:]
    lines = stderr.strip().splitlines()
    assert "Ray lost a scoring call" in lines[-1] and "--resume" in lines[-1], stderr[-2000:]
    with sqlite3.connect(f"file:{out / 'coral.sqlite'}?mode=ro", uri=True) as db:
        details = [json.loads(row[0]) for row in db.execute("SELECT details FROM evaluations")]
    assert not [d["error"] for d in details if "error" in d], (
        "Ray's failure was recorded as candidates' errors")
    resumed = run_coral("run", "--resume", str(out), "--json", env=env, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert timeless(json.loads(resumed.stdout)) == timeless(local)
    assert _records(out) == _records(local_dir)


@pytest.mark.parametrize("address, words", [
    ("127.0.0.1:{closed}", "cannot reach the Ray cluster at 127.0.0.1:"),
    ("no-port-here", "is not HOST:PORT"),
])
def test_an_unreachable_cluster_is_one_line_and_no_run(tmp_path, env, address, words):
    address = address.format(closed=_free_port())
    out = tmp_path / "never"
    result = run_coral("run", "--plugin", "quixbugs", "--limit", "1", "--samples", "1",
                       "--executor", "ray", "--ray-address", address, "--out", str(out),
                       env=env, timeout=120)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], result.stderr
    assert not out.exists()


def test_ray_is_imported_only_by_a_run_that_names_it(env):
    probe = ("import sys; from coral_core import plugins; plugins.registry(); "
             "import coral_cli.app; print('ray' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
    from coral_core import plugins

    assert "ray" in plugins.registry().names("executors")


def test_a_batch_goes_to_the_actor_that_holds_its_adapter_unless_it_lags():
    from coral_plugins.executors.ray.executor import _Member, choose_generator

    first, second = _Member("a"), _Member("b")
    first.used("/adapters/x")
    second.used("/adapters/y")
    assert choose_generator([first, second], "/adapters/y") is second
    second.busy = 1  # one batch more queued: still worth waiting for
    assert choose_generator([first, second], "/adapters/y") is second
    second.busy = 2  # two more: the idle actor loads the adapter instead
    assert choose_generator([first, second], "/adapters/y") is first
    assert choose_generator([first, second], "/adapters/new") is first  # least busy
    for name in "pqrs":  # an actor keeps the last HELD_ADAPTERS (4) in mind
        first.used(name)
    assert "/adapters/x" not in first.adapters and first.adapters[-1] == "s"
