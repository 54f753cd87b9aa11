"""What a search config may ask for is bounded and checked before the run directory exists;
grids are enumerated lazily and random draws are made per ask, so a small config never
builds work proportional to the product of its axes (issue "Every input is hostile, round
three", items 5 and 6)."""

from __future__ import annotations

import itertools
import json
import math
import re
import signal
import sqlite3
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from conftest import coral_env, gene_space, store_sql
from coral_core.config.schema import MAX_BATCH, MAX_TRIALS, OptionInvalid
from coral_core.errors import UserError
from coral_core.run.runner import _check_proposals
from coral_plugins.search import grid as grid_module
from coral_plugins.search import random as random_module
from coral_plugins.search.evolution.training import training_options
from coral_plugins.search.grid import GridSearch, decode
from coral_plugins.search.random import RandomSearch

HEAD = '[dataset]\nproblems = ["sieve"]\n[run]\nsamples = 1\n'


def _axis(key: str, count: int = 60) -> str:
    if key in ("model.top_k", "model.max_new_tokens"):
        values = [str(i + 1) for i in range(count)]
    else:
        values = [f"{0.01 * (i + 1):.2f}" for i in range(count)]
    return f'"{key}" = [{", ".join(values)}]\n'


AXES = ("model.temperature", "model.top_p", "model.top_k", "model.max_new_tokens",
        "evaluators.weights.bugfix")
HUGE_GRID = "".join(_axis(key) for key in AXES)  # 60^5 = 777,600,000 points


@pytest.fixture(scope="module")
def env(data_dir):
    return coral_env(data_dir)


# Peak memory of the coral process, read from inside it (VmHWM), under an address-space
# limit: a regression that builds the grid fails fast instead of exhausting the machine.
_WRAPPER = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
try:
    from coral_cli.app import main
    main(sys.argv[2:])
finally:
    with open("/proc/self/status") as status:
        peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    with open(sys.argv[1], "w") as handle:
        handle.write(str(peak))
"""


def _measured(tmp_path: Path, env: dict[str, str], *args: str):
    record = tmp_path / "peak"
    done = subprocess.run([sys.executable, "-c", _WRAPPER, str(record), *args],
                          capture_output=True, text=True, env=env, timeout=300)
    return done, int(record.read_text()) / 1024


def _run(tmp_path: Path, env: dict[str, str], toml: str | None, *args: str,
         plugin: str = "quixbugs") -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    out = tmp_path / "run"
    config = tmp_path / "exp.toml"
    extra: list[str] = []
    if toml is not None:
        config.write_text(toml)
        extra = ["--config", str(config)]
    result, _ = _measured(tmp_path, env, "run", "--plugin", plugin, *extra, "--out", str(out),
                          "--json", *args)
    return result, out, config


def _refused(result: subprocess.CompletedProcess[str], out: Path, *fragments: str) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert not out.exists(), "a refused run left its run directory"
    return lines[0]


# ----- grid: computed size, lazy points, constant state

def test_grid_points_are_decoded_in_nested_loop_order():
    space = {"a": [1, 2, 3], "b": ["x", "y"], "c": [True, False, None, 0]}
    expected = [dict(zip(space, combo)) for combo in itertools.product(*space.values())]
    grid = GridSearch(space)
    assert grid.size == 24
    assert [grid.point(i) for i in range(24)] == expected
    assert grid.ask() == expected and grid.ask() == []
    assert decode(23, [[0, 1, 2], [0, 1], [0, 1, 2, 3]]) == (2, 1, 3)


def test_a_huge_grid_with_a_small_budget_builds_only_the_budget():
    space = {f"k{i}": list(range(60)) for i in range(5)}
    tracemalloc.start()
    try:
        grid = GridSearch(space, budget=3)
        first = grid.ask()
        second = grid.ask()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert grid.size == 60 ** 5 and grid.limit == 3
    assert first == [dict.fromkeys(space, 0) | {"k4": i} for i in range(3)] and second == []
    assert peak < 1_000_000, f"{peak} bytes traced for 3 points of a 60^5 grid"
    state = json.dumps(grid.state())
    assert len(state) < 40 and json.loads(state) == {"next": 3}


def test_a_grid_proposes_batches_and_resumes_where_it_stopped(monkeypatch):
    monkeypatch.setattr(grid_module, "MAX_BATCH", 4)
    space = {"a": list(range(5)), "b": list(range(3))}
    whole = [dict(zip(space, combo)) for combo in itertools.product(*space.values())][:11]
    grid = GridSearch(space, budget=11)
    batches = [grid.ask() for _ in range(4)]
    assert [len(b) for b in batches] == [4, 4, 3, 0]
    assert sum(batches, []) == whole
    resumed = GridSearch(space, budget=11)
    first = resumed.ask()
    again = GridSearch(space, budget=11)
    again.restore(json.loads(json.dumps(resumed.state())))
    assert first + again.ask() + again.ask() == whole and again.ask() == []


@pytest.mark.parametrize("space, budget, fragment", [
    ({f"k{i}": list(range(60)) for i in range(5)}, 0, "777600000 combinations"),
    ({"a": [1, 2]}, MAX_TRIALS + 1, f"[0, {MAX_TRIALS}]"),
    ({"a": [1, 2]}, -1, f"[0, {MAX_TRIALS}]"),
])
def test_a_grid_that_asks_for_too_many_trials_is_refused(space, budget, fragment):
    with pytest.raises(OptionInvalid, match=re.escape(fragment)):
        GridSearch(space, budget=budget)


# ----- random: per-ask draws, the same draws however they are batched

def _drawn(search: RandomSearch) -> list:
    found = []
    while batch := search.ask():
        found += batch
    return found


def test_random_draws_per_ask_and_batching_does_not_change_them(monkeypatch):
    space = {"model.temperature": {"low": 0.1, "high": 1.0}, "model.top_k": [0, 5, 50]}
    whole = _drawn(RandomSearch(space, seed=7, budget=10))
    assert len(whole) == 10
    monkeypatch.setattr(random_module, "MAX_BATCH", 3)
    search = RandomSearch(space, seed=7, budget=10)
    first = search.ask()
    assert len(first) == 3
    resumed = RandomSearch(space, seed=7, budget=10)
    resumed.restore(json.loads(json.dumps(search.state())))
    assert first + _drawn(resumed) == whole


def test_random_with_the_largest_budget_draws_one_batch_at_a_time():
    search = RandomSearch({"model.temperature": {"low": 0.1, "high": 1.0}}, budget=MAX_TRIALS)
    assert len(search.ask()) == MAX_BATCH
    assert len(json.dumps(search.state())) < 20_000  # the generator's state, not the draws


@pytest.mark.parametrize("budget", [MAX_TRIALS + 1, 10 ** 8, -1])
def test_random_refuses_a_budget_out_of_bounds(budget):
    with pytest.raises(OptionInvalid, match=str(MAX_TRIALS)):
        RandomSearch({"model.temperature": [0.1]}, budget=budget)


@pytest.mark.parametrize("spec", [
    {"low": -1e308, "high": 1e308}, {"low": 0.0, "high": math.inf},
    {"low": math.nan, "high": 1.0},
])
def test_random_refuses_a_range_that_is_not_finite(spec):
    with pytest.raises(UserError, match="finite range"):
        RandomSearch({"model.options.x": spec})


def test_a_strategy_proposing_more_than_a_run_may_hold_is_stopped():
    _check_proposals("plugin", MAX_BATCH, 0)
    with pytest.raises(UserError, match=f"at most {MAX_BATCH} per batch"):
        _check_proposals("plugin", MAX_BATCH + 1, 0)
    with pytest.raises(UserError, match=f"at most {MAX_TRIALS}"):
        _check_proposals("plugin", 2, MAX_TRIALS - 1)


# ----- evolution genes and options

@pytest.mark.parametrize("gene, spec, fragment", [
    ("temperature", {"low": 0.0, "high": 1.2, "step": 1e-300}, "below 1e-06"),
    ("top_p", {"low": 0.5, "high": 1.0, "step": 1e-300}, "below 1e-06"),
    ("temperature", {"low": 0.0, "high": 1e-300, "step": 1e-300}, "below 1e-06"),
    ("temperature", {"low": 0.0, "high": 1.0, "step": 0.0}, "step must be > 0"),
    ("temperature", {"low": 0.0, "high": 1.0, "step": -0.5}, "step must be > 0"),
    ("temperature", {"low": 0.0, "high": 1.0, "step": math.nan}, "finite numbers"),
    ("temperature", {"low": 0.0, "high": math.inf, "step": 0.1}, "finite numbers"),
    ("top_k", {"low": 0, "high": 2 ** 62, "step": 1}, "at most 1000000"),
    ("top_k", {"low": 0, "high": 1000, "step": 2 ** 62}, "multiple of step"),
    ("temperature", {"low": 0.0, "high": 1.0, "step": 1e10}, "multiple of step"),
    ("top_p", {"low": 0.5, "high": 2.0, "step": 0.5}, "'model.top_p' must be in (0, 1]"),
    ("temperature", [0.1, math.nan], "must be a number"),
    ("operator_weight", [-1.0, 1.0], "numbers in [0, 1000000]"),
    ("temperature", [i / 1000 for i in range(1001)], "at most 1000"),
])
def test_degenerate_genes_are_refused(gene, spec, fragment):
    with pytest.raises(OptionInvalid, match=re.escape(fragment)) as raised:
        gene_space("baseline", False, {gene: spec})
    assert raised.value.path == ("search", "options", "genes", gene)


def test_a_fine_but_bounded_gene_is_accepted():
    space = gene_space("baseline", False,
                       {"top_p": {"low": 0.5, "high": 1.0, "step": 1e-6}})
    space.distributions()  # Optuna's decimal arithmetic copes with it


def test_one_step_between_large_neighbours_is_a_whole_step():
    """A red-team pass: 100 - 99.999999 is 1e-6 only to 1e-8 of itself, and was refused as
    not a multiple of step."""
    space = gene_space("baseline", False,
                       {"temperature": {"low": 99.999999, "high": 100.0, "step": 1e-6}})
    space.distributions()


@pytest.mark.parametrize("key, value, fragment", [
    ("epochs", 1e9, "(0, 1000]"), ("steps", 10 ** 9, "[0, 1000000]"),
    ("learning_rate", math.inf, "(0, 1]"), ("batch_size", 10 ** 6, "[1, 4096]"),
    ("max_length", 2 ** 40, "[8, 1048576]"), ("epochs", math.nan, "(0, 1000]"),
])
def test_training_options_are_bounded(key, value, fragment):
    with pytest.raises(OptionInvalid, match=re.escape(fragment)):
        training_options({key: value}, 0)


# ----- as a user runs it: one line, the key and the bound, no run directory

SPACE_RANDOM = '[search]\nstrategy = "random"\nbudget = {budget}\n[search.space]\n' \
               '"model.temperature" = {{low = 0.1, high = 1.0}}\n'


@pytest.mark.parametrize("toml, args, fragments", [
    (SPACE_RANDOM.format(budget=10 ** 8), (),
     ("exp.toml (line", "'search.budget'", str(MAX_TRIALS))),
    (SPACE_RANDOM.format(budget=MAX_TRIALS + 1), ("--dry-run",),
     ("'search.budget'", str(MAX_TRIALS))),
    ('[search]\nstrategy = "grid"\n[search.space]\n' + HUGE_GRID, (),
     ("exp.toml (line", "777600000 combinations", str(MAX_TRIALS), "budget")),
    ('[search]\nstrategy = "grid"\n[search.options]\nbudget = 1000000000\n[search.space]\n'
     '"model.temperature" = [0.1]\n', (), ("exp.toml (line", "[search.options] budget",
                                           "[search] budget")),
    ('[search]\nstrategy = "grid"\n[search.space]\n' + _axis("model.temperature", 1001), (),
     ("exp.toml (line", "'model.temperature'", "at most 1000")),
    ('[search]\nstrategy = "grid"\nbudget = 2\n[search.space]\n'
     + "".join(f'"evaluators.options.style.k{i}" = [1, 2]\n' for i in range(33)), (),
     ("exp.toml (line", "at most 32 keys")),
    ('[search]\nstrategy = "random"\n[search.space]\n'
     '"model.options.x" = {low = -1e308, high = 1e308}\n', (),
     ("exp.toml (line", "'model.options.x'", "overflows")),
    (None, ("--seed", str(2 ** 70)), ("--seed", "2**63 - 1")),
    (None, ("--max-new-tokens", str(10 ** 9)), ("--max-new-tokens", "1000000")),
    (None, ("--temperature", "1e300"), ("--temperature", "at most 100")),
])
def test_bounds_of_search_keys_and_flags(tmp_path, env, toml, args, fragments):
    result, out, _ = _run(tmp_path, env, toml, *args)
    _refused(result, out, *fragments)


@pytest.mark.parametrize("toml, args, fragments", [
    (None, ("--population", "100000000", "--dry-run"),
     ("command line (--population)", "population = 100000000", "<= 1000")),
    (None, ("--population", "100000000"), ("--population", "<= 1000")),
    (None, ("--generations", str(10 ** 12)), ("--generations", "<= 1000")),
    (None, ("--population", "1000", "--generations", "11"), ("population x generations",
                                                             "at most 10000")),
    ('[search.options.genes]\ntemperature = {low = 0.0, high = 1.0, step = 1e-300}\n', (),
     ("exp.toml (line 2)", "[search.options.genes] temperature", "1e-06")),
    ('[search.options.genes]\ntop_k = {low = 0, high = 4000000000, step = 2}\n', (),
     ("exp.toml (line 2)", "top_k", "at most 1000000")),
    ('[search.options.genes]\ntop_p = [0.5, 1.5]\n', (), ("exp.toml (line 2)", "top_p",
                                                          "'model.top_p' must be in (0, 1]")),
    ('[search.options]\nmax_train_seconds = 1e300\n', (), ("exp.toml (line 2)",
                                                           "max_train_seconds", "31622400")),
    ('[search.options]\nmax_tokens = 9000000000000000000\n', (), ("max_tokens", "<= ")),
])
def test_bounds_of_the_evolution_search(tmp_path, env, toml, args, fragments):
    result, out, _ = _run(tmp_path, env, toml, *args, plugin="evolution")
    _refused(result, out, *fragments)


@pytest.mark.parametrize("dry_run", [True, False])
def test_a_60_to_the_5_grid_with_budget_1_runs_in_bounded_memory(tmp_path, env, dry_run):
    config = tmp_path / "grid.toml"
    config.write_text(HEAD + '[search]\nstrategy = "grid"\nbudget = 1\n[search.space]\n'
                      + HUGE_GRID)
    out = tmp_path / "run"
    args = ["run", "--plugin", "quixbugs", "--config", str(config), "--out", str(out),
            "--dry-run" if dry_run else "--json"]
    done, peak_mib = _measured(tmp_path, env, *args)
    assert done.returncode == 0, done.stderr[-2000:]
    assert peak_mib < 500, f"peak {peak_mib:.0f} MiB"
    if dry_run:
        assert 'strategy = "grid"' in done.stdout and not out.exists()
    else:
        trials = json.loads(done.stdout)["trials"]
        assert [t["overrides"] for t in trials] == [
            {"evaluators.weights.bugfix": 0.01, "model.max_new_tokens": 1,
             "model.temperature": 0.01, "model.top_k": 1, "model.top_p": 0.01}]


def test_random_at_its_largest_budget_starts_with_one_batch(tmp_path, env):
    """The whole budget is never drawn at once: the first batch is stored, then Ctrl-C."""
    config = tmp_path / "random.toml"
    config.write_text(HEAD + SPACE_RANDOM.format(budget=MAX_TRIALS))
    out = tmp_path / "run"
    process = subprocess.Popen(
        [str(Path(sys.executable).with_name("coral")), "run", "--plugin", "quixbugs",
         "--config", str(config), "--out", str(out)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    count = 0
    while count == 0 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
        try:
            count = store_sql(out / "coral.sqlite", "SELECT COUNT(*) FROM trials",
                              read_only=True)[0][0]
        except sqlite3.Error:
            count = 0
    process.send_signal(signal.SIGINT)
    process.wait(timeout=120)
    assert count > 0, "no trial was stored"
    with sqlite3.connect(out / "coral.sqlite") as db:
        assert db.execute("SELECT COUNT(*), MAX(batch) FROM trials").fetchone() == (MAX_BATCH, 0)


@pytest.mark.parametrize("low, high", [(9223372036854775000, 9223372036854775807), (1, 2),
                                       (10 ** 17, 10 ** 17 + 3)])
def test_log_uniform_integer_draws_stay_in_their_range(low, high):
    """A red-team pass: exp(log(x)) is x only to a float's digits, so a range near 2**63
    drew values below its low bound."""
    strategy = random_module.RandomSearch(
        {"model.top_k": {"low": low, "high": high, "int": True, "log": True},
         "model.temperature": {"low": 0.3, "high": 0.3 + 1e-15, "log": True}}, seed=3,
        budget=50)
    for trial in strategy.ask():
        assert low <= trial["model.top_k"] <= high and isinstance(trial["model.top_k"], int)
        assert 0.3 <= trial["model.temperature"] <= 0.3 + 1e-15
