"""The Ray executor: the runner's generation batches go to generation actors, its scoring
jobs to one evaluation actor per node; only the driver writes the run store.

Actors live for the whole run (a model loads once per actor, a sandbox pool warms once per
node). A batch goes to an idle actor that already holds its adapter where there is one, so
adapters are swapped as rarely as possible. Actors are restarted by Ray when they die, and
the calls in flight there are retried on the restarted actor: generation and scoring are
deterministic functions of their inputs, so a retry gives what the first try would have,
and the driver records each result once, when it arrives.

No wait is open-ended. Every call to an actor is tracked from here until its result
arrives; a watchdog thread says what the run is waiting for when no call has finished for
a while ("waiting for Ray: N calls in flight, oldest X s" on the progress line, and in the
log), and fails every call in flight with one line when none has finished for
`CORAL_RAY_STALL_SECONDS` (30 minutes by default): the deadline counts time without any
progress, never a call's own duration, so a slow or loaded cluster that still finishes
work is never failed.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from concurrent.futures import FIRST_EXCEPTION, Future, InvalidStateError, wait
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from coral_core.config.blueprints import ModelBlueprint, ScoringBlueprint
from coral_core.errors import UserError
from coral_core.executors.ray_cluster import connect, coral_environment, import_ray, shutdown
from coral_core.types import Generation, GenerationRequest, ScoredCandidate, Task

from .actors import EvaluationWorker, GenerationWorker

log = logging.getLogger(__name__)
# What a phase waits for, for the progress display (cli/progress.py listens while it
# shows); never printed as a log line of its own.
NOTES = logging.getLogger("coral.progress")
NOTES.propagate = False

NAMESPACE = "coral"  # actors are named <run tag>-generation-N / -evaluation-N in it
RESTARTS = 4  # times Ray restarts a dead actor
# Calls in flight on a dead actor are retried on its restart for as long as Ray restarts
# it: a finite count is spent while the actor is still restarting (each resubmission to a
# restarting actor fails fast and counts), so a slow restart on a loaded node failed calls
# whose actor did come back. An actor dead for good fails its calls at once.
RETRIES = -1
CLOSE_SECONDS = 60.0
STALL_VARIABLE = "CORAL_RAY_STALL_SECONDS"
STALL_SECONDS = 1800.0  # no call finished for this long: the run gives up (placing the
#                         actors and loading a model in each fits in it)
MAX_STALL_SECONDS = 365 * 86400.0
QUIET_SECONDS = 30.0  # no call finished for this long: the progress line says what Ray holds
WARN_SECONDS = 120.0  # ... and a warning says it once, even with --json
TICK_SECONDS = 2.0  # the watchdog's period


HELD_ADAPTERS = 4  # adapters an actor is assumed to keep loaded (the hf model's default LRU)


@dataclass(eq=False)
class _Member:
    """An actor and what the driver knows of it."""

    actor: Any
    name: str = ""
    busy: int = 0
    adapters: list = field(default_factory=list)  # recently used, most recent last
    restarts: int = 0  # as the watchdog last saw them

    def used(self, adapter: str | None) -> None:
        if adapter in self.adapters:
            self.adapters.remove(adapter)
        self.adapters = (self.adapters + [adapter])[-HELD_ADAPTERS:]


@dataclass(eq=False)
class _Call:
    """A call to an actor, from submission until its outcome is handed over."""

    ref: Any
    future: Future
    member: _Member
    doing: str  # "generation", "scoring", "starting its actors"
    phase: str  # the progress phase it holds up ("" for none)
    started: float
    ready_seen: bool = False  # Ray had its result at the last tick


def choose_generator(members: Sequence[_Member], adapter: str | None) -> _Member:
    """The actor for a batch: one that holds its adapter, unless it has more than one
    batch more queued than the least busy actor (then the least busy: an adapter load
    costs less than waiting a whole batch); ties go to the earlier actor."""
    least = min(m.busy for m in members)
    holders = [m for m in members if adapter in m.adapters and m.busy <= least + 1]
    return min(holders or members, key=lambda m: m.busy)


def stall_seconds() -> float:
    """`CORAL_RAY_STALL_SECONDS`, or the default: how long a run waits without any call
    finishing before it gives up."""
    text = os.environ.get(STALL_VARIABLE, "").strip()
    if not text:
        return STALL_SECONDS
    try:  # ASCII only: float() reads full-width digits too
        value = float(text) if text.isascii() else -1.0
    except ValueError:
        value = -1.0
    # at least a second: a smaller one gave up at once, saying "after 0 s"
    if not 1 <= value <= MAX_STALL_SECONDS:
        raise UserError(f"{STALL_VARIABLE}={text!r}: give the seconds a Ray run may go "
                        f"without any call finishing, a number from 1 to "
                        f"{MAX_STALL_SECONDS:.0f} (a year)")
    return value


def waiting_text(count: int, oldest: float) -> str:
    """'waiting for Ray: 3 calls in flight, oldest 40 s' (the age in steps of 10 s, then
    of a minute, so a plain progress log gets a line per step, not per tick)."""
    step = 10 if oldest < 120 else 60
    shown = int(oldest // step * step)
    return f"waiting for Ray: {count} call{'s' * (count != 1)} in flight, oldest {shown} s"


class RayExecutor:
    name = "ray"

    def __init__(self, settings: Mapping[str, Any]):
        self.settings = dict(settings)
        self.stall = stall_seconds()
        self.ray = import_ray()
        self.owned = connect(str(self.settings.get("ray_address") or ""))
        # Never held while calling Ray: a result's callback (on Ray's own thread) takes it.
        self._lock = threading.Lock()
        self._starting = threading.Lock()  # actors start once, never after close()
        self._sharing = threading.Lock()  # object-store puts; no callback takes it
        self._generators: list[_Member] = []
        self._evaluators: list[_Member] = []
        self._shared: dict[tuple[str, str], Any] = {}  # object-store refs of tasks, blueprints
        self._calls: dict[Future, _Call] = {}  # in flight, by the future handed out
        self._progress_at = time.monotonic()  # the last call finished (or work began)
        self._noted: set[str] = set()  # phases whose progress note is ours
        self._warned = False  # this stall was warned about
        self._said = ""  # what -v last said about it
        self._wedged: set[_Member] = set()  # actors whose calls the watchdog gave up on
        self._closed = False
        self._stop = threading.Event()
        self._watchdog: threading.Thread | None = None
        self.tag = f"coral-{uuid.uuid4().hex[:12]}"  # names this run's actors on the cluster

    # ------------------------------------------------------------------ actors

    @property
    def generation_slots(self) -> int:
        """Batches the runner may have in flight at once: one per generation actor."""
        return max(1, len(self._generators))

    @property
    def parallel_trials(self) -> int:
        """Trials of one batch the runner may run at once (those that share a model and
        scorers): while one trial's samples are scored, another's are generated."""
        return int(self.settings.get("parallel_trials") or 0) or 2 * self.generation_slots

    def _start_generators(self, model: ModelBlueprint) -> None:
        with self._starting:
            if self._generators or self._closed:
                return
            ray = self.ray
            wanted = int(self.settings.get("generation_actors") or 0)
            gpus = int(ray.cluster_resources().get("GPU", 0)) if _needs_gpu(model) else 0
            if gpus and wanted > gpus:
                raise UserError(f"[execution] generation_actors = {wanted}, but the Ray "
                                f"cluster has {gpus} GPU(s): each actor holds one")
            count = wanted or gpus or 1
            resources = {"num_gpus": 1, "num_cpus": 0} if gpus else {"num_cpus": 0}
            remote = ray.remote(GenerationWorker)
            members = []
            for index in range(count):
                name = f"{self.tag}-generation-{index}"
                members.append(_Member(remote.options(
                    name=name, namespace=NAMESPACE, max_restarts=RESTARTS,
                    max_task_retries=RETRIES, **resources,
                ).remote(self.settings, coral_environment()), name=name))
            self._generators = members
            log.info("%d generation actor(s)%s", count, " on GPUs" if gpus else "")

    def _start_evaluators(self) -> None:
        with self._starting:
            if self._evaluators or self._closed:
                return
            ray = self.ray
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            nodes = [n for n in ray.nodes()
                     if n.get("Alive") and n["Resources"].get("CPU", 0) > 0]
            if not nodes:
                raise UserError("the Ray cluster has no node with CPUs to score candidates on")
            count = int(self.settings.get("evaluation_actors") or 0) or len(nodes)
            placed = [nodes[index % len(nodes)] for index in range(count)]
            members = []
            for index, node in enumerate(placed):
                sharing = sum(other is node for other in placed)  # a node's CPUs, split
                workers = (int(self.settings.get("workers") or 0)
                           or max(1, int(node["Resources"]["CPU"]) // sharing))
                strategy = NodeAffinitySchedulingStrategy(node["NodeID"], soft=True)
                name = f"{self.tag}-evaluation-{index}"
                members.append(_Member(ray.remote(EvaluationWorker).options(
                    name=name, namespace=NAMESPACE, num_cpus=0,
                    max_concurrency=2 * workers, max_restarts=RESTARTS,
                    max_task_retries=RETRIES, scheduling_strategy=strategy,
                ).remote(self.settings, workers, coral_environment()), name=name))
            self._evaluators = members
            log.info("%d evaluation actor(s) on %d node(s)", count, len(nodes))

    def _share(self, kind: str, key: str, value: Any) -> Any:
        """Put a task or blueprint in the object store once; calls pass the reference."""
        with self._sharing:
            ref = self._shared.get((kind, key))
            if ref is None:
                ref = self._shared[(kind, key)] = self.ray.put(value)
            return ref

    # ------------------------------------------------------------------ calls

    def _track(self, member: _Member, ref: Any, doing: str, phase: str) -> Future:
        """A call just submitted: its future settles when Ray has its outcome (or when the
        watchdog gives up on it), never later."""
        future: Future = Future()
        call = _Call(ref, future, member, doing, phase, time.monotonic())
        with self._lock:
            if self._closed:  # closed while it was being submitted: nobody will settle it
                future.set_exception(RuntimeError("the Ray executor is closed"))
                return future
            if not self._calls:  # the stall clock runs only while something is awaited
                self._progress_at = call.started
            self._calls[future] = call
        self._start_watchdog()
        ref.future().add_done_callback(lambda done: self._arrived(call, done))
        return future

    def _arrived(self, call: _Call, done: Future) -> None:
        """Ray's callback (on its own thread): hand the outcome over, taking no lock that
        is held while calling Ray."""
        error = done.exception()
        self._settle(call, done.result() if error is None else self._outcome(call, error))

    def _outcome(self, call: _Call, error: BaseException) -> BaseException:
        """What a failed call raises: the actor's own exception (a candidate's UserError
        stays one), or Ray's failure as one line (the trial stops; resume redoes it)."""
        if isinstance(error, self.ray.exceptions.RayTaskError):
            cause = getattr(error, "cause", None)
            return cause if isinstance(cause, BaseException) else error
        if call.doing == "starting its actors":
            return UserError(f"Ray failed while starting its actors: {_first_line(error)}")
        return UserError(f"Ray lost a {call.doing} call: {_first_line(error)}")

    def _settle(self, call: _Call, outcome: Any) -> None:
        """The call's one outcome (later ones, from the watchdog or Ray, are dropped)."""
        with self._lock:
            if self._calls.pop(call.future, None) is None:
                return
            call.member.busy -= 1
            self._progress_at = time.monotonic()  # Ray answered (or the watchdog gave up)
            self._warned = False
        try:
            if isinstance(outcome, BaseException):
                call.future.set_exception(outcome)
            else:
                call.future.set_result(outcome)
        except InvalidStateError:  # cancelled meanwhile
            pass

    def _await(self, futures: Sequence[Future]) -> list[Any]:
        """Every result, in order; the first failure raised as soon as it arrives. Bounded
        by the watchdog, which settles every tracked call."""
        pending = list(futures)
        while True:
            if self._stop.is_set() and not all(f.done() for f in pending):
                raise RuntimeError("the Ray executor is closed")
            done, pending_set = wait(pending, timeout=TICK_SECONDS,
                                     return_when=FIRST_EXCEPTION)
            for future in done:
                if future.exception() is not None:
                    raise future.exception()
            if not pending_set:
                return [future.result() for future in futures]
            pending = list(pending_set)

    # ------------------------------------------------------------------ the watchdog

    def _start_watchdog(self) -> None:
        with self._lock:
            if self._watchdog is not None or self._stop.is_set():
                return
            self._watchdog = threading.Thread(target=self._watch, daemon=True,
                                              name="coral-ray-watchdog")
        self._watchdog.start()

    def _watch(self) -> None:
        while not self._stop.wait(TICK_SECONDS):
            try:
                self._tick(time.monotonic())
            except Exception as error:  # the watchdog must outlive a hiccup of Ray's
                log.debug("the Ray watchdog's check failed: %s", _first_line(error))

    def _tick(self, now: float) -> None:
        with self._lock:
            calls = list(self._calls.values())
            quiet = now - self._progress_at
        if not calls:
            self._clear_notes()
            return
        self._collect_missed(calls)
        if quiet < min(QUIET_SECONDS, self.stall / 3):
            self._clear_notes()
            return
        calls = [c for c in calls if not c.future.done()]
        if not calls:
            return
        text = waiting_text(len(calls), now - min(c.started for c in calls))
        states = self._actor_states({c.member for c in calls})
        detail = f"{text}{'; ' + states if states else ''}"
        if detail != self._said:  # -v: a line per step of the age, not per tick
            self._said = detail
            log.info("%s; none finished for %.0f s", detail, quiet)
        phases = {c.phase for c in calls if c.phase}
        for phase in sorted(phases):  # each phase's line: the calls that hold it up
            mine = [c for c in calls if c.phase == phase]
            self._noted.add(phase)
            NOTES.info(waiting_text(len(mine), now - min(c.started for c in mine)),
                       extra={"coral_phase": phase})
        for phase in sorted(self._noted - phases):
            self._noted.discard(phase)
            NOTES.info("", extra={"coral_phase": phase})
        if quiet >= min(WARN_SECONDS, self.stall / 2) and not self._warned:
            self._warned = True
            log.warning("%s; no call has finished for %.0f s (the run gives up after %.0f s "
                        "without progress: %s)", detail, quiet, self.stall, STALL_VARIABLE)
        if quiet >= self.stall:
            oldest = now - min(c.started for c in calls)
            self._give_up(calls, f"{len(calls)} call{'s' * (len(calls) != 1)} in flight, "
                          f"oldest {oldest:.0f} s{'; ' + states if states else ''}", quiet)

    def _collect_missed(self, calls: Sequence[_Call]) -> None:
        """A result Ray holds whose callback has not come by the next tick is fetched
        here, so a lost notification cannot stall a run."""
        try:
            ready, _ = self.ray.wait([c.ref for c in calls], num_returns=len(calls),
                                     timeout=0, fetch_local=False)
        except Exception as error:
            log.debug("ray.wait for the calls in flight failed: %s", _first_line(error))
            return
        ready = set(ready)
        for call in calls:
            if call.ref not in ready:
                continue
            if not call.ready_seen:
                call.ready_seen = True
                continue
            log.debug("a %s call's result came without its callback", call.doing)
            try:
                outcome: Any = self.ray.get(call.ref, timeout=CLOSE_SECONDS)
            except Exception as error:
                outcome = self._outcome(call, error)
            self._settle(call, outcome)

    def _actor_states(self, members: set[_Member]) -> str:
        """'generation-0 restarting (restart 1 of 4)' for each actor not alive, from the
        cluster's actor table; a restart is logged once. Best effort: '' where Ray's
        table cannot be read."""
        try:
            table = self.ray._private.state.actors
        except AttributeError:
            return ""
        said = []
        for member in sorted(members, key=lambda m: m.name):
            try:
                info = table(member.actor._actor_id.hex())
            except Exception:
                continue
            state = str(info.get("State", "")).lower()
            restarts = int(info.get("NumRestarts", 0) or 0)
            short = member.name.removeprefix(f"{self.tag}-")
            if restarts > member.restarts:
                member.restarts = restarts
                log.info("Ray restarted actor %s (restart %d of %d); its calls in flight "
                         "are retried there", short, restarts, RESTARTS)
            if state and state != "alive":
                said.append(f"{short} {state.replace('_', ' ')}"
                            f"{f' (restart {restarts} of {RESTARTS})' if restarts else ''}")
        return ", ".join(said)

    def _give_up(self, calls: Sequence[_Call], detail: str, quiet: float) -> None:
        """No call finished for `stall` seconds: each call in flight fails with one line
        (the trial stops; a resume redoes what was lost)."""
        error = UserError(f"Ray finished no call in {quiet:.0f} s: {detail}; see 'ray "
                          f"status' and the actors' logs, or allow more time with "
                          f"{STALL_VARIABLE}")
        log.debug("giving up on %d Ray call(s)", len(calls))
        with self._lock:
            self._wedged.update(c.member for c in calls)
        for call in calls:
            self._settle(call, error)
        with self._lock:
            self._progress_at = time.monotonic()

    def _clear_notes(self) -> None:
        if self._said:
            log.info("Ray is finishing calls again")
            self._said = ""
        for phase in sorted(self._noted):
            NOTES.info("", extra={"coral_phase": phase})
        self._noted.clear()

    # ------------------------------------------------------------------ the protocol

    def prepare(self, model: ModelBlueprint, scoring: ScoringBlueprint,
                adapters: Sequence[str] = ()) -> None:
        self._start_generators(model)
        self._start_evaluators()
        calls = ([(m, m.actor.prepare.remote(model, list(adapters))) for m in self._generators]
                 + [(m, m.actor.prepare.remote(scoring)) for m in self._evaluators])
        with self._lock:
            for member, _ in calls:
                member.busy += 1
        self._await([self._track(member, ref, "starting its actors", "")
                     for member, ref in calls])

    def check_models(self, sections: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        """The search's model values judged on a machine that builds models (the driver,
        a login node, cannot see the cluster's devices and files): one the cluster
        refuses stops the run before it begins, not at that value's trial."""
        member = self._generators[0]
        with self._lock:
            member.busy += 1
        ref = self._send(member, "check_models", list(sections))
        said = self._await([self._track(member, ref, "starting its actors", "")])[0]
        if said:
            raise UserError(said)

    def generate(self, model: ModelBlueprint, requests: Sequence[GenerationRequest],
                 ) -> list[list[Generation]]:
        """The actor that holds the batch's adapter where one does (`choose_generator`)."""
        self._start_generators(model)
        adapter = requests[0].adapter if requests else None
        with self._lock:
            if self._closed:
                raise RuntimeError("the Ray executor is closed")
            member = choose_generator(self._generators, adapter)
            member.busy += 1
            member.used(adapter)
        ref = self._send(member, "generate", model, list(requests))
        return self._await([self._track(member, ref, "generation", "generate")])[0]

    def submit(self, scoring: ScoringBlueprint, task: Task, text: str,
               extract: bool = True) -> "Future[ScoredCandidate]":
        self._start_evaluators()
        blueprint = self._share("scoring", scoring.digest, scoring)
        shared_task = self._share("task", f"{scoring.dataset.digest}/{task.id}", task)
        with self._lock:
            if self._closed:
                raise RuntimeError("the Ray executor is closed")
            member = min(self._evaluators, key=lambda m: m.busy)
            member.busy += 1
        ref = self._send(member, "score", blueprint, shared_task, text, extract)
        return self._track(member, ref, "scoring", "evaluate")

    def _send(self, member: _Member, method: str, *args: Any) -> Any:
        """One call to a member already counted busy; the count is given back when the call
        cannot even be sent (no callback would ever give it back)."""
        try:
            return getattr(member.actor, method).remote(*args)
        except BaseException:
            with self._lock:
                member.busy -= 1
            raise

    def _abandon(self, why: str) -> None:
        """Settle every call still in flight with `why`: once the watchdog stops, nothing
        else would, and a thread waiting on one (a generation helper) would hold the
        interpreter's exit (Ray retries a call on an actor killed at close)."""
        with self._lock:
            self._closed = True
            pending, self._calls = list(self._calls.values()), {}
        for call in pending:
            try:
                call.future.set_exception(RuntimeError(why))
            except InvalidStateError:
                pass

    def cancel(self) -> None:
        """Ctrl-C: kill the actors (their sandboxes die with them) and return at once."""
        self._stop.set()
        self._abandon("cancelled")
        with self._lock:
            members = self._generators + self._evaluators
        for member in members:
            try:
                self.ray.kill(member.actor, no_restart=True)
            except Exception:  # already gone
                pass
        if self.owned:  # a local Ray we started must not outlive us; give it a moment
            stopper = threading.Thread(target=shutdown, args=(self.ray,), daemon=True)
            stopper.start()
            stopper.join(5.0)

    def close(self) -> None:
        self._stop.set()
        self._abandon("the Ray executor is closed")  # the run is over: none is awaited
        with self._starting, self._lock:
            members, self._generators, self._evaluators = (
                self._generators + self._evaluators, [], [])
            answering = [m for m in members if m not in self._wedged]
        self._clear_notes()
        try:
            if answering:  # sandboxes and models released in order, not by a kill
                self.ray.get([m.actor.close.remote() for m in answering],
                             timeout=CLOSE_SECONDS)
        except Exception as error:
            log.warning("a Ray actor did not close cleanly: %s", _first_line(error))
        for member in members:
            try:
                self.ray.kill(member.actor, no_restart=True)
            except Exception:
                pass
        if self.owned and self.ray.is_initialized():
            shutdown(self.ray)


def _needs_gpu(model: ModelBlueprint) -> bool:
    """Only a model that runs weights here wants a GPU; the baseline, the reference and
    remote servers (openai:) run on CPU actors."""
    return str(model.section.get("spec", "")).split(":", 1)[0] == "hf"


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:300] if text else type(error).__name__
