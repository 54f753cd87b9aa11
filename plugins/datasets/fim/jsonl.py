"""Reading a JSONL file line by line, each failure one error naming the file and line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from coral_core.errors import UserError


def json_lines(path: Path, what: str) -> Iterator[tuple[int, str, Any]]:
    """(line number, where, value) for every non-blank line; `what` names the reader in
    errors about the file itself."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{what}: no such file: {path}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(f"{what}: cannot read {path}: {error}") from None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            value = json.loads(line)
        except json.JSONDecodeError as error:
            raise UserError(f"{where}: malformed JSON ({error.msg})") from None
        yield number, where, value
