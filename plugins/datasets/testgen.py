"""testgen: a model writes pytest tests for a QuixBugs program.

The model sees the correct program and writes a test file; the `testgen` evaluator runs it
in the sandbox against the correct program, the buggy one and cosmic-ray's mutants. The
QuixBugs splits hold (a test or extra run that names a training problem is refused) and the
upstream tests are never shown: the model writes its own.
"""

from __future__ import annotations

from typing import Sequence

from coral_core import plugins
from coral_core.extract import extract_python
from coral_core.hookspecs import hookimpl
from coral_core.types import Prompt, Success, Task


NAME = "testgen"

PROMPT = """Write pytest tests for the Python function `{name}` in {name}.py. The tests must \
pass on this correct program, and should fail if the function had a bug: check its results \
on inputs you choose, edge cases included.

```python
{program}
```
{support}
Import the function with `from {name} import {name}`. Provide the test file:
```python
"""

SUPPORT = """
The class `Node` it uses can be imported with `from node import Node`:

```python
{node}
```
"""


class Testgen:
    """QuixBugs problems as test-writing tasks; `data_dir` as for quixbugs."""

    name = NAME
    candidate_kind = "tests"
    description = "test generation: write pytest tests for a QuixBugs program (40 problems)"
    data_name = "quixbugs"  # the folder it reads (`coral datasets list`)

    def __init__(self, data_dir: str | None = None):
        self.quixbugs = plugins.build("datasets", "quixbugs", data_dir=data_dir)
        self.splits = tuple(self.quixbugs.splits)

    @property
    def root(self):
        """The data folder (hidden from candidates, like quixbugs')."""
        return self.quixbugs.root

    def _task(self, problem: Task) -> Task:
        program = problem.reference
        support = problem.execution.support if problem.execution else ()
        node = dict(support).get("node")
        text = PROMPT.format(name=problem.id, program=program.strip("\n"),
                             support=SUPPORT.format(node=node.strip("\n")) if node else "")
        return Task(
            id=problem.id, dataset=NAME, split=problem.split,
            prompt=Prompt(instruction=text), source=program,
            success=Success("bug_revealed", 1.0), stop=("\n```",), candidate_kind="tests",
            seen_in_training=problem.seen_in_training,
            metadata={"module": problem.id, "entry_point": problem.id, "program": program,
                      "buggy": problem.source, "support": [list(s) for s in support]},
        )

    def tasks(self, split: str, problems: Sequence[str] = ()) -> list[Task]:
        return [self._task(task) for task in self.quixbugs.tasks(split, problems)]

    def extract_code(self, task: Task, text: str) -> str:
        return extract_python(text, tests=True)


PRESET = {
    "dataset": {"name": NAME, "split": "test"},
    "model": {"spec": "baseline"},
    "evaluators": {
        "use": ["testgen"],
        "weights": {"bug_revealed": 0.4, "mutation_score": 0.3, "line_coverage": 0.2,
                    "tests_pass": 0.1},
    },
    "run": {"samples": 5},
}


@hookimpl
def coral_register_datasets(register):
    register(NAME, Testgen)


@hookimpl
def coral_register_experiments(register):
    register(NAME, PRESET)
