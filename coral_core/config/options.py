"""A plugin factory's options: which it takes, of what type, and reading `--model-arg
KEY=VALUE` strings into them.

The schema is the factory's signature (a class's `__init__`), or a mapping the factory
declares as `option_types` ({name: type}); a factory that also takes `**options` accepts
names it does not list, whose values are read as TOML literals (`4` an integer, `true` a
boolean, `{a = 1}` a table) and otherwise kept as strings.
"""

from __future__ import annotations

import inspect
import os
import types
import typing
from typing import Any, Callable, Mapping

from coral_core.files.decoding import DecodeError, toml_document
from coral_core.config.schema import OptionInvalid
from coral_core.config.settings import INT_BOUND
from coral_core.errors import UserError
from coral_core.suggest import did_you_mean

# Parameters Coral fills itself, never options a user sets.
INTERNAL = ("dataset", "base_url")
_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


def _signature(factory: Callable[..., Any]) -> inspect.Signature | None:
    for evaluate in (True, False):
        try:
            return inspect.signature(factory, eval_str=evaluate)
        except (NameError, TypeError, SyntaxError):
            continue
        except ValueError:  # no signature (a builtin)
            return None
    return None


def option_schema(factory: Callable[..., Any], positional: int = 1,
                  ) -> tuple[dict[str, Any], bool]:
    """({option: annotation}, open): the keyword options `factory` takes after its first
    `positional` arguments, and whether it takes any other name (`**options`)."""
    declared = getattr(factory, "option_types", None)
    if isinstance(declared, Mapping):
        return dict(declared), False
    signature = _signature(factory)
    if signature is None:
        return {}, True
    schema: dict[str, Any] = {}
    open_ended = False
    skipped = 0
    for parameter in signature.parameters.values():
        if parameter.kind is parameter.VAR_KEYWORD:
            open_ended = True
        elif parameter.kind is parameter.VAR_POSITIONAL:
            continue
        elif parameter.kind is parameter.POSITIONAL_ONLY or (
                parameter.kind is parameter.POSITIONAL_OR_KEYWORD and skipped < positional):
            skipped += 1
        elif parameter.name not in INTERNAL:
            schema[parameter.name] = parameter.annotation
    return schema, open_ended


def accepts(factory: Callable[..., Any], parameter: str) -> bool:
    """Whether `factory` names `parameter` itself (Coral passes `dataset`, `space`, `seed`...
    only to a factory that asks for it; `**options` does not count)."""
    signature = _signature(factory)
    return signature is not None and parameter in signature.parameters


def check_call(factory: Callable[..., Any], label: str, *args: Any, **options: Any) -> None:
    """Options `factory` does not take, or of a type its signature does not allow, are a
    user error naming `label` (checked by binding them to its signature; without one, a
    builtin's, the call itself decides)."""
    signature = _signature(factory)
    if signature is None:
        return
    check_types(factory, label, options, positional=len(args))
    try:
        signature.bind(*args, **options)
    except TypeError as error:
        named = [p.name for p in signature.parameters.values()
                 if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        unknown = [name for name in options if name not in named]
        if unknown and not any(p.kind is p.VAR_KEYWORD
                               for p in signature.parameters.values()):
            raise UserError(f"{label} takes no option '{unknown[0]}' (it takes: "
                            f"{', '.join(named) or 'none'})") from None
        raise UserError(f"bad options for {label}: {error}") from None


def takes(factory: Callable[..., Any], name: str) -> bool:
    """Whether `factory` accepts the keyword `name` (by name, or through **options)."""
    signature = _signature(factory)
    if signature is None:
        return True
    parameters = signature.parameters.values()
    return any(p.name == name and p.kind is not p.POSITIONAL_ONLY for p in parameters) or any(
        p.kind is p.VAR_KEYWORD for p in parameters)


def unknown_options(factory: Callable[..., Any], names: list[str], label: str,
                    positional: int = 1) -> str | None:
    """A one-line complaint about the first name `factory` does not take, or None."""
    found = _first_unknown(factory, names, positional)
    return None if found is None else _no_option(label, *found)


def _no_option(label: str, name: str, schema: dict[str, Any]) -> str:
    listing = ", ".join(sorted(schema)) or "none"
    return f"{label} has no option '{name}'{did_you_mean(name, schema)} (options: {listing})"


def _first_unknown(factory: Callable[..., Any], names: list[str],
                   positional: int) -> tuple[str, dict[str, Any]] | None:
    schema, open_ended = option_schema(factory, positional)
    if open_ended:
        return None
    return next(((name, schema) for name in names if name not in schema), None)


def check_table(factory: Callable[..., Any], label: str, options: Mapping[str, Any],
                path: tuple[str, ...], positional: int = 0) -> None:
    """Options from the configuration table at `path` that `factory` does not take, or of
    a type it does not allow: an OptionInvalid naming the key, so that its caller can say
    which file and line (or flag) set it."""
    found = _first_unknown(factory, list(options), positional)
    if found is not None:
        raise OptionInvalid(path + (found[0],),
                            f"[{'.'.join(path)}]: " + _no_option(label, *found))
    check_types(factory, label, options, positional, path)


def _kinds(annotation: Any) -> list[Any]:
    """The types an annotation allows, None left out; strings ('int | None') read too."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return []
    if isinstance(annotation, str):
        names = {"int": int, "float": float, "bool": bool, "str": str, "dict": dict,
                 "list": list, "tuple": list}
        found = [names.get(part.strip().split("[")[0]) for part in annotation.split("|")]
        return [kind for kind in found if kind is not None]
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return [kind for arg in typing.get_args(annotation) if arg is not type(None)
                for kind in _kinds(arg)]
    if origin is not None:
        return [dict if issubclass(origin, Mapping) else list] if isinstance(origin, type) \
            else []
    return [annotation] if isinstance(annotation, type) else []


def _is_a(value: Any, kind: Any) -> bool:
    """Whether a value read from a file is of `kind`: no bool is a number (TOML's `"false"`
    is no false, and `true` no 1), an integer is a number, a path is text."""
    if kind is bool:
        return type(value) is bool
    if isinstance(value, bool):
        return False
    if kind is float:
        return isinstance(value, (int, float))
    if kind is str:
        return isinstance(value, (str, os.PathLike))
    if kind is dict:
        return isinstance(value, Mapping)
    if kind is list:
        return isinstance(value, (list, tuple))
    return not isinstance(kind, type) or isinstance(value, kind)


def _wanted(kinds: list[Any]) -> str:
    return " or ".join({bool: "true/false", int: "an integer", float: "a number",
                        dict: "a TOML table {k = v}", list: "a TOML list [a, b]"}
                       .get(k, getattr(k, "__name__", str(k))) for k in kinds)


def check_types(factory: Callable[..., Any], label: str, options: Mapping[str, Any],
                positional: int = 1, path: tuple[str, ...] = ()) -> None:
    """Each option's value of a type its annotation allows (None: the default's); a
    string where a boolean belongs must never read as true. With the `path` of the table
    the options come from, the error is an OptionInvalid: its caller names file and line."""
    schema, _ = option_schema(factory, positional)
    for name, value in options.items():
        kinds = _kinds(schema.get(name, inspect.Parameter.empty))
        if value is None or not kinds or any(_is_a(value, kind) for kind in kinds):
            continue
        shown = repr(value) if isinstance(value, (str, int, float)) else type(value).__name__
        message = f"{label} option '{name}' takes {_wanted(kinds)}, not {shown[:80]}"
        raise OptionInvalid(path + (name,), message) if path else UserError(message)


def _literal(text: str) -> Any:
    """A TOML literal ('4', 'true', '[1, 2]', '{a = 1}'), else the text itself."""
    try:
        return toml_document(f"value = {text}", "option")["value"]
    except DecodeError:
        return text


def coerce(text: str, annotation: Any) -> Any:
    """`text` read as the annotation says; ValueError names the type wanted."""
    kinds = _kinds(annotation)
    if not kinds:
        return _literal(text)
    lowered = text.strip().lower()
    if bool in kinds and lowered in _TRUE + _FALSE:
        return lowered in _TRUE
    if int in kinds:
        try:
            return int(text)
        except ValueError:
            pass
    if float in kinds:
        try:
            return float(text)
        except ValueError:
            pass
    if str in kinds:
        return text
    if dict in kinds or list in kinds:
        value = _literal(text)
        if isinstance(value, tuple(k for k in (dict, list) if k in kinds)):
            return value
    raise ValueError(f"takes {_wanted(kinds)}")


def parse_assignments(pairs: list[str], factory: Callable[..., Any], label: str,
                      flag: str = "--model-arg") -> dict[str, Any]:
    """`KEY=VALUE` strings as typed options for `factory` (a later KEY wins)."""
    schema, open_ended = option_schema(factory)
    options: dict[str, Any] = {}
    for pair in pairs:
        key, equals, text = pair.partition("=")
        key = key.strip()
        if not equals or not key:
            raise UserError(f"{flag} needs KEY=VALUE, got '{pair}'")
        if key not in schema and not open_ended:
            raise UserError(f"{flag} {pair}: " + (unknown_options(factory, [key], label)
                                                  or f"{label} has no option '{key}'"))
        try:
            options[key] = coerce(text, schema.get(key, inspect.Parameter.empty))
            _storable(options[key])
        except ValueError as error:
            raise UserError(f"{flag} {pair}: {label} option '{key}' {error}") from None
    return options


def _storable(value: Any) -> None:
    """An integer a TOML file can hold (a flag's value is written to the run's config.toml,
    and one past 64 bits made a run that Coral could not read back, nor resume)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if not -INT_BOUND <= value < INT_BOUND:
            raise ValueError("takes integers of at most 64 bits (-2**63 to 2**63 - 1)")
    elif isinstance(value, (list, tuple)):
        for item in value:
            _storable(item)
    elif isinstance(value, dict):
        for item in value.values():
            _storable(item)
