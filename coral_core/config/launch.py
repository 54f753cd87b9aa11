"""From command-line flags to a run's resolved configuration: preset < --config file <
flags, each layer remembering where it came from (so a value found wrong later is
reported at its file and line), and the checks of what `--resume` may change.

The CLI only collects flags; the rules live here, where they can be tested.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Collection, Mapping, Sequence

from coral_core import plugins
from coral_core.config import experiment as configuration
from coral_core.errors import UserError
from coral_core.config.options import parse_assignments
from coral_core.config.schema import OptionInvalid
from coral_core.config.settings import BY_FLAG, SETTINGS, Range
from coral_core.types import RunFlag

# Flags that set a plugin's option, not a key of the settings table: flag -> (path, the
# least value it takes or None): the data set file and FIM cut of `coral evaluate`. (Plugins
# add `coral run` flags of their own: coral_register_run_flags, `plugin_flags()`.)
OPTION_FLAGS: dict[str, tuple[tuple[str, ...], int | None]] = {
    "data": (("dataset", "options", "path"), None),
    "extract": (("dataset", "options", "extract"), None),
}
# Coral's own flags: flag -> (section, key), or (section, "options", option)
PLACES: dict[str, tuple[str, ...]] = {
    **{item.flag: (item.section, item.key) for item in SETTINGS if item.flag},
    **{flag: path for flag, (path, _) in OPTION_FLAGS.items()},
}
# Flags that may relocate a resumed run: they change where things are, not what is computed.
RELOCATING = ("data_dir", "base_url")
# The built-in strategies, whose only dimensions are [search.space]'s; any other (evolution's
# genes) gets `search.pinned`, the model keys the user set.
SPACE_STRATEGIES = ("single", "grid", "random")


def plugin_flags(taken: Collection[str] = ()) -> dict[str, RunFlag]:
    """The `coral run` flags plugins registered, by name; one that is not a RunFlag, or
    that takes a name Coral's own flags have (or one of the options in `taken`, the
    command's others), is an error naming its plugin."""
    found = {}
    for given, entry in plugins.registry().entries["run_flags"].items():
        flag = entry.factory
        if not isinstance(flag, RunFlag) or flag.kind not in (int, float, str):
            raise UserError(f"plugin '{entry.plugin}' registered run flag '{given}' that is "
                            "not a RunFlag(path, kind int/float/str, help, ...)")
        if not isinstance(flag.path, (tuple, list)) or len(flag.path) < 2 \
                or not all(isinstance(p, str) and p for p in flag.path):
            raise UserError(f"plugin '{entry.plugin}' registered run flag '{given}' whose path "
                            f"{flag.path!r} is not a tuple of keys, e.g. "
                            "(\"search\", \"options\", \"population\")")
        name = given.replace("-", "_")  # `length-budget` and `length_budget`: one flag
        if not (name.isascii() and name.isidentifier()):  # "bad name!" was a traceback
            raise UserError(f"plugin '{entry.plugin}' registered run flag {given!r}: a flag's "
                            "name is letters, digits, underscores or dashes (--NAME-WITH-"
                            "DASHES)")
        if name in PLACES or flag_name(name) in taken:
            raise plugins.NameConflict(f"run flag '{name}' is Coral's own; plugin "
                                       f"'{entry.plugin}' cannot add it (disable the plugin "
                                       "with CORAL_DISABLE_PLUGINS)")
        if name in found:
            raise plugins.NameConflict(f"run flag {flag_name(name)} is registered twice "
                                       f"(plugin '{entry.plugin}' registered it as '{given}')")
        found[name] = replace(flag, path=tuple(flag.path))
    return found


def places() -> dict[str, tuple[str, ...]]:
    """Every flag's configuration path: Coral's own, then the plugins' run flags."""
    return {**PLACES, **{name: flag.path for name, flag in plugin_flags().items()}}


def flag_name(name: str) -> str:
    return "--" + name.replace("_", "-")


def split_list(text: str | None, flag: str) -> list[str] | None:
    """'a, b,c' -> ['a', 'b', 'c'] (None stays None). A text that names nothing is refused:
    `--problems ,` ran the whole split (an empty list is every problem)."""
    if text is None:
        return None
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts:
        raise UserError(f"{flag} {text!r} names nothing; give NAME[,NAME...]")
    return parts


def _least(flag: str) -> int | None:
    """The least value an integer flag takes (said as such, before the key's own check):
    the low end of its key's range, or a plugin option flag's own."""
    if flag in OPTION_FLAGS:
        return OPTION_FLAGS[flag][1]
    if flag not in PLACES:
        added = plugin_flags().get(flag)
        return added.least if added is not None and added.kind is int else None
    item = BY_FLAG.get(flag)
    if item is not None and item.kind == "int" and isinstance(item.check, Range) \
            and not item.check.open_low:
        return int(item.check.low)
    return None


def flag_layer(**flags: Any) -> configuration.Layer:
    """Command-line flags as a configuration layer (only the ones given)."""
    for name, value in flags.items():
        least = _least(name)
        if value is not None and least is not None and value < least:
            raise UserError(f"{flag_name(name)} must be at least {least}, got {value}")
    layer: dict[str, Any] = {}
    paths = places() if any(flag not in PLACES for flag in flags) else PLACES
    for flag, value in flags.items():
        if value is None or (flag == "fail_fast" and value is False):
            continue
        *tables, key = paths[flag]
        node = layer
        for table in tables:
            node = node.setdefault(table, {})
        node[key] = str(value) if isinstance(value, Path) else value
    try:
        return configuration.validate(layer, "command line")
    except UserError as error:  # name the flag rather than the key it sets
        text = str(error)
        for flag, path in paths.items():
            text = text.replace(f"'{'.'.join(path)}'", flag_name(flag))
        raise UserError(text) from None


@dataclass(frozen=True)
class Resolved:
    """A fresh run's configuration, the layers it was merged from, and what the run should
    say once about how they combined (a preset's search narrowed by the user's settings)."""

    config: dict[str, Any]
    layers: tuple[Mapping[str, Any], ...]
    notes: tuple[str, ...] = ()
    presets: int = 0  # the first layers, a preset's (the user's file and flags follow)

    def where(self, path: tuple[str, ...]) -> str:
        return configuration.locate(self.layers, path)

    def user_sets(self, path: tuple[str, ...]) -> bool:
        """Whether the user's file or flags set `path`, not only a preset."""
        return any(configuration.sets(layer, path) for layer in self.layers[self.presets:])


def resolve_fresh(plugin: str | None, config_file: Path | None, flags: Mapping[str, Any],
                  model_args: Sequence[str] = (), cwd: Path | None = None) -> Resolved:
    """preset < file < flags, `--model-arg`s typed by the chosen model's options, paths
    made absolute against `cwd`: the configuration of `coral run` and `coral evaluate`."""
    # the run machinery when a run is resolved: `coral --help` reads this module's flags
    from coral_core.run.factories import experiment_preset, parse_model_spec

    layers: list[Mapping[str, Any]] = []
    preset = experiment_preset(plugin) if plugin is not None else None
    if preset is not None:
        layers.append(preset)
    if config_file is not None:
        layers.append(configuration.read_file(config_file))
    if not layers:
        raise UserError("give --plugin NAME (an experiment preset) and/or --config FILE")
    layers.append(flag_layer(**flags))
    if model_args:
        spec = configuration.merge(*layers)["model"]["spec"]
        prefix = parse_model_spec(spec)[0]
        factory = plugins.registry().get("models", prefix).factory
        options = parse_assignments(list(model_args), factory, f"model '{prefix}'")
        layers.append(configuration.validate({"model": {"options": options}},
                                             "command line"))
    merged = configuration.merge(*layers)
    notes = _user_settings_win(merged, preset, layers[1 if preset is not None else 0:])
    return Resolved(configuration.absolute_paths(merged, cwd or Path.cwd()), tuple(layers),
                    tuple(notes), presets=int(preset is not None))


def _user_settings_win(merged: dict[str, Any], preset: Mapping[str, Any] | None,
                       user: Sequence[Mapping[str, Any]]) -> list[str]:
    """What a user sets explicitly beats a search that would vary it: a key a flag sets
    leaves every space, a key the file sets leaves the preset's; a file that gives a
    [search] space of its own (an empty one: none) replaces the preset's, and one that names
    another strategy drops it; a grid or random search left with no dimension runs once; a
    strategy with dimensions of its own keeps the `model.*` keys the user set
    (`search.pinned`). Returns the lines that say so (a silent 16-trial grid is a large bill
    with a real model)."""
    search = merged["search"]
    if search["strategy"] not in SPACE_STRATEGIES:  # its own dimensions: it keeps these
        search["pinned"] = sorted({*search.get("pinned", []), *_model_keys(user)})
    if not search["space"]:
        return []
    preset_search = (preset or {}).get("search", {})
    user_space: dict[str, Any] = {}
    cleared = False
    for layer in user:
        given = layer.get("search", {})
        if "space" in given:  # the user's own space: the preset's is not merged into it
            cleared = True
            user_space = {} if not given["space"] else {**user_space, **given["space"]}
        if preset_search.get("space") and given.get(
                "strategy", preset_search.get("strategy")) != preset_search.get("strategy"):
            cleared = True
    notes = []
    if cleared and preset_search.get("space"):
        notes.append("the preset's search space is replaced by the configuration's (its own "
                     "[search] space or strategy)")
    space = dict(user_space) if cleared else dict(search["space"])
    flags = [layer for layer in user if getattr(layer, "origin", "") == "command line"]
    for key in list(space):
        setters = flags if key in user_space else user
        if any(configuration.sets(layer, configuration.parse_path(key)) for layer in setters):
            del space[key]
            notes.append(f"{key} is set explicitly, so the {search['strategy']} search "
                         "does not vary it")
    search["space"] = space
    if not space and search["strategy"] in ("grid", "random"):
        search["strategy"] = "single"
        notes.append("no search dimension is left: one configuration runs")
    return notes


def _model_keys(user: Sequence[Mapping[str, Any]]) -> set[str]:
    """The `model.*` keys that a file or flag sets, `model.options` tables down to their
    leaves (`model.options.family_weights.swap`)."""
    def leaves(prefix: str, table: Mapping[str, Any]) -> set[str]:
        found: set[str] = set()
        for key, value in table.items():
            if isinstance(value, Mapping) and value:
                found |= leaves(f"{prefix}.{key}", value)
            else:
                found.add(f"{prefix}.{key}")
        return found

    keys: set[str] = set()
    for layer in user:
        model = layer.get("model", {})
        keys |= {f"model.{key}" for key, value in model.items()
                 if key not in ("spec", "options")}
        if isinstance(model.get("options"), Mapping):
            keys |= leaves("model.options", model["options"])
    return keys


def _given(value: Any) -> bool:
    """A flag the user gave: `--seed 0` and `--limit 0` are (0 == False made them look
    absent, and a resume took them silently)."""
    if value is None or value is False:
        return False
    return not (isinstance(value, (list, tuple)) and not value)


def refuse_with_resume(given: Mapping[str, Any]) -> None:
    """--resume continues a run as configured: only relocating flags may come with it."""
    named = [flag_name(name) for name, value in given.items()
             if _given(value) and name not in RELOCATING]
    if named:
        raise UserError("--resume continues a run as it was configured (only --data-dir "
                        f"and --base-url may relocate it); drop {', '.join(named)}")


def relocations(data_dir: Path | None, base_url: str | None, cwd: Path | None = None,
                ) -> dict[tuple[str, str], str]:
    """The relocating flags as {(section, key): value}, paths made absolute."""
    given = {"data_dir": data_dir, "base_url": base_url}
    layer = flag_layer(**given)
    layer = configuration.absolute_paths(layer, cwd or Path.cwd()) if layer else layer
    return {PLACES[n]: layer[PLACES[n][0]][PLACES[n][1]]
            for n in RELOCATING if given[n] is not None}


def dry_run_text(config: Mapping[str, Any], task_ids: Sequence[str]) -> str:
    """The resolved configuration as TOML, headed by comments (still valid TOML) saying
    that nothing ran and which tasks a run would do."""
    shown = ", ".join(task_ids[:20]) + (", ..." if len(task_ids) > 20 else "")
    header = [
        "# coral run --dry-run: the resolved configuration (nothing was run or written)",
        f"# {len(task_ids)} task(s): {shown}",
        f"# {config['run']['samples']} sample(s) per task, search: "
        f"{config['search']['strategy']}",
    ]
    return "\n".join(header) + "\n\n" + configuration.dump(config)


def placed(error: OptionInvalid, where: Callable[[tuple[str, ...]], str]) -> UserError:
    """The error, said at the file and line (or the flag) that set its key."""
    at = where(error.path)
    set_by = places()  # the flag that set the key, or one that set a key within it
    flag = next((flag_name(flag) for flag, path in set_by.items()
                 if path == error.path), None) or next(
        (flag_name(flag) for flag, path in set_by.items()
         if path[:len(error.path)] == error.path), None)
    if at == "command line" and not flag and error.path[:2] == ("model", "options"):
        flag = "--model-arg"  # the one flag that sets model options
    if at == "command line" and flag:
        at = f"command line ({flag})"
    known = at and at != "the defaults"  # a factory's own default names no file
    return UserError(f"{at}: {error}" if known else str(error))
