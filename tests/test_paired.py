"""The best trial against the runner-up (paired bootstrap over tasks) and heatmap.png."""

from __future__ import annotations

from pathlib import Path

from coral_core.results.heatmap import grid_of, write_heatmap
from coral_core.results.paired import compare, runner_up_comparison, task_value, verdict_text
from coral_core.run.store import TrialRecord


def _result(values: list[float], name: str = "em") -> dict:
    return {"problems": [{"problem": f"t{i}", "n": 1, "objectives": {name: v},
                          "fitness": v, "pass_at_k": {"1": v}}
                         for i, v in enumerate(values)]}


def _trial(number: int, values: list[float]) -> TrialRecord:
    return TrialRecord(number, 0, {}, "", "finished", _result(values), None)


def test_a_value_that_is_not_finite_never_ranks():
    from coral_core.run.runner import rank_value
    assert rank_value({"objectives": {"em": float("nan")}}, "em") is None
    assert rank_value({"objectives": {"em": 0.5}}, "em") == 0.5
    problem = {"problem": "t", "n": 1, "objectives": {"em": float("inf")}}
    assert task_value(problem, "em") is None


def test_task_value_reads_the_ranking_figure():
    problem = _result([0.25])["problems"][0]
    assert task_value(problem, "em") == task_value(problem, "fitness") == 0.25
    assert task_value(problem, "pass@1") == 0.25
    assert task_value(problem, "pass@2") is None and task_value(problem, "es") is None
    assert task_value({**problem, "n": 0}, "em") is None


def test_a_clear_difference_is_distinguishable_and_one_task_is_not():
    clear = compare(_result([1.0] * 40), _result([0.0] * 20 + [1.0] * 20), "em", seed=0)
    assert clear["distinguishable"] and clear["difference"] == 0.5
    assert clear["interval"][0] > 0 and clear["tasks"] == 40 and clear["tasks_differing"] == 20
    noise = compare(_result([1.0] + [0.0] * 49), _result([0.0] * 50), "em", seed=0)
    assert not noise["distinguishable"] and noise["interval"][0] <= 0 < noise["difference"]
    # seeded: the same inputs and seed give the same interval
    assert noise == compare(_result([1.0] + [0.0] * 49), _result([0.0] * 50), "em", seed=0)
    # only tasks both trials scored are paired
    partial = compare(_result([1.0, 1.0]), {"problems": [_result([0.0])["problems"][0]]},
                      "em", seed=0)
    assert partial["tasks"] == 1
    # a bootstrap over one task, or five, is one point: it cannot tell two trials apart
    one = compare(_result([1.0]), _result([0.0]), "em", seed=0)
    assert one["interval"][0] > 0 and not one["distinguishable"]
    five = compare(_result([1.0] * 5), _result([0.0] * 5), "em", seed=0)
    assert not five["distinguishable"]
    assert "differ on 5 of the tasks, and fewer than 6" in verdict_text(
        {"trial": 0, "rank_by": "em", "runner_up": {"trial": 1, "value": 0.0, **five}})
    assert compare(_result([1.0] * 6), _result([0.0] * 6), "em", seed=0)["distinguishable"]


def test_ties_are_skipped_to_the_first_trial_that_differs():
    ranked = [(0.6, _trial(2, [1, 1, 0, 1, 0])), (0.6, _trial(0, [1, 1, 0, 1, 0])),
              (0.4, _trial(1, [1, 0, 0, 1, 0]))]
    versus = runner_up_comparison(ranked, "em", seed=0)
    assert versus["trial"] == 1 and versus["ties"] == [0] and versus["value"] == 0.4
    best = {"trial": 2, "rank_by": "em", "runner_up": versus}
    line = verdict_text(best)
    assert line.startswith("best trial 2 vs runner-up trial 1 (trial 0 scores the same")
    assert "NOT distinguishable" in line
    alone = runner_up_comparison(ranked[:2], "em", seed=0)
    assert alone == {"trial": None, "ties": [0]}
    assert "every other trial scores the same" in verdict_text({**best, "runner_up": alone})
    assert "every other finished trial scores the same" in verdict_text(
        {**best, "runner_up": alone}, partial=True)
    assert verdict_text(best, partial=True).startswith("best finished trial 2 vs runner-up")
    assert runner_up_comparison(ranked[:1], "em", seed=0) is None
    assert verdict_text({"trial": 2, "rank_by": "em", "runner_up": None}) == ""


def test_trials_of_other_tasks_are_neither_ties_nor_left_out():
    """A red-team grid over dataset.problems: a trial of other tasks that agreed on the
    shared ones was called a tie, and one sharing no task was left out without a word."""
    def of(number, values, names):
        trial = _trial(number, values)
        for problem, name in zip(trial.result["problems"], names):
            problem["problem"] = name
        return trial

    best = of(2, [1, 1], ["a", "b"])
    ranked = [(1.0, best), (1.0, of(1, [1], ["b"])), (0.0, of(0, [0], ["c"]))]
    versus = runner_up_comparison(ranked, "em", seed=0)
    assert versus["trial"] == 1 and versus["ties"] == [] and versus["shared_tasks_only"]
    assert versus["tasks"] == 1
    assert "1 tasks both scored (their tasks differ)" in verdict_text(
        {"trial": 2, "rank_by": "em", "runner_up": versus})
    lonely = runner_up_comparison([ranked[0], ranked[2]], "em", seed=0)
    assert lonely == {"trial": None, "ties": [], "apart": [0]}
    assert verdict_text({"trial": 2, "rank_by": "em", "runner_up": lonely}) == (
        "best trial 2: no other trial shares a task with it")


def _summary(points: list[tuple[float, int, float]]) -> dict:
    trials = [{"trial": i, "status": "finished",
               "overrides": {"model.temperature": t, "model.max_new_tokens": m},
               "objectives": {"balanced": v}, "fitness": v}
              for i, (t, m, v) in enumerate(points)]
    best = max(trials, key=lambda t: t["fitness"])
    return {"trials": trials, "best": {"trial": best["trial"], "rank_by": "balanced",
                                       "overrides": best["overrides"]}}


def test_heatmap_only_for_a_full_two_key_grid(tmp_path: Path):
    full = _summary([(0.1, 16, 0.2), (0.1, 32, 0.3), (0.2, 16, 0.1), (0.2, 32, 0.5)])
    first, second, rows, columns, values = grid_of(full)
    assert (first, second, rows, columns) == ("model.temperature", "model.max_new_tokens",
                                              [0.1, 0.2], [16, 32])
    assert values[("0.2", "32")] == 0.5
    assert write_heatmap(tmp_path, full) == "heatmap.png"
    png = (tmp_path / "heatmap.png").read_bytes()
    assert png[:4] == b"\x89PNG" and not list(tmp_path.glob(".*partial"))
    write_heatmap(tmp_path, full)
    assert (tmp_path / "heatmap.png").read_bytes() == png  # same data, same bytes
    holes = _summary([(0.1, 16, 0.2), (0.1, 32, 0.3), (0.2, 16, 0.1)])
    assert grid_of(holes) is None and write_heatmap(tmp_path / "none", holes) is None
    one_key = {"trials": [{"trial": i, "status": "finished", "overrides": {"a": i},
                           "fitness": 0.1 * i} for i in range(3)],
               "best": {"trial": 2, "rank_by": "fitness", "overrides": {"a": 2}}}
    assert grid_of(one_key) is None
