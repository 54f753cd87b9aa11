"""Reading a run directory back: the summary of a finished run, or what an unfinished one has."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import config as configuration
from .errors import UserError
from .metrics import summarize
from .runner import CONFIG_FILE, SUMMARY_FILE, build_summary
from .store import RunStore
from .types import Task


def load_report(run_dir: Path) -> dict[str, Any]:
    run_dir = Path(run_dir)
    store_path = run_dir / RunStore.FILENAME
    if not store_path.exists() or not (run_dir / CONFIG_FILE).exists():
        raise UserError(f"{run_dir} is not a Coral run directory")
    store = RunStore(store_path)
    try:
        status = store.meta("status") or "unknown"
        summary_path = run_dir / SUMMARY_FILE
        if status == "finished" and summary_path.exists():
            summary = json.loads(summary_path.read_text(encoding="utf-8"))
            return {**summary, "status": status}
        config = configuration.loads_resolved(
            (run_dir / CONFIG_FILE).read_text(encoding="utf-8"), str(run_dir / CONFIG_FILE))
        trials = store.trials()
        trial = trials[-1][0] if trials else 0
        records = store.evaluations(trial)
        split = config["dataset"]["split"]
        tasks = [Task(id=task_id, dataset=config["dataset"]["name"], split=split, prompt="")
                 for task_id in sorted({key[0] for key in records})]
        result = summarize(tasks, records)
        return {**build_summary(run_dir, config, result, isolated=None), "status": status}
    finally:
        store.close()
