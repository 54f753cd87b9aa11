"""The Ray executor: the runner's generation batches go to generation actors, its scoring
jobs to one evaluation actor per node; only the driver writes the run store.

Actors live for the whole run (a model loads once per actor, a sandbox pool warms once per
node). A batch goes to an idle actor that already holds its adapter where there is one, so
adapters are swapped as rarely as possible. Actors are restarted by Ray when they die, and
the call in flight is retried there: generation and scoring are deterministic functions of
their inputs, so a retry gives what the first try would have, and the driver records each
result once, when it arrives.
"""

from __future__ import annotations

import logging
import threading
import uuid
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from coral_core.blueprints import ModelBlueprint, ScoringBlueprint
from coral_core.errors import UserError
from coral_core.scoring import ScoredCandidate
from coral_core.types import Generation, GenerationRequest, Task

from .actors import EvaluationWorker, GenerationWorker
from .cluster import connect, import_ray

log = logging.getLogger(__name__)

NAMESPACE = "coral"  # actors are named <run tag>-generation-N / -evaluation-N in it
RESTARTS = 4  # times Ray restarts a dead actor
RETRIES = 4  # times a call in flight on a dead actor is retried on its restart
CLOSE_SECONDS = 60.0
PREPARE_SECONDS = 1800.0  # to place the actors and load the model in each


HELD_ADAPTERS = 4  # adapters an actor is assumed to keep loaded (the hf model's default LRU)


@dataclass
class _Member:
    """An actor and what the driver knows of it."""

    actor: Any
    busy: int = 0
    adapters: list = field(default_factory=list)  # recently used, most recent last

    def used(self, adapter: str | None) -> None:
        if adapter in self.adapters:
            self.adapters.remove(adapter)
        self.adapters = (self.adapters + [adapter])[-HELD_ADAPTERS:]


def choose_generator(members: Sequence[_Member], adapter: str | None) -> _Member:
    """The actor for a batch: one that holds its adapter, unless it has more than one
    batch more queued than the least busy actor (then the least busy: an adapter load
    costs less than waiting a whole batch); ties go to the earlier actor."""
    least = min(m.busy for m in members)
    holders = [m for m in members if adapter in m.adapters and m.busy <= least + 1]
    return min(holders or members, key=lambda m: m.busy)


class RayExecutor:
    name = "ray"

    def __init__(self, settings: Mapping[str, Any]):
        self.settings = dict(settings)
        self.ray = import_ray()
        self.owned = connect(str(self.settings.get("ray_address") or ""))
        self._lock = threading.Lock()
        self._starting = threading.Lock()  # actors start once, never after close()
        self._generators: list[_Member] = []
        self._evaluators: list[_Member] = []
        self._shared: dict[tuple[str, str], Any] = {}  # object-store refs of tasks, blueprints
        self._pending: dict[Future, Any] = {}
        self._closed = False
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
            self._generators = [_Member(remote.options(
                name=f"{self.tag}-generation-{index}", namespace=NAMESPACE,
                max_restarts=RESTARTS, max_task_retries=RETRIES, **resources,
            ).remote(self.settings)) for index in range(count)]
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
                members.append(_Member(ray.remote(EvaluationWorker).options(
                    name=f"{self.tag}-evaluation-{index}", namespace=NAMESPACE, num_cpus=0,
                    max_concurrency=2 * workers, max_restarts=RESTARTS,
                    max_task_retries=RETRIES, scheduling_strategy=strategy,
                ).remote(self.settings, workers)))
            self._evaluators = members
            log.info("%d evaluation actor(s) on %d node(s)", count, len(nodes))

    def _get(self, refs: Any, timeout: float | None = None, doing: str = "work") -> Any:
        """ray.get, raising what the actor raised (a UserError stays a UserError); Ray's own
        failures (an actor that cannot start or died for good, a lost object, a timeout)
        become one-line errors: the trial stops, and a resume redoes what was lost."""
        ray = self.ray
        try:
            return ray.get(refs, timeout=timeout)
        except ray.exceptions.RayTaskError as error:
            cause = getattr(error, "cause", None)
            raise (cause if isinstance(cause, BaseException) else error) from None
        except ray.exceptions.GetTimeoutError:
            raise UserError(f"Ray did not finish {doing} within {timeout:.0f} s (actors "
                            "that cannot be placed? see 'ray status')") from None
        except ray.exceptions.RayError as error:
            raise UserError(f"Ray failed during {doing}: {_first_line(error)}") from None

    def _share(self, kind: str, key: str, value: Any) -> Any:
        """Put a task or blueprint in the object store once; calls pass the reference."""
        with self._lock:
            ref = self._shared.get((kind, key))
            if ref is None:
                ref = self._shared[(kind, key)] = self.ray.put(value)
            return ref

    # ------------------------------------------------------------------ the protocol

    def prepare(self, model: ModelBlueprint, scoring: ScoringBlueprint,
                adapters: Sequence[str] = ()) -> None:
        self._start_generators(model)
        self._start_evaluators()
        self._get([m.actor.prepare.remote(model, list(adapters)) for m in self._generators]
                  + [m.actor.prepare.remote(scoring) for m in self._evaluators],
                  timeout=PREPARE_SECONDS, doing="starting its actors")

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
        try:
            return self._get(member.actor.generate.remote(model, list(requests)),
                             doing="generation")
        finally:
            with self._lock:
                member.busy -= 1

    def submit(self, scoring: ScoringBlueprint, task: Task, text: str,
               extract: bool = True) -> "Future[ScoredCandidate]":
        self._start_evaluators()
        blueprint = self._share("scoring", scoring.digest, scoring)
        shared_task = self._share("task", f"{scoring.dataset.digest}/{task.id}", task)
        future: Future[ScoredCandidate] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the Ray executor is closed")
            member = min(self._evaluators, key=lambda m: m.busy)
            member.busy += 1
            ref = member.actor.score.remote(blueprint, shared_task, text, extract)
            self._pending[future] = ref
        ref.future().add_done_callback(lambda done: self._settle(future, member, done))
        return future

    def _settle(self, future: Future, member: _Member, done: Future) -> None:
        """A scoring call ended: its result, the candidate's own error (a UserError from
        the scorers), or Ray's failure as a UserError (the trial stops; resume redoes it)."""
        error = done.exception()
        if error is None:
            outcome: Any = done.result()
        elif isinstance(error, self.ray.exceptions.RayTaskError):
            cause = getattr(error, "cause", None)
            outcome = cause if isinstance(cause, BaseException) else error
        else:
            outcome = UserError(f"Ray lost a scoring call: {_first_line(error)}")
        with self._lock:
            member.busy -= 1
            self._pending.pop(future, None)
            if future.done():  # cancelled meanwhile
                return
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)

    def cancel(self) -> None:
        """Ctrl-C: kill the actors (their sandboxes die with them) and return at once."""
        with self._lock:
            self._closed = True
            pending, self._pending = dict(self._pending), {}
            members = self._generators + self._evaluators
            for future in pending:
                if not future.done():
                    future.set_exception(RuntimeError("cancelled"))
        for member in members:
            try:
                self.ray.kill(member.actor, no_restart=True)
            except Exception:  # already gone
                pass
        if self.owned:  # a local Ray we started must not outlive us; give it a moment
            stopper = threading.Thread(target=self.ray.shutdown, daemon=True)
            stopper.start()
            stopper.join(5.0)

    def close(self) -> None:
        with self._starting, self._lock:
            self._closed = True
            members, self._generators, self._evaluators = (
                self._generators + self._evaluators, [], [])
        try:
            if members:  # sandboxes and models released in order, not by a kill
                self.ray.get([m.actor.close.remote() for m in members], timeout=CLOSE_SECONDS)
        except Exception as error:
            log.warning("a Ray actor did not close cleanly: %s", _first_line(error))
        for member in members:
            try:
                self.ray.kill(member.actor, no_restart=True)
            except Exception:
                pass
        if self.owned and self.ray.is_initialized():
            self.ray.shutdown()


def _needs_gpu(model: ModelBlueprint) -> bool:
    """Only a model that runs weights here wants a GPU; the baseline, the reference and
    remote servers (openai:) run on CPU actors."""
    return str(model.section.get("spec", "")).split(":", 1)[0] == "hf"


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:300] if text else type(error).__name__
