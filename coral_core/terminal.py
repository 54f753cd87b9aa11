"""A command's side of the terminal, for Coral's own commands and plugins' alike: help that
reads like a Unix tool's (flags without a `<bool>` type, arguments as `RUN_DIR`, not
`{run_dir}`, `-h` beside `--help`, defaults shown), a note under a table, and --json's one
document on stdout."""

from __future__ import annotations

import io
import json
import os
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.text import Text
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from coral_core.files.stdout import GuardedStream
from coral_core.shown import printable

CONTEXT = {"help_option_names": ["-h", "--help"]}

stdout = Console(soft_wrap=True)
stderr = Console(stderr=True, soft_wrap=True)

_document: io.TextIOBase | None = None  # the real stdout, once reserved for the document


def _literal(obj: Any) -> None:
    """Help text is shown as written: typer reads it as rich markup, where a TOML table
    name (`[tool.coral.mutation]`, `[dataset.options]`) is a tag and vanishes."""
    if getattr(obj, "coral_literal", False):
        return
    for name in ("help", "short_help"):
        text = getattr(obj, name, None)
        if isinstance(text, str):
            setattr(obj, name, escape(text))
    obj.coral_literal = True


def _tidy(params: list[Any]) -> list[Any]:
    for param in params:
        _literal(param)
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""  # a flag takes no value: show none
        elif isinstance(param, TyperArgument) and param.metavar is None:
            param.metavar = param.name.upper()
    return params


def _refuse_empty_paths(command: Any, ctx: Any, args: list[str]) -> None:
    """A path given as "" (an unset shell variable, most often: `--config "$CFG"`) was '.',
    the current folder, by the time Coral saw it ("config . is a folder", or the data sets
    looked for here): said as the bad input it is, before anything else."""
    from typer import BadParameter  # Click's, as the typer in use has it (vendored or not)

    if ctx.resilient_parsing:
        return
    paths = [p for p in command.get_params(ctx) if getattr(p.type, "name", "") == "path"]
    if not paths:
        return
    try:  # the raw values, before any conversion (a second parse: no side effects)
        given, _, _ = command.make_parser(ctx).parse_args(args=list(args))
    except Exception:  # noqa: BLE001 - the real parse that follows says what is wrong
        return
    for param in paths:
        raw = given.get(param.name)
        if raw == "" or (isinstance(raw, (list, tuple)) and "" in raw):
            raise BadParameter("an empty path; give a file or folder", ctx=ctx, param=param)


class CoralCommand(TyperCommand):
    def get_params(self, ctx: Any) -> list[Any]:
        _literal(self)
        return _tidy(super().get_params(ctx))

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        _refuse_empty_paths(self, ctx, args)
        return super().parse_args(ctx, args)

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return [piece[1:-1] if piece.startswith("{") and piece.endswith("}") else piece
                for piece in super().collect_usage_pieces(ctx)]


class CoralGroup(TyperGroup):
    def get_params(self, ctx: Any) -> list[Any]:
        for command in (self, *self.commands.values()):  # its list shows theirs
            _literal(command)
        return _tidy(super().get_params(ctx))


def reserve_stdout() -> None:
    """--json promises one JSON document on stdout. From here on, anything else written to
    file descriptor 1 (a library's print, a C extension, a process started now such as a
    local Ray's raylet) goes to stderr; print_json writes to the real stdout."""
    global _document
    if _document is not None:
        return
    sys.stdout.flush()
    _document = GuardedStream(io.TextIOWrapper(os.fdopen(os.dup(1), "wb"), encoding="utf-8"))
    try:
        os.dup2(2, 1)
    except OSError:  # stderr closed (2>&-): the strays go nowhere
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
    sys.stdout = sys.stderr


def print_json(document: Any) -> None:
    stream = _document or sys.stdout
    stream.write(json.dumps(document, indent=2) + "\n")
    stream.flush()


def note(text: str, style: str = "") -> None:
    """A line under a table (plain text in a pipe)."""
    if stdout.is_terminal:  # control characters shown as escapes (a run's own text)
        stdout.print(Text(printable(text), style=style), soft_wrap=False)
    else:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
