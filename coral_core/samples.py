"""Scoring samples produced elsewhere: EvalPlus-style JSONL, one `{"task_id": ...,
"solution": ...}` or `{"task_id": ..., "completion": ...}` object per line.

A `solution` is a whole program, scored as it is; a `completion` is a model's reply to the
task's prompt, from which the data set extracts the program (as in a run). `task_id` is the
task's id, optionally prefixed by the data set's name (`quixbugs/gcd`, as EvalPlus writes
`HumanEval/0`). Scoring goes through the same executor and evaluators as a run, and the
result is a run's summary (per problem n, c, pass@k, objectives; overall figures with
their intervals), so results from any other harness can be rescored and compared.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from . import __version__
from .blueprints import ScoringBlueprint
from .candidate_files import find_task
from .decoding import jsonl_file
from .errors import UserError
from .execution import code_digest
from .factories import build_executor
from .metrics import summarize
from .protocols import Dataset
from .scoring import ScoredCandidate
from .store import ScoreRecord, TaskRecord
from .types import Task


@dataclass(frozen=True)
class Sample:
    line: int
    task_id: str
    text: str
    whole_program: bool  # "solution" (scored as is) rather than "completion"


def read_samples(path: Path) -> list[Sample]:
    """Every sample in the file; a malformed line is an error naming the file and line."""
    samples = []
    for number, where, item in jsonl_file(path, "samples"):
        if not isinstance(item, dict):
            raise UserError(f"{where}: expected an object with task_id and solution or "
                            "completion")
        task_id = item.get("task_id")
        if not isinstance(task_id, str) or not task_id:
            raise UserError(f"{where}: 'task_id' must be a non-empty string")
        key = "solution" if "solution" in item else "completion"
        if not isinstance(item.get(key), str):
            raise UserError(f"{where}: needs 'solution' (a program) or 'completion' (a "
                            "reply to the task's prompt) as a string")
        samples.append(Sample(number, task_id, item[key], key == "solution"))
    if not samples:
        raise UserError(f"{path} holds no samples")
    return samples


def task_name(task_id: str, dataset_name: str) -> str:
    """'QuixBugs/gcd' -> 'gcd' for the quixbugs data set; other ids are kept."""
    prefix, slash, rest = task_id.partition("/")
    return rest if slash and prefix.lower() == dataset_name.lower() else task_id


def score_samples(config: Mapping[str, Any], dataset: Dataset, samples: Sequence[Sample],
                  source: Path) -> dict[str, Any]:
    """Score every sample (identical programs once) and summarize like a run."""
    tasks: dict[str, Task] = {}
    for sample in samples:
        name = task_name(sample.task_id, dataset.name)
        if name not in tasks:
            try:
                tasks[name] = find_task(dataset, name)
            except UserError as error:
                raise UserError(f"{source}:{sample.line}: {error}") from None
    executor = build_executor(config["execution"])
    blueprint = ScoringBlueprint.of(config)
    try:
        futures = [(sample, executor.submit(blueprint, tasks[task_name(sample.task_id,
                                                                       dataset.name)],
                                            sample.text, extract=not sample.whole_program))
                   for sample in samples]
        scored = [(sample, future.result()) for sample, future in futures]
    finally:
        executor.close()
    return _summary(config, dataset, tasks, scored, source)


def _summary(config: Mapping[str, Any], dataset: Dataset, tasks: Mapping[str, Task],
             scored: list[tuple[Sample, ScoredCandidate]], source: Path) -> dict[str, Any]:
    counts: dict[str, int] = {}
    records: dict[tuple[str, int], ScoreRecord] = {}
    for sample, result in scored:
        name = task_name(sample.task_id, dataset.name)
        index = counts[name] = counts.get(name, 0) + 1
        records[(name, index - 1)] = ScoreRecord(
            0, name, index - 1, code_digest(result.code), result.passed,
            dict(result.objectives), result.fitness, dict(result.details), result.seconds)
    task_records = [TaskRecord(0, t.id, t.split, t.seen_in_training, t.success is not None,
                               t.prompt.digest()) for t in tasks.values()]
    seed = config["run"]["seed"]
    result = summarize(task_records, records, seed=seed)
    splits = sorted({t.split for t in tasks.values()})
    return {
        "run_dir": None, "status": "finished", "model": f"samples:{Path(source).name}",
        "dataset": dataset.name, "split": ", ".join(splits),
        "samples": max(counts.values()), "seed": seed, **result,
        **({"samples_min": min(counts.values())}
           if min(counts.values()) != max(counts.values()) else {}),
        "source": str(Path(source).absolute()), "coral_version": __version__,
    }
