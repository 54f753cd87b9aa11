"""The one decoder for JSON and TOML that Coral reads (configs, samples, predictions, tasks,
summaries, what the run store holds): bounded depth, number length and size, so that a
crafted document ends in one clear error instead of a RecursionError, a ValueError from
int() or an unbounded parse. JSON Lines are split on newlines only (a JSON string may hold
U+2028 and other characters that `str.splitlines` treats as line breaks)."""

from __future__ import annotations

import json
import math
import os
import re
import sys
from typing import Any, Iterator

from coral_core.files import fileio
from coral_core.errors import UserError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MAX_DEPTH = 64
MAX_NUMBER_CHARS = 64  # an int or float literal's length; 2**63 has 19 digits
MAX_INT = 2 ** 63
MAX_KEY_PARTS = 64


class DecodeError(UserError):
    """A document that is not what it should be; the message names where."""


def _number(text: str, kind: type) -> Any:
    if len(text) > MAX_NUMBER_CHARS:
        raise ValueError(f"a number of {len(text)} characters (at most {MAX_NUMBER_CHARS})")
    return kind(text)


def _check_depth(value: Any, where: str, int_range: bool = False) -> Any:
    """Iteratively (a recursive walk would fail on the document it guards against).
    `int_range`: integers within 2**63 as TOML defines them (JSON from other programs
    holds larger ones: Hugging Face configs write model_max_length = 1e30 as an integer),
    and no NUL in a string or key (a configuration's strings become paths, URLs and
    names: "\u0000" in `run.out` crashed the run where it became a path)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if int_range and (isinstance(item, str) and "\0" in item or isinstance(item, dict)
                          and any("\0" in key for key in item)):
            raise DecodeError(f"{where}: a string holds a NUL character (\\u0000)")
        if isinstance(item, (dict, list)):
            if depth > MAX_DEPTH:
                raise DecodeError(f"{where}: nested deeper than {MAX_DEPTH} levels")
            stack.extend((child, depth + 1)
                         for child in (item.values() if isinstance(item, dict) else item))
        elif (int_range and isinstance(item, int) and not isinstance(item, bool)
              and abs(item) > MAX_INT):
            raise DecodeError(f"{where}: an integer out of range (at most 2**63)")
    return value


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are all different: `{"task_id": "a", "task_id": "b"}` kept
    the last without a word (a fuzzing pass); which one was meant is a guess."""
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise ValueError(f"the key {twice!r} is given twice")
    return value


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant}: JSON has no NaN or infinity")


def _finite_number(text: str) -> float:
    value = _number(text, float)
    if not math.isfinite(value):
        raise ValueError(f"{text} is out of a float's range")
    return value


def json_value(text: str | bytes, where: str, finite: bool = True) -> Any:
    """One JSON document; `where` prefixes the error ('FILE line N'). NaN, Infinity and
    numbers past a float's range are refused (`finite`): Python reads them, other programs
    do not, and one read from a samples file went on into a results file; only third-party
    files Coral merely consults (a model's config) pass finite=False."""
    try:
        value = json.loads(text, parse_int=lambda s: _number(s, int),
                           parse_float=_finite_number if finite else lambda s: _number(s, float),
                           parse_constant=_not_json if finite else None,
                           object_pairs_hook=_object)
    except RecursionError:
        raise DecodeError(f"{where}: nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as error:  # JSONDecodeError, or a number refused above
        raise DecodeError(f"{where}: malformed JSON ({_short(error)})") from None
    return _check_depth(value, where)


def _check_keys(text: str, where: str) -> None:
    """tomllib takes time quadratic in the parts of one dotted key (`a.a.a...` a million
    times: minutes); no Coral key has more than a few, so a long one is refused first."""
    for number, line in enumerate(text.split("\n"), 1):
        head = line.lstrip()
        key = head[:head.find("]")] if head.startswith("[") else head.split("=", 1)[0]
        if key.count(".") >= MAX_KEY_PARTS:
            raise DecodeError(f"{where}: line {number}: a key of more than {MAX_KEY_PARTS} "
                              "dotted parts")


def toml_document(text: str, where: str) -> dict[str, Any]:
    """One TOML document (its tables as dicts); TOMLDecodeError messages carry the line. A
    UTF-8 byte order mark in front (Windows Notepad writes one) is dropped, as Python drops
    it from a source file: TOML's parser called it an invalid statement."""
    text = text.removeprefix("\ufeff")
    _check_keys(text, where)
    try:
        value = tomllib.loads(text, parse_float=lambda s: _number(s, float))
    except RecursionError:
        raise DecodeError(f"{where}: nested deeper than {MAX_DEPTH} levels") from None
    except tomllib.TOMLDecodeError as error:
        raise DecodeError(f"{where}: {_short(error)}") from None
    except ValueError:  # an integer past int()'s digit limit
        raise DecodeError(f"{where}: an integer out of range (at most 2**63)") from None
    return _check_depth(value, where, int_range=True)


_CONTENT = re.compile(r"[^\s][^\n]*")  # from a line's first character that is not space


def jsonl_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) for each non-blank line, split on '\\n' only. Found by scanning,
    not by splitting: a billion blank lines (1 GiB, 1 MB gzip-compressed) made a list of a
    billion strings, 9 GB and more than a minute (a bad-input pass)."""
    number, counted = 1, 0
    for found in _CONTENT.finditer(text):
        start = text.rfind("\n", 0, found.start()) + 1
        number += text.count("\n", counted, start)
        counted = start
        yield number, text[start:found.end()]


def jsonl_file(path: str | os.PathLike[str], what: str, limit: int = fileio.DATA_BYTES,
               ) -> Iterator[tuple[int, str, Any]]:
    """(line number, 'FILE:N', value) for every non-blank line of a JSON Lines file
    (a regular file of at most `limit` bytes, plain or gzip-compressed); `what` names the
    file in errors."""
    text = fileio.read_text(path, limit=limit, what=what, gzipped=True)
    for number, line in jsonl_lines(text):
        where = f"{path}:{number}"
        yield number, where, json_value(line, where)


_SPACE = re.compile(r"\s+")


def _short(error: BaseException, limit: int = 200) -> str:
    text = _SPACE.sub(" ", str(error)).strip()
    return text if len(text) <= limit else text[:limit] + "..."
