"""`--executor ray` on real Ray: a local `ray.init` and a `ray start --head` cluster on
loopback give the same records and summaries as `--executor local`, lose nothing when an
actor is killed mid-run (beside CPU load), say what they wait for and fail in one line
when the cluster stops answering, and fail in one line when it cannot be reached."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest

from conftest import coral_env, run_coral, store_sql
from coral_core.results.reporting import timeless
from coral_core.executors.ray_cluster import connect

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
    """A real head node on loopback (`ray start --head --block`), stopped afterwards by
    stopping that command: `ray stop` would stop every Ray on the machine, another test
    worker's too."""
    port = _free_port()
    log = tmp_path_factory.mktemp("cluster") / "ray-start.log"
    with open(log, "w") as out:
        head = subprocess.Popen(
            [RAY, "start", "--head", "--block", f"--port={port}",
             "--node-ip-address=127.0.0.1", "--num-cpus=2", "--include-dashboard=false",
             "--disable-usage-stats"],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while "will now block" not in log.read_text():  # said once the node is up
            assert head.poll() is None, log.read_text()[-2000:]
            assert time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.5)
        yield f"127.0.0.1:{port}"
    finally:  # the head, its processes and their workers: the session it started
        os.killpg(head.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):  # its orderly stop took 33 s
            head.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(head.pid, signal.SIGKILL)
        head.wait()


@contextlib.contextmanager
def _cpu_hogs(per_core: int = 2) -> Iterator[None]:
    """Busy-looping processes beside the block (as `benchmarks/loaded.py` runs the suite)."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True:\n    pass\n"],
                             start_new_session=True)
            for _ in range(per_core * (os.cpu_count() or 1))]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def _run(tmp_path: Path, env: dict, name: str, config: str, *extra: str):
    summary, out, _ = _run_with_pid(tmp_path, env, name, config, *extra)
    return summary, out


def _run_with_pid(tmp_path: Path, env: dict, name: str, config: str, *extra: str):
    """`_run`, and the pid the coral process had."""
    path = tmp_path / f"{name}.toml"
    path.write_text(config)
    out = tmp_path / name
    command = [str(Path(sys.executable).with_name("coral")), "run", "--plugin", "quixbugs",
               "--config", str(path), "--out", str(out), "--json", *extra]
    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as process:
        stdout, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr[-3000:]
    assert "Token authentication is enabled" not in stderr  # Ray's notice, each run
    return json.loads(stdout), out, process.pid


def _left_of_ray_started_by(pid: int) -> list[str]:
    """The live head processes (GCS, raylet, monitors, API server) of the local Ray that
    the coral process `pid` started (its session holds that driver's log): their command
    lines name the session. (Its workers and agents end with its raylet.)"""
    root = Path(os.environ.get("RAY_TMPDIR") or tempfile.gettempdir()) / "ray"
    sessions = {log.parents[1].name
                for log in root.glob(f"session_*/logs/python-core-driver-*_{pid}.log")}
    assert sessions, f"no Ray session of driver {pid} under {root}"
    left = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if any(session in line for session in sessions):
                left.append(line[:200])
    return left


def _records(run_dir: Path) -> tuple[list, list]:
    with sqlite3.connect(f"file:{run_dir / 'coral.sqlite'}?mode=ro", uri=True) as db:
        generations = db.execute(
            "SELECT trial, task_id, sample, request_digest, params, text FROM generations "
            "ORDER BY trial, task_id, sample").fetchall()
        evaluations = db.execute(
            "SELECT trial, task_id, sample, code_sha, passed, objectives, fitness "
            "FROM evaluations ORDER BY trial, task_id, sample").fetchall()
    return generations, evaluations


def test_a_grid_on_a_local_ray_equals_the_local_executor(tmp_path, env, cluster):
    """Without --ray-address Coral starts a Ray of its own, even while a `ray start`
    cluster runs on the machine (Ray alone would join that one), and stops it at the end
    (its monitor killed first: ray_cluster.shutdown)."""
    config = GRID.format(problems='["kheapsort", "lcs_length", "next_palindrome"]', samples=3)
    local, local_dir = _run(tmp_path, env, "local", config)
    on_ray, ray_dir, pid = _run_with_pid(tmp_path, env, "ray", config, "--executor", "ray")
    assert _left_of_ray_started_by(pid) == []  # its Ray stopped with it
    assert len(on_ray["trials"]) == 2
    assert timeless(on_ray) == timeless(local)
    assert _records(ray_dir) == _records(local_dir)
    assert len(_records(ray_dir)[1]) == 2 * 3 * 3


KILLED = GRID.format(problems="[]", samples=4)  # the runs whose actors are killed
# Each cluster test makes two or three whole runs (and the first also the local reference
# and the cluster): beside CPU load (`make test-loaded-all`, or a shared machine) that is
# more than the suite's 600 s per test. Each wait inside has its own bound, which is what
# these tests check; this is only the backstop.
CLUSTER_TEST_SECONDS = 1500


@pytest.fixture(scope="module")
def local_reference(tmp_path_factory, env):
    """`KILLED` on the local executor: the summary and records every Ray run must equal."""
    summary, run_dir = _run(tmp_path_factory.mktemp("reference"), env, "local", KILLED)
    return summary, run_dir


# A run's first records, beside the test's CPU load, after starting its actors (which import
# the model and warm a sandbox pool): well under 100 s here even under `make test-loaded-all`.
FIRST_RECORDS_SECONDS = 600


def _count(out: Path) -> int:
    try:
        return store_sql(out / "coral.sqlite", "SELECT COUNT(*) FROM evaluations",
                         read_only=True)[0][0]
    except sqlite3.Error:
        return 0


def _actor_pid(name: str) -> int:
    """The process of a named actor of the namespace "coral" (as the cluster's table has it)."""
    handle = ray.get_actor(name, namespace="coral")
    return int(ray._private.state.actors(handle._actor_id.hex())["Pid"])


def _start_and_wait(tmp_path: Path, env: dict, cluster: str, name: str, config: str,
                    *extra: str) -> tuple[subprocess.Popen, Path]:
    """Start `coral run --executor ray` on the cluster and wait for its first records;
    this test is then joined to the cluster as a driver of its own, as Coral is."""
    path = tmp_path / f"{name}.toml"
    path.write_text(config)
    out = tmp_path / name
    # files, not pipes: a pipe nobody reads until the end would stop a run that says
    # more than the pipe holds (Ray's warnings on a loaded machine)
    with open(f"{out}.stdout", "w") as stdout, open(f"{out}.stderr", "w") as stderr:
        process = subprocess.Popen(
            [str(Path(sys.executable).with_name("coral")), "run", "--plugin", "quixbugs",
             "--config", str(path), "--out", str(out), "--executor", "ray",
             "--ray-address", cluster, *extra], env=env, stdout=stdout, stderr=stderr,
            text=True)
    connect(cluster)
    try:
        deadline = time.monotonic() + FIRST_RECORDS_SECONDS
        while _count(out) < 2:
            assert process.poll() is None, _said(out)[1][-2000:]
            if time.monotonic() > deadline:
                state = _cluster_state(cluster)
                process.kill()
                process.wait()
                pytest.fail(f"the run recorded nothing in {FIRST_RECORDS_SECONDS} s; it "
                            f"said:\n{_said(out)[1][-3000:]}\nthe cluster:\n{state}")
            time.sleep(0.02)
    except BaseException:
        ray.shutdown()
        process.kill()
        raise
    return process, out


def _cluster_state(cluster: str) -> str:
    """`ray status` and this run's actors as the cluster's table has them: what a failure
    needs to say where a run that recorded nothing stood."""
    status = subprocess.run([RAY, "status", f"--address={cluster}"], capture_output=True,
                            text=True, timeout=120)
    actors = [(a.get("Name"), a.get("State"), a.get("NumRestarts"), a.get("Pid"))
              for a in ray._private.state.actors().values()]
    return f"{status.stdout[-2000:]}{status.stderr[-1000:]}\nactors: {actors}"


def _said(out: Path) -> tuple[str, str]:
    """What the run started by `_start_and_wait` printed: stdout, stderr."""
    return Path(f"{out}.stdout").read_text(), Path(f"{out}.stderr").read_text()


def _finish(process: subprocess.Popen, out: Path, timeout: float) -> tuple[str, str]:
    """Wait for that run (killed if it outlives `timeout`); what it printed."""
    try:
        process.wait(timeout=timeout)
    finally:
        process.kill()
        process.wait()
    return _said(out)


def _actors(endings: tuple[str, ...]) -> list[str]:
    named = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
             if a["namespace"] == "coral" and a["name"].endswith(endings)]
    assert len(named) == len(endings), named
    return sorted(named)


def _kill_mid_run(tmp_path: Path, env: dict, cluster: str, name: str, config: str,
                  endings: tuple[str, ...], restart: bool) -> tuple[subprocess.Popen, Path, int]:
    """Start `coral run --executor ray --json` on the cluster, wait for its first records,
    then kill its actors whose names end with `endings` (Ray restarts them if `restart`):
    the evaluation actor's process dies of SIGKILL (a crash, as the OOM killer's), any
    other actor by `ray.kill`; return the running process, its run folder and how many
    records it had then."""
    process, out = _start_and_wait(tmp_path, env, cluster, name, config, "--json")
    try:
        for actor in _actors(endings):
            if restart and actor.endswith("-evaluation-0"):
                os.kill(_actor_pid(actor), signal.SIGKILL)
            else:
                ray.kill(ray.get_actor(actor, namespace="coral"), no_restart=not restart)
        return process, out, _count(out)
    finally:
        ray.shutdown()


@pytest.mark.timeout(CLUSTER_TEST_SECONDS)
def test_a_cluster_run_survives_killed_actors_and_equals_local(
        tmp_path, env, cluster, local_reference):
    """Joined with --ray-address, beside two CPU-bound processes per core: the evaluation
    actor's process is killed (SIGKILL) and the generation actor too (`ray.kill`) while
    calls are in flight there; Ray restarts both and the calls are retried on them. Every
    record arrives once, the result is the local executor's, and the run ends in bounded
    time (issue 29: it had not ended ten minutes later)."""
    local, local_dir = local_reference
    total = len(_records(local_dir)[1])
    with _cpu_hogs():
        process, out, at_kill = _kill_mid_run(tmp_path, env, cluster, "cluster", KILLED,
                                              ("-evaluation-0", "-generation-0"),
                                              restart=True)
        started = time.monotonic()
        stdout, stderr = _finish(process, out, 600)
    assert process.returncode == 0, stderr[-3000:]
    assert "Token authentication is enabled" not in stderr  # Ray's notice, on each join
    assert at_kill < total, "the run ended before the actors were killed"
    assert timeless(json.loads(stdout)) == timeless(local)
    assert _records(out) == _records(local_dir)  # each once, none lost
    print(f"finished {time.monotonic() - started:.0f} s after the kill")


@pytest.mark.timeout(CLUSTER_TEST_SECONDS)
def test_sigterm_to_a_ray_driver_ends_it_as_ctrl_c_does(tmp_path, env, cluster):
    """`kill` of the driver: exit 130 and the line that resumes it, as with the local
    executor (Ray's core had put its own SIGTERM handler below Python's: an abort, exit
    134, its stack dump and no resume line)."""
    process, out = _start_and_wait(tmp_path, env, cluster, "terminated", KILLED)
    ray.shutdown()
    process.send_signal(signal.SIGTERM)
    _, stderr = _finish(process, out, 300)
    assert process.returncode == 130, stderr[-3000:]
    assert f"coral: interrupted; resume with: coral run --resume {out}" in stderr
    assert "SIGTERM received" not in stderr


@pytest.mark.timeout(CLUSTER_TEST_SECONDS)
def test_a_cluster_that_stops_answering_says_so_then_fails_in_one_line(
        tmp_path, env, cluster, local_reference):
    """Both actors are frozen (SIGSTOP: alive to Ray, answering nothing, as a wedged node
    is) mid-run. The progress line says what the run waits for, a warning says it once,
    and when no call has finished for CORAL_RAY_STALL_SECONDS the trial stops with one
    line (exit 2) instead of waiting forever; a resume finishes with the local records."""
    local, local_dir = local_reference
    # long enough for a loaded machine to start the run (placing the actors, warming the
    # sandboxes: the watchdog counts that too), short for a test
    stall = 45
    stalled = {**env, "CORAL_RAY_STALL_SECONDS": str(stall)}
    process, out = _start_and_wait(tmp_path, stalled, cluster, "frozen", KILLED)
    frozen = []
    try:
        try:
            for actor in _actors(("-evaluation-0", "-generation-0")):
                frozen.append(_actor_pid(actor))
                os.kill(frozen[-1], signal.SIGSTOP)
        finally:
            ray.shutdown()
        started = time.monotonic()
        _, stderr = _finish(process, out, 300)
        waited = time.monotonic() - started
    finally:
        for pid in frozen:  # whatever is left of them must not hold the cluster
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGCONT)
    assert process.returncode == 2, stderr[-3000:]
    lines = stderr.strip().splitlines()
    last = lines[-1]
    assert "Ray finished no call in" in last and "in flight, oldest" in last, last
    assert "CORAL_RAY_STALL_SECONDS" in last and "--resume" in last, last
    assert any("(waiting for Ray: " in line and " in flight, oldest " in line
               for line in lines), stderr[-3000:]  # the progress line's note
    assert any(line.startswith("coral: warning: waiting for Ray: ") for line in lines), (
        stderr[-3000:])
    assert waited < stall + 150, f"{waited:.0f} s from the freeze to the exit"
    _resume_equals_local(out, env, local, local_dir)


def _resume_equals_local(out, env, local, local_dir) -> None:
    """Ray's failure was not recorded as candidates' errors, and a resume on the cluster
    finishes with the local executor's summary and records."""
    with sqlite3.connect(f"file:{out / 'coral.sqlite'}?mode=ro", uri=True) as db:
        details = [json.loads(row[0]) for row in db.execute("SELECT details FROM evaluations")]
    assert not [d["error"] for d in details if "error" in d], (
        "Ray's failure was recorded as candidates' errors")
    resumed = run_coral("run", "--resume", str(out), "--json", env=env, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert timeless(json.loads(resumed.stdout)) == timeless(local)
    assert _records(out) == _records(local_dir)


@pytest.mark.timeout(CLUSTER_TEST_SECONDS)
def test_an_actor_lost_for_good_stops_the_trial_in_one_line_and_resume_finishes(
        tmp_path, env, cluster, local_reference):
    """An evaluation actor killed without restart: Ray's failure is not recorded as the
    candidates' errors; the run stops with one line (exit 2), and a resume on the cluster
    finishes with the local executor's records."""
    local, local_dir = local_reference
    process, out, _ = _kill_mid_run(tmp_path, env, cluster, "lost", KILLED,
                                    ("-evaluation-0",), restart=False)
    _, stderr = _finish(process, out, 600)
    if process.returncode == 0:  # every scoring call had returned before the kill
        pytest.skip("the run finished before the actor was killed")
    assert process.returncode == 2, stderr[-2000:]
    lines = stderr.strip().splitlines()
    assert "Ray lost a scoring call" in lines[-1] and "--resume" in lines[-1], stderr[-2000:]
    _resume_equals_local(out, env, local, local_dir)


@pytest.mark.parametrize("address, words", [
    ("127.0.0.1:{closed}", "cannot reach the Ray cluster at 127.0.0.1:"),
    ("no-port-here", "is not HOST:PORT"),
    # a port that takes the connection and says nothing: Ray retried it for minutes
    ("127.0.0.1:{silent}", "answers, but not as a Ray cluster"),
    ("auto", "answers, but not as a Ray cluster"),  # RAY_ADDRESS names the silent port
])
def test_an_unreachable_cluster_is_one_line_and_no_run(tmp_path, env, address, words):
    with socket.socket() as silent:
        silent.bind(("", 0))  # every address: Ray reads 127.0.0.1 as the node's own
        silent.listen()
        port = silent.getsockname()[1]
        address = address.format(closed=_free_port(), silent=port)
        out = tmp_path / "never"
        result = run_coral("run", "--plugin", "quixbugs", "--limit", "1", "--samples", "1",
                           "--executor", "ray", "--ray-address", address, "--out", str(out),
                           env={**env, "RAY_ADDRESS": f"127.0.0.1:{port}"}, timeout=120)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], result.stderr
    assert not out.exists()


@pytest.mark.parametrize("address", [" ", "localhost:99999", "a b:1", "ray://", "host:",
                                     "ray:// x", "[]:6379", "host:" + "1" * 5000,
                                     "[::1:6379", "::1:6379", "[[::1]]:6379"])
def test_an_address_that_cannot_be_one_is_refused_by_dry_run(tmp_path, env, address):
    """A red-team pass: these passed --dry-run (a real run refused them)."""
    result = run_coral("run", "--plugin", "quixbugs", "--limit", "1", "--executor", "ray",
                       "--ray-address", address, "--out", str(tmp_path / "r"), "--dry-run",
                       env=env, timeout=120)
    assert result.returncode == 2 and not result.stdout, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "is not HOST:PORT" in lines[0], result.stderr


def test_an_ipv6_address_in_brackets_is_probed():
    """[::1]:PORT reached the socket with its brackets ('Name or service not known')."""
    from coral_core.errors import UserError
    from coral_core.executors.ray_cluster import _reachable

    try:
        listener = socket.create_server(("::1", 0), family=socket.AF_INET6)
    except OSError:
        pytest.skip("no IPv6 loopback here")
    with listener:
        port = listener.getsockname()[1]
        with pytest.raises(UserError, match="not as a Ray cluster"):
            _reachable(f"[::1]:{port}")


def test_a_search_value_the_cluster_refuses_stops_the_run_before_it_begins(
        tmp_path, env, cluster, tiny_models):
    """The driver (a login node) cannot see the cluster's files: a search over
    `model.adapter` passes its checks (--dry-run), and an actor judges each value before
    the run begins; one the cluster lacks stopped the run only at its trial, leaving a
    run no resume could finish (a reviewer's pass)."""
    from tiny_model import shared_tiny_model

    missing = tmp_path / "adapter-nowhere"
    config = tmp_path / "search.toml"
    config.write_text(f'[model]\nspec = "hf:{shared_tiny_model(tiny_models)}"\n'
                      '[search]\nstrategy = "grid"\n[search.space]\n'
                      f'"model.adapter" = ["{missing}"]\n')
    out = tmp_path / "never"
    command = ("run", "--plugin", "quixbugs", "--limit", "1", "--samples", "1", "--config",
               str(config), "--executor", "ray", "--ray-address", cluster, "--out", str(out))
    dry = run_coral(*command, "--dry-run", env=env, timeout=300)
    assert dry.returncode == 0, dry.stderr
    result = run_coral(*command, env=env, timeout=600)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert f'model.adapter = "{missing}"' in lines[-1] and "adapter" in lines[-1], lines
    assert not out.exists()


def test_the_address_auto_finds_is_read_with_an_ipv6_host_in_brackets(monkeypatch):
    """Where the address `auto` resolves to has a bare IPv6 host (as a recorded
    `ray start` may), it was refused as 'not HOST:PORT' (a reviewer's pass)."""
    from coral_core.executors.ray_cluster import _auto_address, bracketed, check_address

    for found, read in (("2001:db8::1:6379", "[2001:db8::1]:6379"),
                        ("[2001:db8::1]:6379", "[2001:db8::1]:6379"),
                        ("10.0.0.1:6379", "10.0.0.1:6379")):
        assert bracketed(found) == read
        check_address(read)
    monkeypatch.setenv("RAY_ADDRESS", "[2001:db8::1]:6380")
    assert _auto_address() == "[2001:db8::1]:6380"
    import ray._private.services as services

    monkeypatch.setattr(services, "canonicalize_bootstrap_address",
                        lambda address: "2001:db8::1:6381")  # as a recorded `ray start` may
    assert _auto_address() == "[2001:db8::1]:6381"


@pytest.mark.parametrize("dry_run", [(), ("--dry-run",)])
def test_a_stall_deadline_that_is_not_seconds_is_one_line_and_no_run(tmp_path, env, dry_run):
    """Refused before Ray starts, by --dry-run too; at most a year (1e308 is no deadline),
    at least a second (1e-9 gave up at once), ASCII digits (float() reads '１０')."""
    out = tmp_path / "never"
    for value in ("soon", "1e308", "-5", "1e-9", "\uff11\uff10"):
        result = run_coral("run", "--plugin", "quixbugs", "--limit", "1", "--samples", "1",
                           "--executor", "ray", "--out", str(out), *dry_run,
                           env={**env, "CORAL_RAY_STALL_SECONDS": value}, timeout=120)
        assert result.returncode == 2 and not result.stdout
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and f"CORAL_RAY_STALL_SECONDS='{value}'" in lines[0], lines
        assert not out.exists()
    result = run_coral("run", "--plugin", "quixbugs", "--limit", "1", "--executor", "ray",
                       "--out", str(out), "--dry-run",
                       env={**env, "CORAL_RAY_STALL_SECONDS": "31536000"}, timeout=120)
    assert result.returncode == 0, result.stderr


def test_what_a_ray_run_waits_for_reaches_the_progress_line(capsys):
    """The executor's note travels on the 'coral.progress' logger: a plain progress log
    shows it on the phase's line (and clears it), and it is never a log line of its own."""
    from coral_cli.progress import PlainProgress
    from coral_plugins.executors.ray.executor import NOTES, waiting_text

    assert waiting_text(3, 47.9) == "waiting for Ray: 3 calls in flight, oldest 40 s"
    assert waiting_text(1, 185) == "waiting for Ray: 1 call in flight, oldest 180 s"
    with PlainProgress() as progress:
        progress.start("evaluate", 8, 2)
        NOTES.info(waiting_text(4, 31), extra={"coral_phase": "evaluate"})
        NOTES.info("", extra={"coral_phase": "evaluate"})
        progress.advance("evaluate", 6)
    NOTES.info("after the display", extra={"coral_phase": "evaluate"})  # nobody listens
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["evaluate: 2/8", "evaluate: 2/8 (waiting for Ray: 4 calls in flight, "
                     "oldest 30 s)", "evaluate: 8/8"], lines
    assert NOTES.level == logging.NOTSET  # nobody listens: an executor's note costs nothing
    assert not [h for h in NOTES.handlers if type(h).__module__ == "coral_cli.progress"]


class _SettingsProbe:
    """An actor that builds one of Coral's actors in its own process, then says which
    CORAL_* settings that process has."""

    def __init__(self, worker_class, args: tuple, environment: dict):
        self.worker = worker_class(*args, environment=environment)

    def settings(self) -> dict:
        return {k: v for k, v in os.environ.items() if k.startswith("CORAL_")}


def test_actors_on_a_node_take_the_drivers_coral_settings(cluster):
    """A node does not share the driver's environment: each actor is given the driver's
    CORAL_* settings, by its constructor (Ray's runtime environment for them would cost a
    fresh worker process per actor)."""
    from ray import cloudpickle

    from coral_plugins.executors.ray.actors import EvaluationWorker, GenerationWorker

    marker = f"CORAL_PROBE_{os.getpid()}"
    connect(cluster)
    try:
        cloudpickle.register_pickle_by_value(sys.modules[__name__])
        probe = ray.remote(num_cpus=0)(_SettingsProbe)
        for worker_class, args in ((GenerationWorker, ({},)), (EvaluationWorker, ({}, 1))):
            actor = probe.remote(worker_class, args, {marker: "from the driver"})
            assert ray.get(actor.settings.remote(), timeout=300).get(marker) \
                == "from the driver", worker_class.__name__
            bare = probe.remote(worker_class, args, {})
            assert marker not in ray.get(bare.settings.remote(), timeout=300)
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
        ray.shutdown()


def test_ray_is_imported_only_by_a_run_that_names_it(env):
    probe = ("import sys; from coral_core import plugins; plugins.registry(); "
             "import coral_cli.app; print('ray' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
    from coral_core import plugins

    assert "ray" in plugins.registry().names("executors")


def test_a_ray_that_fails_on_import_is_one_line_naming_the_settings(tmp_path, monkeypatch):
    """Ray reads its RAY_* settings on import; a bad one raised from deep inside it (a
    traceback, exit 1). A package that fails on import as it did stands in for Ray."""
    from coral_core.errors import UserError
    from coral_core.executors.ray_cluster import import_ray

    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "__init__.py").write_text(
        "raise ValueError(\"invalid literal for int() with base 10: 'x'\")\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "ray")
    monkeypatch.setenv("RAY_backend_log_level", "x")
    with pytest.raises(UserError, match=r"^Ray could not be imported: ValueError: invalid "
                                        r"literal .*'x' \(check .*RAY_backend_log_level"):
        import_ray()


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


@pytest.mark.parametrize("address", ["", "local"])
def test_a_local_ray_retries_its_object_store_in_short_steps(address):
    """A local Ray's raylet connected to its object store before the store's thread
    listened on about a third of starts here, and Ray tries again a second later: Coral's
    own Ray (no address, or "local") is started with 20 ms steps (the same 10 s in all)
    and this machine's CPUs. Every process of that Ray takes its settings from the GCS,
    as this driver did."""
    from coral_core.executors.ray_cluster import LOCAL_RAY_CONFIG, shutdown

    assert not ray.is_initialized()
    assert connect(address) is True
    try:
        stored = ray._private.state.state.get_system_config()
        for key, value in LOCAL_RAY_CONFIG.items():
            assert stored.get(key) == value, key
            assert getattr(ray._raylet.Config, key)() == value, key  # applied here
        assert ray.cluster_resources()["CPU"] == os.cpu_count()
    finally:
        shutdown(ray)
