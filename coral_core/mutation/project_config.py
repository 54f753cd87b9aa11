"""`[tool.coral.mutation]` in a project's pyproject.toml: the options of `coral mutation run`
kept with the project (as cosmic-ray keeps its config file and mutmut its `[tool.mutmut]`).
A flag given on the command line wins over the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from coral_core.errors import UserError
from coral_core.files.decoding import DecodeError, toml_document

# key in the file: (type, whether a list of that type is also accepted)
KEYS: dict[str, tuple[type, bool]] = {
    "module": (str, True), "tests": (str, True), "session": (str, False),
    "workers": (int, False), "timeout-mode": (str, False), "sample": (float, False),
    "seed": (int, False), "operators": (str, True), "exclude-operators": (str, True),
    "lines": (str, False), "survivors": (int, False),
}


def _typed(value: Any, kind: type, many: bool, where: str) -> Any:
    if many and isinstance(value, list):
        return [_typed(item, kind, False, where) for item in value]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, bool) or not isinstance(value, kind):
        wanted = kind.__name__ + (f" or a list of {kind.__name__}" if many else "")
        raise UserError(f"{where} must be {wanted}, not {value!r}")
    return value


# the values a key takes, checked here so that an error names the file, not a flag
ALLOWED = {
    "workers": (lambda n: 1 <= n <= 4096, "in [1, 4096] (each is a process)"),
    "sample": (lambda f: 0 < f <= 1, "a fraction in (0, 1]"),
    "seed": (lambda n: -2 ** 63 <= n < 2 ** 63, "in [-2**63, 2**63 - 1]"),
    "survivors": (lambda n: -1 <= n <= 10 ** 9, "-1 (all), 0 (none) or a count"),
    "timeout-mode": (lambda m: m in ("relative", "seed"), "relative or seed"),
}


def check_flag(key: str, value: Any) -> Any:
    """A flag's value, held to what the same key in pyproject.toml may be."""
    allowed, wanted = ALLOWED.get(key, (lambda v: True, ""))
    if value is not None and not allowed(value):
        raise UserError(f"--{key} must be {wanted}, not {value!r}")
    return value


def read_options(project: Path) -> dict[str, Any]:
    """The table's options, typed ({} when the project has none); lists stay lists."""
    path = project / "pyproject.toml"
    if not path.is_file():
        return {}
    try:
        document = toml_document(path.read_text(encoding="utf-8"), str(path))
    except (DecodeError, UnicodeDecodeError, OSError) as error:
        raise UserError(f"{path}: cannot be read as TOML: {error}") from None
    table: Any = document
    for key in ("tool", "coral", "mutation"):
        table = table.get(key, {}) if isinstance(table, dict) else None
        if not isinstance(table, dict):
            raise UserError(f"{path}: [tool.coral.mutation] must be a table ({key} is not)")
    options = {}
    for key, value in table.items():
        if key not in KEYS:
            known = ", ".join(sorted(KEYS))
            raise UserError(f"{path}: [tool.coral.mutation] has no key '{key}' (known: {known})")
        kind, many = KEYS[key]
        where = f"{path}: [tool.coral.mutation] {key}"
        options[key] = _typed(value, kind, many, where)
        allowed, wanted = ALLOWED.get(key, (lambda v: True, ""))
        if not allowed(options[key]):
            raise UserError(f"{where} must be {wanted}, not {value!r}")
    return options


def as_list(value: Any) -> list:
    """A key that takes one value or a list of them, as a list."""
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]
