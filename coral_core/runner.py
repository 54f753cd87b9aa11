"""A run: generate samples, score them, record each as it completes, summarise.

Every sample has its own seed, derived from the run seed, the trial, the task and the
sample index, so a resumed run generates exactly what the interrupted one would have, and
it only generates and evaluates what the store does not already hold.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Protocol

from . import __version__, config as configuration, plugins
from .factories import Scoring, build_dataset, build_model, build_scoring, sampling_params
from .errors import UserError
from .metrics import summarize
from .protocols import Dataset, Model
from .scoring import Scorer
from .store import ScoreRecord, GenerationRecord, RunStore
from .types import Candidate, GenerationRequest, Task

CONFIG_FILE = "config.toml"
SUMMARY_FILE = "summary.json"


class Progress(Protocol):
    def start(self, phase: str, total: int, done: int = 0) -> None: ...

    def advance(self, phase: str, amount: int = 1) -> None: ...


class NoProgress:
    def start(self, phase: str, total: int, done: int = 0) -> None:
        pass

    def advance(self, phase: str, amount: int = 1) -> None:
        pass


@dataclass(frozen=True)
class RunInfo:
    """What lifecycle hooks receive."""

    run_dir: Path
    config: Mapping[str, Any]
    resumed: bool


def derive_seed(*parts: object) -> int:
    """A stable 31-bit seed (never Python's salted hash())."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def write_atomic(path: Path, text: str) -> None:
    """Write to a temporary file and rename: a reader never sees half a file."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def default_run_dir(config: Mapping[str, Any]) -> Path:
    """runs/DATASET-MODEL-TIMESTAMP under the current folder (`--out` or `[run] out` names
    the run directory itself instead)."""
    root = Path("runs")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    model = configuration_label(config["model"]["spec"])
    base = root / f"{config['dataset']['name']}-{model}-{stamp}"
    path, number = base, 1
    while path.exists():
        number += 1
        path = Path(f"{base}-{number}")
    return path


def configuration_label(spec: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in spec)[-40:] or "model"


def check_new_run_dir(run_dir: Path) -> None:
    if (run_dir / RunStore.FILENAME).exists() or (run_dir / CONFIG_FILE).exists():
        raise UserError(f"{run_dir} already holds a run; use --resume {run_dir} to continue it")
    if run_dir.exists() and (not run_dir.is_dir() or any(run_dir.iterdir())):
        raise UserError(f"{run_dir} exists and is not an empty folder")


def create_run(config: dict[str, Any], run_dir: Path) -> RunInfo:
    """Make the run directory with its resolved config.toml and an empty store."""
    run_dir = Path(run_dir)
    check_new_run_dir(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    config = dict(config)
    config["run"] = {**config["run"], "out": str(run_dir)}
    write_atomic(run_dir / CONFIG_FILE, configuration.dump(config))
    store = RunStore.in_run(run_dir)
    store.set_meta("status", "running")
    store.set_meta("coral_version", __version__)
    store.close()
    return RunInfo(run_dir, config, resumed=False)


def open_run(run_dir: Path) -> RunInfo:
    """An interrupted run to resume; a finished one or a folder that is not a run is refused."""
    run_dir = Path(run_dir)
    config_path, store_path = run_dir / CONFIG_FILE, run_dir / RunStore.FILENAME
    if not run_dir.is_dir() or not config_path.exists() or not store_path.exists():
        raise UserError(f"{run_dir} is not a Coral run directory (no {CONFIG_FILE} and "
                        f"{RunStore.FILENAME})")
    config = configuration.loads_resolved(config_path.read_text(encoding="utf-8"),
                                          str(config_path))
    store = RunStore(store_path)
    status = store.meta("status")
    store.close()
    if status == "finished":
        raise UserError(f"{run_dir} is a finished run; see 'coral report {run_dir}'")
    return RunInfo(run_dir, config, resumed=True)


class _Trial:
    """One configuration's generations and evaluations."""

    def __init__(self, number: int, config: Mapping[str, Any], tasks: list[Task],
                 dataset: Dataset, model: Model, scorer: Scorer, store: RunStore,
                 info: RunInfo, progress: Progress):
        self.number, self.config, self.tasks = number, config, tasks
        self.dataset, self.model, self.scorer, self.store = dataset, model, scorer, store
        self.info, self.progress = info, progress
        self.samples = config["run"]["samples"]
        self.seed = config["run"]["seed"]

    def run(self, workers: int) -> dict[tuple[str, int], ScoreRecord]:
        generations = self.store.generations(self.number)
        evaluations = self.store.evaluations(self.number)
        wanted = [(task, i) for task in self.tasks for i in range(self.samples)]
        total = len(wanted)
        self.progress.start("generate", total, sum((t.id, i) in generations for t, i in wanted))
        self.progress.start("evaluate", total, sum((t.id, i) in evaluations for t, i in wanted))
        pending: list[Future] = []
        with ThreadPoolExecutor(workers, thread_name_prefix="coral-eval") as pool:
            for task, i in wanted:
                record = generations.get((task.id, i))
                if record is not None and (task.id, i) not in evaluations:
                    pending.append(pool.submit(self._evaluate, task, record))
            missing = [(t, i) for t, i in wanted if (t.id, i) not in generations]
            batch = self.config["model"]["batch_size"]
            for start in range(0, len(missing), batch):
                chunk = missing[start: start + batch]
                for (task, i), record in zip(chunk, self._generate(chunk)):
                    pending.append(pool.submit(self._evaluate, task, record))
                self._raise_failures(pending)
            for future in pending:
                future.result()
        return self.store.evaluations(self.number)

    @staticmethod
    def _raise_failures(pending: list[Future]) -> None:
        for future in pending:
            if future.done() and future.exception() is not None:
                raise future.exception()  # type: ignore[misc]

    def _generate(self, chunk: list[tuple[Task, int]]) -> list[GenerationRecord]:
        requests = [
            GenerationRequest(
                task.prompt,
                sampling_params(self.config, derive_seed(self.seed, self.number, task.id, i)),
                adapter=self.config["model"]["adapter"] or None, task_id=task.id,
            )
            for task, i in chunk
        ]
        outputs = self.model.generate(requests)
        if len(outputs) != len(requests) or any(len(o) != 1 for o in outputs):
            raise RuntimeError(f"model '{self.model.name}' returned the wrong number of samples")
        records = []
        for (task, i), request, (generation,) in zip(chunk, requests, outputs):
            params = {k: v for k, v in vars(request.params).items()}
            params["stop"] = list(request.params.stop)
            record = GenerationRecord(
                self.number, task.id, i, hashlib.sha256(task.prompt.encode()).hexdigest(),
                params, generation.text, generation.prompt_tokens, generation.completion_tokens,
                generation.seconds, generation.finish_reason,
            )
            self.store.add_generation(record)
            plugins.notify("coral_record_written", run=self.info, kind="generation", record=record)
            self.progress.advance("generate")
            records.append(record)
        return records

    def _evaluate(self, task: Task, generation: GenerationRecord) -> None:
        started = time.perf_counter()
        code = self.dataset.extract_code(task, generation.text)
        scored = self.scorer.score(Candidate(task, code))
        record = ScoreRecord(
            self.number, task.id, generation.sample,
            hashlib.sha256(code.encode("utf-8", "surrogatepass")).hexdigest(), scored.passed,
            dict(scored.objectives), scored.fitness, {"code": code, **scored.details},
            time.perf_counter() - started,
        )
        self.store.add_evaluation(record)
        plugins.notify("coral_record_written", run=self.info, kind="evaluation", record=record)
        self.progress.advance("evaluate")


def _overridden(config: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    layer = configuration.validate(dict(overrides), "search strategy overrides")
    return configuration.merge(config, layer)


@dataclass
class Session:
    """Everything a run needs, built and checked before anything is written to disk."""

    dataset: Dataset
    tasks: list[Task]
    scoring: Scoring
    model: Model
    search: Any

    def close(self) -> None:
        self.scoring.close()
        close = getattr(self.model, "close", None)
        if callable(close):
            close()


def prepare(config: Mapping[str, Any], run_dir: Path) -> Session:
    """Build the plugins the configuration names; user errors surface here, not mid-run."""
    dataset = build_dataset(config)
    tasks = dataset.tasks(config["dataset"]["split"], config["dataset"]["problems"])
    search = plugins.build("search_strategies", config["search"]["strategy"],
                           **config["search"]["options"])
    data_root = str(getattr(dataset, "root", "") or "")
    hidden = tuple(p for p in (data_root, str(Path(run_dir).resolve())) if p)
    scoring = build_scoring(config, hidden=hidden)
    try:
        model = build_model(config, dataset)
    except BaseException:
        scoring.close()
        raise
    return Session(dataset, tasks, scoring, model, search)


def execute(info: RunInfo, session: Session, progress: Progress | None = None) -> dict[str, Any]:
    """Run (or continue) the run in `info.run_dir` to the end; return the summary."""
    progress = progress or NoProgress()
    config = info.config
    store = RunStore.in_run(info.run_dir)
    session.scoring.context.store = store
    try:
        plugins.notify("coral_run_started", run=info)
        workers = session.scoring.sandbox.workers * 2
        trial, last = 0, None
        while True:
            batch = session.search.ask()
            if not batch:
                break
            told = []
            for overrides in batch:
                trial_config = _overridden(config, overrides)
                store.set_trial(trial, dict(overrides), "running")
                records = _Trial(trial, trial_config, session.tasks, session.dataset,
                                 session.model, session.scoring.scorer, store, info,
                                 progress).run(workers)
                result = summarize(session.tasks, records)
                store.set_trial(trial, dict(overrides), "finished", result["objectives"])
                told.append((overrides, {**result["objectives"], "fitness": result["fitness"]}))
                last = result
                trial += 1
            session.search.tell(told)
        if last is None:
            raise UserError(f"search strategy '{config['search']['strategy']}' proposed nothing")
        summary = build_summary(info.run_dir, config, last, session.scoring.sandbox.isolated)
        write_atomic(info.run_dir / SUMMARY_FILE, json.dumps(summary, indent=2) + "\n")
        store.set_meta("status", "finished")
        plugins.notify("coral_run_finished", run=info, summary=summary)
        return summary
    finally:
        session.scoring.context.store = None
        store.close()


def build_summary(run_dir: Path, config: Mapping[str, Any], result: Mapping[str, Any],
                  isolated: bool | None) -> dict[str, Any]:
    return {
        "run_dir": str(run_dir),
        "model": config["model"]["spec"],
        "dataset": config["dataset"]["name"],
        "split": config["dataset"]["split"],
        "samples": config["run"]["samples"],
        "seed": config["run"]["seed"],
        **result,
        "sandboxed": isolated,
        "coral_version": __version__,
    }
