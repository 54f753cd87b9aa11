"""What `coral datasets list` and `coral datasets show` tell: the registered data sets,
where each one's files are found, and a data set's problems with their split and tests."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from coral_core import plugins
from coral_core.data.locate import check_data_root, fetched_dir, find_dataset_dir, is_folder
from coral_core.errors import UserError
from coral_core.run.factories import build_dataset, check_split, check_tasks, data_set_names
from coral_core.config.blueprints import DatasetBlueprint


def needs_files(factory: Any) -> bool:
    """A data set reads files unless its factory says `needs_data = False`."""
    return bool(getattr(factory, "needs_data", True))


def location(name: str, factory: Any, data_dir: Path | None) -> str | None:
    """Where the data set's files would be read from now ('' when it needs none), or
    None when they are missing. A data set that reads another's folder says so with
    `data_name` (testgen reads quixbugs/)."""
    if not needs_files(factory):
        return ""
    try:
        return str(find_dataset_dir(getattr(factory, "data_name", name), data_dir))
    except UserError:
        return None


def data_set_folders() -> list[str]:
    """The real paths of the registered data sets' folders under $CORAL_DATA_DIR: no output
    may be written in one, even by a command that reads none of them (`coral export -o
    DATA/quixbugs/json_testcases/gcd.json` replaced a test file, a red-team pass)."""
    configured = os.environ.get("CORAL_DATA_DIR")
    if not configured:
        return []
    base = Path(configured).expanduser()
    return [os.path.realpath(base / name) for name in data_set_names()
            if is_folder(base / name)]


def dataset_rows(data_dir: Path | None) -> list[dict[str, Any]]:
    check_data_root(data_dir)
    registry = plugins.registry()
    rows = []
    for name in registry.names("datasets"):
        entry = registry.entries["datasets"][name]
        factory = entry.factory
        # a data set that reads another's folder (testgen reads quixbugs/) has its splits
        # unless it says otherwise, and is fetched by fetching that one
        folder = getattr(factory, "data_name", name)
        owner = registry.entries["datasets"].get(folder)
        source = owner.factory if owner is not None else factory
        rows.append({
            "name": name, "plugin": entry.plugin,
            "splits": list(getattr(factory, "splits", ()) or getattr(source, "splits", ())),
            "split_sizes": dict(getattr(factory, "split_sizes", {})
                                or getattr(source, "split_sizes", {}) or {}),
            "description": getattr(factory, "description", ""),
            "fetchable": callable(getattr(source, "fetch", None)),
            "fetch_name": folder,
            "needs_data": needs_files(factory),
            "cached": is_folder(fetched_dir(folder)),
            "data": location(name, factory, data_dir),
        })
    return rows


def data_label(row: dict[str, Any]) -> str:
    if not row["needs_data"]:
        return "(needs no files)"
    if row["data"]:
        return row["data"]
    missing = "missing: --data-dir DIR or CORAL_DATA_DIR"
    return missing + (f", or coral datasets fetch {row.get('fetch_name', row['name'])}"
                      if row["fetchable"] else "")


def problem_rows(name: str, split: str | None, data_dir: Path | None) -> list[dict[str, Any]]:
    """One row per problem of `split` (every split when None: 'all' where the data set
    has it): id, split, number of tests, seen in training, whether it has a reference."""
    dataset = build_dataset(DatasetBlueprint.of({"dataset": {
        "name": name, "options": {}, "data_dir": str(data_dir) if data_dir else ""}}))
    splits = tuple(dataset.splits)
    if split is not None:
        check_split(dataset, name, split)
    chosen = [split] if split else (["all"] if "all" in splits else list(splits))
    rows, seen = [], set()
    for each in chosen:
        tasks = list(dataset.tasks(each))
        check_tasks(name, tasks)  # a plugin's strings: a traceback here (a newcomer's pass)
        for task in tasks:
            if task.id in seen:
                continue
            seen.add(task.id)
            cases = task.execution.cases if task.execution is not None else None
            counted = task.metadata.get("tests")  # a data set's own count, without cases
            rows.append({"problem": task.id, "split": task.split,
                         "tests": len(cases) if cases is not None else
                         counted if isinstance(counted, int) else None,
                         "seen_in_training": task.seen_in_training,
                         "reference": bool(task.reference)
                         or task.candidate_kind == "completion",
                         "success": (f"{task.success.objective} >= {task.success.threshold:g}"
                                     if task.success else None)})
    return rows
