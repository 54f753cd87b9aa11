"""Configuration: preset < file < flags, and errors that name the key, the file and the line."""

from __future__ import annotations

import hashlib
import os

import pytest

from coral_core.config import experiment as configuration
from coral_core.errors import UserError


def test_layers_merge_in_order_preset_file_flags(tmp_path):
    preset = configuration.validate({"run": {"samples": 50, "seed": 1},
                                     "model": {"temperature": 0.8}}, "preset")
    path = tmp_path / "exp.toml"
    path.write_text("[run]\nsamples = 5\n[model]\ntemperature = 0.2\n[model.options]\nx = 1\n")
    flags = configuration.validate({"run": {"samples": 3}}, "command line")
    merged = configuration.merge(preset, configuration.read_file(path), flags)
    assert merged["run"] == {"samples": 3, "seed": 1, "out": "", "fail_fast": False}
    assert merged["model"]["temperature"] == 0.2 and merged["model"]["options"] == {"x": 1}
    assert merged["execution"]["test_timeout"] == 5.0  # untouched default


def test_option_tables_merge_but_weights_replace():
    first = {"model": {"options": {"a": 1}}, "evaluators": {"weights": {"bugfix": 1.0, "x": 2.0}}}
    second = {"model": {"options": {"b": 2}}, "evaluators": {"weights": {"bugfix": 0.5}}}
    merged = configuration.merge(first, second)
    assert merged["model"]["options"] == {"a": 1, "b": 2}
    assert merged["evaluators"]["weights"] == {"bugfix": 0.5}


def test_integers_are_accepted_as_numbers_but_booleans_are_not(tmp_path):
    path = tmp_path / "exp.toml"
    path.write_text("[model]\ntemperature = 1\n")
    assert configuration.read_file(path)["model"]["temperature"] == 1.0
    path.write_text("[run]\nseed = true\n")
    with pytest.raises(UserError, match="'run.seed' must be an integer, got bool"):
        configuration.read_file(path)


@pytest.mark.parametrize("text, message, line", [
    ("[run]\nseed = 1\n\n[model]\ntemprature = 0.7\n", "unknown key 'model.temprature'", 5),
    ("[run]\nsamples = 'ten'\n", "'run.samples' must be an integer, got str", 2),
    ("model.temperature = -1\n", "'model.temperature' must be >= 0", 1),
    ("[execution]\nisolation = 'docker'\n", "must be auto, bwrap or none", 2),
])
def test_errors_name_key_file_and_line(tmp_path, text, message, line):
    path = tmp_path / "exp.toml"
    path.write_text(text)
    with pytest.raises(UserError) as caught:
        configuration.read_file(path)
    assert message in str(caught.value)
    assert f"{path} (line {line})" in str(caught.value)


def test_malformed_toml_reports_the_parser_position(tmp_path):
    path = tmp_path / "exp.toml"
    path.write_text("[run]\nsamples = = 3\n")
    with pytest.raises(UserError, match=r"invalid TOML: .*line 2"):
        configuration.read_file(path)


def test_a_byte_order_mark_in_front_is_read_as_python_reads_one(tmp_path):
    """Windows Notepad saves UTF-8 with a byte order mark: "invalid TOML: Invalid statement
    (at line 1, column 1)" said nothing of it (a bad-input pass). Anywhere else it is an
    error still."""
    path = tmp_path / "exp.toml"
    path.write_bytes(b"\xef\xbb\xbf[run]\nsamples = 3\n")
    assert configuration.read_file(path)["run"]["samples"] == 3
    path.write_bytes(b"[run]\n\xef\xbb\xbfsamples = 3\n")
    with pytest.raises(UserError, match=r"invalid TOML: .*line 2"):
        configuration.read_file(path)
    path.write_bytes(b"\xef\xbb\xbf[run]\nsamples = \"ten\"\n")  # its line, as without
    with pytest.raises(UserError, match=r"exp.toml \(line 2\): 'run.samples' must be an int"):
        configuration.read_file(path)


def test_resolved_config_round_trips():
    merged = configuration.merge({"run": {"samples": 7}, "model": {"stop": ["```"]}})
    assert configuration.loads_resolved(configuration.dump(merged), "x") == merged


# --- NaN and infinities -------------------------------------------------------------------

@pytest.mark.parametrize("text, line, message", [
    ("[run]\nseed = 1\n\n[evaluators.weights]\nbugfix = nan\n", 5,
     "'evaluators.weights.bugfix' must be a finite number, got nan"),
    ("[evaluators]\nweights = {bugfix = 1.0, style = inf}\n", 2,
     "'evaluators.weights.style' must be a finite number, got inf"),
    ("[execution]\nworkers = 2\ntest_timeout = inf\n", 3,
     "'execution.test_timeout' must be a finite number, got inf"),
    ("model.temperature = -inf\n", 1, "'model.temperature' must be a finite number, got -inf"),
    ("[evaluators.options.style]\nmax_line_length = 79\nthresholds = [0.5, nan]\n", 3,
     "'evaluators.options.style.thresholds[1]' must be a finite number, got nan"),
    ("[search]\nstrategy = 'grid'\n[search.options]\nx = {y = {z = inf}}\n", 4,
     "'search.options.x.y.z' must be a finite number, got inf"),
    ("[dataset.options]\nfactor = nan\n", 2,
     "'dataset.options.factor' must be a finite number, got nan"),
    ('[search.space]\n"model.temperature" = [0.5, nan]\n', 2,
     "[search.space] 'model.temperature' must be a finite number, got nan"),
])
def test_nan_and_infinity_are_refused_wherever_a_number_is_accepted(tmp_path, text, line, message):
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(UserError) as caught:
        configuration.read_file(path)
    assert str(caught.value) == f"{path} (line {line}): {message}"


def test_nan_in_a_layer_built_in_code_is_refused_too():
    with pytest.raises(UserError, match=r"^preset: 'model.options.scale' must be a finite "
                                        r"number, got nan$"):
        configuration.validate({"model": {"options": {"scale": float("nan")}}}, "preset")


# --- merging at every depth ---------------------------------------------------------------

def test_option_tables_merge_key_by_key_at_every_depth(tmp_path):
    preset = configuration.validate({
        "evaluators": {"weights": {"bugfix": 1.0, "style": 0.5},
                       "options": {"style": {"max_line_length": 79, "select": ["E", "F"]},
                                   "tests": {"slow": False}}},
        "model": {"spec": "hf:base", "options": {"dtype": "bfloat16",
                                                 "generation": {"a": 1, "b": {"c": 2, "d": 3}}}},
    }, "preset")
    path = tmp_path / "exp.toml"
    path.write_text("[evaluators.options.style]\nselect = ['W']\n"
                    "[model.options.generation.b]\nc = 20\n"
                    "[evaluators.weights]\nbugfix = 2\n")
    merged = configuration.merge(preset, configuration.read_file(path))
    assert merged["evaluators"]["options"] == {
        "style": {"max_line_length": 79, "select": ["W"]}, "tests": {"slow": False}}
    assert merged["model"]["options"] == {"dtype": "bfloat16",
                                          "generation": {"a": 1, "b": {"c": 20, "d": 3}}}
    assert merged["evaluators"]["weights"] == {"bugfix": 2.0}  # weights: the whole set
    # merging leaves its layers as they were
    assert preset["evaluators"]["options"]["style"] == {"max_line_length": 79,
                                                        "select": ["E", "F"]}


# --- a backend's options stay with it -----------------------------------------------------

HF = {"model": {"spec": "hf:some/model", "options": {"dtype": "bfloat16"}}}
OPENAI = {"model": {"spec": "openai:gpt", "base_url": "http://localhost:8000/v1",
                    "options": {"api_key_env": "KEY"}}}


@pytest.mark.parametrize("layers, spec, base_url, options", [
    ([HF, {"model": {"spec": "openai:gpt", "base_url": "http://h/v1"}}],
     "openai:gpt", "http://h/v1", {}),
    ([OPENAI, {"model": {"spec": "hf:other"}}], "hf:other", "", {}),
    ([OPENAI, {"model": {"spec": "baseline"}}], "baseline", "", {}),
    ([OPENAI, {"model": {"spec": "openai:other"}}],
     "openai:other", "http://localhost:8000/v1", {"api_key_env": "KEY"}),
    ([HF, {"model": {"spec": "openai:gpt", "options": {"timeout": 5}}}],
     "openai:gpt", "", {"timeout": 5}),
    ([HF, {"model": {"spec": "openai:gpt"}}, {"model": {"options": {"timeout": 5}}}],
     "openai:gpt", "", {"timeout": 5}),
    ([HF, {"model": {"temperature": 0.1}}], "hf:some/model", "", {"dtype": "bfloat16"}),
    # options given without a model go with the model chosen later (--model on top)
    ([HF, {"model": {"options": {"delay": 0.5}}}, {"model": {"spec": "echo"}}],
     "echo", "", {"delay": 0.5}),
    ([{"model": {"spec": "baseline"}}, {"model": {"options": {"delay": 0.5}}},
      {"model": {"spec": "echo"}}], "echo", "", {"delay": 0.5}),
])
def test_switching_backend_drops_the_other_backends_options(layers, spec, base_url, options):
    merged = configuration.merge(*(configuration.validate(layer, f"layer {index}")
                                   for index, layer in enumerate(layers)))
    assert (merged["model"]["spec"], merged["model"]["base_url"],
            merged["model"]["options"]) == (spec, base_url, options)


# --- problems listed once -----------------------------------------------------------------

def test_a_problem_listed_twice_is_an_error(tmp_path):
    path = tmp_path / "exp.toml"
    path.write_text("[dataset]\nname = 'quixbugs'\nproblems = ['sieve', 'gcd', 'sieve']\n")
    with pytest.raises(UserError) as caught:
        configuration.read_file(path)
    assert str(caught.value) == f"{path} (line 3): 'dataset.problems' lists 'sieve' twice"


# --- digest -------------------------------------------------------------------------------

def test_digest_is_sha256_of_canonical_json_without_relocatable_keys():
    config = {"run": {"samples": 3, "out": "/runs/a"}, "model": {"temperature": 0.5,
                                                                 "base_url": "http://a"},
              "dataset": {"data_dir": "/data", "name": "quixbugs"}}
    canonical = '{"dataset":{"name":"quixbugs"},"model":{"temperature":0.5},"run":{"samples":3}}'
    assert configuration.digest(config) == hashlib.sha256(canonical.encode()).hexdigest()


def test_digest_ignores_relocation_but_not_configuration():
    base = configuration.merge({"dataset": {"name": "quixbugs", "data_dir": "/a"},
                                "run": {"samples": 100, "out": "/runs/1"}})
    moved = configuration.merge({"dataset": {"name": "quixbugs", "data_dir": "/elsewhere"},
                                 "model": {"base_url": "http://other:8000/v1"},
                                 "run": {"samples": 100, "out": "/moved/1"}})
    edited = configuration.merge({"dataset": {"name": "quixbugs", "data_dir": "/a"},
                                  "run": {"samples": 3, "out": "/runs/1"}})
    assert configuration.digest(base) == configuration.digest(moved)
    assert configuration.digest(base) != configuration.digest(edited)
    reread = configuration.loads_resolved(configuration.dump(base), "config.toml")
    assert configuration.digest(reread) == configuration.digest(base)


# --- absolute paths -----------------------------------------------------------------------

def test_paths_are_made_absolute_against_the_given_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    config = configuration.merge({"dataset": {"data_dir": "data"},
                                  "model": {"adapter": "~/adapters/a1"},
                                  "run": {"out": "../runs/x"}})
    work = tmp_path / "work"
    absolute = configuration.absolute_paths(config, work)
    assert absolute["dataset"]["data_dir"] == os.path.join(str(work), "data")
    assert absolute["model"]["adapter"] == os.path.join(str(tmp_path), "home", "adapters", "a1")
    assert absolute["run"]["out"] == os.path.join(str(tmp_path), "runs", "x")
    assert config["dataset"]["data_dir"] == "data"  # the input is left as it was
    unset = configuration.absolute_paths(configuration.merge({"run": {"out": "/abs/out"}}), work)
    assert (unset["dataset"]["data_dir"], unset["model"]["adapter"],
            unset["run"]["out"]) == ("", "", "/abs/out")
