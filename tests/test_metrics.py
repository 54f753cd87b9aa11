"""pass@k against the combinatorial definition, and the summary's means."""

from __future__ import annotations

import itertools
from math import comb

import pytest

from coral_core.scoring.metrics import pass_at_k, summarize
from coral_core.run.store import ScoreRecord, TaskRecord


@pytest.mark.parametrize("n, c", [(1, 0), (1, 1), (5, 0), (5, 2), (10, 3), (10, 10), (50, 1)])
def test_pass_at_k_equals_one_minus_binomial_ratio_for_every_k(n, c):
    for k in range(1, n + 1):
        assert pass_at_k(n, c, k) == pytest.approx(1 - comb(n - c, k) / comb(n, k), abs=1e-12)


def test_pass_at_k_is_the_chance_that_a_random_k_subset_holds_a_pass():
    outcomes = [True, False, False, True, False, False]
    for k in range(1, 7):
        subsets = list(itertools.combinations(outcomes, k))
        brute = sum(any(s) for s in subsets) / len(subsets)
        assert pass_at_k(6, 2, k) == pytest.approx(brute)


def test_pass_at_k_rejects_impossible_arguments():
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)


def _record(task, sample, passed, bugfix):
    return ScoreRecord(0, task, sample, "x", passed, {"bugfix": bugfix}, bugfix, {}, 0.0)


def test_summary_means_over_problems_and_counts_fixed():
    tasks = [TaskRecord(0, "a", "test", False, True, ""),
             TaskRecord(0, "b", "train", True, True, "")]
    records = {("a", 0): _record("a", 0, True, 1.0), ("a", 1): _record("a", 1, False, 0.5),
               ("b", 0): _record("b", 0, False, 0.0), ("b", 1): _record("b", 1, False, 0.2)}
    summary = summarize(tasks, records)
    a, b = summary["problems"]
    assert (a["n"], a["c"], a["pass_at_k"]) == (2, 1, {"1": 0.5, "2": 1.0})
    assert b["seen_in_training"] is True and b["c"] == 0
    assert summary["pass_at_k"] == {"1": 0.25, "2": 0.5}
    assert summary["objectives"]["bugfix"] == pytest.approx((0.75 + 0.1) / 2)
    assert summary["fixed"] == 1
    # a split mixing training problems in also reports the unseen ones alone
    assert summary["unseen"] == {"problems": 1, "pass_at_k": {"1": 0.5, "2": 1.0},
                                 "objectives": {"bugfix": 0.75}, "fitness": 0.75, "fixed": 1}
    only_unseen = summarize(tasks[:1], {k: v for k, v in records.items() if k[0] == "a"})
    assert "unseen" not in only_unseen


def test_tasks_without_success_have_no_c_pass_at_k_or_fixed():
    tasks = [TaskRecord(0, "a", "test", False, False, "")]
    records = {("a", 0): _record("a", 0, None, 0.4), ("a", 1): _record("a", 1, None, 0.6)}
    summary = summarize(tasks, records)
    (a,) = summary["problems"]
    assert "c" not in a and "pass_at_k" not in a and a["n"] == 2
    assert "pass_at_k" not in summary and "fixed" not in summary
    assert summary["objectives"]["bugfix"] == pytest.approx(0.5)


def test_the_interval_row_sits_under_the_overall_row_it_belongs_to():
    """--split all: the 95% CI is the overall figures' interval, so it follows the overall
    row, and the unseen problems' row comes after it."""
    from coral_core.results.summary_tables import summary_grid

    tasks = [TaskRecord(0, "a", "test", False, True, ""),
             TaskRecord(0, "b", "train", True, True, "")]
    records = {("a", 0): _record("a", 0, True, 1.0), ("b", 0): _record("b", 0, False, 0.0)}
    summary = {**summarize(tasks, records), "dataset": "quixbugs", "split": "all",
               "model": "m", "samples": 1, "seed": 0,
               "intervals": {"pass_at_k": {"1": [0.0, 1.0]}, "objectives": {},
                             "fitness": [0.0, 1.0]}}
    labels = [row[0] for row in summary_grid(summary).rows]
    overall = next(i for i, label in enumerate(labels) if label.startswith("overall"))
    assert labels[overall + 1] == "95% CI" and labels[overall + 2].startswith("unseen")
