"""Configuration: preset < file < flags, and errors that name the key, the file and the line."""

from __future__ import annotations

import pytest

from coral_core import config as configuration
from coral_core.errors import UserError


def test_layers_merge_in_order_preset_file_flags(tmp_path):
    preset = configuration.validate({"run": {"samples": 50, "seed": 1},
                                     "model": {"temperature": 0.8}}, "preset")
    path = tmp_path / "exp.toml"
    path.write_text("[run]\nsamples = 5\n[model]\ntemperature = 0.2\n[model.options]\nx = 1\n")
    flags = configuration.validate({"run": {"samples": 3}}, "command line")
    merged = configuration.merge(preset, configuration.read_file(path), flags)
    assert merged["run"] == {"samples": 3, "seed": 1, "out": ""}
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


def test_resolved_config_round_trips():
    merged = configuration.merge({"run": {"samples": 7}, "model": {"stop": ["```"]}})
    assert configuration.loads_resolved(configuration.dump(merged), "x") == merged
