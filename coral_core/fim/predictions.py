"""Rescoring FIM predictions made by any other harness: `coral evaluate --plugin fim --data
TASKS.jsonl --predictions PRED.jsonl`. Lines are `{"task_id" | "index", "prediction"}`
(index: 0-based position in the task file); every task needs exactly one prediction."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from coral_core.files.decoding import jsonl_file as json_lines
from coral_core.errors import UserError
from coral_core.suggest import did_you_mean
from coral_core.types import Task


def read_predictions(path: Path, tasks: Sequence[Task]) -> list[str]:
    """One prediction per task, in the tasks' order; a malformed line, an unknown task, a
    task predicted twice or a task with no prediction is one error naming the line."""
    ids = [task.id for task in tasks]
    position = {task_id: index for index, task_id in enumerate(ids)}
    found: dict[int, str] = {}
    for _, where, obj in json_lines(path, "predictions"):
        if not isinstance(obj, dict) or not isinstance(obj.get("prediction"), str):
            raise UserError(f'{where}: expected {{"task_id" or "index", "prediction": '
                            '"..."}')
        index = _index(obj, where, position, len(ids))
        if index in found:
            raise UserError(f"{where}: a second prediction for task '{ids[index]}'")
        found[index] = obj["prediction"]
    missing = [ids[i] for i in range(len(ids)) if i not in found]
    if missing:
        raise UserError(f"{path}: no prediction for task '{missing[0]}'"
                        + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    return [found[i] for i in range(len(ids))]


def _index(obj: dict, where: str, position: dict[str, int], count: int) -> int:
    """The task a line predicts: by id, by index, or by both when they agree."""
    by_id = None
    if "task_id" in obj:
        task_id = str(obj["task_id"])
        if task_id not in position:
            raise UserError(f"{where}: unknown task '{task_id}'"
                            f"{did_you_mean(task_id, list(position))}")
        by_id = position[task_id]
        if "index" not in obj:
            return by_id
    index = obj.get("index")
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
        raise UserError(f"{where}: give \"task_id\", or an \"index\" in 0..{count - 1}")
    if by_id is not None and by_id != index:
        raise UserError(f"{where}: \"task_id\" '{obj['task_id']}' is at index {by_id} of the task "
                        f"file, but \"index\" is {index}: give one, or two that agree")
    return index


def score_predictions(dataset: Any, tasks: Sequence[Task], predictions: Sequence[str],
                      mode: str = "coral") -> dict[str, Any]:
    """The document `coral evaluate --plugin fim --json` prints: per task its objectives
    (after the data set's extraction, as a run would apply it), and the overall figures."""
    from coral_core.fim.metrics import score_many
    from coral_core.run.factories import extracted_code

    extracted = [extracted_code(dataset, task, text) for task, text in zip(tasks, predictions)]
    scored = score_many(extracted, [task.reference for task in tasks],
                        [str(task.metadata.get("language", "python")) for task in tasks], mode)
    rows = [{"task_id": task.id, **row, "prediction": text}
            for task, row, text in zip(tasks, scored["tasks"], extracted)]
    return {"tasks": rows, "overall": scored["overall"], "mode": mode}
