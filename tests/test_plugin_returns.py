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


class Loose:
    """An evaluator whose objective is not a number."""

    name = "loose"
    objectives = ("loose",)

    def __init__(self, value):
        self.value = value

    def evaluate(self, candidate, context):
        from coral_core.types import Evaluation

        return Evaluation({"loose": self.value})


@pytest.mark.parametrize("value", ["0.9", True, None, [0.5]])
def test_an_objective_that_is_not_a_number_is_the_evaluators_error(value):
    """A red-team evaluator's "0.9" was stored as 0.9, and True as 1.0."""
    from coral_core.scoring.scorer import Scorer
    from coral_core.types import Candidate

    scorer = Scorer([Loose(value)], None, {"loose": 1.0})
    scored, errors = scorer.score_apart(Candidate(_task("a"), "x = 1\n"))
    assert "gave loose=" in errors["loose"] and "not a number in [0, 1]" in errors["loose"]
    assert scored.objectives == {"loose": 0.0}


def test_numbers_of_any_real_type_are_taken():
    import fractions

    import numpy as np

    from coral_core.scoring.scorer import Scorer
    from coral_core.types import Candidate

    for value in (1, 0.5, np.float32(0.25), fractions.Fraction(1, 4)):
        scorer = Scorer([Loose(value)], None, {"loose": 1.0})
        scored, errors = scorer.score_apart(Candidate(_task("a"), "x = 1\n"))
        assert not errors and scored.objectives["loose"] == float(value)


class Returns:
    """An evaluator that returns what it is handed (a newcomer's mistakes)."""

    name = "returns"

    def __init__(self, given, objectives=("returns",)):
        self.given, self.objectives = given, objectives

    def evaluate(self, candidate, context):
        return self.given


@pytest.mark.parametrize("given, words", [
    ({"returns": 1.0}, "evaluator 'returns' returned a dict, not an Evaluation"),
    (None, "evaluator 'returns' returned a NoneType, not an Evaluation"),
    ("Evaluation", "evaluator 'returns' returned a str, not an Evaluation"),
])
def test_an_evaluator_that_breaks_its_contract_is_one_line_naming_it(given, words):
    """A newcomer's pass: a dict returned zeroed every objective and the run exited 0 (the
    message blamed Coral's scorer.py); a misnamed objective was a bare KeyError."""
    from coral_core.scoring.scorer import Scorer
    from coral_core.types import Candidate

    scorer = Scorer([Returns(given)], None, {"returns": 1.0})
    for score in (scorer.score, scorer.score_apart):
        with pytest.raises(UserError) as caught:
            score(Candidate(_task("a"), "x = 1\n"))
        assert words in str(caught.value)


def test_an_objective_an_evaluator_does_not_give_is_that_candidates_error():
    """It was a bare KeyError; an evaluator may leave it out on one path only."""
    from coral_core.scoring.scorer import Scorer
    from coral_core.types import Candidate, Evaluation

    scorer = Scorer([Returns(Evaluation({"len": 0.5}))], None, {"returns": 1.0})
    scored, errors = scorer.score_apart(Candidate(_task("a"), "x = 1\n"))
    assert ("evaluator 'returns' gave no objective 'returns', which its `objectives` declare "
            "(it gave: len)") in errors["returns"]
    assert scored.objectives == {"returns": 0.0}


@pytest.mark.parametrize("declared", ["length", ("length", 3), None, ("",)])
def test_objectives_that_are_not_a_tuple_of_names_are_refused_at_once(declared):
    """`objectives = "length"` was read as the objectives l, e, n, g, t, h."""
    from coral_core.scoring.scorer import Scorer

    with pytest.raises(UserError, match="declares objectives = .*: give a tuple of names"):
        Scorer([Returns(None, declared)], None)


class Extracts:
    name = "extracts"

    def extract_code(self, task, text):
        pass  # forgot the return


def test_extract_code_that_gives_no_text_is_one_line_naming_the_data_set():
    """A newcomer's pass: an AttributeError from deep in the scorer, and exit 1; the same
    from `coral evaluate --plugin fim` (its predictions are extracted as a run's are)."""
    from coral_core.executors.in_process import _score
    from coral_core.fim.predictions import score_predictions

    said = "data set 'extracts' extract_code gave a NoneType where the candidate's code"
    with pytest.raises(UserError, match=said):
        _score(None, Extracts(), _task("a"), "reply", True)
    with pytest.raises(UserError, match=said):
        score_predictions(Extracts(), [_task("a")], ["reply"])
