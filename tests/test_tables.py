"""Tables fit the width they are printed at and never cut a name: run, report, plugins
list and datasets list at 60, 80, 120 and 200 columns on a terminal, and piped (Markdown).

A terminal is simulated the way rich honours it (TTY_COMPATIBLE=1, COLUMNS=N); the CLI
runs for real.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import coral_env, run_coral
from coral_core.results.summary_tables import percent, summary_grid
from coral_core.results.grids import Column, Grid, boxed_width, fit, markdown
from plugin_kit import echo_model_distribution

WIDTHS = (60, 80, 120, 200)
# The names the issue saw cut: next_p..., shortest_path..., and the longest ones.
PROBLEMS = ("next_palindrome", "next_permutation", "shortest_path_length",
            "shortest_path_lengths", "shortest_paths", "longest_common_subsequence",
            "is_valid_parenthesization")
RUN_HEADERS = ("problem", "seen", "c/n", "pass@1", "bugfix", "runtime", "security", "style",
               "syntax", "fitness")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _whole(word: str, text: str) -> bool:
    return re.search(rf"(?<![\w@/]){re.escape(word)}(?![\w@])", text) is not None


def _check(text: str, width: int | None, names, headers) -> None:
    plain = ANSI.sub("", text)
    assert "…" not in plain and "..." not in plain, plain
    for name in (*names, *headers):
        assert _whole(name, plain), (name, width, plain)
    if width is not None:
        assert max(len(line) for line in plain.splitlines()) <= width, plain
    else:
        assert "\x1b[" not in text and any(line.startswith("| ") for line in text.splitlines())


@pytest.fixture(scope="module")
def setting(tmp_path_factory, data_dir):
    root = tmp_path_factory.mktemp("tables")
    env = coral_env(data_dir, PYTHONPATH=str(echo_model_distribution(root / "site")))
    return {"root": root, "env": env}


def _terminal(env: dict[str, str], width: int | None) -> dict[str, str]:
    if width is None:
        return {**env, "COLUMNS": "80"}  # piped: Markdown whatever the width
    return {**env, "COLUMNS": str(width), "TTY_COMPATIBLE": "1"}


@pytest.fixture(scope="module")
def finished_run(setting) -> Path:
    """One run for every width: `run` and `report` print its table through the same code."""
    out = setting["root"] / "run"
    result = run_coral("run", "--plugin", "quixbugs", "--model", "echo", "--split", "all",
                       "--problems", ",".join(PROBLEMS), "--samples", "1", "--out", str(out),
                       env=_terminal(setting["env"], 80))
    assert result.returncode == 0, result.stderr
    _check(result.stdout, 80, PROBLEMS, RUN_HEADERS)
    return out


@pytest.mark.parametrize("width", [*WIDTHS, None], ids=lambda w: f"{w}cols" if w else "piped")
def test_run_and_report_tables_keep_every_problem_name_and_header_whole(
        setting, finished_run, width):
    report = run_coral("report", str(finished_run), env=_terminal(setting["env"], width))
    assert report.returncode == 0, report.stderr
    _check(report.stdout, width, PROBLEMS, RUN_HEADERS)
    assert "95% CI" in ANSI.sub("", report.stdout) and "bootstrap over problems" in \
        " ".join(ANSI.sub("", report.stdout).split())


@pytest.mark.parametrize("width", [*WIDTHS, None], ids=lambda w: f"{w}cols" if w else "piped")
def test_plugins_and_datasets_lists_keep_names_and_paths_whole(setting, width, data_dir):
    env = _terminal(setting["env"], width)
    plugins = run_coral("plugins", "list", env=env)
    assert plugins.returncode == 0, plugins.stderr
    names = [p["name"] for p in json.loads(run_coral("plugins", "list", "--json",
                                                     env=setting["env"]).stdout)]
    _check(plugins.stdout, width, names, ("name", "source", "status", "registers", "hooks"))
    datasets = run_coral("datasets", "list", env=env)
    assert datasets.returncode == 0, datasets.stderr
    path = str(data_dir / "quixbugs")
    wide = width is None or width - 20 >= len(path)
    _check(datasets.stdout, width, ["quixbugs"] + ([path] if wide else []),
           ("name", "splits", "data", "description"))
    show = run_coral("datasets", "show", "quixbugs", env=env)
    assert show.returncode == 0, show.stderr
    _check(show.stdout, width, PROBLEMS, ("problem", "split", "tests", "seen"))


# -------------------------------------------------------------- the layout, in process

GRID = Grid("t", (Column("problem", key=True), Column("a", "right"), Column("bb", "right"),
                  Column("ccc", "right")),
            (("longest_common_subsequence", "1", "22", "333"), ("x", "4", "5", "6")), "cap")


def test_a_grid_that_fits_stays_whole():
    assert fit(GRID, 200) == [GRID]


def test_a_grid_too_wide_is_split_with_its_key_in_every_part():
    widths = GRID.widths()
    parts = fit(GRID, boxed_width(widths[:3]))
    assert [[c.header for c in p.columns] for p in parts] == [["problem", "a", "bb"],
                                                              ["problem", "ccc"]]
    assert [p.title for p in parts] == ["t (1/2)", "t (2/2)"]


def test_a_grid_whose_key_and_one_column_do_not_fit_needs_a_vertical_layout():
    assert fit(GRID, 20) is None


def test_markdown_escapes_pipes_and_aligns_numbers():
    text = markdown(Grid("", (Column("a"), Column("n", "right")), (("x|y", "1"),)))
    assert text.splitlines() == ["| a    | n   |", "|------|----:|", "| x\\|y |   1 |"]


def test_percentages_round_half_up_everywhere():
    assert percent(0.0125) == "1.3%" and percent(0.0345) == "3.5%" and percent(1.0) == "100.0%"
    assert percent(0.145) == "14.5%" and percent(0.0) == "0.0%"


def test_one_sample_is_singular_and_seen_problems_get_a_column_not_a_suffix():
    summary = {"dataset": "d", "split": "all", "model": "m", "samples": 1, "seed": 0,
               "problems": [{"problem": "p", "n": 1, "c": 1, "seen_in_training": True,
                             "pass_at_k": {"1": 1.0}, "objectives": {}, "fitness": 1.0,
                             "errors": 0}],
               "pass_at_k": {"1": 1.0}, "objectives": {}, "fitness": 1.0, "fixed": 1}
    grid = summary_grid(summary)
    assert "1 sample per problem" in grid.title
    assert grid.rows[0][:2] == ("p", "yes") and "seen in training" in grid.caption


def test_every_sample_count_shows_its_largest_pass_at_k():
    ks = {"1": 0.5, "2": 0.7, "3": 0.8, "4": 0.9}
    summary = {"dataset": "d", "split": "test", "model": "m", "samples": 4, "seed": 0,
               "problems": [{"problem": "p", "n": 4, "c": 2, "pass_at_k": ks,
                             "objectives": {}, "fitness": 1.0, "errors": 0}],
               "pass_at_k": ks, "objectives": {}, "fitness": 1.0, "fixed": 1}
    headers = [column.header for column in summary_grid(summary).columns]
    assert [h for h in headers if h.startswith("pass@")] == ["pass@1", "pass@2", "pass@4"]


def test_hundreds_of_problems_show_the_aggregate_unless_asked():
    problems = [{"problem": f"t{i:03d}", "n": 1, "pass_at_k": {}, "objectives": {"em": 1.0},
                 "fitness": 1.0, "errors": 0} for i in range(200)]
    summary = {"dataset": "fim", "split": "test", "model": "m", "samples": 1, "seed": 0,
               "problems": problems, "objectives": {"em": 1.0}, "fitness": 1.0,
               "run_dir": "/runs/x"}
    short = summary_grid(summary)
    assert [row[0] for row in short.rows] == ["overall"]
    assert "200 problems" in short.caption and "--per-problem" in short.caption
    assert len(summary_grid(summary, every_problem=True).rows) == 201


def test_trial_overrides_read_as_a_person_writes_them():
    from coral_core.results.summary_tables import short_overrides

    assert short_overrides({"model.temperature": 0.8599796663725433,
                            "model.max_new_tokens": 64}) == "temperature=0.86, max_new_tokens=64"
    assert short_overrides({"a.rank": 8, "b.rank": [1.23456, "q"]}) == "a.rank=8, b.rank=[1.235,q]"
