"""LocalExecutor, the `local` executor (its plugin is `executors.local`): generation in
the driver's process, evaluation on a thread pool over the pre-warmed sandbox pool.

Components are built here from their blueprints, once per digest. Trials run one after
another, so one model and one scorer set are kept alive at a time: building the next
closes the previous (an hf model's memory is released before the next one loads).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Mapping, Sequence

from coral_core.errors import UserError
from coral_core.failures import PLUGIN_FAULTS, describe
from coral_core.config.blueprints import DatasetBlueprint, ModelBlueprint, ScoringBlueprint
from coral_core.run.factories import (Scoring, build_dataset, build_model, build_scoring,
                                      extracted_code)
from coral_core.protocols import Dataset, Model
from coral_core.scoring.scorer import failed_candidate
from coral_core.types import Candidate, Generation, GenerationRequest, ScoredCandidate, Task

log = logging.getLogger(__name__)


class LocalExecutor:
    name = "local"

    def __init__(self, settings: Mapping[str, Any]):
        workers = settings.get("workers") or os.cpu_count() or 1
        self._threads = max(2, 2 * workers)  # two jobs in flight per sandbox worker
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._datasets: dict[str, Dataset] = {}
        self._model: tuple[str, Model] | None = None
        self._scoring: tuple[str, Scoring] | None = None

    def dataset(self, blueprint: DatasetBlueprint) -> Dataset:
        with self._lock:
            if blueprint.digest not in self._datasets:
                self._datasets[blueprint.digest] = build_dataset(blueprint)
            return self._datasets[blueprint.digest]

    def model(self, blueprint: ModelBlueprint) -> Model:
        if self._model is None or self._model[0] != blueprint.digest:
            if self._model is not None:
                _close(self._model[1])
                self._model = None
            self._model = (blueprint.digest,
                           build_model(blueprint, self.dataset(blueprint.dataset)))
        return self._model[1]

    def scoring(self, blueprint: ScoringBlueprint) -> Scoring:
        with self._lock:
            current = self._scoring
        if current is not None and current[0] == blueprint.digest:
            return current[1]
        if current is not None:
            self._drain()
            current[1].close()
        built = build_scoring(blueprint, self.dataset(blueprint.dataset))
        with self._lock:
            self._scoring = (blueprint.digest, built)
        return built

    def prepare(self, model: ModelBlueprint, scoring: ScoringBlueprint,
                adapters: Sequence[str] = ()) -> None:
        self.prepare_model(model, adapters)
        self.scoring(scoring)

    def prepare_model(self, model: ModelBlueprint, adapters: Sequence[str] = ()) -> None:
        """Build the model now and check the adapters and the kinds of prompt the run will
        send, where the model can: either is refused before any work, not at the first
        batch."""
        built = self.model(model)
        ready = getattr(built, "check_ready", None)  # a server that answers, a key it takes
        if callable(ready):
            ready()
        renders = getattr(built, "check_prompt", None)  # e.g. infilling without FIM tokens
        if callable(renders):
            from coral_core.run.runner import select_tasks

            kinds = {}
            for task in select_tasks(self.dataset(model.dataset), model.dataset.section):
                kinds.setdefault(task.prompt.kind, task.prompt)
            for prompt in kinds.values():
                renders(prompt)
        check = getattr(built, "prepare_adapter", None)
        if callable(check):
            for adapter in adapters:
                check(adapter)

    def generate(self, model: ModelBlueprint, requests: Sequence[GenerationRequest],
                 ) -> list[list[Generation]]:
        try:
            return self.model(model).generate(list(requests))
        except (SystemExit, GeneratorExit) as error:  # a model's bug, not Coral's exit
            raise RuntimeError(f"model '{model.section['spec']}' raised "
                               f"{describe(error)}") from error

    def submit(self, scoring: ScoringBlueprint, task: Task, text: str,
               extract: bool = True) -> "Future[ScoredCandidate]":
        built = self.scoring(scoring)
        dataset = self.dataset(scoring.dataset)
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="coral-eval")
            pool = self._pool
        return pool.submit(_score, built, dataset, task, text, extract)

    def _drain(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def cancel(self) -> None:
        """Abandon queued work and kill the sandboxes under running work; never waits for
        a job to finish."""
        with self._lock:
            pool, self._pool = self._pool, None
            scoring, self._scoring = self._scoring, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        if scoring is not None:
            closer = threading.Thread(target=scoring[1].close, daemon=True)
            closer.start()
            closer.join(1.0)

    def close(self) -> None:
        self._drain()
        with self._lock:
            scoring, self._scoring = self._scoring, None
        if scoring is not None:
            scoring[1].close()
        if self._model is not None:
            _close(self._model[1])
            self._model = None


def _score(scoring: Scoring, dataset: Dataset, task: Task, text: str,
           extract: bool) -> ScoredCandidate:
    """Extract and score one reply. An exception from the data set's extraction or an
    evaluator is this candidate's error, not the run's: it comes back as a failed
    candidate (details["error"]) and the driver decides (record it, or --fail-fast)."""
    started = time.perf_counter()
    code = ""
    try:
        code = extracted_code(dataset, task, text) if extract else text
        scored = scoring.scorer.score(Candidate(task, code))
    except UserError:  # the configuration, not this candidate: the trial stops
        raise
    except PLUGIN_FAULTS as error:  # a plugin's bug on one candidate must not end the run
        log.debug("scoring '%s' raised", task.id, exc_info=error)
        return failed_candidate(task, error, code, scoring.scorer.objective_names,
                                time.perf_counter() - started)
    details = {**scored.details, "sandboxed": scoring.sandbox.isolated}
    return ScoredCandidate(scored.objectives, scored.fitness, scored.passed, details, code,
                           time.perf_counter() - started)


def _close(component: Any) -> None:
    close = getattr(component, "close", None)
    if callable(close):
        close()
