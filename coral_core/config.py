"""Experiment configuration: TOML, merged preset < file < flags, checked key by key.

Unknown keys and wrong types are errors that name the key and the file (and its line);
nothing is silently dropped.
"""

from __future__ import annotations

import copy
import re
import sys
from pathlib import Path
from typing import Any, Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

import tomli_w

from .errors import UserError

# section -> key -> (type, check or None). "table" values are free-form plugin options.
SCHEMA: dict[str, dict[str, tuple[str, Any]]] = {
    "dataset": {
        "name": ("str", None), "split": ("str", None), "problems": ("list[str]", None),
        "data_dir": ("str", None), "options": ("table", None),
    },
    "model": {
        "spec": ("str", None), "base_url": ("str", None), "adapter": ("str", None),
        "temperature": ("float", lambda v: v >= 0 or "must be >= 0"),
        "top_p": ("float", lambda v: 0 < v <= 1 or "must be in (0, 1]"),
        "top_k": ("int", lambda v: v >= 0 or "must be >= 0"),
        "max_new_tokens": ("int", lambda v: v >= 1 or "must be >= 1"),
        "repetition_penalty": ("float", lambda v: v > 0 or "must be > 0"),
        "stop": ("list[str]", None),
        "batch_size": ("int", lambda v: v >= 1 or "must be >= 1"),
        "options": ("table", None),
    },
    "evaluators": {
        "use": ("list[str]", None), "weights": ("table[float]", None), "gate": ("str", None),
        "options": ("table", None),
    },
    "search": {"strategy": ("str", None), "options": ("table", None)},
    "execution": {
        "executor": ("str", None), "ray_address": ("str", None),
        "workers": ("int", lambda v: v >= 0 or "must be >= 0 (0 = one per core)"),
        "test_timeout": ("float", lambda v: v > 0 or "must be > 0"),
        "timeout_factor": ("float", lambda v: v >= 0 or "must be >= 0 (0 = off)"),
        "timeout_floor": ("float", lambda v: v > 0 or "must be > 0"),
        "memory_mb": ("int", lambda v: v >= 64 or "must be >= 64"),
        "isolation": ("str", lambda v: v in ("auto", "bwrap", "none")
                      or "must be auto, bwrap or none"),
    },
    "run": {
        "samples": ("int", lambda v: v >= 1 or "must be >= 1"),
        "seed": ("int", lambda v: v >= 0 or "must be >= 0"),
        "out": ("str", None),
    },
}

DEFAULTS: dict[str, dict[str, Any]] = {
    "dataset": {"name": "", "split": "test", "problems": [], "data_dir": "", "options": {}},
    "model": {
        "spec": "baseline", "base_url": "", "adapter": "", "temperature": 0.8, "top_p": 0.95,
        "top_k": 0,
        "max_new_tokens": 512, "repetition_penalty": 1.0, "stop": [], "batch_size": 16,
        "options": {},
    },
    "evaluators": {"use": ["tests"], "weights": {}, "gate": "", "options": {}},
    "search": {"strategy": "single", "options": {}},
    "execution": {
        "executor": "local", "ray_address": "", "workers": 0, "test_timeout": 5.0,
        "timeout_factor": 0.0, "timeout_floor": 0.25, "memory_mb": 1024, "isolation": "auto",
    },
    "run": {"samples": 10, "seed": 0, "out": ""},
}

_TYPE_NAMES = {"str": "a string", "int": "an integer", "float": "a number",
               "list[str]": "a list of strings", "table": "a table",
               "table[float]": "a table of numbers"}


def _kind_ok(kind: str, value: Any) -> bool:
    if kind == "str":
        return isinstance(value, str)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "list[str]":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if kind == "table":
        return isinstance(value, dict)
    if kind == "table[float]":
        return isinstance(value, dict) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value.values()
        )
    raise AssertionError(kind)


def _line_of(text: str, section: str, key: str) -> int | None:
    """Best-effort line of `key` in `[section]` (tomllib does not report positions)."""
    current = ""
    for number, line in enumerate(text.splitlines(), 1):
        header = re.match(r"\s*\[\s*([^\]]+?)\s*\]", line)
        if header:
            current = header.group(1)
            if current == f"{section}.{key}" or (not key and current == section):
                return number
            continue
        if re.match(rf"\s*{re.escape(key)}\s*=", line) and current == section:
            return number
        if re.match(rf"\s*{re.escape(section)}\.{re.escape(key)}\s*=", line) and current == "":
            return number
    return None


def validate(data: Mapping[str, Any], origin: str, text: str = "") -> dict[str, Any]:
    """Check sections, keys, types and ranges; return a normalised copy (ints -> floats)."""
    def where(section: str, key: str) -> str:
        line = _line_of(text, section, key) if text else None
        return f"{origin}" + (f" (line {line})" if line else "")

    result: dict[str, Any] = {}
    for section, values in data.items():
        if section not in SCHEMA:
            raise UserError(f"{where(section, '')}: unknown section [{section}] "
                            f"(known: {', '.join(SCHEMA)})")
        if not isinstance(values, dict):
            raise UserError(f"{where(section, '')}: [{section}] must be a table")
        result[section] = {}
        for key, value in values.items():
            if key not in SCHEMA[section]:
                raise UserError(f"{where(section, key)}: unknown key '{section}.{key}' "
                                f"(known: {', '.join(SCHEMA[section])})")
            kind, check = SCHEMA[section][key]
            if not _kind_ok(kind, value):
                raise UserError(f"{where(section, key)}: '{section}.{key}' must be "
                                f"{_TYPE_NAMES[kind]}, got {type(value).__name__}")
            if kind == "float":
                value = float(value)
            if kind == "table[float]":
                value = {k: float(v) for k, v in value.items()}
                if any(v < 0 for v in value.values()):
                    raise UserError(f"{where(section, key)}: '{section}.{key}' values must be >= 0")
            if check is not None:
                verdict = check(value)
                if verdict is not True:
                    raise UserError(f"{where(section, key)}: '{section}.{key}' {verdict}")
            result[section][key] = copy.deepcopy(value)
    return result


def read_file(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise UserError(f"cannot read config {path}: {reason}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise UserError(f"{path}: invalid TOML: {error}") from None
    return validate(data, str(path), text)


def merge(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """Later layers win key by key; tables of plugin options merge one level deep, while a
    weights table replaces the one before it (a user's weights are the whole set)."""
    merged = copy.deepcopy(DEFAULTS)
    for layer in layers:
        for section, values in layer.items():
            for key, value in values.items():
                current = merged[section].get(key)
                if SCHEMA[section][key][0] == "table" and isinstance(current, dict):
                    merged[section][key] = {**current, **copy.deepcopy(value)}
                else:
                    merged[section][key] = copy.deepcopy(value)
    return merged


def dump(config: Mapping[str, Any]) -> str:
    return tomli_w.dumps(config)


def loads_resolved(text: str, origin: str) -> dict[str, Any]:
    """Read back a resolved config.toml written by `dump` (resume)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise UserError(f"{origin}: invalid TOML: {error}") from None
    return merge(validate(data, origin, text))
