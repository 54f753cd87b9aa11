"""What a user sets explicitly wins over a preset's search: a flag or a file that fixes a
key the preset's grid would vary takes it out of the grid (and says so), a file can drop
the preset's search, and a search left with no dimension runs once."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import coral_env, run_coral
from coral_core.config import launch


def _flags(**given):
    flags = dict.fromkeys(launch.PLACES)
    flags.update(given)
    return flags


def _resolved(tmp_path: Path, text: str | None = None, plugin: str = "fim", **flags):
    config = None
    if text is not None:
        config = tmp_path / "c.toml"
        config.write_text(text)
    return launch.resolve_fresh(plugin, config, _flags(**flags))


def test_a_flag_takes_its_key_out_of_the_presets_grid(tmp_path):
    plain = _resolved(tmp_path)
    assert set(plain.config["search"]["space"]) == {"model.temperature",
                                                    "model.max_new_tokens"}
    fixed = _resolved(tmp_path, temperature=0.2)
    assert set(fixed.config["search"]["space"]) == {"model.max_new_tokens"}
    assert fixed.config["model"]["temperature"] == 0.2
    assert fixed.config["search"]["strategy"] == "grid"
    assert any("model.temperature is set explicitly" in n for n in fixed.notes)


def test_a_file_value_takes_its_key_out_of_the_presets_grid(tmp_path):
    resolved = _resolved(tmp_path, "[model]\nmax_new_tokens = 64\ntemperature = 0.3\n")
    assert resolved.config["search"]["space"] == {}
    assert resolved.config["search"]["strategy"] == "single"
    assert resolved.config["model"]["max_new_tokens"] == 64
    assert any("one configuration runs" in n for n in resolved.notes)


@pytest.mark.parametrize("text", ['[search]\nstrategy = "single"\n', "[search]\nspace = {}\n"])
def test_a_file_can_turn_the_presets_search_off(tmp_path, text):
    resolved = _resolved(tmp_path, text)
    assert resolved.config["search"]["space"] == {}
    assert resolved.config["search"]["strategy"] == "single"
    assert resolved.notes


def test_a_files_own_space_replaces_the_presets(tmp_path):
    text = '[search]\nstrategy = "grid"\n[search.space]\n"model.top_p" = [0.5, 0.9]\n'
    resolved = _resolved(tmp_path, text)  # fim's preset varies temperature x max_new_tokens
    assert resolved.config["search"]["space"] == {"model.top_p": [0.5, 0.9]}
    assert any("search space is replaced" in n for n in resolved.notes)


def test_a_strategy_with_its_own_dimensions_keeps_the_keys_set(tmp_path):
    resolved = _resolved(tmp_path, "[model]\ntop_p = 0.9\n", plugin="evolution",
                         temperature=0.2)
    assert resolved.config["search"]["pinned"] == ["model.temperature", "model.top_p"]
    assert _resolved(tmp_path, plugin="evolution").config["search"]["pinned"] == []
    assert "pinned" not in _resolved(tmp_path, plugin="quixbugs").config["search"] or \
        _resolved(tmp_path, plugin="quixbugs").config["search"]["pinned"] == []


def test_evolution_does_not_vary_a_key_the_user_set(tmp_path, data_dir):
    out = tmp_path / "run"
    result = run_coral("run", "--plugin", "evolution", "--temperature", "0.2", "--limit", "1",
                       "--samples", "1", "--population", "2", "--generations", "1",
                       "--out", str(out), "--json", env=coral_env(data_dir))
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("model.temperature is set explicitly") == 1
    import json

    trials = json.loads(result.stdout)["trials"]
    assert len(trials) == 2
    assert {t["overrides"]["model.temperature"] for t in trials} == {0.2}


def test_a_flag_beats_the_files_own_grid_too(tmp_path):
    text = '[search]\nstrategy = "grid"\n[search.space]\n"model.temperature" = [0.2, 0.4]\n' \
           '"model.top_p" = [0.9, 0.95]\n'
    resolved = _resolved(tmp_path, text, plugin="quixbugs", temperature=0.5)
    assert resolved.config["search"]["space"] == {"model.top_p": [0.9, 0.95]}
    mine = _resolved(tmp_path, text + "[model]\ntemperature = 0.7\n", plugin="quixbugs")
    assert set(mine.config["search"]["space"]) == {"model.temperature", "model.top_p"}, \
        "a file that sets a key and varies it in its own space: its space is kept"
    assert mine.notes == ()


def test_nothing_changes_without_explicit_settings(tmp_path):
    assert _resolved(tmp_path).notes == ()


def test_the_run_says_so_once(data_dir):
    result = run_coral("run", "--plugin", "fim", "--temperature", "0.2", "--limit", "2",
                       "--dry-run", env=coral_env(data_dir))
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("model.temperature is set explicitly") == 1
    assert "search: grid" in result.stdout and '"model.temperature"' not in result.stdout
