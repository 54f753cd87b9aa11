"""fim: fill-in-the-middle completion tasks.

`[dataset.options] path = "TASKS.jsonl"` reads JSONL in three shapes, detected per line:
(a) `{"prompt": "<|fim_prefix|>...<|fim_suffix|>...<|fim_middle|>", "groundtruth"}` with the
prompt in any supported family's format (parsed back into prefix/suffix, so that it is
re-templated for the model that runs it); (b) `{"prefix", "suffix", "groundtruth"}`;
(c) CrossCodeEval's lines (`prompt` = left context, `right_context`, `groundtruth`,
`metadata.task_id`, optional `crossfile_context.text`, prepended with `crossfile = true`).
Without `path`, a default set is built from the Python standard library of the running
interpreter (`kind`, `n`, `seed` options) and cached in the user cache.
"""

from __future__ import annotations

import functools
import hashlib
import sys
from pathlib import Path
from typing import Any, Sequence

from coral_core.data.locate import cache_folder
from coral_core.files.decoding import jsonl_file as json_lines
from coral_core.config.schema import OptionInvalid
from coral_core.errors import UserError
from coral_core.files.fileio import is_regular
from coral_core.hookspecs import hookimpl
from coral_core.suggest import did_you_mean
from coral_core.types import Prompt, Success, Task

from . import build
from .extract import EXTRACTORS, extractor_for
from coral_core.fim.templates import parse_any

NAME = "fim"
LANGUAGES = ("python", "java")
STOPS = {  # the FIM design's per-language stop sequences
    "python": ("\n\ndef ", "\nclass ", "\n\n\n", "\nif __name__"),
    "java": ("\n\npublic ", "\n\nprivate ", "\n\nclass ", "\n\ninterface "),
}


def guess_language(path: str) -> str:
    return "java" if "java" in Path(path).name.lower() else "python"


def metadata(obj: dict, where: str) -> dict:
    """A task's 'metadata' object ({} when absent)."""
    meta = obj.get("metadata", {})
    if not isinstance(meta, dict):
        raise UserError(f"{where}: 'metadata' must be an object, not {type(meta).__name__}")
    return meta


def _task_id(value: Any, where: str) -> str | None:
    """A task id as text: a non-empty string or an integer (None: number the line)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
        what = "an empty string" if value == "" else f"a {type(value).__name__}"
        raise UserError(f"{where}: a task id must be a non-empty string or an integer, "
                        f"not {what}")
    return str(value)


def parse_line(obj: Any, where: str, crossfile: bool) -> tuple[str, str, str, str | None]:
    """(prefix, suffix, groundtruth, task id or None) of one JSONL object."""
    if not isinstance(obj, dict) or not isinstance(obj.get("groundtruth"), str):
        raise UserError(f"{where}: not a FIM task (expected a JSON object with 'groundtruth' "
                        "and 'prefix'/'suffix', a templated 'prompt', or CrossCodeEval's "
                        "'prompt'/'right_context')")
    meta = metadata(obj, where)
    task_id = _task_id(obj["task_id"] if "task_id" in obj else meta.get("task_id"), where)
    if isinstance(obj.get("prefix"), str) and isinstance(obj.get("suffix"), str):
        return obj["prefix"], obj["suffix"], obj["groundtruth"], task_id
    if isinstance(obj.get("prompt"), str) and isinstance(obj.get("right_context"), str):
        prefix = obj["prompt"]
        context = obj.get("crossfile_context")
        if crossfile and context is not None:
            if not isinstance(context, dict) or not isinstance(context.get("text"), str):
                raise UserError(f"{where}: crossfile = true reads 'crossfile_context' as an "
                                "object with a string 'text' (CrossCodeEval's shape)")
            prefix = context["text"] + prefix
        return prefix, obj["right_context"], obj["groundtruth"], task_id
    if isinstance(obj.get("prompt"), str):
        parsed = parse_any(obj["prompt"])
        if parsed is None:
            raise UserError(f"{where}: 'prompt' is in no known FIM format (qwen, deepseek, "
                            "starcoder, codellama, codestral); give 'prefix' and 'suffix'")
        return parsed[1], parsed[2], obj["groundtruth"], task_id
    raise UserError(f"{where}: not a FIM task (expected 'prefix'/'suffix', a templated "
                    "'prompt', or CrossCodeEval's 'prompt'/'right_context')")


def read_tasks(path: Path, language: str | None, crossfile: bool) -> list[dict]:
    rows, seen = [], set()
    for number, where, obj in json_lines(path, "fim"):
        prefix, suffix, truth, task_id = parse_line(obj, where, crossfile)
        task_id = task_id or str(number)
        if task_id in seen:
            raise UserError(f"{where}: duplicate task id '{task_id}'")
        seen.add(task_id)
        lang = obj.get("language") or language or guess_language(str(path))
        if lang not in LANGUAGES:
            raise UserError(f"{where}: language '{lang}' (expected python or java)")
        meta = metadata(obj, where)
        rows.append({"task_id": task_id, "prefix": prefix, "suffix": suffix,
                     "groundtruth": truth, "language": lang, "metadata": meta})
    if not rows:
        raise UserError(f"fim: {path} holds no tasks")
    return rows


def default_set(kind: str = "line", n: int = 200, seed: int = 0) -> Path:
    """The default set from this interpreter's standard library, built once and cached."""
    root = build.stdlib_dir()
    key = hashlib.sha256(f"{root}|{sys.version}|{build.BUILDER_VERSION}".encode()).hexdigest()
    path = cache_folder("fim") / f"stdlib-{kind}-{n}-{seed}-{key[:12]}.jsonl"
    if not is_regular(path):  # absent, or a link or FIFO planted in the cache: (re)built
        build.write_jsonl(build.build_tasks(root, kind, n, seed, "python"), path)
    return path


def _option(key: str, message: str) -> OptionInvalid:
    """Said at the file and line (or flag) that set `[dataset.options] key`."""
    return OptionInvalid(("dataset", "options", key), message)


class FimDataset:
    name = NAME
    splits = ("test",)
    description = "FIM completion: JSONL (3 shapes), your own code, or the stdlib by default"
    needs_data = False
    candidate_kind = "completion"  # what a reply becomes (the baseline model infills)

    def __init__(self, path: str = "", language: str = "", crossfile: bool = False,
                 extract: str = "auto", kind: str = "line", n: int = 200, seed: int = 0,
                 source: str = "", data_dir: str | None = None) -> None:
        if source not in ("", "quixbugs"):
            raise _option("source", f"fim: source = '{source}' (expected \"quixbugs\", or none)")
        if source and path:
            raise UserError("fim: give either path (tasks from a file) or source = "
                            "\"quixbugs\" (tasks built from QuixBugs), not both")
        if language and language not in LANGUAGES:
            raise _option("language", f"fim: language = '{language}' (expected python or java)")
        if extract != "auto" and extract not in EXTRACTORS:
            raise _option("extract", f"fim: extract = '{extract}' is unknown"
                          f"{did_you_mean(extract, EXTRACTORS)} (known: auto, "
                          f"{', '.join(EXTRACTORS)})")
        if kind not in build.KINDS:
            raise _option("kind", f"fim: kind = '{kind}' (expected one of "
                                  f"{', '.join(build.KINDS)})")
        if n < 1:
            raise _option("n", f"fim: n must be at least 1, not {n!r}")
        self.path, self.language, self.crossfile = path, language or None, bool(crossfile)
        self.extract, self.kind, self.n, self.seed = extract, kind, int(n), int(seed)
        self.source = source
        self.quixbugs = None
        if source == "quixbugs":
            from coral_core import plugins

            self.quixbugs = plugins.build("datasets", "quixbugs", data_dir=data_dir)
            self.splits = tuple(self.quixbugs.splits)

    @property
    def root(self) -> Path | str:
        """The data folder candidates must not see (QuixBugs' when built from it)."""
        return self.quixbugs.root if self.quixbugs is not None else ""

    @functools.cached_property
    def rows(self) -> list[dict]:
        path = Path(self.path) if self.path else default_set(self.kind, self.n, self.seed)
        return read_tasks(path, self.language, self.crossfile)

    def _task(self, row: dict) -> Task:
        language = row["language"]
        return Task(
            id=row["task_id"], dataset=NAME, split="test",
            prompt=Prompt(prefix=row["prefix"], suffix=row["suffix"]),
            reference=row["groundtruth"], success=Success("em", 1.0),
            stop=STOPS[language], candidate_kind="completion",
            metadata={"language": language, **{k: v for k, v in row["metadata"].items()
                                               if isinstance(v, (str, int, float, bool))}},
        )

    def tasks(self, split: str, problems: Sequence[str] = ()) -> list[Task]:
        if self.quixbugs is not None:
            from .quixbugs_source import quixbugs_infill_tasks

            return quixbugs_infill_tasks(self.quixbugs, split, problems, self.kind, self.seed)
        tasks = [self._task(row) for row in self.rows]
        if problems:
            known = {t.id: t for t in tasks}
            for problem in problems:
                if problem not in known:
                    raise UserError(f"fim: unknown task '{problem}'"
                                    f"{did_you_mean(problem, known)}")
            return [known[p] for p in problems]
        return tasks

    def extract_code(self, task: Task, text: str) -> str:
        language = str(task.metadata.get("language", "python"))
        extractor = extractor_for(self.extract, language, str(task.metadata.get("kind", "")))
        return extractor(text, task.prompt.prefix or "", task.prompt.suffix or "", language)


BALANCED = {"es": 1 / 0.7, "em": 1 / 0.25, "em_es": 1 / 0.55}

PRESET = {
    "dataset": {"name": NAME, "split": "test"},
    # The weight-free baseline infills from the prompt's own context: the floor, with no
    # weights. `--model reference` answers with the ground truth (a pipeline check, every
    # figure 1.0); real numbers need --model hf:... or openai:... (see docs/fim.md).
    "model": {"spec": "baseline", "max_new_tokens": 64, "temperature": 0.1},
    "evaluators": {"use": ["fim"], "weights": dict(BALANCED)},
    "search": {
        "strategy": "grid", "rank_by": "balanced",
        "space": {"model.temperature": [0.05, 0.1, 0.2, 0.3],
                  "model.max_new_tokens": [32, 48, 64, 96]},
    },
    "run": {"samples": 1},
}


# Infilling inside the QuixBugs programs, run against their tests: pass@k beside ES/EM.
QUIXBUGS_PRESET = {
    "dataset": {"name": NAME, "split": "test", "options": {"source": "quixbugs"}},
    "model": {"spec": "baseline", "max_new_tokens": 64, "temperature": 0.1},
    "evaluators": {"use": ["fim", "fim_tests"],
                   "weights": {"infill_pass": 1.0, "es": 0.5, "em": 0.5}},
    "run": {"samples": 1},
}


@hookimpl
def coral_register_datasets(register):
    register(NAME, FimDataset)


@hookimpl
def coral_register_experiments(register):
    register(NAME, PRESET)
    register("fim-quixbugs", QUIXBUGS_PRESET)


@hookimpl
def coral_register_commands(cli):
    from .command import app

    cli.add_typer(app, name="fim")
