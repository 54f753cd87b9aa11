"""Reading a run directory back, read-only: the summary of a finished run, or what an
unfinished one holds so far (labelled partial, with its counts and whether its process
is alive). Nothing in the folder is created or changed."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from coral_core.files.decoding import json_value
from coral_core.errors import UserError
from coral_core.files.fileio import SUMMARY_BYTES, read_text
from coral_core.run.lifecycle import hook_errors
from coral_core.scoring.metrics import summarize
from coral_core.run.rundir import SUMMARY_FILE, RunInfo, holder, is_run_dir, read_config
from coral_core.run.runner import build_summary
from coral_core.run.store import RunStore, ScoreRecord, TaskRecord


def load_report(run_dir: Path) -> dict[str, Any]:
    run_dir = Path(os.path.abspath(run_dir))
    if not is_run_dir(run_dir):
        raise UserError(f"{run_dir} is not a Coral run directory")
    store = RunStore.in_run(run_dir, read_only=True)
    try:
        status = store.meta("status") or "unknown"
        summary_path = run_dir / SUMMARY_FILE
        if status == "finished" and summary_path.exists():
            text = read_text(summary_path, limit=SUMMARY_BYTES, what="summary",
                             within=run_dir)
            summary = check_summary(json_value(text, str(summary_path)), summary_path)
            return {**summary, "status": status}
        config = read_config(run_dir)
        seed = config["run"]["seed"]
        stored = store.trials()
        held = {t.trial: (store.tasks(t.trial), store.evaluations(t.trial)) for t in stored}
        trials = [t if t.status == "finished" else replace(t, result=_so_far(*held[t.trial], seed))
                  for t in stored]
        summary = build_summary(RunInfo(run_dir, config, resumed=False), trials,
                                config["search"]["rank_by"], partial=True,
                                hook_errors=hook_errors(store), status=status)
        pid = holder(run_dir)
        if status == "running" and pid is None:  # killed (kill -9, power loss): no one set it
            summary["status"] = status = "stopped"
        pending = sorted({t.task_id for tasks, _ in held.values() for t in tasks}
                         - {p["problem"] for p in summary.get("problems", ())})
        counts = {"trials": len(trials),
                  "trials_finished": sum(t.status == "finished" for t in trials),
                  "samples_wanted": sum(len(tasks) for tasks, _ in held.values())
                  * config["run"]["samples"],
                  "samples_scored": sum(len(scores) for _, scores in held.values())}
        return {**summary, "status": status, "partial": True, "counts": counts,
                "pending_problems": pending,
                "process_alive": pid is not None, "pid": pid if pid and pid > 0 else None}
    finally:
        store.close()


def _so_far(tasks: list[TaskRecord], scores: dict[tuple[str, int], ScoreRecord],
            seed: int) -> dict[str, Any] | None:
    """An unfinished trial's results over the problems it has scored (None before any):
    a problem with no sample scored yet is pending, not 0%."""
    scored = {task_id for task_id, _ in scores}
    started = [t for t in tasks if t.task_id in scored]
    return summarize(started, scores, seed) if started else None


def timeless(summary: Any) -> Any:
    """A summary (or any part of one) less where the run lives and how long things took:
    what two runs of the same configuration and seed must agree on, wherever they ran."""
    if isinstance(summary, dict):
        return {k: timeless(v) for k, v in summary.items()
                if k != "run_dir" and "seconds" not in k}
    if isinstance(summary, list):
        return [timeless(v) for v in summary]
    return summary


# What reading a damaged record raises past the shape checks (a plugin's table reading a
# field of another shape): `coral report` and `coral export` turn it into one line.
SHAPE_ERRORS = (TypeError, KeyError, AttributeError, ValueError, IndexError)

_TEXT, _COUNT, _NUMBER = (str,), (int,), (int, float)
_MAYBE_TEXT = (str, type(None))
# What the tables read of a summary, by key: a summary.json edited by hand or by another
# program fails here in one line, not as a TypeError inside a table.
_SUMMARY = {"dataset": _TEXT, "split": _TEXT, "model": _TEXT, "samples": _COUNT,
            "seed": _COUNT, "problems": (list,), "pass_at_k": (dict,), "objectives": (dict,),
            "fixed": _COUNT, "fitness": _NUMBER, "errors": _COUNT, "intervals": (dict, type(None)),
            "trials": (list,), "best": (dict, type(None)), "hook_errors": _COUNT,
            "run_dir": _MAYBE_TEXT, "unseen": (dict,)}
_PROBLEM = {"problem": _TEXT, "n": _COUNT, "c": _COUNT, "pass_at_k": (dict,),
            "objectives": (dict,), "fitness": _NUMBER, "errors": _COUNT}
_TRIAL = {"trial": _COUNT, "overrides": (dict,), "objectives": (dict, type(None)),
          "pass_at_k": (dict, type(None)), "fitness": (int, float, type(None)),
          "status": _TEXT}


def _shaped(value: Any, shape: dict[str, tuple[type, ...]], where: str) -> None:
    if not isinstance(value, dict):
        raise UserError(f"{where} is a {type(value).__name__}, not an object")
    for key, kinds in shape.items():
        if key in value and (not isinstance(value[key], kinds)
                             or (isinstance(value[key], bool) and bool not in kinds)):
            raise UserError(f"{where}: '{key}' is a {type(value[key]).__name__}, not "
                            f"{' or '.join(k.__name__ for k in kinds)}")
    for key in ("pass_at_k", "objectives"):
        numbers = value.get(key)
        if isinstance(numbers, dict) and not all(
                isinstance(v, _NUMBER) and not isinstance(v, bool) for v in numbers.values()):
            raise UserError(f"{where}: '{key}' holds values that are not numbers")


def check_summary(summary: Any, path: Path) -> dict[str, Any]:
    """`summary` if it has the shape of a summary.json Coral writes, else a UserError."""
    where = f"{path}"
    _shaped(summary, _SUMMARY, where)
    for key in ("dataset", "split", "model", "samples", "seed", "problems"):
        if key not in summary:
            raise UserError(f"{where}: no '{key}'; not a summary Coral wrote")
    for index, problem in enumerate(summary["problems"]):
        _shaped(problem, _PROBLEM, f"{where}: problems[{index}]")
        if "problem" not in problem:
            raise UserError(f"{where}: problems[{index}] has no 'problem'")
    for index, trial in enumerate(summary.get("trials", ())):
        _shaped(trial, _TRIAL, f"{where}: trials[{index}]")
    return summary
