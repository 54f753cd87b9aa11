"""Help output that reads like a Unix tool's: flags without a `<bool>` type, arguments as
`RUN_DIR` (not `{run_dir}`), `-h` beside `--help`, defaults shown."""

from __future__ import annotations

from typing import Any

from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

CONTEXT = {"help_option_names": ["-h", "--help"]}


def _tidy(params: list[Any]) -> list[Any]:
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""  # a flag takes no value: show none
        elif isinstance(param, TyperArgument) and param.metavar is None:
            param.metavar = param.name.upper()
    return params


class CoralCommand(TyperCommand):
    def get_params(self, ctx: Any) -> list[Any]:
        return _tidy(super().get_params(ctx))

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return [piece[1:-1] if piece.startswith("{") and piece.endswith("}") else piece
                for piece in super().collect_usage_pieces(ctx)]


class CoralGroup(TyperGroup):
    def get_params(self, ctx: Any) -> list[Any]:
        return _tidy(super().get_params(ctx))
