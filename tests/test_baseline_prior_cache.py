"""The baseline's prior kept in Coral's cache: read back while its key holds, learned
afresh for other data or a damaged file, and never a reason for a run to fail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coral_core.types import Prompt, TrainingExample
from coral_plugins.models.baseline import prior_cache
from coral_plugins.models.baseline.prior import SHRINK, learn_prior

BUGGY, FIXED = "def f(a, b):\n    return a - b\n", "def f(a, b):\n    return a + b\n"


def _examples(buggy: str = BUGGY) -> list[TrainingExample]:
    return [TrainingExample(task, Prompt(instruction="fix it"), answer=FIXED, source=source,
                            solution=FIXED)
            for task, source in (("one", buggy), ("two", "def g(x):\n    return -x\n"))]


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("CORAL_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / prior_cache.FOLDER


def _stored(cache: Path) -> Path:
    files = list(cache.glob("prior-*.json"))
    assert len(files) == 1, files
    return files[0]


def test_a_prior_is_learned_once_then_read_back(cache) -> None:
    examples = _examples()
    first = prior_cache.stored_prior(examples)
    assert first == learn_prior(examples)
    path = _stored(cache)
    assert path.name == f"prior-{prior_cache.prior_key(examples, SHRINK)}.json"
    # what is read back is the file's: change a count the file holds, consistently
    data = json.loads(path.read_text())
    data["prior"]["kinds"]["proposed"]["binary_op"] += 5
    path.write_text(json.dumps(data))
    again = prior_cache.stored_prior(examples)
    assert again.kinds.proposed["binary_op"] == first.kinds.proposed["binary_op"] + 5
    assert again.families == first.families and again.problems == ("one", "two")


def test_other_data_or_another_shrinkage_is_another_key(cache) -> None:
    examples = _examples()
    keys = {prior_cache.prior_key(examples, SHRINK), prior_cache.prior_key(examples, 10.0),
            prior_cache.prior_key(_examples("def f(a, b):\n    return b - a\n"), SHRINK)}
    assert len(keys) == 3
    assert prior_cache.prior_key(_examples(), SHRINK) in keys  # and the same data, the same


@pytest.mark.parametrize("damage", [
    "not json", "[]", '{"key": "another"}', "{}",
    "fixing over proposed", "a count that is text", "a count that is negative",
    "a count that is true", "a count too large for a float", "a table missing",
    "problems that are not text",
    "another shrinkage", "a link out of the cache",
])
def test_a_damaged_file_is_relearned_and_replaced(cache, damage) -> None:
    examples = _examples()
    learned = prior_cache.stored_prior(examples)
    path = _stored(cache)
    data = json.loads(path.read_text())
    kinds = data["prior"]["kinds"]
    if damage == "fixing over proposed":
        kinds["fixing"]["binary_op"] = kinds["proposed"]["binary_op"] + 1
    elif damage == "a count that is text":
        kinds["proposed"]["binary_op"] = "1"
    elif damage == "a count that is negative":
        kinds["fixing"]["binary_op"] = -1
    elif damage == "a count that is true":  # where none fixed: JSON's true is not 1
        kinds["fixing"][min(k for k, n in kinds["fixing"].items() if n == 0)] = True
    elif damage == "a count too large for a float":
        kinds["proposed"]["binary_op"] = kinds["fixing"]["binary_op"] = 10 ** 400
    elif damage == "a table missing":
        del data["prior"]["loop_exits"]
    elif damage == "problems that are not text":
        data["prior"]["problems"] = [1, 2]
    elif damage == "another shrinkage":
        data["prior"]["shrink"] = 10.0
    if damage == "a link out of the cache":
        elsewhere = cache.parent.parent / "elsewhere.json"
        elsewhere.write_text(json.dumps(data))
        path.unlink()
        path.symlink_to(elsewhere)
    elif damage in ("not json", "[]", '{"key": "another"}', "{}"):
        path.write_text(damage)
    else:
        path.write_text(json.dumps(data))
    assert prior_cache.stored_prior(examples) == learned
    assert not _stored(cache).is_symlink()
    assert prior_cache.stored_prior(examples) == learned  # the replacement reads back


def test_a_folder_linked_out_of_the_cache_is_neither_read_nor_written(cache, tmp_path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    cache.parent.mkdir(parents=True)
    cache.symlink_to(outside)
    assert prior_cache.stored_prior(_examples()) == learn_prior(_examples())
    assert list(outside.iterdir()) == []


def test_a_cache_that_cannot_be_written_costs_only_the_time(tmp_path, monkeypatch) -> None:
    (tmp_path / "file").write_text("not a folder")
    for where in (tmp_path / "file", Path("/proc/coral-cannot-be-here")):
        monkeypatch.setenv("CORAL_CACHE_DIR", str(where))
        assert prior_cache.stored_prior(_examples()) == learn_prior(_examples())
