"""The QuixBugs plugin: splits, contamination rules, training data, prompts, translated tests."""

from __future__ import annotations

import ast
import json

import pytest

from coral_core.errors import UserError
from coral_core.types import Prompt, Success, TrainingExample
from coral_plugins.datasets.quixbugs import EXTRA, TEST, TRAIN, QuixBugs, make_prompt

GCD_BUGGY = ("def gcd(a, b):\n    if b == 0:\n        return a\n    else:\n"
             "        return gcd(a % b, b)\n")


@pytest.fixture(scope="module")
def quixbugs(data_dir):
    return QuixBugs(data_dir=str(data_dir))


def test_splits_partition_the_40_problems(quixbugs):
    assert (len(TRAIN), len(TEST), len(EXTRA)) == (24, 8, 8)
    assert len(set(TRAIN) | set(TEST) | set(EXTRA)) == 40
    assert {t.id for t in quixbugs.tasks("all")} == set(TRAIN) | set(TEST) | set(EXTRA)
    assert [t.id for t in quixbugs.tasks("test")] == list(TEST)
    assert all(t.seen_in_training == (t.split == "train") for t in quixbugs.tasks("all"))


@pytest.mark.parametrize("split", ["test", "extra"])
def test_naming_a_training_problem_on_an_evaluation_split_is_refused(quixbugs, split):
    with pytest.raises(UserError, match="contamination: 'gcd' is a training problem"):
        quixbugs.tasks(split, ["gcd"])


def test_training_data_is_96_examples_from_training_problems_only(quixbugs):
    examples = quixbugs.training_examples()
    assert len(examples) == 96
    assert {e.task_id for e in examples} == set(TRAIN)
    assert len({e.prompt for e in examples if e.task_id == "gcd"}) == 4
    with pytest.raises(UserError, match="contamination: .*refused: sieve"):
        quixbugs.training_examples(["gcd", "sieve"])


def test_training_examples_are_rendered_by_the_data_set(quixbugs, data_dir):
    """The evaluation prompt's shape with each instruction variant; the answer is the
    corrected program and the fence that closes the prompt's open one."""
    folder = data_dir / "quixbugs"
    buggy = (folder / "python_programs" / "gcd.py").read_text()
    fixed = (folder / "correct_python_programs" / "gcd.py").read_text()
    assert buggy.startswith(GCD_BUGGY)  # the pinned upstream program, then its docstring
    body = ("\n\nBuggy Code:\n```python\n" + buggy.strip("\n") + "\n```\n\n"
            "Provide the corrected Python code:\n```python\n")
    instructions = ["Fix the bug in this Python function from gcd:",
                    "Debug and correct the following Python code for gcd:",
                    "The following function has a bug. Provide the corrected version:",
                    "Analyze and fix the error in this gcd implementation:"]
    assert quixbugs.training_examples(["gcd"]) == [
        TrainingExample("gcd", Prompt(instruction=instruction + body),
                        answer=fixed.strip("\n") + "\n```", source=buggy.strip("\n"),
                        solution=fixed.strip("\n"))
        for instruction in instructions]


def test_prompt_is_seed_000s_with_the_buggy_program(quixbugs):
    task = quixbugs.task("gcd")
    assert task.prompt == Prompt(instruction=(
        "Fix the buggy Python function in gcd.py\n\n"
        "The function has a bug that needs to be corrected. Analyze the code and provide the "
        "fixed version.\n\nBuggy Code:\n```python\n" + task.source.strip("\n") + "\n```\n\n"
        "Provide the corrected Python code:\n```python\n"))
    assert task.prompt.instruction == make_prompt("gcd", task.source)
    assert task.source.startswith(GCD_BUGGY) and task.reference not in task.prompt.instruction
    assert task.success == Success("bugfix", 1.0)


def test_json_problems_follow_the_upstream_comparisons(quixbugs, data_dir):
    sqrt = quixbugs.task("sqrt").execution.cases
    assert all(c.expects[0].kind == "approx" for c in sqrt)
    assert sqrt[0].expects[0].tolerance == sqrt[0].step.args[-1]
    assert all(c.step.project == "list" for c in quixbugs.task("kheapsort").execution.cases)
    hanoi = quixbugs.task("hanoi").execution.cases
    assert isinstance(hanoi[1].expects[0].value[0], tuple), "hanoi expects tuples as upstream"
    lines = (data_dir / "quixbugs" / "json_testcases" / "knapsack.json").read_text().splitlines()
    assert len(quixbugs.task("knapsack").execution.cases) == len([x for x in lines if x]) - 1
    slow = QuixBugs(data_dir=str(data_dir), include_slow=True)
    assert len(slow.task("knapsack").execution.cases) == len([x for x in lines if x])


@pytest.mark.parametrize("problem", EXTRA + ("reverse_linked_list",))
def test_graph_tests_keep_expected_values_out_of_the_sandbox(quixbugs, problem, data_dir):
    task = quixbugs.task(problem)
    setup = task.execution.setup
    tree = ast.parse(setup)
    assert "__coral_record__" in setup and "assert" not in setup
    assert not any(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
                   and isinstance(n.value.value, str) for n in ast.walk(tree)), "docstrings left"
    for case in task.execution.cases:
        for expect in case.expects:
            if expect.kind == "eq":
                literal = repr(expect.value)
                if len(literal) > 12:  # short ones (0, [0]) occur as inputs too
                    assert literal not in setup, (case.name, literal)
    upstream = (data_dir / "quixbugs" / "python_testcases" / f"test_{problem}.py").read_text()
    tests = [n.name for n in ast.parse(upstream).body
             if isinstance(n, ast.FunctionDef) and n.name.startswith("test")]
    assert [c.name for c in task.execution.cases] == tests


def test_shortest_path_lengths_expected_dict_is_held_by_the_parent(quixbugs):
    task = quixbugs.task("shortest_path_lengths")
    assert "expected" not in task.execution.setup
    first = task.execution.cases[0].expects[0]
    assert first.kind == "eq" and first.value[(1, 0)] == float("inf")


def test_reverse_linked_list_identity_checks_compare_objects(quixbugs):
    kinds = [e.kind for e in quixbugs.task("reverse_linked_list").execution.cases[0].expects]
    assert kinds == ["same", "eq"]


def test_extraction_uses_the_entry_point(quixbugs):
    task = quixbugs.task("gcd")
    reply = "```python\ndef helper():\n    pass\n```\n```python\ndef gcd(a, b):\n    return a\n```"
    assert quixbugs.extract_code(task, reply).startswith("def gcd")


def test_missing_data_names_both_ways_to_provide_it(tmp_path, monkeypatch):
    monkeypatch.delenv("CORAL_DATA_DIR", raising=False)
    monkeypatch.setenv("CORAL_CACHE_DIR", str(tmp_path))
    with pytest.raises(UserError) as caught:
        QuixBugs().tasks("test")
    message = str(caught.value)
    assert "--data-dir" in message and "coral datasets fetch quixbugs" in message


def test_json_testcases_parse_as_the_seed_describes(data_dir):
    for path in (data_dir / "quixbugs" / "json_testcases").glob("*.json"):
        for line in path.read_text().splitlines():
            if line.strip():
                args, _ = json.loads(line)
                assert isinstance(args, list)
