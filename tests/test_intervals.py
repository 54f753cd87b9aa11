"""Bootstrap 95% intervals over problems: seeded, around the mean, in every summary."""

from __future__ import annotations

import statistics

from coral_core.results.intervals import bootstrap, summary_intervals
from coral_core.scoring.metrics import summarize
from coral_core.run.store import ScoreRecord, TaskRecord


def test_bootstrap_is_seeded_and_brackets_the_mean():
    values = [0.0, 0.1, 0.5, 0.9, 1.0, 0.3, 0.7, 0.2]
    first = bootstrap({"x": values}, seed=3)["x"]
    assert first == bootstrap({"x": values}, seed=3)["x"]
    assert any(bootstrap({"x": values}, seed=other)["x"] != first for other in range(4, 9))
    low, high = first
    assert 0.0 <= low < statistics.fmean(values) < high <= 1.0


def test_constant_columns_have_a_zero_width_interval():
    assert bootstrap({"x": [0.5] * 5}, seed=0) == {"x": [0.5, 0.5]}
    assert bootstrap({}, seed=0) == {}


def _record(task, sample, passed):
    value = 1.0 if passed else 0.0
    return ScoreRecord(0, task, sample, "x", passed, {"bugfix": value}, value, {}, 0.0)


def test_summaries_carry_intervals_for_pass_at_k_objectives_and_fitness():
    tasks = [TaskRecord(0, name, "test", False, True, "") for name in "abcd"]
    records = {(t, i): _record(t, i, t in "ab" and i == 0) for t in "abcd" for i in range(2)}
    summary = summarize(tasks, records, seed=5)
    intervals = summary["intervals"]
    assert intervals["level"] == 0.95 and intervals["seed"] == 5
    assert set(intervals["pass_at_k"]) == {"1", "2"}
    low, high = intervals["pass_at_k"]["1"]
    assert low <= summary["pass_at_k"]["1"] <= high
    assert set(intervals["objectives"]) == {"bugfix"} and len(intervals["fitness"]) == 2


def test_only_shown_pass_at_k_get_intervals():
    problems = [{"n": 30, "c": 1, "pass_at_k": {str(k): 0.1 for k in range(1, 31)},
                 "objectives": {}, "fitness": 0.0}]
    ks = [str(k) for k in range(1, 31)]
    assert set(summary_intervals(problems, ks, [], 0)["pass_at_k"]) == {
        "1", "2", "5", "10", "20", "25", "30"}


def test_pass_at_k_and_objectives_share_draws_as_separate_bootstraps_would():
    """One set of draws serves both when every problem defines success: the same intervals
    as two bootstraps from the same seed."""
    problems = [{"n": 2, "c": c, "pass_at_k": {"1": c / 2, "2": float(c > 0)},
                 "objectives": {"passed": c / 2}, "fitness": c / 2 + 0.1}
                for c in (0, 1, 2, 0, 2, 1, 0, 0, 2)]
    got = summary_intervals(problems, ["1", "2"], ["passed"], 11)
    pass_columns = {k: [p["pass_at_k"][k] for p in problems] for k in ("1", "2")}
    others = bootstrap({"objective:passed": [p["objectives"]["passed"] for p in problems],
                        "fitness": [p["fitness"] for p in problems]}, 11)
    assert got["pass_at_k"] == bootstrap(pass_columns, 11)
    assert got["objectives"] == {"passed": others["objective:passed"]}
    assert got["fitness"] == others["fitness"]
    assert got["fitness"] != got["objectives"]["passed"]  # each column its own values
