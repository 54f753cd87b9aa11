"""docs/configuration.md lists every key with its type, default and meaning, generated from
the schema; the README's configuration example is a valid experiment file."""

from __future__ import annotations

import re

from conftest import ROOT
from coral_core.config import experiment as configuration
from coral_core.config.reference import MEANINGS, reference
from coral_core.config.schema import SCHEMA


def test_every_key_has_a_meaning():
    assert {s: set(keys) for s, keys in SCHEMA.items()} == {
        s: set(keys) for s, keys in MEANINGS.items()}


def test_configuration_md_holds_the_generated_reference_unchanged():
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert reference() in text, ("docs/configuration.md is out of date: regenerate its "
                                 "reference part with coral_core.config.reference.reference()")


def _toml_blocks(path):
    text = (ROOT / path).read_text(encoding="utf-8")
    return re.findall(r"```toml\n(.*?)```", text, re.S)


def test_documented_examples_are_valid_experiment_files(tmp_path):
    blocks = (_toml_blocks("README.md") + _toml_blocks("docs/configuration.md")
              + _toml_blocks("docs/ray.md"))
    assert len(blocks) >= 2
    for number, block in enumerate(blocks):
        path = tmp_path / f"example{number}.toml"
        path.write_text(block)
        configuration.merge(configuration.read_file(path))  # raises on any unknown key


def test_readme_points_to_the_full_reference():
    assert "docs/configuration.md" in (ROOT / "README.md").read_text(encoding="utf-8")
