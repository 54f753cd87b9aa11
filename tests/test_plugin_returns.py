"""What a plugin returns is checked where Coral takes it: a data set's tasks, a model's
generations, a strategy's proposals and state. A wrong value is one line naming the
plugin, not a traceback from deep inside the run (a red-team pass found sqlite's
IntegrityError for a duplicate task id, AttributeErrors for strings where tasks and
override tables belong, and a run of no trials that finished with an empty summary)."""

from __future__ import annotations

import pytest

from coral_core.errors import UserError
from coral_core.run import runner
from coral_core.types import Prompt, Task

SECTION = {"name": "plugged", "split": "test", "problems": [], "limit": 0}


class Given:
    """A data set that gives what it is handed."""

    splits = ("test",)

    def __init__(self, tasks):
        self._tasks = tasks

    def tasks(self, split, problems=None):
        return self._tasks


def _task(task_id):
    return Task(id=task_id, dataset="plugged", split="test", prompt=Prompt("Fix it."))


@pytest.mark.parametrize("tasks, words", [
    ([_task("a"), _task("a")], "data set 'plugged' gave task 'a' twice"),
    ([_task("a"), "b"], "data set 'plugged' gave a str where a Task belongs"),
    ([_task("")], "gave a task whose id is ''"),
])
def test_a_data_sets_wrong_tasks_are_one_line(tasks, words):
    with pytest.raises(UserError) as caught:
        runner.select_tasks(Given(tasks), SECTION)
    assert words in str(caught.value)


def test_sound_tasks_pass_the_check():
    assert [t.id for t in runner.select_tasks(Given([_task("a"), _task("b")]), SECTION)] \
        == ["a", "b"]


class Unserialisable:
    def state(self):
        return {"seen": {1, 2}}


def test_a_strategy_state_that_is_not_json_is_one_line():
    with pytest.raises(UserError, match="Unserialisable's state\\(\\) is not JSON data"):
        runner._strategy_state(Unserialisable(), 0)
