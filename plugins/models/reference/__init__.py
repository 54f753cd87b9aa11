"""The `reference` model: ``--model reference`` answers every task with the task's own
reference solution.

It is how to check a data set end to end without a model: every task should then be
solved (a task whose reference fails its own tests has a broken test or reference), and
a new data set plugin can be tried before any model is wired up. It needs no weights, no
server and no training examples; a task without a reference is an error that names it.
"""

from __future__ import annotations

import threading
from typing import Any, Sequence

from coral_core.errors import UserError
from coral_core.hookspecs import hookimpl
from coral_core.types import Generation, GenerationRequest

NAME = "reference"


class ReferenceModel:
    """Looks each request's task up in the run's data set by `request.task_id`."""

    name = NAME
    supports_adapters = False

    def __init__(self, dataset: Any):
        if dataset is None:
            raise UserError("reference: needs the run's data set (set [dataset] name)")
        self.dataset = dataset
        self._references: dict[str, str] = {}
        self._searched: set[str] = set()
        self._empty: set[str] = set()  # tasks whose reference may be "" (an empty infill)
        self._lock = threading.Lock()

    def _load(self, task_id: str) -> str | None:
        """The task's reference, reading the data set's splits one at a time until the
        task is found (a data set may refuse a problem on a split it is not in)."""
        for split in getattr(self.dataset, "splits", ()):
            if split in self._searched:
                continue
            try:
                tasks = self.dataset.tasks(split)
            except UserError:
                continue
            self._searched.add(split)
            for task in tasks:
                self._references.setdefault(task.id, task.reference)
                if task.candidate_kind == "completion":  # an empty completion is an answer
                    self._empty.add(task.id)
            if task_id in self._references:
                break
        return self._references.get(task_id)

    def reference(self, task_id: str) -> str:
        with self._lock:
            found = self._references.get(task_id)
            if found is None:
                found = self._load(task_id)
        if found is None:
            raise UserError(f"reference: data set '{self.dataset.name}' has no task "
                            f"'{task_id}'")
        if not found and task_id not in self._empty:
            raise UserError(f"reference: task '{task_id}' of data set '{self.dataset.name}' "
                            "has no reference solution")
        return found

    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Generation]]:
        return [[Generation(self.reference(request.task_id), finish_reason="stop")]
                * request.params.n for request in requests]


def create_reference(target: str = "", *, dataset: Any = None) -> ReferenceModel:
    """The factory Coral calls for ``--model reference`` (it passes the run's data set)."""
    if target:
        raise UserError(f"reference: takes no target (use --model reference, not "
                        f"reference:{target})")
    return ReferenceModel(dataset)


def check_tasks(tasks: Sequence[Any]) -> None:
    """Before the run directory exists: every task must have a reference to give (an
    empty completion is one), or the run would fail at its first batch."""
    missing = [task.id for task in tasks
               if not task.reference and task.candidate_kind != "completion"]
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3
                                          else "")
        raise UserError(f"reference: {len(missing)} task(s) have no reference solution to "
                        f"give ({shown}); --model reference cannot answer them: use a model "
                        "that writes them (--model hf:PATH_OR_ID or --model openai:MODEL)")


create_reference.check_tasks = check_tasks  # type: ignore[attr-defined]


@hookimpl
def coral_register_models(register: Any) -> None:
    register(NAME, create_reference)
