"""Lazy factories: a plugin registers `Lazy("module:Name")`, and the module is imported when
a command first uses it, never by loading the plugins; a Lazy answers for its target's
call, signature and attributes, and a target that cannot be imported is one line."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from coral_core import plugins
from coral_core.config.options import check_call, option_schema
from coral_core.errors import UserError
from coral_core.lazy import Lazy

TARGET = '''
from __future__ import annotations

IMPORTED = True


class Toy:
    """A factory whose option types come from its annotations."""

    splits = ("train", "test")

    def __init__(self, size: int = 3, name: str = "toy") -> None:
        self.size, self.name = size, name
'''


@pytest.fixture
def toy_module(tmp_path, monkeypatch):
    (tmp_path / "lazy_toy_target.py").write_text(TARGET)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("lazy_toy_target", None)
    yield "lazy_toy_target"
    sys.modules.pop("lazy_toy_target", None)


def test_a_lazy_factory_is_its_target_once_used(toy_module):
    lazy = Lazy(f"{toy_module}:Toy")
    assert toy_module not in sys.modules  # naming it imports nothing
    assert lazy.splits == ("train", "test")
    assert toy_module in sys.modules
    built = lazy(size=5)
    assert (built.size, built.name) == (5, "toy")
    schema, open_ended = option_schema(lazy, positional=0)
    assert schema == {"size": int, "name": str} and not open_ended  # types, not strings
    with pytest.raises(UserError, match=r"'toy' takes no option 'colour' \(it takes: size, name\)"):
        check_call(lazy, "'toy'", colour="red")


def _factory(target: str, *, flag: bool = False, size: int = 8, rate: float = 1.0,
             name: str | None = None, table: dict | None = None, loose=None) -> None:
    """A model factory's signature: its annotations are what a file's values must be."""


@pytest.mark.parametrize("options, words", [
    ({"flag": "false"}, "option 'flag' takes true/false, not 'false'"),  # never true
    ({"flag": 0}, "option 'flag' takes true/false, not 0"),
    ({"size": "8"}, "option 'size' takes an integer, not '8'"),
    ({"size": 2.5}, "option 'size' takes an integer, not 2.5"),
    ({"size": True}, "option 'size' takes an integer, not True"),
    ({"rate": "fast"}, "option 'rate' takes a number, not 'fast'"),
    ({"name": 5}, "option 'name' takes str, not 5"),
    ({"table": [1]}, "option 'table' takes a TOML table {k = v}, not list"),
])
def test_option_values_from_a_file_must_be_of_their_annotated_type(options, words):
    check_call(_factory, "model 'x'", "t", flag=True, size=2, rate=3, name="n", table={},
               loose=object())  # the right types (an integer is a number; None a default)
    check_call(_factory, "model 'x'", "t", name=None)
    with pytest.raises(UserError) as caught:
        check_call(_factory, "model 'x'", "t", **options)
    assert str(caught.value) == f"model 'x' {words}"


def test_the_hf_models_remote_code_switch_takes_only_a_boolean():
    """`trust_remote_code = "false"` in a file was truthy: the model's own code ran."""
    from coral_plugins.models.hf.model import HFModel

    with pytest.raises(UserError, match="option 'trust_remote_code' takes true/false"):
        check_call(HFModel, "model 'hf'", "/nowhere", trust_remote_code="false")


@pytest.mark.parametrize("target, why", [
    ("lazy_no_such_module_here:Thing", "No module named 'lazy_no_such_module_here'"),
    ("json:NoSuchThing", "NoSuchThing"),
])
def test_a_target_that_cannot_be_loaded_is_one_line_when_used(target, why):
    lazy = Lazy(target)  # registering it cannot fail
    with pytest.raises(UserError) as caught:
        lazy()
    message = str(caught.value)
    assert message.startswith(f"cannot load {target}: ") and why in message
    assert "\n" not in message


def test_a_target_is_module_colon_attribute():
    with pytest.raises(ValueError, match="package.module:attribute"):
        Lazy("no_colon_here")


def test_loading_the_plugins_imports_no_lazy_target(toy_module, tmp_path, monkeypatch):
    """A plugin that registers a Lazy: `plugins.registry()` has the name, and only a build
    imports the module."""
    plugin = tmp_path / "lazy_toy_plugin.py"
    plugin.write_text(textwrap.dedent(f'''
        from coral_core.hookspecs import hookimpl
        from coral_core.lazy import Lazy


        @hookimpl
        def coral_register_datasets(register):
            register("lazy-toy", Lazy("{toy_module}:Toy"))
    '''))
    sys.modules.pop("lazy_toy_plugin", None)
    monkeypatch.setattr(plugins, "BUILTIN_PLUGINS", (*plugins.BUILTIN_PLUGINS, "lazy_toy_plugin"))
    plugins.reset()
    assert "lazy-toy" in plugins.registry().names("datasets")
    assert toy_module not in sys.modules
    assert plugins.build("datasets", "lazy-toy", size=2).size == 2
    assert toy_module in sys.modules


def test_help_and_version_import_no_plugin_machinery():
    """`coral --help` loads every plugin (for the commands they add) and `--version` none;
    neither imports a model, the sandbox, the run machinery, numpy or an HTTP client."""
    probe = textwrap.dedent('''
        import json, sys
        from coral_cli.app import main
        sys.argv = ["coral", sys.argv[1]]
        try:
            main()
        except SystemExit:
            pass
        heavy = ("numpy", "torch", "transformers", "httpx", "coral_core.sandbox",
                 "coral_core.run.factories", "coral_core.execution", "coral_core.data.fetch",
                 "coral_plugins.models.baseline.model", "coral_plugins.models.hf.model",
                 "coral_plugins.search.evolution.strategy")
        sys.stderr.write(json.dumps(sorted(m for m in heavy if m in sys.modules)))
    ''')
    for flag in ("--help", "--version"):
        result = subprocess.run([sys.executable, "-c", probe, flag], capture_output=True,
                                text=True, timeout=120)
        assert json.loads(result.stderr.strip().splitlines()[-1]) == [], (flag, result.stderr)
