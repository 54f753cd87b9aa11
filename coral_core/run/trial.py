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
import logging
import queue
import threading
import weakref
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Mapping, Protocol

from coral_core.config.blueprints import ModelBlueprint, ScoringBlueprint
from coral_core.errors import UserError
from coral_core.execution import code_digest
from coral_core.run.factories import sampling_params
from coral_core.run.lifecycle import Lifecycle
from coral_core.scoring.metrics import summarize
from coral_core.protocols import Executor
from coral_core.run.rundir import RunInfo
from coral_core.scoring.scorer import failed_candidate
from coral_core.seeds import derive_seed
from coral_core.run.store import GenerationRecord, RunStore, ScoreRecord, TaskRecord
from coral_core.types import (Generation, GenerationRequest, SamplingParams, ScoredCandidate,
                              Task)

log = logging.getLogger(__name__)
SHOWN_ERRORS = 3  # distinct scoring errors a trial says one by one; then one line for more


class Progress(Protocol):
    """What a run reports as it goes; `note` (optional) says what a phase waits for, `label`
    (optional) which trials it is counting."""

    def start(self, phase: str, total: int, done: int = 0) -> None: ...

    def advance(self, phase: str, amount: int = 1) -> None: ...


class NoProgress:
    def start(self, phase: str, total: int, done: int = 0) -> None:
        pass

    def advance(self, phase: str, amount: int = 1) -> None:
        pass

    def note(self, phase: str, text: str) -> None:
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

    def prompts(self) -> dict[str, dict[str, Any]]:
        """Each task's prompt as plain data, by digest (kept for `coral export`)."""
        return {t.prompt.digest(): {
            "instruction": t.prompt.instruction,
            "messages": [[m.role, m.content] for m in t.prompt.messages],
            "prefix": t.prompt.prefix, "suffix": t.prompt.suffix} for t in self.tasks}


class SharedProgress:
    """One progress display for trials that run at once: each trial's start adds its work
    to the phase's totals instead of resetting them."""

    def __init__(self, progress: Progress):
        self.progress = progress
        self._lock = threading.Lock()
        self._totals: dict[str, list[int]] = {}

    def start(self, phase: str, total: int, done: int = 0) -> None:
        with self._lock:
            totals = self._totals.setdefault(phase, [0, 0])
            totals[0] += total
            totals[1] += done
            self.progress.start(phase, totals[0], totals[1])

    def advance(self, phase: str, amount: int = 1) -> None:
        with self._lock:
            self._totals.setdefault(phase, [0, 0])[1] += amount
            self.progress.advance(phase, amount)

    def note(self, phase: str, text: str) -> None:
        note = getattr(self.progress, "note", None)
        if callable(note):
            with self._lock:
                note(phase, text)


# Executors that have generated in this process: only their first batch starts the model.
_GENERATED: "weakref.WeakSet[Executor]" = weakref.WeakSet()


def unchanged_tasks(store: RunStore, run_dir: Any, plan: TrialPlan,
                    ) -> tuple[dict[str, str], dict[str, str]]:
    """Every task as it was when the trial began (the stored digests, and the tasks' now): a
    test file edited (or another data folder given) between an interrupt and the resume
    scored the rest of the samples against other tests, and pass@k mixed the two (a
    red-team pass)."""
    digests = {task.id: task.digest() for task in plan.tasks}
    try:
        stored = json.loads(store.meta(f"task_digests:{plan.number}") or "{}")
    except ValueError:
        stored = None
    if not isinstance(stored, dict):
        raise UserError(f"{run_dir}: the store's record of trial {plan.number}'s tasks is "
                        "corrupt; it cannot be resumed")
    changed = sorted(t for t, d in digests.items() if t in stored and stored[t] != d)
    if changed:
        raise UserError(
            f"{run_dir}: task '{changed[0]}'"
            f"{f' (and {len(changed) - 1} more)' if len(changed) > 1 else ''} of trial "
            f"{plan.number} is not what it was when the run began (its tests, reference or "
            "prompt changed: data or plugins changed?); it cannot be resumed")
    return stored, digests


def request_seed(run_seed: int, task: Task, sample: int) -> int:
    """The seed of the request for sample `sample` of `task` in a run (a model that draws
    several generations from one request gives each its own with `seeds.sample_seed`)."""
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
    """Generates the trial's missing samples and scores every unscored one.

    Generation runs on a helper thread, one batch at a time, while this (the driver's)
    thread records each evaluation as soon as it completes: a slow model never holds
    finished scores back (a kill loses only work in flight, and progress is current).
    A candidate whose scoring raised is recorded as an error (objectives 0) and the run
    goes on, unless `[run] fail_fast`.
    """

    def __init__(self, plan: TrialPlan, store: RunStore, executor: Executor, info: RunInfo,
                 progress: Progress, lifecycle: Lifecycle | None = None):
        self.plan, self.store, self.executor = plan, store, executor
        self.info, self.progress = info, progress
        self.lifecycle = lifecycle or Lifecycle(store, plan.config["run"]["fail_fast"])
        self.samples = plan.config["run"]["samples"]
        self.seed = plan.config["run"]["seed"]
        self.fail_fast = plan.config["run"]["fail_fast"]
        self.adapter = plan.config["model"]["adapter"] or None
        self.pending: dict[Future, tuple[Task, GenerationRecord]] = {}
        # every future of this trial, once done: the driver handles each completion once,
        # instead of scanning all that are pending (thousands, on a large set) at each one
        self._finished: queue.SimpleQueue[Future] = queue.SimpleQueue()
        self._warned: set[str] = set()  # the distinct scoring errors said one by one
        self._said_more = False

    def request(self, task: Task, sample: int) -> GenerationRequest:
        params = sampling_params(self.plan.config, request_seed(self.seed, task, sample), task)
        return GenerationRequest(task.prompt, params, adapter=self.adapter, task_id=task.id)

    def _note(self, phase: str, text: str) -> None:
        note = getattr(self.progress, "note", None)
        if callable(note):
            note(phase, text)

    def _check_tasks(self) -> None:
        key = f"task_digests:{self.plan.number}"
        stored, digests = unchanged_tasks(self.store, self.info.run_dir, self.plan)
        if any(t not in stored for t in digests):
            self.store.set_meta(key, json.dumps({**stored, **digests}, sort_keys=True))

    def run(self) -> dict[str, Any]:
        number = self.plan.number
        self._check_tasks()
        self.store.add_tasks(self.plan.task_records())
        self.store.add_prompts(self.plan.prompts())
        generations = self.store.generations(number)
        evaluations = self.store.evaluations(number)
        wanted = [(task, i) for task in self.plan.tasks for i in range(self.samples)]
        self._check_stored(wanted, generations)
        missing = [(t, i) for t, i in wanted if (t.id, i) not in generations]
        first = bool(missing) and self.executor not in _GENERATED
        if missing:
            _GENERATED.add(self.executor)
        self._note("generate", "first batch: includes model start-up" if first else "")
        self.progress.start("generate", len(wanted),
                            sum((t.id, i) in generations for t, i in wanted))
        self.progress.start("evaluate", len(wanted),
                            sum((t.id, i) in evaluations for t, i in wanted))
        for task, i in wanted:
            record = generations.get((task.id, i))
            if record is not None and (task.id, i) not in evaluations:
                self._submit(task, record)
        size = self.plan.config["model"]["batch_size"]
        batches = [missing[start: start + size] for start in range(0, len(missing), size)]
        self._drive(batches)
        records = self.store.evaluations(number)
        result = summarize(self.plan.task_records(), records, seed=self.seed)
        flags = {r.details.get("sandboxed") for r in records.values()
                 if not r.details.get("error")}
        result["sandboxed"] = all(flags) if flags and None not in flags else None
        return result

    def _drive(self, batches: list[list[tuple[Task, int]]]) -> None:
        """Generate on helper threads, as many batches at once as the executor has
        generation slots (one for `local`; one per actor for `ray`); record whatever
        completes. Batches are cut the same way whatever the executor, so a model that
        batches gets the same batches, and the same samples, everywhere."""
        slots = max(1, int(getattr(self.executor, "generation_slots", 1) or 1))
        pool = ThreadPoolExecutor(slots, thread_name_prefix="coral-generate")
        try:
            generating: dict[Future, tuple[list[tuple[Task, int]], list[GenerationRequest]]]
            generating = {}
            waiting = deque(batches)
            while True:
                while len(generating) < slots and waiting:
                    chunk = waiting.popleft()
                    requests = [self.request(task, i) for task, i in chunk]
                    future = pool.submit(self.executor.generate, self.plan.model, requests)
                    generating[future] = (chunk, requests)
                    future.add_done_callback(self._finished.put)
                if not generating and not self.pending:
                    return
                done = [self._finished.get()]
                while True:  # and whatever else completed meanwhile, in one round
                    try:
                        done.append(self._finished.get_nowait())
                    except queue.Empty:
                        break
                for future in done:
                    if future in generating:
                        chunk, requests = generating.pop(future)
                        outputs = future.result()
                        self._note("generate", "")
                        for task, record in self._store_generations(chunk, requests, outputs):
                            self._submit(task, record)
                for future in done:
                    if future in self.pending:
                        self._collect(future)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

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

    def _store_generations(self, chunk: list[tuple[Task, int]],
                           requests: list[GenerationRequest], outputs: Any,
                           ) -> list[tuple[Task, GenerationRecord]]:
        model = self.plan.config['model']['spec']
        if not isinstance(outputs, (list, tuple)) or not all(
                isinstance(o, (list, tuple)) for o in outputs):
            raise UserError(f"model '{model}' returned {type(outputs).__name__} from "
                            "generate, not a list of lists of Generation (docs/plugins.md)")
        if len(outputs) != len(requests) or any(len(o) != 1 for o in outputs):
            raise UserError(f"model '{model}' returned the wrong number of samples")
        wrong = next((g for (g,) in outputs if not isinstance(g, Generation)), None)
        if wrong is not None:
            raise UserError(f"model '{model}' returned a {type(wrong).__name__} where a "
                            "Generation belongs (docs/plugins.md)")
        made = []
        for (task, i), request, (generation,) in zip(chunk, requests, outputs):
            record = GenerationRecord(
                self.plan.number, task.id, i, request_digest(self.plan.model, request),
                request.prompt.digest(), params_record(request.params), str(generation.text),
                generation.prompt_tokens, generation.completion_tokens, generation.seconds,
                generation.finish_reason,
            )
            self.store.add_generation(record)
            self.lifecycle.notify("coral_record_written", run=self.info, kind="generation",
                                  record=record)
            self.progress.advance("generate")
            made.append((task, record))
        return made

    def _submit(self, task: Task, record: GenerationRecord) -> None:
        future = self.executor.submit(self.plan.scoring, task, record.text)
        self.pending[future] = (task, record)
        future.add_done_callback(self._finished.put)

    def _collect(self, future: Future) -> None:
        """Record a completed evaluation."""
        task, generation = self.pending.pop(future)
        try:
            scored = future.result()
        except UserError:
            raise
        except Exception as error:  # an executor that returns the exception itself
            scored = failed_candidate(task, error)
        self._record(task, generation, scored)

    def _record(self, task: Task, generation: GenerationRecord, scored: ScoredCandidate) -> None:
        error = scored.details.get("error")
        if error:
            where = f"sample {generation.sample} of '{task.id}'"
            if self.fail_fast:
                raise UserError(f"scoring {where} raised: {error} (stopped by --fail-fast)")
            if error not in self._warned and len(self._warned) < SHOWN_ERRORS:
                self._warned.add(error)
                log.warning("scoring %s raised: %s; recorded as an error (objectives 0) and "
                            "the run goes on (--fail-fast stops instead)", where, error)
            elif error not in self._warned and not self._said_more:
                self._said_more = True
                log.warning("more scoring errors than the %d shown: each is recorded (the "
                            "summary counts them; 'coral export' lists them)", SHOWN_ERRORS)
        record = ScoreRecord(
            self.plan.number, task.id, generation.sample, code_digest(scored.code), scored.passed,
            dict(scored.objectives), scored.fitness, {"code": scored.code, **scored.details},
            scored.seconds,
        )
        self.store.add_evaluation(record)
        self.lifecycle.notify("coral_record_written", run=self.info, kind="evaluation",
                              record=record)
        self.progress.advance("evaluate")
