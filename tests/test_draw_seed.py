"""The seed of a hosted check's test process: the same for the same program and test, kept
from the program (a key of the machine's, outside every sandbox), shared with Ray actors."""

from __future__ import annotations

import os
import stat

import pytest

from coral_core.errors import UserError
from coral_core.executors.ray_cluster import coral_environment
from coral_core.hosted import draws as seeds


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CORAL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(seeds.KEY_VARIABLE, raising=False)
    seeds.key.cache_clear()
    yield tmp_path / "cache"
    seeds.key.cache_clear()


def test_the_key_is_made_once_private_and_kept(cache):
    first = seeds.draw_seed("def f(): pass\n", "def check(c): pass\n")
    path = cache / seeds.KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(path.read_text().strip()) == 64
    seeds.key.cache_clear()  # a later run reads the same key: the same draws
    assert seeds.draw_seed("def f(): pass\n", "def check(c): pass\n") == first
    assert seeds.draw_seed("def f(): return 1\n", "def check(c): pass\n") != first
    assert seeds.draw_seed("def f(): pass\n", "def check(c): return\n") != first
    assert not [p for p in cache.iterdir() if p.name != seeds.KEY_FILE]  # no drafts left


def test_another_key_draws_otherwise_and_the_variable_wins(cache, monkeypatch):
    mine = seeds.draw_seed("x = 1\n", "t")
    monkeypatch.setenv(seeds.KEY_VARIABLE, "0" * 64)
    seeds.key.cache_clear()
    assert seeds.draw_seed("x = 1\n", "t") != mine
    assert seeds.key() == "0" * 64


def test_a_key_file_that_is_a_link_or_garbage_is_refused(cache, tmp_path):
    """Never read through a link; never replaced by a key for one process only (the same
    program's verdict then changed from run to run: a red-team pass)."""
    cache.mkdir()
    elsewhere = tmp_path / "planted"
    elsewhere.write_text("a" * 64)
    (cache / seeds.KEY_FILE).symlink_to(elsewhere)
    with pytest.raises(UserError, match="cannot keep the test key in Coral's cache"):
        seeds.key()
    seeds.key.cache_clear()
    (cache / seeds.KEY_FILE).unlink()
    (cache / seeds.KEY_FILE).write_text("short\n")
    with pytest.raises(UserError, match="holds no key"):
        seeds.key()


def test_an_unwritable_cache_is_refused_unless_the_variable_gives_the_key(cache, monkeypatch):
    monkeypatch.setenv("CORAL_CACHE_DIR", "/proc/coral-cannot-be-here")
    seeds.key.cache_clear()
    with pytest.raises(UserError, match="set CORAL_CACHE_DIR to a folder you can write"):
        seeds.key()
    monkeypatch.setenv(seeds.KEY_VARIABLE, "k" * 64)
    seeds.key.cache_clear()
    assert seeds.draw_seed("p", "t") == seeds.draw_seed("p", "t")


def test_ray_actors_are_given_the_drivers_key(cache):
    assert coral_environment()[seeds.KEY_VARIABLE] == seeds.key()
    assert os.environ.get(seeds.KEY_VARIABLE) is None  # the driver's own stays unset
