"""pass@k and the per-problem / overall summary of a set of evaluations."""

from __future__ import annotations

import statistics
from typing import Any, Iterable, Mapping, Sequence

from coral_core.results.intervals import summary_intervals
from coral_core.run.store import ScoreRecord, TaskRecord


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimator 1 - C(n-c, k) / C(n, k) (Chen et al., 2021), computed stably."""
    if not 1 <= k <= n:
        raise ValueError(f"k must be in [1, n={n}], got {k}")
    if not 0 <= c <= n:
        raise ValueError(f"c must be in [0, n={n}], got {c}")
    if n - c < k:
        return 1.0
    product = 1.0
    for i in range(n - c + 1, n + 1):
        product *= 1.0 - k / i
    return 1.0 - product


def _mean(values: Iterable[float]) -> float:
    values = list(values)
    return statistics.fmean(values) if values else 0.0


def problem_summary(task: TaskRecord, records: Sequence[ScoreRecord]) -> dict[str, Any]:
    """n, mean objectives and fitness; c and pass@k only where the task defines success."""
    n = len(records)
    names = sorted({name for r in records for name in r.objectives})
    summary: dict[str, Any] = {
        "problem": task.task_id,
        "split": task.split,
        "seen_in_training": task.seen_in_training,
        "n": n,
        "errors": sum(1 for r in records if r.details.get("error")),
    }
    if task.has_success:
        c = sum(1 for r in records if r.passed)
        summary["c"] = c
        summary["pass_at_k"] = {str(k): round(pass_at_k(n, c, k), 6) for k in range(1, n + 1)}
    summary["objectives"] = {name: round(_mean(r.objectives.get(name, 0.0) for r in records), 6)
                             for name in names}
    summary["fitness"] = round(_mean(r.fitness for r in records), 6)
    return summary


def summarize(tasks: Sequence[TaskRecord], records: Mapping[tuple[str, int], ScoreRecord],
              seed: int = 0) -> dict[str, Any]:
    """Per-problem results and their means; pass@k overall for every k all problems reach,
    and `fixed`, over the problems that define success; `errors`, the samples whose
    scoring raised (scored 0, see the record's details); `intervals`, a bootstrap 95%
    interval for each overall figure, seeded with `seed` (the run's)."""
    by_task: dict[str, list[ScoreRecord]] = {t.task_id: [] for t in tasks}
    for (task_id, _), record in sorted(records.items()):
        if task_id in by_task:
            by_task[task_id].append(record)
    problems = [problem_summary(t, by_task[t.task_id]) for t in tasks]
    result: dict[str, Any] = {"problems": problems, **_means(problems)}
    result["errors"] = sum(p["errors"] for p in problems)
    names = sorted(result["objectives"])
    result["intervals"] = summary_intervals(problems, list(result.get("pass_at_k", {})),
                                            names, seed)
    unseen = [p for p in problems if not p.get("seen_in_training")]
    if unseen and len(unseen) < len(problems):  # a split mixing training problems in
        result["unseen"] = {"problems": len(unseen), **_means(unseen)}
    return result


def _means(problems: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """pass@k for every k all problems reach and `fixed`, over those that define success;
    objective and fitness means over those with samples."""
    counted = [p for p in problems if p["n"]]
    succeeding = [p for p in counted if "c" in p]
    max_k = min((p["n"] for p in succeeding), default=0)
    names = sorted({name for p in counted for name in p["objectives"]})
    result: dict[str, Any] = {}
    if succeeding:
        result["pass_at_k"] = {
            str(k): round(_mean(p["pass_at_k"][str(k)] for p in succeeding), 6)
            for k in range(1, max_k + 1)}
    result["objectives"] = {name: round(_mean(p["objectives"].get(name, 0.0) for p in counted), 6)
                            for name in names}
    result["fitness"] = round(_mean(p["fitness"] for p in counted), 6)
    if succeeding:
        result["fixed"] = sum(1 for p in succeeding if p["c"] >= 1)
    return result
