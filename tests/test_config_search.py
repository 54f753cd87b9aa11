"""[search] rank_by / space / budget, and the per-trial override layer (override_layer,
resolve): every key a trial may change is checked like a config file's, the rest refused."""

from __future__ import annotations

import pytest

from coral_core.config import experiment as configuration
from coral_core.errors import UserError

FIXED_KEYS = ["run.samples", "run.seed", "run.out", "search.strategy", "search.budget",
              "search.options.x", "execution.executor", "execution.ray_address",
              "execution.workers", "dataset.data_dir", "model.base_url"]


def read(tmp_path, text):
    path = tmp_path / "exp.toml"
    path.write_text(text)
    return path, lambda: configuration.read_file(path)


def refused(tmp_path, text):
    path, load = read(tmp_path, text)
    with pytest.raises(UserError) as caught:
        load()
    return str(caught.value).replace(str(path), "exp.toml")


def test_search_defaults():
    assert configuration.merge()["search"] == {
        "strategy": "single", "rank_by": "fitness", "space": {}, "budget": 0, "options": {},
        "pinned": []}


def test_space_is_normalised_to_dotted_keys(tmp_path):
    _, load = read(tmp_path, (
        "[search]\nstrategy = 'random'\nrank_by = 'bugfix'\nbudget = 8\n"
        "[search.space]\n"
        '"model.temperature" = [0, 0.8]\n'
        "model.top_p = {low = 0.5, high = 1}\n"          # unquoted: a nested table
        '"model.top_k" = {low = 1, high = 64, log = true}\n'
        '"evaluators.weights.bugfix" = {choices = [0.5, 2]}\n'
        '"evaluators.options.style.max_line_length" = [79, 100]\n'
        '"model.options.foo" = {low = 1, high = 3, int = true}\n'
        '"model.spec" = ["baseline", "openai:gpt"]\n'
        '"evaluators.weights" = [{bugfix = 1}, {bugfix = 1, style = 0.5}]\n'))
    search = load()["search"]
    assert (search["strategy"], search["rank_by"], search["budget"]) == ("random", "bugfix", 8)
    assert search["space"] == {
        "model.temperature": [0.0, 0.8],
        "model.top_p": {"low": 0.5, "high": 1.0, "log": False, "int": False},
        "model.top_k": {"low": 1, "high": 64, "log": True, "int": True},
        "evaluators.weights.bugfix": {"choices": [0.5, 2.0]},
        "evaluators.options.style.max_line_length": [79, 100],
        "model.options.foo": {"low": 1, "high": 3, "log": False, "int": True},
        "model.spec": ["baseline", "openai:gpt"],
        "evaluators.weights": [{"bugfix": 1.0}, {"bugfix": 1.0, "style": 0.5}],
    }
    resolved = configuration.merge(load())
    assert configuration.loads_resolved(configuration.dump(resolved), "x") == resolved


@pytest.mark.parametrize("key", FIXED_KEYS)
def test_space_refuses_keys_no_trial_may_change(tmp_path, key):
    message = refused(tmp_path, f'[run]\nseed = 1\n[search.space]\n"{key}" = ["a", "b"]\n')
    assert message.startswith(f"exp.toml (line 4): [search.space] '{key}' cannot vary "
                              "between trials: ")
    assert "\n" not in message


@pytest.mark.parametrize("line, message", [
    ('"model.temprature" = [0.1]',
     "[search.space] unknown key 'model.temprature' (did you mean 'temperature'?) "),
    ('"modle.temperature" = [0.1]',
     "[search.space] unknown section [modle] (did you mean 'model'?) "),
    ('"model.temperature" = []', "[search.space] 'model.temperature' values must be a "
                                 "non-empty list"),
    ('"model.temperature" = 0.5', "[search.space] 'model.temperature' needs a list of values"),
    ('"model.temperature" = [0.2, -1]', "[search.space] 'model.temperature' must be >= 0"),
    ('"model.temperature" = [0.2, 0.2]', "[search.space] 'model.temperature' values lists "
                                         "0.2 twice"),
    ('"model.top_k" = [1, 2.5]', "[search.space] 'model.top_k' must be an integer, got float"),
    ('"model.top_p" = {low = 0, high = 1}', "[search.space] 'model.top_p' must be in (0, 1]"),
    ('"model.top_p" = {low = 0.9, high = 0.5}', "[search.space] 'model.top_p' range has low "
                                                "0.9 > high 0.5"),
    ('"model.top_p" = {low = 0.5}', "[search.space] 'model.top_p' range needs both low and high"),
    ('"model.temperature" = {low = 0, high = 1, log = true}',
     "[search.space] 'model.temperature' range with log = true needs low > 0"),
    ('"model.temperature" = {low = 0, high = 1, step = 2}',
     "[search.space] 'model.temperature' range has unknown key 'step'"),
    ('"model.top_k" = {low = 1, high = 9, int = false}',
     "[search.space] 'model.top_k' is an integer: its range cannot have int = false"),
    ('"model.spec" = {low = 1, high = 2}', "[search.space] 'model.spec' is a string: search it "
                                           "with a list of values"),
    ('"model.temperature" = {choices = []}', "[search.space] 'model.temperature' choices must "
                                             "be a non-empty list"),
    ('"evaluators.weights.bugfix" = [-1]', "[search.space] 'evaluators.weights.bugfix' must "
                                           "be >= 0"),
    ('"model.temperature.x" = [1]', "[search.space] 'model.temperature.x' does not exist: "
                                    "'model.temperature' is a number"),
    ('"evaluators.weights.bugfix.x" = [1]', "[search.space] 'evaluators.weights.bugfix.x' does "
                                            "not exist: 'evaluators.weights.bugfix' is a number"),
    ('"model" = [1]', "[search.space] 'model' is a section, not a key"),
    ('"dataset.problems" = [["sieve", "sieve"]]', "[search.space] 'dataset.problems' lists "
                                                  "'sieve' twice"),
])
def test_space_values_are_checked_like_the_key_they_vary(tmp_path, line, message):
    text = refused(tmp_path, f"[search]\nstrategy = 'grid'\n\n[search.space]\n{line}\n")
    assert text.startswith(f"exp.toml (line 5): {message}")


@pytest.mark.parametrize("text, message", [
    ("[search]\nbudget = -1\n", "'search.budget' must be >= 1 (or 0 for the strategy's default)"),
    ("[search]\nrank_by = ''\n", "'search.rank_by' must name an objective (or fitness)"),
    ("[search]\nspace = 3\n", "'search.space' must be a table of search dimensions, got int"),
])
def test_other_search_keys_are_checked(tmp_path, text, message):
    assert refused(tmp_path, text) == f"exp.toml (line 2): {message}"


def test_space_merges_dimension_by_dimension():
    preset = configuration.validate({"search": {"space": {
        "model.temperature": [0.2, 0.8], "model.top_p": {"low": 0.5, "high": 1.0}}}}, "preset")
    file = configuration.validate({"search": {"space": {
        "model.top_p": {"choices": [0.9]}, "model.top_k": [0, 40]}}}, "file")
    assert configuration.merge(preset, file)["search"]["space"] == {
        "model.temperature": [0.2, 0.8], "model.top_p": {"choices": [0.9]},
        "model.top_k": [0, 40]}


# --- overrides ----------------------------------------------------------------------------

BASE = configuration.merge(configuration.validate({
    "dataset": {"name": "quixbugs", "data_dir": "/data"},
    "model": {"spec": "hf:m", "options": {"dtype": "bfloat16", "gen": {"a": 1, "b": 2}}},
    "evaluators": {"use": ["tests", "style"], "weights": {"bugfix": 1.0, "style": 0.5},
                   "options": {"style": {"max_line_length": 79, "select": ["E"]}}},
    "run": {"samples": 3, "seed": 7},
}, "base"))


def test_override_layer_from_dotted_keys_and_sections():
    layer = configuration.override_layer(
        {"model.temperature": 0, "evaluators.options.style.max_line_length": 100,
         "dataset": {"problems": ["gcd"]}}, "trial 1")
    assert layer == {"model": {"temperature": 0.0},
                     "evaluators": {"options": {"style": {"max_line_length": 100}}},
                     "dataset": {"problems": ["gcd"]}}
    assert isinstance(layer["model"]["temperature"], float)


def test_resolve_applies_overrides_to_a_copy_of_the_resolved_base():
    before = configuration.dump(BASE)
    resolved = configuration.resolve(BASE, {
        "model.temperature": 0.2, "model.options.gen.b": 5,
        "evaluators.options.style.max_line_length": 100, "dataset.problems": ["sieve"]})
    assert resolved["model"]["temperature"] == 0.2
    assert resolved["model"]["options"] == {"dtype": "bfloat16", "gen": {"a": 1, "b": 5}}
    assert resolved["evaluators"]["options"] == {"style": {"max_line_length": 100,
                                                           "select": ["E"]}}
    assert resolved["dataset"] == {"name": "quixbugs", "split": "test", "problems": ["sieve"],
                                   "limit": 0, "data_dir": "/data", "options": {}}
    assert resolved["run"] == {"samples": 3, "seed": 7, "out": "", "fail_fast": False}
    assert configuration.dump(BASE) == before  # the base is untouched


def test_resolve_keeps_keys_the_defaults_do_not_have():
    base = configuration.merge()
    base["dataset"]["extra"] = "kept"
    assert configuration.resolve(base, {"model.top_k": 5})["dataset"]["extra"] == "kept"


@pytest.mark.parametrize("overrides, weights", [
    ({"evaluators.weights.bugfix": 0.25}, {"bugfix": 0.25, "style": 0.5}),
    ({"evaluators.weights.security": 2}, {"bugfix": 1.0, "style": 0.5, "security": 2.0}),
    ({"evaluators.weights": {"bugfix": 0.25}}, {"bugfix": 0.25}),
    ({"evaluators": {"weights": {"bugfix": 0.25}}}, {"bugfix": 0.25}),
    ({}, {"bugfix": 1.0, "style": 0.5}),
])
def test_weights_entry_override_sets_one_entry_a_table_replaces(overrides, weights):
    assert configuration.resolve(BASE, overrides)["evaluators"]["weights"] == weights


def test_resolve_switching_backend_drops_the_other_backends_options():
    resolved = configuration.resolve(BASE, {"model.spec": "openai:gpt"})
    assert (resolved["model"]["spec"], resolved["model"]["options"]) == ("openai:gpt", {})
    kept = configuration.resolve(BASE, {"model.spec": "hf:other"})
    assert kept["model"]["options"] == {"dtype": "bfloat16", "gen": {"a": 1, "b": 2}}


@pytest.mark.parametrize("key", FIXED_KEYS)
def test_overrides_refuse_keys_no_trial_may_change(key):
    with pytest.raises(UserError) as caught:
        configuration.resolve(BASE, {key: "x"})
    assert str(caught.value).startswith(
        f"search strategy overrides: '{key}' cannot vary between trials: ")
    if key.count(".") == 1:  # the same refusal for the TOML-shaped form
        section, name = key.split(".")
        with pytest.raises(UserError, match=f"^trial 2: '{key}' cannot vary between trials"):
            configuration.override_layer({section: {name: "x"}}, "trial 2")


@pytest.mark.parametrize("overrides, message", [
    ({"model.temperature": float("nan")}, "'model.temperature' must be a finite number, got nan"),
    ({"evaluators.weights.bugfix": float("inf")},
     "'evaluators.weights.bugfix' must be a finite number, got inf"),
    ({"model.options.gen": {"c": float("-inf")}},
     "'model.options.gen.c' must be a finite number, got -inf"),
    ({"model.temprature": 0.1}, "unknown key 'model.temprature' (did you mean "
                                "'temperature'?) (known: "),
    ({"model": 3}, "'model' is a section, not a key"),
    ({"dataset.problems": ["sieve", "sieve"]}, "'dataset.problems' lists 'sieve' twice"),
    ({"model.top_p": 2}, "'model.top_p' must be in (0, 1]"),
    ({"model.temperature": 0.1, "model": {"temperature": 0.2}},
     "'model.temperature' is set twice"),
    ({"model.options": {"a": 1}, "model.options.a": 2},
     "'model.options.a' is set twice (also as 'model.options')"),
])
def test_bad_overrides_are_one_line_errors(overrides, message):
    with pytest.raises(UserError) as caught:
        configuration.override_layer(overrides, "trial 3")
    assert str(caught.value).startswith(f"trial 3: {message}")
    assert "\n" not in str(caught.value)


def test_a_planner_collects_search_values_for_the_cluster_only_before_the_run(data_dir):
    """Where models are built elsewhere, each model section a search value gives is kept
    for the executor to judge before the run; afterwards a trial's values (every adapter
    an evolution makes) are not kept: the list grew for the whole run (a reviewer's pass)."""
    from coral_core.run.factories import experiment_preset
    from coral_core.run.runner import Planner

    config = configuration.merge(experiment_preset("quixbugs"), {
        "dataset": {"data_dir": str(data_dir), "split": "train", "problems": ["gcd"]}})
    here = Planner(config)
    here.plan(1, {"model.temperature": 0.5})
    assert here.take_judged_elsewhere() == []
    on_cluster = configuration.merge(config, {"model": {"spec": "hf:/cluster/model"}})
    planner = Planner(on_cluster, models_here=False)
    planner.plan(0, {})
    planner.plan(1, {"model.adapter": "/nowhere/a"})
    planner.plan(2, {"model.adapter": "/nowhere/a"})  # judged once
    taken = planner.take_judged_elsewhere()
    assert [said for said, _ in taken] == ['model.adapter = "/nowhere/a"']
    assert taken[0][1]["adapter"] == "/nowhere/a"
    planner.plan(3, {"model.adapter": "/nowhere/b"})
    assert planner.take_judged_elsewhere() == [] and planner.judged_elsewhere == []
