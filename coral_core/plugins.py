"""The plugin manager and the registries that the register_* hooks fill.

Built-in plugins go through the same manager as third-party ones; third-party packages
are found through the ``coral`` entry-point group. ``CORAL_DISABLE_PLUGINS=a,b`` blocks
plugins by name (built-in module name such as ``style``, or entry-point name).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Callable

import pluggy

from . import hookspecs
from .errors import UserError

BUILTIN_PLUGINS: tuple[str, ...] = (
    "coral_plugins.datasets.quixbugs",
    "coral_plugins.models.baseline",
    "coral_plugins.models.hf",
    "coral_plugins.models.openai",
    "coral_plugins.evaluators.tests",
    "coral_plugins.evaluators.style",
    "coral_plugins.evaluators.security",
    "coral_plugins.evaluators.syntax",
    "coral_plugins.evaluators.runtime",
    "coral_plugins.search.single",
)

KINDS = ("datasets", "models", "evaluators", "search_strategies", "experiments")
LABELS = {"datasets": "dataset", "models": "model", "evaluators": "evaluator",
          "search_strategies": "search strategy", "experiments": "experiment"}


@dataclass(frozen=True)
class Registered:
    """Something a plugin registered: `factory` builds it (or, for experiments, is the preset)."""

    name: str
    factory: Any
    plugin: str


@dataclass(frozen=True)
class PluginInfo:
    name: str
    source: str  # "builtin" or "DIST VERSION"
    hooks: tuple[str, ...]


@dataclass
class Registry:
    """Everything registered, by kind then name."""

    manager: pluggy.PluginManager
    plugins: list[PluginInfo] = field(default_factory=list)
    entries: dict[str, dict[str, Registered]] = field(
        default_factory=lambda: {kind: {} for kind in KINDS}
    )

    def get(self, kind: str, name: str) -> Registered:
        try:
            return self.entries[kind][name]
        except KeyError:
            known = ", ".join(sorted(self.entries[kind])) or "none"
            label = LABELS[kind]
            raise UserError(f"unknown {label} '{name}' (known: {known})") from None

    def names(self, kind: str) -> list[str]:
        return sorted(self.entries[kind])


def disabled_plugins() -> set[str]:
    raw = os.environ.get("CORAL_DISABLE_PLUGINS", "")
    return {name.strip() for name in raw.split(",") if name.strip()}


def _builtin_name(module: str) -> str:
    return module.rsplit(".", 1)[-1]


def _make_manager() -> tuple[pluggy.PluginManager, dict[str, str]]:
    manager = pluggy.PluginManager("coral")
    manager.add_hookspecs(hookspecs)
    blocked = disabled_plugins()
    for name in blocked:
        manager.set_blocked(name)
    sources: dict[str, str] = {}
    for module_name in BUILTIN_PLUGINS:
        name = _builtin_name(module_name)
        if name in blocked:
            continue
        manager.register(importlib.import_module(module_name), name=name)
        sources[name] = "builtin"
    for entry_point in metadata.entry_points(group="coral"):
        if entry_point.name in blocked or manager.has_plugin(entry_point.name):
            continue
        try:
            plugin = entry_point.load()
        except Exception as error:  # a broken third-party package must not hide the cause
            raise UserError(f"plugin '{entry_point.name}' failed to load: {error}") from error
        manager.register(plugin, name=entry_point.name)
        dist = entry_point.dist
        sources[entry_point.name] = f"{dist.name} {dist.version}" if dist else "entry point"
    return manager, sources


def _collect(manager: pluggy.PluginManager, kind: str) -> dict[str, Registered]:
    found: dict[str, Registered] = {}
    hook = getattr(manager.hook, f"coral_register_{kind}")
    for impl in reversed(hook.get_hookimpls()):  # registration order
        def register(name: str, factory: Any, _plugin: str = impl.plugin_name) -> None:
            if not isinstance(name, str) or not name:
                raise UserError(f"plugin '{_plugin}' registered a {kind} entry without a name")
            if name in found:
                raise UserError(
                    f"{kind} name '{name}' is registered by both '{found[name].plugin}' "
                    f"and '{_plugin}'; disable one with CORAL_DISABLE_PLUGINS"
                )
            found[name] = Registered(name, factory, _plugin)

        impl.function(register=register)
    return found


@functools.lru_cache(maxsize=1)
def registry() -> Registry:
    """Load every plugin once per process and collect what they register."""
    manager, sources = _make_manager()
    result = Registry(manager)
    for name, plugin in manager.list_name_plugin():
        if plugin is None:  # blocked by CORAL_DISABLE_PLUGINS
            continue
        hooks = tuple(
            sorted(caller.name for caller in manager.get_hookcallers(plugin) or ())
        )
        result.plugins.append(PluginInfo(name, sources.get(name, "unknown"), hooks))
    for kind in KINDS:
        result.entries[kind] = _collect(manager, kind)
    return result


def reset() -> None:
    """Forget the loaded plugins (tests change the environment between calls)."""
    registry.cache_clear()


def notify(hook_name: str, **kwargs: Any) -> None:
    """Call a lifecycle hook on every plugin that implements it."""
    getattr(registry().manager.hook, hook_name)(**kwargs)


def build(kind: str, name: str, **options: Any) -> Any:
    """Instantiate a registered dataset, evaluator or search strategy with options."""
    entry = registry().get(kind, name)
    return instantiate(entry.factory, f"'{name}'", **options)


def accepts(factory: Callable[..., Any], parameter: str) -> bool:
    try:
        return parameter in inspect.signature(factory).parameters
    except (TypeError, ValueError):  # no signature available (builtins)
        return False


def instantiate(factory: Callable[..., Any], label: str, *args: Any, **options: Any) -> Any:
    """Call a plugin factory; options it does not take are a user error naming `label`."""
    try:
        inspect.signature(factory).bind(*args, **options)
    except TypeError as error:
        raise UserError(f"bad options for {label}: {error}") from None
    except ValueError:  # no signature available (builtins): let the call decide
        pass
    return factory(*args, **options)
