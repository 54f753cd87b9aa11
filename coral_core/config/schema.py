"""What an experiment configuration may hold: sections, keys, types, ranges and defaults
(derived from the table of settings in `coral_core.config.settings`), and the checks that a value,
a dotted override path or a `[search.space]` dimension fits its key.

`coral_core.config.experiment` reads files, merges layers and says where in a file a problem
is; this module only decides what is valid. A failed check raises `Invalid`, whose `path` names the
offending key (a tuple of its parts) and whose text names it too.
"""

from __future__ import annotations

import copy
import math
from typing import Any

from coral_core.errors import UserError
from coral_core.config.settings import (  # noqa: F401 - the bounds are imported from here too
    DAY, INT_BOUND, MAX_NEW_TOKENS, MAX_SAMPLES, MAX_TEMPERATURE, MAX_TRIALS, SETTINGS,
    defaults,
)
from coral_core.suggest import did_you_mean


class Invalid(ValueError):
    """A value that does not fit the schema; `path` is the offending key as a tuple of parts."""

    def __init__(self, path: tuple[str, ...], message: str) -> None:
        super().__init__(message)
        self.path = tuple(path)


class OptionInvalid(UserError):
    """A plugin's option (a search strategy's, checked when it is built) out of its bounds;
    `path` names the key, so the caller can say which file and line set it."""

    def __init__(self, path: tuple[str, ...], message: str) -> None:
        super().__init__(message)
        self.path = tuple(path)

    def __reduce__(self) -> tuple[Any, tuple[tuple[str, ...], str]]:
        # raised in a Ray actor (a model's check where it is built), it crosses a pickle
        return (type(self), (self.path, str(self)))


# What a search may ask for, checked before the run directory exists (docs/search.md):
MAX_BATCH = 4096  # trials a strategy proposes per ask (the most `parallel_trials` runs)
MAX_DIMENSIONS = 32  # keys in [search.space]
MAX_VALUES = 1000  # values in one dimension's list or choices (each is checked on its own)


# section -> key -> (kind, check or None), from the settings table. A check returns True or
# what is wrong. "table" values are free-form plugin options; "table[float]" maps names to
# numbers; "space" is [search.space].
SCHEMA: dict[str, dict[str, tuple[str, Any]]] = {
    section: {item.key: (item.kind, item.check) for item in SETTINGS if item.section == section}
    for section in dict.fromkeys(item.section for item in SETTINGS)
}

DEFAULTS: dict[str, dict[str, Any]] = defaults()

TYPE_NAMES = {"str": "a string", "bool": "true or false", "int": "an integer",
              "float": "a number",
              "list[str]": "a list of strings", "table": "a table",
              "table[float]": "a table of numbers", "space": "a table of search dimensions"}

# Keys no trial may change (prefixes match whole parts): they say how the run and the search
# work, or where the run lives and what it may use, not what it computes.
FIXED: dict[str, str] = {item.name: item.fixed for item in SETTINGS if item.fixed}

RANGE_KEYS = ("low", "high", "log", "int")


def dotted(path: tuple[str, ...]) -> str:
    return ".".join(path)


def parse_path(name: str) -> tuple[str, ...]:
    """'evaluators.weights.bugfix' -> ('evaluators', 'weights', 'bugfix')."""
    parts = tuple(name.split("."))
    if not all(parts):
        raise Invalid((name,), f"'{name}' is not a dotted key such as 'model.temperature'")
    return parts


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _kind_ok(kind: str, value: Any) -> bool:
    if kind == "str":
        return isinstance(value, str)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return _is_number(value)
    if kind == "list[str]":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if kind in ("table", "table[float]", "space"):
        return isinstance(value, dict)
    raise AssertionError(kind)


def _finite(path: tuple[str, ...], value: Any) -> None:
    """NaN and infinities are refused at any depth of a value (tables and lists included)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise Invalid(path, f"'{dotted(path)}' must be a finite number, got {value!r}")
    if isinstance(value, dict):
        for key, item in value.items():
            _finite(path + (str(key),), item)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _finite(path[:-1] + (f"{path[-1]}[{index}]",), item)


def kind_of(path: tuple[str, ...]) -> str:
    """The kind of the key a path names ('number' for an entry of a table of numbers, 'any'
    inside free-form options); unknown keys and paths into non-tables are `Invalid`."""
    section, key, rest = path[0], (path[1] if len(path) > 1 else None), path[2:]
    if section not in SCHEMA:
        raise Invalid(path[:1], f"unknown section [{section}]{did_you_mean(section, SCHEMA)} "
                                f"(known: {', '.join(SCHEMA)})")
    if key is None:
        raise Invalid(path, f"'{section}' is a section, not a key: name one as "
                            f"'{section}.KEY'")
    if key not in SCHEMA[section]:
        raise Invalid(path[:2], f"unknown key '{section}.{key}'"
                                f"{did_you_mean(key, SCHEMA[section])} "
                                f"(known: {', '.join(SCHEMA[section])})")
    kind = SCHEMA[section][key][0]
    if not rest:
        return kind
    if kind == "table":
        return "any"
    if kind == "table[float]" and len(rest) == 1:
        return "number"
    owner = path[:3] if kind == "table[float]" else path[:2]
    owner_kind = "a number" if kind == "table[float]" else TYPE_NAMES[kind]
    raise Invalid(path, f"'{dotted(path)}' does not exist: '{dotted(owner)}' is {owner_kind}")


def _got(value: Any) -> str:
    """What a value that is not a list of strings is: a list's first item of another kind
    is named ('got a list holding 1 (int)'; 'got list' said nothing)."""
    if isinstance(value, list):
        odd = next((v for v in value if not isinstance(v, str)), None)
        if odd is not None:
            return f"a list holding {odd!r} ({type(odd).__name__})"[:120]
    return type(value).__name__


def check(path: tuple[str, ...], value: Any) -> Any:
    """Check `value` for the key (or the entry inside a table) that `path` names; return a
    normalised copy (integers become floats where the key is a number)."""
    kind = kind_of(path)
    name = dotted(path)
    if kind == "any":
        _finite(path, value)
        return copy.deepcopy(value)
    if kind == "number" or kind == "float":
        if not _is_number(value):
            raise Invalid(path, f"'{name}' must be a number, got {type(value).__name__}")
        try:
            value = float(value)
        except OverflowError:  # an integer past what a float holds
            value = math.inf
        _finite(path, value)
        if kind == "number" and value < 0:
            raise Invalid(path, f"'{name}' must be >= 0")
        if kind == "number":
            return value
    elif not _kind_ok(kind, value):
        got = _got(value) if kind == "list[str]" else type(value).__name__
        raise Invalid(path, f"'{name}' must be {TYPE_NAMES[kind]}, got {got}")
    elif kind == "int" and not -INT_BOUND <= value < INT_BOUND:
        rule = SCHEMA[path[0]][path[1]][1]
        verdict = rule(value) if rule is not None else True  # the key's own range, if any
        raise Invalid(path, f"'{name}' " + (verdict if verdict is not True else
                                            "must be in [-2**63, 2**63 - 1] (64 bits)"))
    elif kind == "table[float]":
        value = {key: check(path + (key,), item) for key, item in value.items()}
    elif kind == "table":
        _finite(path, value)
        value = copy.deepcopy(value)
    elif kind == "space":
        value = check_space(value, path)
    else:
        value = copy.deepcopy(value)
    rule = SCHEMA[path[0]][path[1]][1]
    if rule is not None:
        verdict = rule(value)
        if verdict is not True:
            raise Invalid(path, f"'{name}' {verdict}")
    return value


def check_searchable(path: tuple[str, ...]) -> None:
    """Refuse a key that no trial (no search dimension, no override) may change."""
    name = dotted(path)
    for fixed, reason in FIXED.items():
        if name == fixed or name.startswith(fixed + "."):
            raise Invalid(path, f"'{name}' cannot vary between trials: {reason}")


def check_override(path: tuple[str, ...], value: Any) -> Any:
    """A value a trial sets: a known, searchable key, checked like any other value."""
    kind_of(path)
    check_searchable(path)
    return check(path, value)


def _dimensions(space: dict[str, Any], where: tuple[str, ...], prefix: tuple[str, ...] = ()):
    """(path, spec) for each dimension; nested tables (`model.temperature = [...]` written
    unquoted) are read as dotted paths until a list or a range/choices table."""
    for key, spec in space.items():
        try:
            path = prefix + parse_path(key)
        except Invalid as error:
            raise Invalid(where + prefix + (key,), f"[search.space] {error}") from None
        if isinstance(spec, dict) and spec and not set(spec) & {*RANGE_KEYS, "choices"}:
            yield from _dimensions(spec, where, path)
        else:
            yield path, spec


def check_space(space: dict[str, Any], where: tuple[str, ...] = ("search", "space")) -> dict:
    """Normalise [search.space] to {"section.key...": [values] | {low, high, log, int} |
    {choices: [values]}}; every dimension names a searchable key and every value fits it."""
    result: dict[str, Any] = {}
    for path, spec in _dimensions(space, where):
        name = dotted(path)
        try:
            if name in result:
                raise Invalid(path, f"'{name}' is listed twice")
            if len(result) == MAX_DIMENSIONS:
                raise Invalid(path, f"'{name}' is one dimension too many: a space has at "
                                    f"most {MAX_DIMENSIONS} keys")
            result[name] = _check_dimension(path, spec)
        except Invalid as error:
            raise Invalid(where + (name,), f"[search.space] {error}") from None
    return result


def _check_values(path: tuple[str, ...], values: Any, what: str) -> list[Any]:
    if not isinstance(values, list) or not values:
        raise Invalid(path, f"'{dotted(path)}' {what} must be a non-empty list")
    if len(values) > MAX_VALUES:
        raise Invalid(path, f"'{dotted(path)}' {what} has {len(values)} entries: at most "
                            f"{MAX_VALUES}")
    checked = [check_override(path, value) for value in values]
    for index, value in enumerate(checked):
        if any(type(other) is type(value) and other == value for other in checked[:index]):
            raise Invalid(path, f"'{dotted(path)}' {what} lists {value!r} twice")
    return checked


def _check_dimension(path: tuple[str, ...], spec: Any) -> Any:
    name = dotted(path)
    kind = kind_of(path)
    check_searchable(path)
    if isinstance(spec, list):
        return _check_values(path, spec, "values")
    if not isinstance(spec, dict):
        raise Invalid(path, f"'{name}' needs a list of values, {{low = ..., high = ...}} or "
                            f"{{choices = [...]}}, got {type(spec).__name__}")
    if "choices" in spec:
        if set(spec) != {"choices"}:
            raise Invalid(path, f"'{name}': choices cannot be combined with "
                                f"{', '.join(sorted(set(spec) - {'choices'}))}")
        return {"choices": _check_values(path, spec["choices"], "choices")}
    unknown = sorted(set(spec) - set(RANGE_KEYS))
    if unknown:
        raise Invalid(path, f"'{name}' range has unknown key {unknown[0]!r} "
                            f"(known: {', '.join(RANGE_KEYS)}, or choices)")
    if "low" not in spec or "high" not in spec:
        raise Invalid(path, f"'{name}' range needs both low and high")
    if kind not in ("int", "float", "number", "any"):
        raise Invalid(path, f"'{name}' is {TYPE_NAMES[kind]}: search it with a list of values "
                            "or {choices = [...]}, not a range")
    for flag in ("log", "int"):
        if not isinstance(spec.get(flag, False), bool):
            raise Invalid(path, f"'{name}' range: {flag} must be true or false")
    integer = spec.get("int", kind == "int")
    if kind == "int" and not integer:
        raise Invalid(path, f"'{name}' is an integer: its range cannot have int = false")
    bounds = []
    for bound in ("low", "high"):
        value = spec[bound]
        if not _is_number(value) or (integer and not isinstance(value, int)):
            raise Invalid(path, f"'{name}' range {bound} must be "
                                f"{'an integer' if integer else 'a number'}, got {value!r}")
        value = check_override(path, value)
        bounds.append(int(value) if integer else value)
    low, high = bounds
    if low > high:
        raise Invalid(path, f"'{name}' range has low {low!r} > high {high!r}")
    log = spec.get("log", False)
    if log and low <= 0:
        raise Invalid(path, f"'{name}' range with log = true needs low > 0")
    try:
        finite = math.isfinite(float(high) - float(low))
    except OverflowError:  # an integer past what a float holds
        finite = False
    if not finite:
        raise Invalid(path, f"'{name}' range is wider than a number can hold "
                            "(high - low overflows)")
    return {"low": low, "high": high, "log": log, "int": integer}
