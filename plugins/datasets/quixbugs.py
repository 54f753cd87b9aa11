"""QuixBugs: 40 small Python programs with one bug each (upstream layout, loaded at run time).

Splits follow the CORAL-X design: 24 training problems, 8 clean test problems,
and the 8 graph problems as a third split, "extra". A run on test or extra that names a
training problem is refused; training data is built from training problems only; results
on training problems are always marked as seen in training.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Sequence

from coral_core.data.locate import FetchLimits, find_dataset_dir
from coral_core.errors import UserError
from coral_core.extract import extract_python
from coral_core.hookspecs import hookimpl
from coral_core.scoring.program_tests import ExecutionSpec
from coral_core.suggest import did_you_mean
from coral_core.types import Prompt, Success, Task, TrainingExample

from .quixbugs_tests import UpstreamFormatError, data_file, load_cases

NAME = "quixbugs"
COMMIT = "4257f44b0ff1181dedaedee6a447e133219fcebf"
ARCHIVE_URL = f"https://github.com/jkoppel/QuixBugs/archive/{COMMIT}.tar.gz"
FOLDERS = ("python_programs", "correct_python_programs", "json_testcases", "python_testcases")
# sha256 over the files of FOLDERS at COMMIT (see coral_core.data.fetch.tree_digest)
CONTENT_DIGEST = "b2350018b420c95ad0a0395cc478cf1d9e9285488f75d666fa9fd9a6f7877603"

TRAIN = (
    "bitcount", "bucketsort", "find_first_in_sorted", "find_in_sorted", "flatten", "gcd",
    "get_factors", "hanoi", "is_valid_parenthesization", "knapsack", "kth", "levenshtein",
    "lis", "longest_common_subsequence", "max_sublist_sum", "mergesort", "pascal",
    "powerset", "quicksort", "reverse_linked_list", "rpn_eval", "shunting_yard", "sqrt",
    "subsequences",
)
TEST = (
    "kheapsort", "lcs_length", "next_palindrome", "next_permutation", "possible_change",
    "sieve", "to_base", "wrap",
)
EXTRA = (
    "breadth_first_search", "depth_first_search", "detect_cycle", "minimum_spanning_tree",
    "shortest_path_length", "shortest_path_lengths", "shortest_paths", "topological_ordering",
)
SPLITS = {"train": TRAIN, "test": TEST, "extra": EXTRA, "all": tuple(sorted(TRAIN + TEST + EXTRA))}
assert not set(TRAIN) & set(TEST + EXTRA), "training and evaluation problems overlap"

INSTRUCTIONS = (
    "Fix the bug in this Python function from {name}:",
    "Debug and correct the following Python code for {name}:",
    "The following function has a bug. Provide the corrected version:",
    "Analyze and fix the error in this {name} implementation:",
)

# The evaluation prompt's instruction (CORAL-X's); training examples use INSTRUCTIONS instead.
EVALUATION_INSTRUCTION = (
    "Fix the buggy Python function in {name}.py\n\n"
    "The function has a bug that needs to be corrected. Analyze the code and provide the "
    "fixed version."
)

PROMPT = """{instruction}

Buggy Code:
```python
{code}
```

Provide the corrected Python code:
```python
"""

CLOSING_FENCE = "\n```"  # what a model writes after the corrected code


def make_prompt(name: str, buggy_code: str, instruction: str = EVALUATION_INSTRUCTION) -> str:
    """The prompt text: `instruction`, the buggy program in a fenced block, and an open
    ```python fence where the answer goes. Evaluation and training prompts share it."""
    return PROMPT.format(instruction=instruction.format(name=name),
                         code=buggy_code.strip("\n"))


def make_answer(fixed_code: str) -> str:
    """What a model should write after the prompt: the corrected program and the fence."""
    return fixed_code.strip("\n") + CLOSING_FENCE


def split_of(problem: str) -> str:
    for split in ("train", "test", "extra"):
        if problem in SPLITS[split]:
            return split
    raise UserError(f"unknown QuixBugs problem '{problem}'"
                    f"{did_you_mean(problem, SPLITS['all'])} (list them with 'coral datasets "
                    "show quixbugs')")


class QuixBugs:
    """The data set plugin object; `data_dir` is the folder holding quixbugs/."""

    name = NAME
    splits = tuple(SPLITS)
    description = "QuixBugs: 40 one-bug Python programs (train 24 / test 8 / extra 8)"

    def __init__(self, data_dir: str | None = None, include_slow: bool = False):
        self.data_dir = data_dir
        self.include_slow = include_slow

    @functools.cached_property
    def root(self) -> Path:
        root = find_dataset_dir(NAME, self.data_dir)
        missing = [f for f in FOLDERS if not (root / f).is_dir()]
        if missing:
            raise UserError(f"{root} is not a QuixBugs folder (missing {', '.join(missing)})")
        return root

    def _read(self, folder: str, name: str) -> str:
        return data_file(self.root, folder, name)

    def task(self, problem: str) -> Task:
        split = split_of(problem)
        buggy = self._read("python_programs", f"{problem}.py")
        try:
            setup, cases = load_cases(self.root, problem)
        except (OSError, UpstreamFormatError, ValueError) as error:
            raise UserError(f"QuixBugs tests for '{problem}' are unreadable: {error}") from None
        if not self.include_slow:
            cases = tuple(case for case in cases if not case.slow)
        support = (("node", self._read("python_testcases", "node.py")),) if setup else ()
        return Task(
            id=problem, dataset=NAME, split=split,
            prompt=Prompt(instruction=make_prompt(problem, buggy)),
            source=buggy, reference=self._read("correct_python_programs", f"{problem}.py"),
            execution=ExecutionSpec(module=problem, cases=cases, support=support, setup=setup),
            success=Success("bugfix", 1.0),
            seen_in_training=split == "train",
            metadata={"entry_point": problem},
        )

    def tasks(self, split: str, problems: Sequence[str] = ()) -> list[Task]:
        if split not in SPLITS:
            raise UserError(f"unknown split '{split}' (choose from {', '.join(SPLITS)})")
        names = list(problems) or list(SPLITS[split])
        for problem in names:
            home = split_of(problem)
            if split in ("test", "extra") and home == "train":
                raise UserError(
                    f"contamination: '{problem}' is a training problem and cannot be "
                    f"evaluated on the {split} split"
                )
            if split != "all" and home != split:
                raise UserError(f"'{problem}' is not in the {split} split (it is in {home})")
        return [self.task(problem) for problem in names]

    def extract_code(self, task: Task, text: str) -> str:
        return extract_python(text, task.metadata.get("entry_point"))

    def training_examples(self, problems: Sequence[str] = ()) -> list[TrainingExample]:
        """4 instruction variants per training problem (96 for all 24), rendered here: the
        prompt has the evaluation prompt's shape with the variant as its instruction, the
        answer is the corrected program and the closing fence; `source` / `solution` are
        the buggy and the corrected program."""
        names = list(problems) or list(TRAIN)
        outside = [p for p in names if p not in TRAIN]
        if outside:
            raise UserError(
                "contamination: training may only use training problems; "
                f"refused: {', '.join(outside)}"
            )
        examples = []
        for problem in names:
            buggy = self._read("python_programs", f"{problem}.py").strip("\n")
            fixed = self._read("correct_python_programs", f"{problem}.py").strip("\n")
            for template in INSTRUCTIONS:
                examples.append(TrainingExample(
                    problem, prompt=Prompt(instruction=make_prompt(problem, buggy, template)),
                    answer=make_answer(fixed), source=buggy, solution=fixed,
                ))
        return examples

    @staticmethod
    def fetch(force: bool = False, timeout: float | None = None) -> Path:
        """Download the pinned upstream archive into the user cache (see
        `coral_core.data.fetch.fetch_pinned` for what is checked and bounded); `timeout` is the
        deadline of the whole download in seconds."""
        url = os.environ.get("CORAL_QUIXBUGS_URL", ARCHIVE_URL)
        from coral_core.data.fetch import fetch_pinned  # the network code, when fetching

        limits = FetchLimits() if timeout is None else FetchLimits(deadline=timeout)
        return fetch_pinned(NAME, url, CONTENT_DIGEST, FOLDERS, force=force, limits=limits)


PRESET = {
    "dataset": {"name": NAME, "split": "test"},
    "model": {"spec": "baseline"},
    "evaluators": {
        "use": ["tests", "style", "security", "syntax", "runtime"],
        "gate": "syntax",
        "weights": {"bugfix": 0.30, "security": 0.25, "syntax": 0.20, "style": 0.15,
                    "runtime": 0.10},
    },
    # Each test may use 100x the reference solution's time, at least 0.5 s and at most the
    # 5 s test_timeout (CPU time): a correct program is never near that, and a program
    # that loops costs half a second per test instead of five.
    "execution": {"timeout_factor": 100.0, "timeout_floor": 0.5},
    "run": {"samples": 50},
}


@hookimpl
def coral_register_datasets(register):
    register(NAME, QuixBugs)


@hookimpl
def coral_register_experiments(register):
    register(NAME, PRESET)
