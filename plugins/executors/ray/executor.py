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
from dataclasses import dataclass
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


@dataclass
class _Member:
    """An actor and what the driver knows of it."""

    actor: Any
    busy: int = 0
    adapter: str | None = None  # the adapter its last batch used


class RayExecutor:
    name = "ray"

    def __init__(self, settings: Mapping[str, Any]):
        self.settings = dict(settings)
        self.ray = import_ray()
        self.owned = connect(str(self.settings.get("ray_address") or ""))
        self._lock = threading.Lock()
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

    def _start_generators(self) -> None:
        if self._generators:
            return
        ray = self.ray
        gpus = int(ray.cluster_resources().get("GPU", 0))
        count = int(self.settings.get("generation_actors") or 0) or gpus or 1
        resources = {"num_gpus": 1, "num_cpus": 0} if gpus else {"num_cpus": 0}
        remote = ray.remote(GenerationWorker)
        self._generators = [_Member(remote.options(
            name=f"{self.tag}-generation-{index}", namespace=NAMESPACE, max_restarts=RESTARTS,
            max_task_retries=RETRIES, **resources).remote(self.settings))
            for index in range(count)]
        log.info("%d generation actor(s)%s", count, " on GPUs" if gpus else "")

    def _start_evaluators(self) -> None:
        if self._evaluators:
            return
        ray = self.ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes = [n for n in ray.nodes() if n.get("Alive") and n["Resources"].get("CPU", 0) > 0]
        if not nodes:
            raise UserError("the Ray cluster has no node with CPUs to score candidates on")
        count = int(self.settings.get("evaluation_actors") or 0) or len(nodes)
        for index in range(count):
            node = nodes[index % len(nodes)]
            workers = int(self.settings.get("workers") or 0) or int(node["Resources"]["CPU"])
            remote = ray.remote(EvaluationWorker).options(
                name=f"{self.tag}-evaluation-{index}", namespace=NAMESPACE, num_cpus=0,
                max_concurrency=max(2, 2 * workers), max_restarts=RESTARTS,
                max_task_retries=RETRIES,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=True))
            self._evaluators.append(_Member(remote.remote(self.settings)))
        log.info("%d evaluation actor(s) on %d node(s)", count, len(nodes))

    def _get(self, refs: Any, timeout: float | None = None) -> Any:
        """ray.get, raising what the actor raised (a UserError stays a UserError)."""
        try:
            return self.ray.get(refs, timeout=timeout)
        except self.ray.exceptions.RayTaskError as error:
            cause = getattr(error, "cause", None)
            raise (cause if isinstance(cause, BaseException) else error) from None

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
        self._start_generators()
        self._start_evaluators()
        self._get([m.actor.prepare.remote(model, list(adapters)) for m in self._generators]
                  + [m.actor.prepare.remote(scoring) for m in self._evaluators])

    def generate(self, model: ModelBlueprint, requests: Sequence[GenerationRequest],
                 ) -> list[list[Generation]]:
        self._start_generators()
        adapter = requests[0].adapter if requests else None
        with self._lock:
            member = min(self._generators, key=lambda m: (m.busy, m.adapter != adapter))
            member.busy += 1
            member.adapter = adapter
        try:
            return self._get(member.actor.generate.remote(model, list(requests)))
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
        with self._lock:
            member.busy -= 1
            self._pending.pop(future, None)
        if future.done():
            return
        error = done.exception()
        if error is None:
            future.set_result(done.result())
            return
        cause = getattr(error, "cause", None)
        future.set_exception(cause if isinstance(cause, BaseException) else error)

    def cancel(self) -> None:
        """Ctrl-C: kill the actors (their sandboxes die with them) and return at once."""
        with self._lock:
            self._closed = True
            pending, self._pending = dict(self._pending), {}
            members = self._generators + self._evaluators
        for member in members:
            try:
                self.ray.kill(member.actor, no_restart=True)
            except Exception:  # already gone
                pass
        for future in pending:
            if not future.done():
                future.set_exception(RuntimeError("cancelled"))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            members, self._generators, self._evaluators = (
                self._generators + self._evaluators, [], [])
        try:
            if members:  # sandboxes and models released in order, not by a kill
                self.ray.get([m.actor.close.remote() for m in members], timeout=CLOSE_SECONDS)
        except Exception as error:
            log.warning("a Ray actor did not close cleanly: %s", error)
        for member in members:
            try:
                self.ray.kill(member.actor, no_restart=True)
            except Exception:
                pass
        if self.owned and self.ray.is_initialized():
            self.ray.shutdown()
