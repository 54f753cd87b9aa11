"""Reading task files in HumanEval's shape: JSON Lines, plain or gzip-compressed.

Each line is an object with `task_id`, `prompt`, `test` (defining `check(candidate)`) and
`entry_point`, and optionally `canonical_solution` and `suffix` (infilling). That is
HumanEval's, HumanEval-Infilling's, and what HumanEval+ or MBPP converted to it look like,
so any such set can be scored. A bad record is one error naming the file, the line and the
field, raised before anything is scored.
"""

from __future__ import annotations

import ast
import functools
import keyword
import re
from dataclasses import dataclass
from pathlib import Path

from coral_core import parsing
from coral_core.files.decoding import json_value, jsonl_lines
from coral_core.errors import UserError
from coral_core.files import fileio
from coral_core.files.fileio import DATA_BYTES

REQUIRED = ("task_id", "prompt", "test", "entry_point")
OPTIONAL = ("canonical_solution", "suffix")


@dataclass(frozen=True)
class Record:
    """One task as the file gives it (`canonical_solution` / `suffix`: None when absent)."""

    task_id: str
    prompt: str
    test: str
    entry_point: str
    canonical_solution: str | None = None
    suffix: str | None = None
    line: int = 0

    @property
    def asserts(self) -> int:
        """The test's assert statements (what `coral datasets show` counts as its tests)."""
        return _study(self.test)[1]


@functools.lru_cache(maxsize=1024)
def _study(test: str) -> tuple[str, int]:
    """(what is wrong with a test, or "", its assert statements): once per distinct test
    (the infilling files repeat HumanEval's 164 tests over 8,652 tasks)."""
    try:
        tree = parsing.parse(test)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        return (f"is not valid Python ({type(error).__name__}"
                f"{': ' + str(error.args[0]) if error.args else ''})", 0)
    if not any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "check"
               for n in tree.body):
        return "defines no check(candidate) function", 0
    return "", sum(isinstance(n, ast.Assert) for n in ast.walk(tree))


def read_text(path: Path, limit: int = DATA_BYTES) -> str:
    return fileio.read_text(path, limit=limit, what="task file", gzipped=True)


def _field(item: dict, name: str, where: str, required: bool) -> str | None:
    if name not in item:
        if required:
            raise UserError(f"{where}: field '{name}' is missing")
        return None
    value = item[name]
    if not isinstance(value, str):
        raise UserError(f"{where}: field '{name}' must be a string, not "
                        f"{type(value).__name__}")
    return value


def parse_record(item: object, where: str, line: int) -> Record:
    if not isinstance(item, dict):
        raise UserError(f"{where}: expected a JSON object with fields "
                        f"{', '.join(REQUIRED)}")
    values = {name: _field(item, name, where, True) for name in REQUIRED}
    values.update({name: _field(item, name, where, False) for name in OPTIONAL})
    if not values["task_id"]:
        raise UserError(f"{where}: field 'task_id' is empty")
    entry = str(values["entry_point"])
    if not entry.isidentifier() or keyword.iskeyword(entry):
        raise UserError(f"{where}: field 'entry_point' must be a Python name, not "
                        f"{values['entry_point']!r:.60}")
    problem = _study(str(values["test"]))[0]
    if problem:
        raise UserError(f"{where}: field 'test' {problem}")
    problem = _defines(str(values["prompt"]), values["canonical_solution"],
                       values["suffix"] or "", entry)
    if problem:
        raise UserError(f"{where}: {problem}")
    return Record(**values, line=line)  # type: ignore[arg-type]


def _defines(prompt: str, canonical: str | None, suffix: str, entry: str) -> str:
    """What is wrong with the program the harness would check, or "": with a canonical
    solution, prompt + it + suffix must be Python defining `entry_point` at its top level;
    without, the prompt or suffix must hold its def (a red-team set's entry point
    `class`, one defined nowhere, and a prompt that was not Python were scored)."""
    if canonical is None:
        pattern = rf"^[ \t]*(async[ \t]+)?def[ \t]+{re.escape(entry)}[ \t]*\("
        if "\0" in prompt + suffix or not re.search(pattern, prompt + suffix, re.M):
            return (f"field 'entry_point': the prompt has no 'def {entry}(' (give a "
                    "canonical_solution if it is defined otherwise)")
        return ""
    return _program_defines(prompt + canonical + suffix, entry, bool(suffix))


@functools.lru_cache(maxsize=1024)
def _program_defines(program: str, entry: str, suffixed: bool) -> str:
    """`_defines` of a whole program. Cached by the program's text: the infilling files
    rebuild HumanEval's 164 programs over and over, each cut into prompt, hole and suffix
    elsewhere (keyed by the three parts, the multi-line split's 5,815 tasks were 5,815
    parses: 0.5 s of every load)."""
    try:
        tree = parsing.parse(program)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        return (f"prompt + canonical_solution{' + suffix' if suffixed else ''} is not valid "
                f"Python ({type(error).__name__}{': ' + str(error.args[0]) if error.args else ''})")
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    if entry not in names:
        return (f"field 'entry_point': '{entry}' is not defined by prompt + "
                "canonical_solution")
    return ""


def read_records(path: Path) -> list[Record]:
    """Every record of the file, checked; duplicate task ids are refused."""
    records: list[Record] = []
    seen: dict[str, int] = {}
    for number, line in jsonl_lines(read_text(path)):
        where = f"{path}:{number}"
        record = parse_record(json_value(line, where), where, number)
        if record.task_id in seen:
            raise UserError(f"{where}: field 'task_id': '{record.task_id}' is also on line "
                            f"{seen[record.task_id]}")
        seen[record.task_id] = number
        records.append(record)
    if not records:
        raise UserError(f"{path} holds no tasks")
    return records
