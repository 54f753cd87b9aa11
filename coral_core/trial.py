"""One trial: a resolved configuration's samples, generated and scored through an executor.

Sample seeds derive from (run seed, data set, task, sample), never from the trial, so
trials are compared on common random numbers and a resumed trial regenerates exactly
what the interrupted one would have. Each stored sample carries a digest of what made it
(prompt, sampling parameters, adapter, model); a stored sample that the configuration
would not make again is refused instead of being reused. Only this driver writes the
store.
"""

from __future__ import annotations

import hashlib
import json
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from typing import Any, Mapping, Protocol

from . import plugins
from .blueprints import ModelBlueprint, ScoringBlueprint
from .errors import UserError
from .execution import code_digest
from .factories import sampling_params
from .metrics import summarize
from .protocols import Executor
from .rundir import RunInfo
from .scoring import ScoredCandidate
from .seeds import derive_seed
from .store import GenerationRecord, RunStore, ScoreRecord, TaskRecord
from .types import GenerationRequest, SamplingParams, Task


class Progress(Protocol):
    def start(self, phase: str, total: int, done: int = 0) -> None: ...

    def advance(self, phase: str, amount: int = 1) -> None: ...


class NoProgress:
    def start(self, phase: str, total: int, done: int = 0) -> None:
        pass

    def advance(self, phase: str, amount: int = 1) -> None:
        pass


@dataclass(frozen=True)
class TrialPlan:
    """A trial's number, the overrides that made it, and everything resolved from them."""

    number: int
    overrides: Mapping[str, Any]
    config: Mapping[str, Any]
    tasks: tuple[Task, ...]
    model: ModelBlueprint
    scoring: ScoringBlueprint

    def task_records(self) -> list[TaskRecord]:
        return [TaskRecord(self.number, t.id, t.split, t.seen_in_training,
                           t.success is not None, t.prompt.digest()) for t in self.tasks]


def sample_seed(run_seed: int, task: Task, sample: int) -> int:
    return derive_seed(run_seed, task.dataset, task.id, sample)


def params_record(params: SamplingParams) -> dict[str, Any]:
    record = dict(vars(params))
    record["stop"] = list(params.stop)
    return record


def request_digest(model: ModelBlueprint, request: GenerationRequest) -> str:
    payload = [model.identity, request.prompt.digest(), params_record(request.params),
               request.adapter]
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


class TrialRun:
    def __init__(self, plan: TrialPlan, store: RunStore, executor: Executor, info: RunInfo,
                 progress: Progress):
        self.plan, self.store, self.executor = plan, store, executor
        self.info, self.progress = info, progress
        self.samples = plan.config["run"]["samples"]
        self.seed = plan.config["run"]["seed"]
        self.adapter = plan.config["model"]["adapter"] or None
        self.pending: dict[Future, tuple[Task, GenerationRecord]] = {}

    def request(self, task: Task, sample: int) -> GenerationRequest:
        params = sampling_params(self.plan.config, sample_seed(self.seed, task, sample), task)
        return GenerationRequest(task.prompt, params, adapter=self.adapter, task_id=task.id)

    def run(self) -> dict[str, Any]:
        number = self.plan.number
        self.store.add_tasks(self.plan.task_records())
        generations = self.store.generations(number)
        evaluations = self.store.evaluations(number)
        wanted = [(task, i) for task in self.plan.tasks for i in range(self.samples)]
        self._check_stored(wanted, generations)
        self.progress.start("generate", len(wanted),
                            sum((t.id, i) in generations for t, i in wanted))
        self.progress.start("evaluate", len(wanted),
                            sum((t.id, i) in evaluations for t, i in wanted))
        for task, i in wanted:
            record = generations.get((task.id, i))
            if record is not None and (task.id, i) not in evaluations:
                self._submit(task, record)
        missing = [(t, i) for t, i in wanted if (t.id, i) not in generations]
        batch = self.plan.config["model"]["batch_size"]
        for start in range(0, len(missing), batch):
            for task, record in self._generate(missing[start: start + batch]):
                self._submit(task, record)
            self._collect(block=False)
        while self.pending:
            self._collect(block=True)
        records = self.store.evaluations(number)
        result = summarize(self.plan.task_records(), records)
        flags = {r.details.get("sandboxed") for r in records.values()}
        result["sandboxed"] = all(flags) if flags and None not in flags else None
        return result

    def _check_stored(self, wanted: list[tuple[Task, int]],
                      generations: Mapping[tuple[str, int], GenerationRecord]) -> None:
        for task, i in wanted:
            record = generations.get((task.id, i))
            if record is not None and record.request_digest != request_digest(
                    self.plan.model, self.request(task, i)):
                raise UserError(
                    f"{self.info.run_dir}: stored sample {i} of '{task.id}' (trial "
                    f"{self.plan.number}) was made from another prompt or other parameters "
                    "than this configuration gives (data or plugins changed?); it cannot be "
                    "resumed")

    def _generate(self, chunk: list[tuple[Task, int]]) -> list[tuple[Task, GenerationRecord]]:
        requests = [self.request(task, i) for task, i in chunk]
        outputs = self.executor.generate(self.plan.model, requests)
        if len(outputs) != len(requests) or any(len(o) != 1 for o in outputs):
            raise UserError(f"model '{self.plan.config['model']['spec']}' returned the wrong "
                            "number of samples")
        made = []
        for (task, i), request, (generation,) in zip(chunk, requests, outputs):
            record = GenerationRecord(
                self.plan.number, task.id, i, request_digest(self.plan.model, request),
                request.prompt.digest(), params_record(request.params), str(generation.text),
                generation.prompt_tokens, generation.completion_tokens, generation.seconds,
                generation.finish_reason,
            )
            self.store.add_generation(record)
            plugins.notify("coral_record_written", run=self.info, kind="generation", record=record)
            self.progress.advance("generate")
            made.append((task, record))
        return made

    def _submit(self, task: Task, record: GenerationRecord) -> None:
        future = self.executor.submit(self.plan.scoring, task, record.text)
        self.pending[future] = (task, record)

    def _collect(self, block: bool) -> None:
        done, _ = wait(list(self.pending), timeout=None if block else 0,
                       return_when=FIRST_COMPLETED)
        for future in done:
            task, generation = self.pending.pop(future)
            self._record(task, generation, future.result())

    def _record(self, task: Task, generation: GenerationRecord, scored: ScoredCandidate) -> None:
        record = ScoreRecord(
            self.plan.number, task.id, generation.sample, code_digest(scored.code), scored.passed,
            dict(scored.objectives), scored.fitness, {"code": scored.code, **scored.details},
            scored.seconds,
        )
        self.store.add_evaluation(record)
        plugins.notify("coral_record_written", run=self.info, kind="evaluation", record=record)
        self.progress.advance("evaluate")
