"""Each configuration key is declared once, in `coral_core.config.settings.SETTINGS`: the schema,
the defaults, the reference's meanings, the `coral run` flags and their help, the keys a
blueprint leaves to each request, the search's sampling knobs and the defaults of the value
types all derive from it, and no second literal default is written in the places one used
to be (dataclass fields and parameters named after a key, dict literals in the core, help
strings, tuples of key names)."""

from __future__ import annotations

import ast
import functools
import inspect
import re
from pathlib import Path

import pytest
import typer

from conftest import ROOT
from coral_core.config import blueprints
from coral_core.config import experiment as config
from coral_core.config import reference as config_docs
from coral_core.config import schema as config_schema
from coral_core.config import launch
from coral_core.config import settings
from coral_core.errors import UserError
from coral_core.sandbox.policy import SandboxPolicy
from coral_core.config.settings import SETTINGS, Range, default, flag_help
from coral_core.types import SamplingParams

SOURCES = ("coral_core", "cli", "plugins")

# `coral run` flags that set no key of the table: where the configuration comes from, how
# the command behaves, or a model's options (typed by the model, `model.options.KEY`).
NOT_SETTINGS = {"plugin", "config", "model_arg", "resume", "dry_run", "json_output"}

# Fields of the value types that carry a setting's default: they must read the table.
DERIVED_FIELDS = {
    ("SamplingParams", "temperature"): "model.temperature",
    ("SamplingParams", "top_p"): "model.top_p",
    ("SamplingParams", "top_k"): "model.top_k",
    ("SamplingParams", "max_new_tokens"): "model.max_new_tokens",
    ("SamplingParams", "repetition_penalty"): "model.repetition_penalty",
    ("SamplingParams", "stop"): "model.stop",
    ("SandboxPolicy", "memory_mb"): "execution.memory_mb",
}
# A field whose name differs from its key's.
ALIASES = {("SandboxPolicy", "timeout"): "execution.test_timeout"}

# Second definitions still in place, each with why (outside the files of the change that
# made the table), by qualified name and field: remove an entry by making its default read
# `coral_core.config.settings`.
KNOWN = {
    ("ExecutionContext.__init__", "timeout_floor"):
        "ExecutionContext's own default (coral_core/execution.py)",
    ("SandboxPolicy", "timeout"): "SandboxPolicy's default for execution.test_timeout",
    ("SandboxPolicy", "isolation"): "SandboxPolicy's default for execution.isolation",
    ("run_mutation", "executor"): "`coral mutation`'s own --executor default",
}


def _run_params():
    from coral_cli.app import app

    return typer.main.get_command(app).commands["run"].params


# ------------------------------------------------------------------ what derives from it


def test_every_setting_is_declared_once_and_has_a_meaning():
    names = [s.name for s in SETTINGS]
    assert len(names) == len(set(names))
    for item in SETTINGS:
        assert item.meaning.strip(), f"{item.name} has no meaning"
        assert item.kind in config_schema.TYPE_NAMES, item.name
        assert item.section in config_docs.SECTIONS, item.name
        config_schema.check((item.section, item.key), default(item.name))  # it fits itself


def test_the_schema_docs_and_defaults_are_the_tables():
    for item in SETTINGS:
        kind, check = config_schema.SCHEMA[item.section][item.key]
        assert kind == item.kind and check is item.check
        assert config_schema.DEFAULTS[item.section][item.key] == item.default
        assert config_docs.MEANINGS[item.section][item.key] == item.meaning
    assert sum(map(len, config_schema.SCHEMA.values())) == len(SETTINGS)
    assert sum(map(len, config_docs.MEANINGS.values())) == len(SETTINGS)
    assert config_schema.FIXED == {s.name: s.fixed for s in SETTINGS if s.fixed}
    assert config.RELOCATABLE == tuple((s.section, s.key) for s in SETTINGS if s.relocatable)
    assert config.PATH_KEYS == tuple((s.section, s.key) for s in SETTINGS if s.path)


def test_defaults_are_copies():
    first = config_schema.DEFAULTS["model"]["stop"]
    assert default("model.stop") is not first
    assert settings.defaults()["model"]["stop"] is not settings.setting("model.stop").default


def test_the_value_types_use_the_tables_defaults():
    params = SamplingParams()
    for knob in ("temperature", "top_p", "top_k", "max_new_tokens", "repetition_penalty"):
        assert getattr(params, knob) == default(f"model.{knob}"), knob
    assert params.stop == tuple(default("model.stop"))
    assert SandboxPolicy().memory_mb == default("execution.memory_mb")
    assert SandboxPolicy().timeout == default("execution.test_timeout")
    assert SandboxPolicy().isolation == default("execution.isolation")


def test_request_keys_and_search_knobs_come_from_the_table():
    from coral_plugins.search.evolution import genome

    assert set(blueprints.PER_REQUEST_KEYS) == {
        s.key for s in SETTINGS if s.section == "model" and s.per_request}
    assert genome.CHEAP is settings.SAMPLING_KNOBS  # derived, not written again
    # genome order: a seeded search draws each knob's value in this order
    assert settings.SAMPLING_KNOBS == ("temperature", "top_p", "top_k", "repetition_penalty",
                                       "max_new_tokens")
    for knob in settings.SAMPLING_KNOBS:
        assert knob in inspect.signature(SamplingParams).parameters
        assert f"model.{knob}" not in config_schema.FIXED


# ------------------------------------------------------------------------------- the flags


def test_every_flag_of_coral_run_maps_to_a_setting():
    for param in _run_params():
        if param.name in NOT_SETTINGS or param.name == "help":
            continue
        assert param.name in launch.PLACES, f"--{param.name} sets no key"
        item = settings.BY_FLAG.get(param.name)
        if item is None:  # a plugin's option
            assert param.name in launch.OPTION_FLAGS
            continue
        assert param.opts == [launch.flag_name(param.name)]
        assert launch.PLACES[param.name] == (item.section, item.key)
        assert param.help == flag_help(item.name)
        assert param.metavar == item.metavar
    flags = {param.name for param in _run_params()}
    for item in SETTINGS:
        if item.flag:
            assert item.flag in flags, f"{item.name} names a flag `coral run` lacks"


def test_flag_help_names_its_key_and_states_the_tables_default():
    for param in _run_params():
        text = " ".join((param.help or "").split())
        for key in re.findall(r"config: ([a-z_]+\.[a-z_.]+)", text):
            section, name, *_ = key.split(".")
            assert name in config_schema.SCHEMA[section], key
        shown = re.search(r"config: ([a-z_.]+), default ([^)]+)\)", text)
        if shown:
            assert shown.group(2) == str(settings.setting(shown.group(1)).default)
    assert "default 0.8" in flag_help("model.temperature")


def test_integer_flags_take_at_least_their_keys_lower_bound():
    for item in SETTINGS:
        if item.flag and item.kind == "int":
            assert isinstance(item.check, Range) and not item.check.open_low
            least = int(item.check.low)
            with pytest.raises(UserError, match=f"at least {least}, got {least - 1}"):
                launch.flag_layer(**{item.flag: least - 1})
            launch.flag_layer(**{item.flag: least})


# ---------------------------------------------------------- no default written a second time


def _literal(node: ast.AST):
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _same(value, wanted) -> bool:
    return type(value) is type(wanted) and value == wanted


def _telling(value) -> bool:
    """A default that says something when found again (0, "", [] are everywhere)."""
    return value not in (0, "", [], {}, False, None)


def _defaults_in(tree: ast.AST, prefix: str = ""):
    """(owner, name, value node, line) for each class field default (owner: the class's
    qualified name) and each parameter default (owner: the function's)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.ClassDef):
            owner = prefix + node.name
            for statement in node.body:
                if (isinstance(statement, ast.AnnAssign) and statement.value is not None
                        and isinstance(statement.target, ast.Name)):
                    yield owner, statement.target.id, statement.value, statement.lineno
            yield from _defaults_in(node, owner + ".")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            owner = prefix + node.name
            args = node.args
            positional = args.posonlyargs + args.args
            pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
            pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
            for arg, value in pairs:
                yield owner, arg.arg, value, node.lineno
            yield from _defaults_in(node, owner + ".")
        else:
            yield from _defaults_in(node, prefix)


@functools.lru_cache(maxsize=None)
def _parse(path: Path, stamp: int) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _tree(path: Path) -> ast.Module:
    return _parse(path, path.stat().st_mtime_ns)


def _files():
    for top in SOURCES:
        for path in sorted((ROOT / top).rglob("*.py")):
            if path.name != "settings.py" or path.parent.name != "coral_core":
                yield path, path.relative_to(ROOT).as_posix()


def second_definitions(files=None) -> list[str]:
    """Where a setting's default is written again, outside `coral_core/config/settings.py`."""
    by_key: dict[str, list] = {}
    for item in SETTINGS:
        by_key.setdefault(item.key, []).append(item)
    model_keys = {s.key for s in SETTINGS if s.section == "model"}
    found = []
    for path, name in files if files is not None else _files():
        tree = _tree(path)
        for owner, field, value, line in _defaults_in(tree):
            where = f"{name}:{line}: {owner}.{field}"
            derived = DERIVED_FIELDS.get((owner, field))
            if derived is not None:
                if _literal(value)[0]:
                    found.append(f"{where} is a literal; it must read {derived}'s default")
                continue
            items = ([settings.setting(ALIASES[(owner, field)])] if (owner, field) in ALIASES
                     else by_key.get(field, []))
            is_literal, literal = _literal(value)
            for item in items:
                if (is_literal and _same(literal, item.default) and _telling(item.default)
                        and (owner, field) not in KNOWN):
                    found.append(f"{where} = {literal!r} writes {item.name}'s default again")
        core = name.startswith(("coral_core/", "cli/"))  # a plugin's preset may say its values
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict) and core:
                for key, value in zip(node.keys, node.values):
                    if not (isinstance(key, ast.Constant) and key.value in by_key):
                        continue
                    is_literal, literal = _literal(value)
                    if is_literal and any(_same(literal, item.default) and _telling(literal)
                                          for item in by_key[key.value]):
                        found.append(f"{name}:{node.lineno}: {{{key.value!r}: {literal!r}}} "
                                     "writes a setting's default again")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and core:
                if re.search(r"config: [a-z_]+\.[a-z_]+, default ", node.value):
                    found.append(f"{name}:{node.lineno}: help text writes a default: "
                                 f"{node.value!r} (use settings.flag_help)")
            elif isinstance(node, (ast.Tuple, ast.List)):
                names = [e.value for e in node.elts if isinstance(e, ast.Constant)]
                if len(node.elts) >= 4 and len(names) == len(node.elts) \
                        and set(names) <= model_keys:
                    found.append(f"{name}:{node.lineno}: {tuple(names)} lists [model] keys "
                                 "again (derive them from the settings table)")
    return found


def test_no_default_is_written_twice():
    assert second_definitions() == []


def test_known_second_definitions_are_still_there():
    """An entry of KNOWN that no longer matches is stale: delete it."""
    present = {(owner, field) for path, _ in _files()
               for owner, field, _, _ in _defaults_in(_tree(path))}
    assert set(KNOWN) <= present, set(KNOWN) - present


@pytest.mark.parametrize("source, found", [
    ("from dataclasses import dataclass\n\n@dataclass\nclass SamplingParams:\n"
     "    temperature: float = 0.8\n", "is a literal"),
    ("class SandboxPolicy:\n    memory_mb: int = 1024\n", "is a literal"),
    ("def build(memory_mb=1024):\n    pass\n", "execution.memory_mb's default again"),
    ("class Options:\n    max_new_tokens: int = 512\n", "model.max_new_tokens's default"),
    ('DEFAULTS = {"model": {"temperature": 0.8}}\n', "writes a setting's default again"),
    ('HELP = "Sampling temperature (config: model.temperature, default 0.8)."\n',
     "help text writes a default"),
    ('PER_REQUEST_KEYS = ("temperature", "top_p", "top_k", "stop")\n', "lists [model] keys"),
])
def test_the_scan_finds_a_default_written_again(tmp_path, source, found):
    path = tmp_path / "coral_core" / "example.py"
    path.parent.mkdir()
    path.write_text(source)
    reported = second_definitions([(path, "coral_core/example.py")])
    assert len(reported) == 1 and found in reported[0], reported


def test_the_scan_leaves_derived_values_and_other_numbers_alone(tmp_path):
    path = tmp_path / "example.py"
    path.write_text("from coral_core.config.settings import default\n\n\nclass SamplingParams:\n"
                    "    temperature: float = default('model.temperature')\n"
                    "    top_k: int = default('model.top_k')\n\n\n"
                    "def build(memory_mb=2048, temperature=0.0, seed=0):\n    pass\n")
    assert second_definitions([(Path(path), "coral_core/example.py")]) == []
