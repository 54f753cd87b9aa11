"""Experiment configuration: TOML, merged preset < file < flags, checked key by key.

Unknown keys, wrong types, out-of-range values and NaN or infinite numbers are errors that
name the key and the file (and its line); nothing is silently dropped. What is valid lives in
`schema`; this module reads, merges, resolves a trial's overrides and digests.

Merging (`merge`, `resolve`): a later layer wins key by key, and tables merge key by key at
every depth, except that
- `evaluators.weights` given as a table replaces the one before it (a user's weights are the
  whole set); a dotted override path into it (`evaluators.weights.bugfix`) sets that entry;
- `[search.space]` merges dimension by dimension, each dimension's values replacing whole;
- lists replace;
- a layer whose `model.spec` switches backend (the part before ':') drops the earlier
  `model.options` and `model.base_url` when they were given beside a `model.spec` (they
  belonged to that backend); options given in a layer that names no model (a config file
  with `[model.options]` only) go with whichever model is chosen, `--model` included.
"""

from __future__ import annotations

import copy
import datetime
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

import tomli_w

from coral_core.files import decoding
from coral_core.files import fileio
from coral_core.config.schema import (DEFAULTS, SCHEMA, TYPE_NAMES, Invalid, check,
                                      check_override, kind_of, parse_path)
from coral_core.errors import UserError
from coral_core.config.settings import SETTINGS, some_weight

__all__ = ["DEFAULTS", "SCHEMA", "TYPE_NAMES", "Layer", "validate", "read_file", "merge",
           "locate", "sets", "override_layer", "resolve", "digest", "absolute_paths", "dump",
           "loads_resolved"]

# Keys that may differ when a run is relocated (resumed elsewhere): not part of its digest.
RELOCATABLE = tuple((s.section, s.key) for s in SETTINGS if s.relocatable)
PATH_KEYS = tuple((s.section, s.key) for s in SETTINGS if s.path)  # made absolute
REPLACED_TABLES = {("evaluators", "weights")}

_PART = r"""(?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|'[^']*')"""
_KEY = rf"{_PART}(?:\s*\.\s*{_PART})*"
_HEADER = re.compile(rf"\s*\[\[?\s*({_KEY})\s*\]\]?\s*(?:#.*)?$")
_ASSIGN = re.compile(rf"\s*({_KEY})\s*=")


def _dotted_key(text: str) -> str:
    return ".".join(p[1:-1] if p[0] in "\"'" else p for p in re.findall(_PART, text))


def _line_of(text: str, path: tuple[str, ...]) -> int | None:
    """Best-effort line of the key `path` names (tomllib does not report positions): where it
    is set, else the first line inside it, else the line of the deepest table holding it."""
    target = re.sub(r"\[\d+\]", "", ".".join(path))  # 'options.xs[1]' is set on 'xs ='
    current, inside, around = "", None, (-1, None)
    for number, line in enumerate(text.splitlines(), 1):
        header = _HEADER.match(line)
        if header:
            current = full = _dotted_key(header.group(1))
        else:
            assign = _ASSIGN.match(line)
            if not assign:
                continue
            full = ".".join(filter(None, (current, _dotted_key(assign.group(1)))))
        if full == target:
            return number
        if inside is None and full.startswith(target + "."):
            inside = number
        if target.startswith(full + ".") and len(full) > around[0]:
            around = (len(full), number)
    return inside or around[1]


def _where(origin: str, text: str, path: tuple[str, ...]) -> str:
    line = _line_of(text, path) if text else None
    return origin + (f" (line {line})" if line else "")


class Layer(dict):
    """A validated layer that remembers where it came from, so that a value found wrong
    later (a split the data set does not have) can be reported at its file and line."""

    def __init__(self, values: Mapping[str, Any], origin: str, text: str = "") -> None:
        super().__init__(values)
        self.origin = origin
        self.text = text


def sets(layer: Mapping[str, Any], path: tuple[str, ...]) -> bool:
    """Whether `layer` gives a value at `path`."""
    value: Any = layer
    for part in path:
        if not isinstance(value, Mapping) or part not in value:
            return False
        value = value[part]
    return True


def locate(layers: Sequence[Mapping[str, Any]], path: tuple[str, ...]) -> str:
    """Where the value at `path` comes from: the last layer that sets it, as 'FILE (line
    N)', 'command line' or "experiment 'NAME'"; 'the defaults' when no layer does."""
    for layer in reversed(layers):
        if sets(layer, path):
            origin = getattr(layer, "origin", "") or "configuration"
            return _where(origin, getattr(layer, "text", ""), path)
    return "the defaults"


def validate(data: Mapping[str, Any], origin: str, text: str = "") -> Layer:
    """Check sections, keys, types and ranges; return a normalised copy (ints -> floats)
    that remembers `origin` and `text` (see `locate`)."""
    result: dict[str, Any] = {}
    try:
        _refuse_unwritable(data, ())
        for section, values in data.items():
            if section not in SCHEMA:
                kind_of((section,))  # raises: unknown section, naming the known ones
            if not isinstance(values, dict):
                raise Invalid((section,), f"[{section}] must be a table")
            result[section] = {key: check((section, key), value)
                               for key, value in values.items()}
    except Invalid as error:
        raise UserError(f"{_where(origin, text, error.path)}: {error}") from None
    return Layer(result, origin, text)


_SURROGATES = re.compile("[\ud800-\udfff]")


def _refuse_unwritable(value: Any, path: tuple[str, ...]) -> None:
    """Values no config.toml can hold. TOML's dates and times are no setting's type, and in
    the free-form tables (search spaces, plugin options) one reached the run's digest,
    which cannot encode it; a path of bytes that are not UTF-8 (`--out $'r\\xff'`) reached
    config.toml, which cannot either (both were tracebacks)."""
    if isinstance(value, (datetime.date, datetime.time)):
        raise Invalid(path, f"'{'.'.join(path)}' is a TOML date or time, which no setting "
                            "takes (quote it for a string)")
    if isinstance(value, str) and _SURROGATES.search(value):
        raise Invalid(path, f"'{'.'.join(path)}' holds bytes that are not UTF-8 (a file "
                            "name in another encoding?), which config.toml cannot record")
    if isinstance(value, Mapping):
        for key, item in value.items():
            _refuse_unwritable(item, (*path, str(key)))
    elif isinstance(value, list):
        for item in value:
            _refuse_unwritable(item, path)


def read_file(path: str | Path) -> Layer:
    path = Path(path)
    text = fileio.read_text(path, limit=fileio.CONFIG_BYTES, what="config")
    text = text.removeprefix("\ufeff")  # the lines an error names are counted without it
    return validate(_toml(text, str(path)), str(path), text)


class _Entries(dict):
    """Entries set one by one by dotted override paths (`evaluators.weights.bugfix`): they
    merge into the table before them even where a whole table would replace it."""


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return copy.deepcopy(value)


def _deep_merge(current: Mapping[str, Any], value: Mapping[str, Any]) -> dict[str, Any]:
    result = _plain(current)
    for key, item in value.items():
        if isinstance(item, Mapping) and isinstance(result.get(key), dict):
            result[key] = _deep_merge(result[key], item)
        else:
            result[key] = _plain(item)
    return result


def _backend(spec: str) -> str:
    return spec.partition(":")[0]


def _apply(merged: dict[str, Any], layer: Mapping[str, Any],
           loose: dict[str, Any] | None = None) -> dict[str, Any]:
    """Merge one validated layer into `merged` in place (the rules in the module docstring).

    `loose`: the model options given so far in layers that named no model; they go with
    whichever model is chosen, while options given beside a `model.spec` belong to that
    backend and are dropped when a later layer switches backend. Returns the new `loose`.
    """
    loose = _plain(loose or {})
    model = layer.get("model", {})
    for section, values in layer.items():
        target = merged.setdefault(section, {})
        if (section == "model" and "spec" in values
                and _backend(values["spec"]) != _backend(target.get("spec", ""))):
            target["options"] = _plain(loose)
            target["base_url"] = ""
        for key, value in values.items():
            current = target.get(key)
            if (section, key) == ("search", "space") and isinstance(current, dict):
                target[key] = {**_plain(current), **_plain(value)}
            elif (isinstance(value, Mapping) and isinstance(current, dict)
                  and ((section, key) not in REPLACED_TABLES or isinstance(value, _Entries))):
                target[key] = _deep_merge(current, value)
            else:
                target[key] = _plain(value)
    if "options" in model and "spec" not in model:
        loose = _deep_merge(loose, model["options"])
    return loose


def merge(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """The defaults, then each validated layer in order (later layers win)."""
    merged = copy.deepcopy(DEFAULTS)
    loose: dict[str, Any] = {}
    for layer in layers:
        loose = _apply(merged, layer, loose)
    return merged


def override_layer(overrides: Mapping[str, Any], origin: str) -> dict[str, Any]:
    """A validated layer from what a trial changes: flat dotted keys ({"model.temperature":
    0.2, "evaluators.weights.bugfix": 0.5}) and/or TOML-shaped sections ({"model": {...}}).
    Keys no trial may change (`run.*`, `search.*`, where the run executes or finds its data)
    are refused, as are unknown keys, bad values and a key given twice."""
    layer: dict[str, Any] = {}
    given: list[tuple[str, ...]] = []
    try:
        for name, value in overrides.items():
            if not isinstance(name, str):
                raise Invalid((repr(name),), f"override key {name!r} is not a string")
            if "." in name:
                items = [(parse_path(name), value)]
            elif name in SCHEMA and isinstance(value, Mapping):
                items = [((name, key), item) for key, item in value.items()]
            else:
                items = [((name,), value)]  # an unknown section, or a section set to a value
            for path, item in items:
                item = check_override(path, _plain(item))
                for other in given:
                    shorter = min(len(other), len(path))
                    if other[:shorter] == path[:shorter]:
                        also = "" if other == path else f" (also as '{'.'.join(other)}')"
                        raise Invalid(path, f"'{'.'.join(path)}' is set twice{also}")
                given.append(path)
                section, key, *rest = path
                if not rest:
                    layer.setdefault(section, {})[key] = item
                    continue
                entries = layer.setdefault(section, {}).setdefault(key, _Entries())
                for part in rest[:-1]:
                    entries = entries.setdefault(part, {})
                entries[rest[-1]] = item
    except Invalid as error:
        raise UserError(f"{origin}: {error}") from None
    return layer


def resolve(base: Mapping[str, Any], overrides: Mapping[str, Any],
            origin: str = "search strategy overrides") -> dict[str, Any]:
    """A trial's configuration: a copy of the resolved `base` (every key kept) with the
    override layer applied by the same rules as `merge`."""
    resolved = _plain(base)
    _apply(resolved, override_layer(overrides, origin))
    # a key checked on its own cannot see the table it merges into (a red-team pass: a
    # grid's evaluators.weights.bugfix = 0 left every weight 0, which no file may set)
    why = some_weight(resolved.get("evaluators", {}).get("weights") or {})
    if why is not True:
        raise UserError(f"{origin}: 'evaluators.weights' {why}")
    return resolved


def digest(config: Mapping[str, Any]) -> str:
    """sha256 of the resolved configuration's canonical JSON, leaving out the keys a resumed
    run may be relocated with (`dataset.data_dir`, `model.base_url`, `run.out`)."""
    kept = {section: dict(values) for section, values in config.items()}
    for section, key in RELOCATABLE:
        kept.get(section, {}).pop(key, None)
    text = json.dumps(kept, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def absolute_paths(config: Mapping[str, Any], base: Path) -> dict[str, Any]:
    """A copy with non-empty `dataset.data_dir`, `model.adapter` and `run.out` made absolute
    against `base` (`~` expanded; the paths need not exist), and the data set's task file
    (`dataset.options.path`, `--data`) where it names one that exists, so that a run
    resumes from any folder."""
    result = _plain(config)
    for section, key in PATH_KEYS:
        value = result.get(section, {}).get(key)
        if value:
            result[section][key] = _absolute(value, base)
    options = result.get("dataset", {}).get("options")
    if isinstance(options, dict) and isinstance(options.get("path"), str) and options["path"]:
        found = _absolute(options["path"], base)
        if os.path.exists(found):  # a file; a plugin's `path` may be a URL or a hub id
            options["path"] = found
    return result


def _absolute(value: str, base: Path) -> str:
    return os.path.abspath(os.path.join(os.fspath(base), os.path.expanduser(value)))


def dump(config: Mapping[str, Any]) -> str:
    return tomli_w.dumps(config)


def loads_resolved(text: str, origin: str) -> dict[str, Any]:
    """Read back a resolved config.toml written by `dump` (resume)."""
    return merge(validate(_toml(text, origin), origin, text))


def _toml(text: str, origin: str) -> dict[str, Any]:
    return decoding.toml_document(text, f"{origin}: invalid TOML")
