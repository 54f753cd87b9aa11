"""Finding the task a user names (a sample's `task_id`, a candidate file's problem), the same
way for `coral evaluate --samples`, `--candidate` and `--candidate-dir`: a training problem
must never be scored as if it were a test problem."""

from __future__ import annotations

from coral_core.errors import UserError
from coral_core.protocols import Dataset
from coral_core.types import Task


def _in_any_split(dataset: Dataset, problem: str) -> Task:
    """`problem` in any split of the data set."""
    split = "all" if "all" in dataset.splits else dataset.splits[0]
    return dataset.tasks(split, [problem])[0]


def task_name(task_id: str, dataset_name: str) -> str:
    """'QuixBugs/gcd' -> 'gcd' for the quixbugs data set; other ids are kept."""
    prefix, slash, rest = task_id.partition("/")
    return rest if slash and prefix.lower() == dataset_name.lower() else task_id


class OtherSplit(UserError):
    """A task the user named that lies in another split than the one they named; `task`
    is it (a folder's row for that file says whether it was seen in training)."""

    def __init__(self, message: str, task: Task):
        super().__init__(message)
        self.task = task


class TaskLookup:
    """Tasks found in the configured split first (where the data set has it), else in any;
    with `strict` (a split the user named, by flag or in a configuration file, not a
    preset's) a task of another split is an error."""

    def __init__(self, dataset: Dataset, split: str | None, strict: bool):
        self.dataset, self.split, self.strict = dataset, split, strict
        has = bool(split) and split in getattr(dataset, "splits", ())
        self.known = {t.id: t for t in dataset.tasks(split)} if has else None

    def find(self, name: str) -> Task:
        """The task `name` names: its id as given (HumanEval's `HumanEval/0`), else without
        the data set's name in front (`quixbugs/gcd`)."""
        task = self._any(name)
        if self.strict and self.known is not None and task.id not in self.known:
            raise OtherSplit(f"task '{task.id}' is in the {self._home_split(task)} split, "
                             f"not in {self.split} (name no split, with --split or in the "
                             "configuration, to score the tasks of any split)", task)
        return task

    def _any(self, name: str) -> Task:
        names = dict.fromkeys((name, task_name(name, self.dataset.name)))
        if self.known is not None:
            for each in names:
                if each in self.known:
                    return self.known[each]
        error: UserError | None = None
        for each in names:
            try:
                return _in_any_split(self.dataset, each)
            except UserError as failed:
                error = error or failed
        assert error is not None
        raise error

    def _home_split(self, task: Task) -> str:
        """The smallest split holding `task`: where a split gathers others
        (HumanEval-Infilling's `all`), the one it comes from (an error path: reads every
        split)."""
        holding = []
        for name in getattr(self.dataset, "splits", ()):
            ids = {t.id for t in self.dataset.tasks(name)}
            if task.id in ids:
                holding.append((len(ids), name))
        return min(holding)[1] if holding else task.split
