"""Scoring candidate files from disk (`coral evaluate`)."""

from __future__ import annotations

import logging
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from coral_core.run.factories import Scoring
from coral_core.errors import UserError
from coral_core.failures import PLUGIN_FAULTS, describe
from coral_core.files.fileio import CANDIDATE_BYTES, read_text
from coral_core.scoring.task_lookup import OtherSplit, TaskLookup
from coral_core.types import Candidate, Task

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CandidateFile:
    path: Path
    problem: str
    label: str = ""


def read_candidate(path: Path, within: Path | None = None) -> str:
    """A candidate file's text; `within`, its folder: a link in it that leads out (to
    /etc/passwd, whose first line came back in a SyntaxError) is refused. A UTF-8 byte
    order mark is dropped, as Python drops it from a source file (it was a SyntaxError in
    every test)."""
    text = read_text(path, limit=CANDIDATE_BYTES, what="candidate", within=within)
    return text.removeprefix("\ufeff")


def files_in(directory: Path) -> list[CandidateFile]:
    """NAME.py or NAME__LABEL.py, scored against problem NAME."""
    directory = Path(directory)
    if not directory.is_dir():
        raise UserError(f"--candidate-dir {directory} is not a folder")
    found = []
    for path in sorted(directory.glob("*.py")):
        problem, _, label = path.stem.partition("__")
        found.append(CandidateFile(path, problem, label))
    if not found:
        raise UserError(f"--candidate-dir {directory} holds no .py files")
    return found


def _tasks_of(lookup: TaskLookup, files: Sequence[CandidateFile],
              each_on_its_own: bool) -> dict[str, Task | UserError]:
    """Each file's problem, found (in the split the user named, if any). In a folder, a
    file that names no problem of the data set (a stray helper, `__init__.py`) or one of
    another split is that file's error, unless no file names one (the wrong --plugin, most
    likely): then the first such error is the command's."""
    tasks: dict[str, Task | UserError] = {}
    for item in files:
        if item.problem in tasks:
            continue
        try:
            if not item.problem:  # __init__.py: "unknown QuixBugs problem ''", naming no file
                raise UserError(f"--candidate-dir: {item.path.name} names no problem "
                                "(candidate files are NAME.py or NAME__LABEL.py)")
            tasks[item.problem] = lookup.find(item.problem)
        except UserError as error:
            if not each_on_its_own:
                raise
            tasks[item.problem] = error
    if all(isinstance(found, UserError) for found in tasks.values()):
        raise next(iter(tasks.values()))  # type: ignore[misc]
    return tasks


def _as_user_file(detail: str, task: Task, path: Path | None) -> str:
    """Details name the module the sandbox loaded (`gcd.py`); the user wrote `path`."""
    if path is None or task.execution is None:
        return detail
    module = re.escape(task.execution.module + ".py")
    return re.sub(rf"(?<![\w/.-]){module}\b", lambda _: str(path), detail)


NO_TESTS = {"total": 0, "passed": 0, "failed": 0, "timeout": 0, "error": 0}


def _reported_outcomes(details: Mapping[str, Any]) -> list[dict[str, str]] | None:
    """Per-test outcomes an evaluator reported itself (`details[NAME]["outcomes"]`, e.g.
    testgen's tests of a test file), for a task that is not a program run against tests."""
    for reported in details.values():
        outcomes = reported.get("outcomes") if isinstance(reported, Mapping) else None
        if isinstance(outcomes, list):
            return [{"test": str(o.get("test", "")), "status": str(o.get("status", "")),
                     "detail": str(o.get("detail", ""))} for o in outcomes
                    if isinstance(o, Mapping)]
    return None


def _counts(outcomes: Sequence[Mapping[str, str]]) -> dict[str, int]:
    counts = dict(NO_TESTS, total=len(outcomes))
    for outcome in outcomes:
        status = {"pass": "passed", "fail": "failed"}.get(outcome["status"], outcome["status"])
        if status in counts and status != "total":
            counts[status] += 1
    return counts


def document(task: Task, scoring: Scoring, code: str, path: Path | None = None,
             ) -> dict[str, Any]:
    """The `coral evaluate --json` contract for one candidate (details that name the
    loaded module name the user's file `path` instead). An evaluator that raises costs
    only its own objectives: the tests and the other objectives are still reported, with
    `error` saying which evaluator failed, where and how."""
    candidate = Candidate(task, code)
    try:
        scored, errors = scoring.scorer.score_apart(candidate)
        execution = (scoring.context.execution(candidate) if task.execution is not None
                     else None)
    except UserError:
        raise
    except PLUGIN_FAULTS as error:  # one plugin's failure on one file must not lose the batch
        log.warning("scoring %s failed: %s", path or task.id, describe(error))
        log.debug("traceback:", exc_info=error)
        return {**unreadable(task, UserError(describe(error))), "sandboxed": None}
    for name, error in errors.items():
        log.warning("evaluator '%s' failed on %s: %s", name, path or task.id, error)
    result: dict[str, Any] = {
        "problem": task.id, "passed": bool(scored.passed), "tests": dict(NO_TESTS),
        "outcomes": [], "objectives": dict(scored.objectives),
        "fitness": round(scored.fitness, 6), "seen_in_training": task.seen_in_training,
        "sandboxed": scoring.sandbox.isolated,
    }
    if execution is not None:
        result.update(
            tests=execution.counts, sandboxed=execution.result.isolated,
            outcomes=[{"test": o.name, "status": o.status,
                       "detail": _as_user_file(o.detail, task, path)}
                      for o in execution.outcomes])
    else:  # not a program run against tests (a test file, a completion)
        reported = _reported_outcomes(scored.details)
        if reported is not None:
            result.update(tests=_counts(reported), outcomes=reported)
        result["details"] = dict(scored.details)
    if errors:
        result["error"] = "; ".join(f"evaluator '{name}' raised at {error}"
                                    for name, error in errors.items())
    return result


def unreadable(task: Task | str, error: UserError) -> dict[str, Any]:
    """The document of a file in a folder that could not be read (not UTF-8, not a regular
    file, too large) or names no problem of the data set (then `task` is the name): an
    error of its own, the folder's other files still scored."""
    if isinstance(task, str):
        problem, seen = task, False
    else:
        problem, seen = task.id, task.seen_in_training
    return {"problem": problem, "passed": False, "tests": dict(NO_TESTS),
            "outcomes": [], "objectives": {}, "fitness": 0.0,
            "seen_in_training": seen, "sandboxed": None, "error": str(error)}


def evaluate_files(lookup: TaskLookup, scoring: Scoring, files: Sequence[CandidateFile],
                   *, each_on_its_own: bool = False) -> list[Mapping[str, Any]]:
    """Read every file first (bad input fails before any work), then score in parallel.
    `each_on_its_own` (a folder of files): a file that cannot be read, or names no problem,
    is that file's error, not the batch's."""
    tasks = _tasks_of(lookup, files, each_on_its_own)
    sources: list[str | UserError] = []
    for item in files:
        try:
            sources.append(read_candidate(item.path,
                                          item.path.parent if each_on_its_own else None))
        except UserError as error:
            if not each_on_its_own:
                raise
            sources.append(error)
    threads = scoring.sandbox.workers * 2

    def one(item: CandidateFile, source: str | UserError) -> Mapping[str, Any]:
        task = tasks[item.problem]
        if isinstance(task, UserError):
            return unreadable(task.task if isinstance(task, OtherSplit) else item.problem, task)
        if isinstance(source, UserError):
            return unreadable(task, source)
        return document(task, scoring, source, item.path)

    pool = ThreadPoolExecutor(threads)
    try:
        documents = list(pool.map(one, files, sources))
    except BaseException:  # Ctrl-C: the queued files are dropped, not started
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return [{"file": str(item.path), **doc} for item, doc in zip(files, documents)]
