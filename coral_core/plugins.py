"""The plugin manager and the registries that the register_* hooks fill.

Built-in plugins go through the same manager as third-party ones, registered under their
dotted module names (``coral_plugins.evaluators.style``), so a third-party plugin may use
any short name (``style``) beside them. Third-party packages are found through the
``coral`` entry-point group, and registered under their entry-point names.

Environment (read when the registry is first built; `reset()` forgets it):

- ``CORAL_DISABLE_PLUGIN_AUTOLOAD=1`` loads no entry point of the ``coral`` group except
  those ``CORAL_PLUGINS`` names (as ``PYTEST_DISABLE_PLUGIN_AUTOLOAD`` does for pytest).
- ``CORAL_PLUGINS=a,b`` loads the entry points named ``a`` and ``b`` even when autoload
  is off; a name that no installed distribution provides is an error.
- ``CORAL_DISABLE_PLUGINS=a,b`` blocks plugins by name: a built-in's dotted module name, or
  an entry-point name. Blocking wins over ``CORAL_PLUGINS``.
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
    "coral_plugins.search.grid",
    "coral_plugins.search.random",
    "coral_core.executors.local",
)

KINDS = ("datasets", "models", "evaluators", "search_strategies", "executors", "experiments")
LABELS = {"datasets": "dataset", "models": "model", "evaluators": "evaluator",
          "search_strategies": "search strategy", "executors": "executor",
          "experiments": "experiment"}
_OFF = ("", "0", "false", "no", "off")


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


def _names(variable: str) -> list[str]:
    """The comma-separated names in an environment variable, in order, without repeats."""
    raw = os.environ.get(variable, "")
    return list(dict.fromkeys(name.strip() for name in raw.split(",") if name.strip()))


def disabled_plugins() -> set[str]:
    """Names blocked by ``CORAL_DISABLE_PLUGINS``."""
    return set(_names("CORAL_DISABLE_PLUGINS"))


def autoload() -> bool:
    """False when ``CORAL_DISABLE_PLUGIN_AUTOLOAD`` is set to anything but 0/false/no/off."""
    return os.environ.get("CORAL_DISABLE_PLUGIN_AUTOLOAD", "").strip().lower() in _OFF


def _entry_points(blocked: set[str]) -> list[metadata.EntryPoint]:
    """The ``coral`` entry points to load: all of them (autoload) or those ``CORAL_PLUGINS``
    names, less the blocked ones."""
    found = list(metadata.entry_points(group="coral"))
    wanted = _names("CORAL_PLUGINS")
    missing = [name for name in wanted if name not in {ep.name for ep in found}]
    if missing:
        raise UserError(
            f"CORAL_PLUGINS names {', '.join(repr(n) for n in missing)}, but no installed "
            "distribution has a 'coral' entry point of that name (see 'coral plugins list')"
        )
    if not autoload():
        found = [ep for ep in found if ep.name in wanted]
    return [ep for ep in found if ep.name not in blocked]


def _source(entry_point: metadata.EntryPoint) -> str:
    dist = entry_point.dist
    return f"{dist.name} {dist.version}" if dist else "entry point"


def _make_manager() -> tuple[pluggy.PluginManager, dict[str, str]]:
    manager = pluggy.PluginManager("coral")
    manager.add_hookspecs(hookspecs)
    blocked = disabled_plugins()
    for name in blocked:
        manager.set_blocked(name)
    sources: dict[str, str] = {}
    for module_name in BUILTIN_PLUGINS:
        if module_name in blocked:
            continue
        manager.register(importlib.import_module(module_name), name=module_name)
        sources[module_name] = "builtin"
    for entry_point in _entry_points(blocked):
        name = entry_point.name
        if name in sources:
            raise UserError(
                f"two plugins are named '{name}': {sources[name]} and {_source(entry_point)}; "
                "uninstall one, or disable both with CORAL_DISABLE_PLUGINS"
            )
        try:
            plugin = entry_point.load()
        except Exception as error:  # a broken third-party package must not hide the cause
            raise UserError(f"plugin '{name}' failed to load: {error}") from error
        if manager.is_registered(plugin):
            raise UserError(
                f"plugin '{name}' ({_source(entry_point)}) is '{manager.get_name(plugin)}', "
                "which is already loaded; disable one with CORAL_DISABLE_PLUGINS"
            )
        manager.register(plugin, name=name)
        sources[name] = _source(entry_point)
    return manager, sources


def _collect(manager: pluggy.PluginManager, kind: str) -> dict[str, Registered]:
    """Call `coral_register_KIND` plugin by plugin, in registration order (built-ins
    first), each through its own pluggy hook caller, so that every registered name is
    known to come from the plugin whose hook registered it."""
    found: dict[str, Registered] = {}
    hook_name = f"coral_register_{kind}"
    implementations = getattr(manager.hook, hook_name).get_hookimpls()
    for impl in implementations:
        plugin_name = impl.plugin_name

        def register(name: str, factory: Any, _plugin: str = plugin_name) -> None:
            if not isinstance(name, str) or not name:
                raise UserError(f"plugin '{_plugin}' registered a {kind} entry without a name")
            if name in found:
                raise UserError(
                    f"{kind} name '{name}' is registered by both '{found[name].plugin}' "
                    f"and '{_plugin}'; disable one with CORAL_DISABLE_PLUGINS"
                )
            found[name] = Registered(name, factory, _plugin)

        others = [other.plugin for other in implementations if other is not impl]
        caller = manager.subset_hook_caller(hook_name, remove_plugins=others)
        try:
            caller(register=register)
        except UserError:
            raise
        except Exception as error:  # a third-party hook's bug, named in one line
            raise UserError(
                f"plugin '{plugin_name}' failed in {hook_name}: {type(error).__name__}: {error}"
            ) from error
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
