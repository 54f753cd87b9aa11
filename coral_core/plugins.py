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
  an entry-point name. Blocking wins over ``CORAL_PLUGINS``. A name that matches no plugin
  is warned about (a typo would otherwise block nothing, silently).

A third-party plugin that fails to import, or whose registration hook raises, is reported
(file, line, the exception's last line) and skipped: `coral plugins list` shows it as
failed and everything else keeps working. `-v` adds the traceback.
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Callable, Mapping

import pluggy

from coral_core import hookspecs
from coral_core.errors import UserError
from coral_core.failures import PLUGIN_FAULTS, describe
from coral_core.config.options import check_call
from coral_core.suggest import did_you_mean, unknown
from coral_core.switches import switch

log = logging.getLogger(__name__)

BUILTIN_PLUGINS: tuple[str, ...] = (
    "coral_plugins.datasets.quixbugs",
    "coral_plugins.datasets.fim",
    "coral_plugins.datasets.testgen",
    "coral_plugins.datasets.humaneval",
    "coral_plugins.models.baseline",
    "coral_plugins.models.hf",
    "coral_plugins.models.openai",
    "coral_plugins.models.reference",
    "coral_plugins.evaluators.tests",
    "coral_plugins.evaluators.style",
    "coral_plugins.evaluators.security",
    "coral_plugins.evaluators.syntax",
    "coral_plugins.evaluators.runtime",
    "coral_plugins.evaluators.mutation",
    "coral_plugins.evaluators.fim",
    "coral_plugins.evaluators.fim_tests",
    "coral_plugins.evaluators.testgen",
    "coral_plugins.evaluators.humaneval",
    "coral_plugins.search.single",
    "coral_plugins.search.grid",
    "coral_plugins.search.random",
    "coral_plugins.search.evolution",
    "coral_core.executors.local",
    "coral_plugins.executors.ray",
)

KINDS = ("datasets", "models", "evaluators", "search_strategies", "executors", "experiments",
         "run_flags")
LABELS = {"datasets": "dataset", "models": "model", "evaluators": "evaluator",
          "search_strategies": "search strategy", "executors": "executor",
          "experiments": "experiment", "run_flags": "run flag"}


@dataclass(frozen=True)
class Registered:
    """Something a plugin registered: `factory` builds it (or, for experiments, is the preset)."""

    name: str
    factory: Any
    plugin: str


@dataclass(frozen=True)
class PluginInfo:
    """A plugin as `coral plugins list` shows it; `error` is set when it failed (to load,
    or in a registration hook) and was skipped."""

    name: str
    source: str  # "builtin" or "DIST VERSION"
    hooks: tuple[str, ...]
    error: str = ""

    @property
    def status(self) -> str:
        return "failed" if self.error else "loaded"


class NameConflict(UserError):
    """Two plugins register one name: which one a configuration means is ambiguous, so
    this stops Coral instead of skipping a plugin."""


@dataclass(frozen=True)
class HookFailure:
    """A lifecycle hook implementation that raised: the run goes on (unless fail-fast)."""

    plugin: str
    hook: str
    error: str


@dataclass
class Registry:
    """Everything registered, by kind then name."""

    manager: pluggy.PluginManager
    plugins: list[PluginInfo] = field(default_factory=list)
    entries: dict[str, dict[str, Registered]] = field(
        default_factory=lambda: {kind: {} for kind in KINDS}
    )
    _callers: dict[tuple[str, str], Any] = field(default_factory=dict)

    def get(self, kind: str, name: str) -> Registered:
        try:
            return self.entries[kind][name]
        except KeyError:
            raise UserError(unknown(LABELS[kind], name, self.entries[kind],
                                    self.missing_hint())) from None

    def missing_hint(self) -> str:
        """Why a name may be missing: plugins that failed to load, or that
        CORAL_DISABLE_PLUGINS blocks."""
        failed = [p.name for p in self.plugins if p.error]
        hints = [f"plugin {', '.join(repr(n) for n in failed)} failed to load (see 'coral "
                 "plugins list')"] if failed else []
        blocked = sorted(disabled_plugins())
        if blocked:
            hints.append(f"CORAL_DISABLE_PLUGINS blocks {', '.join(repr(n) for n in blocked)}")
        return "; ".join(hints)

    def names(self, kind: str) -> list[str]:
        return sorted(self.entries[kind])

    def caller(self, hook_name: str, plugin_name: str) -> Any:
        """A hook caller that reaches only `plugin_name`'s implementation."""
        key = (hook_name, plugin_name)
        if key not in self._callers:
            others = [impl.plugin for impl in getattr(self.manager.hook, hook_name)
                      .get_hookimpls() if impl.plugin_name != plugin_name]
            self._callers[key] = self.manager.subset_hook_caller(hook_name,
                                                                 remove_plugins=others)
        return self._callers[key]


def _names(variable: str) -> list[str]:
    """The comma-separated names in an environment variable, in order, without repeats."""
    raw = os.environ.get(variable, "")
    return list(dict.fromkeys(name.strip() for name in raw.split(",") if name.strip()))


def disabled_plugins() -> set[str]:
    """Names blocked by ``CORAL_DISABLE_PLUGINS``."""
    return set(_names("CORAL_DISABLE_PLUGINS"))


def autoload() -> bool:
    """False when the switch ``CORAL_DISABLE_PLUGIN_AUTOLOAD`` is on (switches.py)."""
    return not switch("CORAL_DISABLE_PLUGIN_AUTOLOAD")


def _entry_points(blocked: set[str]) -> list[metadata.EntryPoint]:
    """The ``coral`` entry points to load: all of them (autoload) or those ``CORAL_PLUGINS``
    names, less the blocked ones."""
    found = list(metadata.entry_points(group="coral"))
    wanted = _names("CORAL_PLUGINS")
    names = {ep.name for ep in found}
    missing = [name for name in wanted if name not in names]
    if missing:
        raise UserError(
            f"CORAL_PLUGINS names {', '.join(repr(n) for n in missing)}, but no installed "
            "distribution has a 'coral' entry point of that name"
            f"{did_you_mean(missing[0], names)} (see 'coral plugins list')"
        )
    if not autoload():
        found = [ep for ep in found if ep.name in wanted]
    return [ep for ep in found if ep.name not in blocked]


def _source(entry_point: metadata.EntryPoint) -> str:
    dist = entry_point.dist
    return f"{dist.name} {dist.version}" if dist else "entry point"


def _warn_unmatched(blocked: set[str]) -> None:
    """A CORAL_DISABLE_PLUGINS name that names no plugin blocks nothing: say so."""
    if not blocked - set(BUILTIN_PLUGINS):  # no need to read every installed package
        return
    known = set(BUILTIN_PLUGINS) | {ep.name for ep in metadata.entry_points(group="coral")}
    for name in sorted(blocked - known):
        log.warning("CORAL_DISABLE_PLUGINS names '%s', which matches no plugin%s; it blocks "
                    "nothing (see 'coral plugins list')", name, did_you_mean(name, known))


def _failed(name: str, action: str, error: BaseException) -> str:
    """Log a plugin's failure (one line; the traceback with -v) and return its summary."""
    # Coral's own refusal of what the plugin registered says it all; a fault is named with
    # the plugin's line that raised it
    summary = str(error) if isinstance(error, UserError) else describe(error)
    log.warning("plugin '%s' %s and was skipped: %s", name, action, summary)
    log.debug("traceback of plugin '%s':", name, exc_info=error)
    return summary


def _make_manager() -> tuple[pluggy.PluginManager, dict[str, str], dict[str, str]]:
    """The manager with every plugin that loads, their sources, and {name: error} for the
    entry points that failed to import (skipped)."""
    manager = pluggy.PluginManager("coral")
    manager.add_hookspecs(hookspecs)
    blocked = disabled_plugins()
    _warn_unmatched(blocked)
    for name in blocked:
        manager.set_blocked(name)
    sources: dict[str, str] = {}
    failures: dict[str, str] = {}
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
        except PLUGIN_FAULTS as error:  # a broken third-party package must not break Coral
            failures[name] = _failed(name, "failed to load", error)
            sources[name] = _source(entry_point)
            continue
        if manager.is_registered(plugin):
            raise UserError(
                f"plugin '{name}' ({_source(entry_point)}) is '{manager.get_name(plugin)}', "
                "which is already loaded; disable one with CORAL_DISABLE_PLUGINS"
            )
        sources[name] = _source(entry_point)
        try:
            manager.register(plugin, name=name)
        except pluggy.PluginValidationError as error:  # e.g. `coral_register_datasets(reg)`
            if manager.is_registered(plugin):  # pluggy keeps the hooks it added before
                manager.unregister(plugin)
            failures[name] = _failed(name, "does not fit Coral's hooks",
                                     UserError(" ".join(str(error).split())))
            continue
        for mistake in _hook_mistakes(manager, plugin):
            log.warning("plugin '%s': %s", name, mistake)
    return manager, sources, failures


def _hook_mistakes(manager: pluggy.PluginManager, plugin: Any) -> list[str]:
    """What a plugin meant as a hook that Coral will never call: a hook name Coral does not
    have (`coral_register_dataset`), or a `coral_` function without `@hookimpl` (both were
    silent: the plugin "loaded", and its data set was unknown)."""
    known = {name for name in dir(hookspecs) if name.startswith("coral_")}
    implemented = {caller.name for caller in manager.get_hookcallers(plugin) or ()}
    mistakes = [f"{name} is no hook of Coral's{did_you_mean(name, known)}; it is never "
                "called (docs/plugins.md lists the hooks)"
                for name in sorted(implemented - known)]
    for name in sorted(known & set(dir(plugin)) - implemented):
        if callable(getattr(plugin, name, None)):
            mistakes.append(f"{name} is not marked @hookimpl (from coral_core.hookspecs), "
                            "so it is never called")
    return mistakes


def _malformed(kind: str, name: str, value: Any) -> str:
    """Why what a plugin registers cannot be used ("" when it can), found when it
    registers: a preset that was no table and a factory that was no callable failed only
    when used, with a traceback (a red-team pass)."""
    if kind == "run_flags":  # checked with Coral's own flags (config/launch.py)
        return ""
    if kind == "experiments":
        return "" if isinstance(value, Mapping) or callable(value) else (
            f"a {type(value).__name__}, not a configuration table or a function returning one")
    return "" if callable(value) else f"a {type(value).__name__}, not a factory to call"


def _collect(manager: pluggy.PluginManager, kind: str,
             failures: dict[str, str] | None = None) -> dict[str, Registered]:
    """Call `coral_register_KIND` plugin by plugin, in registration order (built-ins
    first), each through its own pluggy hook caller, so that every registered name is
    known to come from the plugin whose hook registered it. A hook that raises marks its
    plugin failed in `failures` (what it registered in this call is dropped); without
    `failures`, it is a UserError."""
    found: dict[str, Registered] = {}
    hook_name = f"coral_register_{kind}"
    for plugin_name, caller in _one_by_one(manager, hook_name):

        def register(name: str, factory: Any, _plugin: str = plugin_name) -> None:
            if not isinstance(name, str) or not name:
                raise UserError(f"plugin '{_plugin}' registered a {kind} entry without a name")
            wrong = _malformed(kind, name, factory)
            if wrong:
                raise UserError(f"plugin '{_plugin}' registered {LABELS[kind]} '{name}': "
                                f"{wrong}")
            if name in found:
                raise NameConflict(
                    f"{kind} name '{name}' is registered by both '{found[name].plugin}' "
                    f"and '{_plugin}'; disable one with CORAL_DISABLE_PLUGINS"
                )
            found[name] = Registered(name, factory, _plugin)

        before = dict(found)
        try:
            caller(register=register)
        except UserError as error:
            if isinstance(error, NameConflict) or failures is None:
                raise
            failures[plugin_name] = _failed(plugin_name, f"failed in {hook_name}", error)
            found = before
        except PLUGIN_FAULTS as error:  # a third-party hook's bug, named in one line
            if failures is None:
                raise UserError(f"plugin '{plugin_name}' failed in {hook_name}: "
                                f"{describe(error)}") from error
            failures[plugin_name] = _failed(plugin_name, f"failed in {hook_name}", error)
            found = before
    return found


@functools.lru_cache(maxsize=1)
def _loaded() -> tuple[pluggy.PluginManager, dict[str, str], dict[str, str]]:
    return _make_manager()


def _one_by_one(manager: pluggy.PluginManager, hook_name: str) -> list[tuple[str, Any]]:
    """(plugin name, a caller of that plugin's implementation alone) for each plugin that
    implements `hook_name`, in registration order."""
    impls = getattr(manager.hook, hook_name).get_hookimpls()
    return [(impl.plugin_name, manager.subset_hook_caller(
        hook_name, remove_plugins=[other.plugin for other in impls if other is not impl]))
        for impl in impls]


def implementations(hook_name: str) -> list[tuple[str, Any]]:
    """`_one_by_one` for the loaded plugins: what `coral --help` needs to add the plugins'
    commands, without collecting (and so importing) every factory."""
    return _one_by_one(_loaded()[0], hook_name)


@functools.lru_cache(maxsize=1)
def registry() -> Registry:
    """Load every plugin once per process and collect what they register."""
    manager, sources, failures = _loaded()
    failures = dict(failures)
    result = Registry(manager)
    for kind in KINDS:
        result.entries[kind] = _collect(manager, kind, failures)
    for name, plugin in manager.list_name_plugin():
        if plugin is None:  # blocked by CORAL_DISABLE_PLUGINS
            continue
        hooks = tuple(
            sorted(caller.name for caller in manager.get_hookcallers(plugin) or ())
        )
        result.plugins.append(PluginInfo(name, sources.get(name, "unknown"), hooks,
                                         failures.get(name, "")))
    for name, error in failures.items():
        if manager.get_plugin(name) is not None:  # failed in a hook: drop all it gave
            manager.unregister(name=name)
            for kind in KINDS:
                result.entries[kind] = {key: entry for key, entry in result.entries[kind]
                                        .items() if entry.plugin != name}
        else:
            result.plugins.append(PluginInfo(name, sources.get(name, "unknown"), (), error))
    log.debug("plugins: %s",
              ", ".join(f"{p.name} ({p.source}, {p.status})" for p in result.plugins))
    return result


def reset() -> None:
    """Forget the loaded plugins (tests change the environment between calls)."""
    registry.cache_clear()
    _loaded.cache_clear()


def notify(hook_name: str, **kwargs: Any) -> list[HookFailure]:
    """Call a lifecycle hook on every plugin that implements it, one plugin at a time, so
    that one plugin's exception neither stops the others nor the caller: the failures are
    returned (the runner records them, or stops with --fail-fast)."""
    current = registry()
    failures = []
    for impl in getattr(current.manager.hook, hook_name).get_hookimpls():
        try:
            current.caller(hook_name, impl.plugin_name)(**kwargs)
        except PLUGIN_FAULTS as error:  # a plugin's bug must not end a run
            log.debug("traceback of %s in plugin '%s':", hook_name, impl.plugin_name,
                      exc_info=error)
            failures.append(HookFailure(impl.plugin_name, hook_name, describe(error)))
    return failures


def build(kind: str, name: str, /, **options: Any) -> Any:
    """Instantiate a registered dataset, evaluator or search strategy with options (an
    option may be called `kind` or `name`: the FIM data sets' `kind` is one)."""
    entry = registry().get(kind, name)
    return instantiate(entry.factory, f"'{name}'", **options)


def instantiate(factory: Callable[..., Any], label: str, /, *args: Any, **options: Any,
                ) -> Any:
    """Call a plugin factory; options it does not take are a user error naming `label`."""
    check_call(factory, label, *args, **options)
    return factory(*args, **options)
