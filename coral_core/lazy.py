"""A plugin's factory named by where it lives, imported when first used.

Registering `Lazy("package.module:Name")` instead of `Name` keeps a plugin's heavy imports
(numpy, a model's libraries, the sandbox) out of every command that never builds it:
`coral --help` loads every plugin, and `coral run --plugin quixbugs` builds one model.
A Lazy stands for its target everywhere Coral looks at a factory: calling it, its
signature (the options it takes), and its attributes (`splits`, `objectives`,
`sampling_knobs`...).
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from .errors import UserError
from .failures import PLUGIN_FAULTS, describe


class Lazy:
    """`module:attribute`, imported on first use; an import that fails is one line."""

    def __init__(self, target: str):
        module, _, attribute = target.partition(":")
        if not module or not attribute:
            raise ValueError(f"Lazy({target!r}): give 'package.module:attribute'")
        self.target = target
        self._resolved: Any = None

    def resolve(self) -> Any:
        if self._resolved is None:
            module, _, attribute = self.target.partition(":")
            try:
                found: Any = importlib.import_module(module)
                for part in attribute.split("."):
                    found = getattr(found, part)
            except PLUGIN_FAULTS as error:
                raise UserError(f"cannot load {self.target}: {describe(error)}") from error
            self._resolved = found
        return self._resolved

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)

    @property
    def __signature__(self) -> inspect.Signature:
        target = self.resolve()
        try:  # annotations as types where they can be evaluated (option types come from them)
            return inspect.signature(target, eval_str=True)
        except (NameError, TypeError, SyntaxError):
            return inspect.signature(target)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # copy, pickle and inspect probe these: not the target's
            raise AttributeError(name)
        return getattr(self.resolve(), name)

    def __repr__(self) -> str:
        return f"Lazy({self.target!r})"
