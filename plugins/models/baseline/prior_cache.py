"""The learned prior, kept between processes in Coral's cache.

Learning it compares every single-edit variant of the training programs with their fixes
(about 3 s here), and every process that used the baseline did it again: each `coral run`,
each Ray actor, each test that runs the default model. The prior depends only on the
training data, the shrinkage, the Python that parses, and the code that proposes and
labels edits, so it is stored under a key made of all of them
(`baseline/prior-KEY.json` in Coral's cache) and read back while the key matches: a
change to any of them is a new key, and so a prior learned afresh. A file that cannot be
read, does not parse or holds anything but consistent counts is relearned and replaced; a
cache that cannot be written costs the time and nothing else.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import threading
from pathlib import Path
from typing import Any, Sequence

from coral_core.data.locate import cache_folder, cache_root
from coral_core.errors import UserError
from coral_core.files.atomic import write_text_atomic
from coral_core.files.fileio import is_within, read_text
from coral_core.types import TrainingExample

from .prior import SHRINK, Counts, Prior, examples_digest, learn_prior

log = logging.getLogger(__name__)

FORMAT = 1
FOLDER = "baseline"
_LIMIT = 1 << 20  # bytes of a stored prior (a few kilobytes in practice)
_MOST = 1 << 53  # a count: more would overflow the rates' floats (a red-team review)
_TABLES = ("kinds", "families", "loop_exits")

_MEMORY: dict[tuple[str, float], Prior] = {}
_LOCK = threading.Lock()


def cached_prior(examples: Sequence[TrainingExample], shrink: float = SHRINK) -> Prior:
    """`learn_prior`, once per process for the same training data, and once per machine
    while Coral's cache keeps it (`stored_prior`)."""
    key = (examples_digest(examples), shrink)
    with _LOCK:
        if key not in _MEMORY:
            _MEMORY[key] = stored_prior(examples, shrink)
        return _MEMORY[key]


def stored_prior(examples: Sequence[TrainingExample], shrink: float = SHRINK) -> Prior:
    """The prior stored under this data's and this code's key, else learned and stored."""
    try:
        key = prior_key(examples, shrink)
    except OSError as error:  # a source file that cannot be read: nothing to key on
        log.debug("baseline prior not cached: %s", error)
        return learn_prior(examples, shrink)
    root = cache_root()
    path = root / FOLDER / f"prior-{key}.json"
    try:  # a link out of the cache is not the cache's
        text = read_text(path, limit=_LIMIT, what="stored prior", within=root)
        prior = _parsed(json.loads(text), key, shrink)
    except (UserError, ValueError, RecursionError) as error:  # missing, unreadable, not JSON
        log.debug("baseline prior not read from %s: %s", path, error)
        prior = None
    if prior is not None:
        log.debug("baseline prior read from %s", path)
        return prior
    prior = learn_prior(examples, shrink)
    try:
        cache_folder(FOLDER)
        if not is_within(path.parent, root):  # neither read nor written through a link
            raise UserError(f"{path.parent} leads out of {root}")
        write_text_atomic(path, json.dumps({"key": key, "prior": _plain(prior)}))
    except (UserError, OSError) as error:
        log.debug("baseline prior not stored in %s: %s", path, error)
    return prior


def prior_key(examples: Sequence[TrainingExample], shrink: float) -> str:
    """A SHA-256 of what the prior is a function of: the training pairs, the shrinkage,
    the Python version (its parser and `ast`) and this package's source files."""
    digest = hashlib.sha256(f"{FORMAT}\0{shrink!r}\0{sys.version}\0".encode())
    digest.update(examples_digest(examples).encode())
    for source in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    return digest.hexdigest()


def _plain(prior: Prior) -> dict[str, Any]:
    tables = {name: {"proposed": dict(getattr(prior, name).proposed),
                     "fixing": dict(getattr(prior, name).fixing)} for name in _TABLES}
    return {**tables, "problems": list(prior.problems), "fixed": list(prior.fixed),
            "shrink": prior.shrink}


def _parsed(data: Any, key: str, shrink: float) -> Prior | None:
    """The stored prior, or None unless it has every field `learn_prior` makes, each of
    its type, with counts that a prior could have (whole, 0 to 2**53, fixing at most
    proposed). Whether they are the counts this data would give is the key's to say."""
    if not isinstance(data, dict) or data.get("key") != key:
        return None
    stored = data.get("prior")
    if not isinstance(stored, dict) or stored.get("shrink") != shrink:
        return None
    tables = [_counts(stored.get(name)) for name in _TABLES]
    names = [stored.get("problems"), stored.get("fixed")]
    if any(table is None for table in tables) or not all(
            isinstance(value, list) and all(isinstance(item, str) for item in value)
            for value in names):
        return None
    kinds, families, loop_exits = tables
    return Prior(kinds, families, loop_exits, tuple(names[0]), tuple(names[1]), shrink)


def _counts(table: Any) -> Counts | None:
    if not isinstance(table, dict) or set(table) != {"proposed", "fixing"}:
        return None
    proposed, fixing = table["proposed"], table["fixing"]
    if not all(isinstance(counts, dict) and all(
            isinstance(name, str) and type(count) is int and 0 <= count <= _MOST
            for name, count in counts.items()) for counts in (proposed, fixing)):
        return None
    if set(fixing) != set(proposed) or any(fixing[n] > proposed[n] for n in fixing):
        return None
    return Counts(proposed, fixing)
