"""Is the best trial better than the runner-up, or did the search crown noise?

Two trials of one search score the same tasks, so their difference is judged task by
task: a paired bootstrap resamples tasks (seeded from the run's seed) and takes the 95%
interval of the mean per-task difference in the ranking figure. The best is
distinguishable from the runner-up only when that interval lies above zero. (Seed 003
picked T = 0.10 over T = 0.20 on 50 tasks with one sample each: a difference this check
calls noise.)
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from coral_core.results.intervals import LEVEL, RESAMPLES, bootstrap

# Fewer differing tasks than this cannot make a difference significant at 95% even when
# every one of them favours the best (a sign test: 2 x 0.5**5 > 0.05), while a bootstrap
# over so few tasks gives an interval of one point: it is not asked.
MIN_DIFFERING = 6


def ranking_figure(record: Mapping[str, Any], rank_by: str) -> float | None:
    """`rank_by` ("fitness", "pass@K" or an objective) of a trial's result, a summary's
    trial row or one problem's summary (they share these keys); None where it is missing
    or not a finite number (a NaN would make any ordering meaningless)."""
    if rank_by == "fitness":
        value = record.get("fitness", 0.0)
    elif rank_by.startswith("pass@"):
        value = record.get("pass_at_k", {}).get(rank_by[len("pass@"):])
    else:
        value = record.get("objectives", {}).get(rank_by)
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value):
        return None
    return float(value)


def task_value(problem: Mapping[str, Any], rank_by: str) -> float | None:
    """A problem's share of a trial's `rank_by` figure (None where it has none)."""
    return ranking_figure(problem, rank_by) if problem.get("n") else None


def compare(best: Mapping[str, Any], other: Mapping[str, Any], rank_by: str,
            seed: int) -> dict[str, Any] | None:
    """The paired comparison of two trial results over the tasks both scored."""
    theirs = {p["problem"]: task_value(p, rank_by) for p in other.get("problems", ())}
    differences = []
    for problem in best.get("problems", ()):
        mine, their = task_value(problem, rank_by), theirs.get(problem["problem"])
        if mine is not None and their is not None:
            differences.append(mine - their)
    if not differences:
        return None
    differing = sum(1 for d in differences if d)
    if not differing:  # a tie on every task: nothing to resample
        return {"difference": 0.0, "interval": [0.0, 0.0], "tasks": len(differences),
                "tasks_differing": 0, "distinguishable": False}
    low, high = bootstrap({"difference": differences}, seed)["difference"]
    mean = sum(differences) / len(differences)
    return {
        "difference": round(mean, 6), "interval": [low, high], "level": LEVEL,
        "method": "paired bootstrap over tasks", "resamples": RESAMPLES, "seed": seed,
        "tasks": len(differences), "tasks_differing": differing,
        "distinguishable": low > 0 and differing >= MIN_DIFFERING,
    }


def _scored(result: Mapping[str, Any]) -> set[str]:
    return {p["problem"] for p in result.get("problems", ()) if p.get("n")}


def runner_up_comparison(ranked: Sequence[tuple[float, Any]], rank_by: str,
                         seed: int) -> dict[str, Any] | None:
    """`ranked` holds (value, trial) pairs, best first: the best against the next trial
    that scores differently on some task (trials that scored the same tasks the same are
    `ties`: a grid over a knob the model ignores has many). Where the trials' tasks differ
    (a search over `dataset.problems`) the comparison is over the tasks both scored and
    says so (`shared_tasks_only`), and trials sharing none with the best are `apart`: a
    red-team grid had a trial with other tasks called a tie, and one with none in common
    left out without a word."""
    if len(ranked) < 2:
        return None
    best, ties, apart = ranked[0][1], [], []
    mine = _scored(best.result or {})
    for value, trial in ranked[1:]:
        result = compare(best.result or {}, trial.result or {}, rank_by, seed)
        if result is None:
            apart.append(trial.trial)
            continue
        same = _scored(trial.result or {}) == mine
        if result["tasks_differing"] or not same:
            return {"trial": trial.trial, "value": value, "ties": ties, **result,
                    **({} if same else {"shared_tasks_only": True}),
                    **({"apart": apart} if apart else {})}
        ties.append(trial.trial)
    if not ties and not apart:
        return None
    return {"trial": None, "ties": ties, **({"apart": apart} if apart else {})}


def verdict_text(best: Mapping[str, Any], partial: bool = False) -> str:
    """The line a report prints under its trials table ("" without a comparison); in a
    partial report only finished trials were compared, and it says so."""
    versus = best.get("runner_up")
    if not versus:
        return ""
    ties, apart = versus.get("ties") or [], versus.get("apart") or []
    tied = (f" (trial{'s' if len(ties) > 1 else ''} {', '.join(map(str, ties))} "
            f"score{'' if len(ties) > 1 else 's'} the same on every task)") if ties else ""
    other = "other finished trial" if partial else "other trial"
    alone = (f"; trial{'s' if len(apart) > 1 else ''} {', '.join(map(str, apart))} "
             f"share{'' if len(apart) > 1 else 's'} no task with it") if apart else ""
    if versus.get("trial") is None:
        best_of = "best finished trial" if partial else "best trial"
        if not ties:
            return f"{best_of} {best['trial']}: no {other} shares a task with it"
        if not apart:
            return f"{best_of} {best['trial']}: every {other} scores the same on every task"
        return (f"{best_of} {best['trial']}: trial{'s' if len(ties) > 1 else ''} "
                f"{', '.join(map(str, ties))} score{'' if len(ties) > 1 else 's'} the same "
                f"on every task{alone}")
    low, high = versus["interval"]
    best_of = "best finished trial" if partial else "best trial"
    head = (f"{best_of} {best['trial']} vs runner-up trial {versus['trial']}{tied}: "
            f"{versus['difference']:+.4f} {best['rank_by']}")
    shared = " both scored (their tasks differ)" if versus.get("shared_tasks_only") else ""
    span = (f"{round(versus.get('level', 0.95) * 100)}% interval {low:+.4f} to {high:+.4f}, "
            f"paired bootstrap over {versus['tasks']} tasks{shared}{alone}")
    if versus["distinguishable"]:
        return f"{head} ({span}): the best is distinguishable from the runner-up"
    few = versus.get("tasks_differing", 0) < MIN_DIFFERING
    return (f"{head} ({span}): NOT distinguishable from the runner-up; "
            + (f"they differ on {versus.get('tasks_differing', 0)} of the tasks, and fewer "
               f"than {MIN_DIFFERING} cannot tell them apart" if few else
               "more tasks or samples are needed to tell them apart"))
