"""Reading a run directory back, read-only: the summary of a finished run, or what an
unfinished one holds so far (labelled partial, with its counts and whether its process
is alive). Nothing in the folder is created or changed."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from .errors import UserError
from .lifecycle import hook_errors
from .metrics import summarize
from .rundir import SUMMARY_FILE, RunInfo, holder, is_run_dir, read_config
from .runner import build_summary
from .store import RunStore


def load_report(run_dir: Path) -> dict[str, Any]:
    run_dir = Path(os.path.abspath(run_dir))
    if not is_run_dir(run_dir):
        raise UserError(f"{run_dir} is not a Coral run directory")
    store = RunStore.in_run(run_dir, read_only=True)
    try:
        status = store.meta("status") or "unknown"
        summary_path = run_dir / SUMMARY_FILE
        if status == "finished" and summary_path.exists():
            try:
                summary = json.loads(summary_path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as error:
                raise UserError(f"cannot read {summary_path}: {error}") from None
            return {**summary, "status": status}
        config = read_config(run_dir)
        seed = config["run"]["seed"]
        stored = store.trials()
        held = {t.trial: (store.tasks(t.trial), store.evaluations(t.trial)) for t in stored}
        trials = [t if t.status == "finished" else replace(  # what it holds so far
            t, result=summarize(*held[t.trial], seed)) for t in stored]
        summary = build_summary(RunInfo(run_dir, config, resumed=False), trials,
                                config["search"]["rank_by"], partial=True,
                                hook_errors=hook_errors(store), status=status)
        pid = holder(run_dir)
        counts = {"trials": len(trials),
                  "trials_finished": sum(t.status == "finished" for t in trials),
                  "samples_wanted": sum(len(tasks) for tasks, _ in held.values())
                  * config["run"]["samples"],
                  "samples_scored": sum(len(scores) for _, scores in held.values())}
        return {**summary, "status": status, "partial": True, "counts": counts,
                "process_alive": pid is not None, "pid": pid if pid and pid > 0 else None}
    finally:
        store.close()


def timeless(summary: Any) -> Any:
    """A summary (or any part of one) less where the run lives and how long things took:
    what two runs of the same configuration and seed must agree on, wherever they ran."""
    if isinstance(summary, dict):
        return {k: timeless(v) for k, v in summary.items()
                if k != "run_dir" and "seconds" not in k}
    if isinstance(summary, list):
        return [timeless(v) for v in summary]
    return summary
