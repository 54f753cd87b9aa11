"""Plugins add commands to `coral` (coral_register_commands); `fim` and `mutation` are
added that way by their built-in plugins. A plugin's broken hook is one line, as every
register hook's failure is; `coral --version` loads no plugin and no run machinery."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import coral_env, run_coral
from plugin_kit import make_distribution

GREETER = '''
    import typer

    from coral_core.hookspecs import hookimpl
    from coral_core.terminal import CONTEXT, CoralCommand, CoralGroup, note, print_json

    greet = typer.Typer(cls=CoralGroup, no_args_is_help=True, context_settings=CONTEXT,
                        help="Greetings from a plugin.")


    @greet.command("hello", cls=CoralCommand)
    def hello(name: str = typer.Argument(..., help="Whom to greet."),
              loud: bool = typer.Option(False, "--loud", help="Shout."),
              as_json: bool = typer.Option(False, "--json", help="Print JSON.")):
        """Say hello."""
        text = f"hello, {name}" + ("!" if loud else "")
        if as_json:
            print_json({"greeting": text})
        else:
            note(text)


    @hookimpl
    def coral_register_commands(cli):
        cli.add_typer(greet, name="greet")
'''

BROKEN = '''
    from coral_core.hookspecs import hookimpl

    @hookimpl
    def coral_register_commands(cli):
        @cli.command("grumpy")
        def grumpy():
            """Never added."""
        raise RuntimeError("no commands today")
'''


def _env(tmp_path, data_dir, name: str, source: str, **extra: str) -> dict[str, str]:
    module = f"coral_{name}"
    site = make_distribution(tmp_path / "site", f"coral-{name}", {module: source},
                             {name: module})
    return coral_env(data_dir, PYTHONPATH=str(site), COLUMNS="120", **extra)


def test_a_plugin_adds_a_command_group_that_helps_and_runs(tmp_path, data_dir):
    env = _env(tmp_path, data_dir, "greeter", GREETER)
    listed = run_coral("--help", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "greet" in listed.stdout and "Greetings from a plugin." in listed.stdout
    assert "fim" in listed.stdout and "mutation" in listed.stdout
    usage = run_coral("greet", "hello", "-h", env=env)
    assert usage.returncode == 0 and "Usage: coral greet hello [OPTIONS] NAME" in usage.stdout
    assert "<bool>" not in usage.stdout  # CoralCommand's help, from the core
    said = run_coral("greet", "hello", "cook", "--loud", env=env)
    assert (said.returncode, said.stdout, said.stderr) == (0, "hello, cook!\n", "")
    as_json = run_coral("greet", "hello", "cook", "--json", env=env)
    assert json.loads(as_json.stdout) == {"greeting": "hello, cook"}
    missing = run_coral("greet", "hello", env=env)
    assert missing.returncode == 2 and "Missing argument 'NAME'" in missing.stderr
    hooks = next(p for p in json.loads(run_coral("plugins", "list", "--json", env=env).stdout)
                 if p["name"] == "greeter")["hooks"]
    assert hooks == ["coral_register_commands"]


def test_a_plugin_whose_command_hook_raises_is_one_line_and_adds_nothing(tmp_path, data_dir):
    env = _env(tmp_path, data_dir, "broken", BROKEN)
    where = f"{tmp_path / 'site' / 'coral_broken.py'}:9: RuntimeError: no commands today"
    warning = ("coral: warning: plugin 'broken' failed in coral_register_commands and was "
               f"skipped: {where}")
    listed = run_coral("--help", env=env)
    assert listed.returncode == 0, listed.stderr
    assert listed.stderr.splitlines() == [warning]
    assert "grumpy" not in listed.stdout and "mutation" in listed.stdout
    called = run_coral("grumpy", env=env)
    assert called.returncode == 2
    assert called.stderr.splitlines() == [warning, "coral: error: No such command 'grumpy'."]
    verbose = run_coral("-v", "--help", env=env)
    assert verbose.returncode == 0 and "Traceback" in verbose.stderr
    assert 'raise RuntimeError("no commands today")' in verbose.stderr
    own = run_coral("fim", "build", "-h", env=env)  # the others' commands still work
    assert own.returncode == 0 and "SRC_DIR" in own.stdout


def test_a_command_hook_that_adds_nothing_says_so(tmp_path, data_dir):
    """`@cli.command` without its parentheses (typer takes the function for the command's
    name and registers nothing): the command was silently missing."""
    env = _env(tmp_path, data_dir, "bare", '''
        from coral_core.hookspecs import hookimpl

        @hookimpl
        def coral_register_commands(cli):
            @cli.command
            def shout():
                """Never added."""
    ''')
    result = run_coral("shout", env=env)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "coral: warning: plugin 'bare' implements coral_register_commands but added no "
        "command (decorate with @cli.command(), parentheses included)",
        "coral: error: No such command 'shout'."]


@pytest.mark.parametrize("name, words", [
    ("fim", "command 'fim' is added by both 'coral_plugins.datasets.fim' and 'taker'; "
            "disable one with CORAL_DISABLE_PLUGINS"),
    ("run", "command 'run' is Coral's own; plugin 'taker' cannot add it (disable the plugin "
            "with CORAL_DISABLE_PLUGINS)"),
])
def test_a_command_name_that_is_taken_is_an_error(tmp_path, data_dir, name, words):
    env = _env(tmp_path, data_dir, "taker", f'''
        from coral_core.hookspecs import hookimpl

        @hookimpl
        def coral_register_commands(cli):
            @cli.command("{name}")
            def taken():
                """Taken."""
    ''')
    result = run_coral("--help", env=env)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [f"coral: error: {words}"]
    blocked = run_coral("--help", env={**env, "CORAL_DISABLE_PLUGINS": "taker"})
    assert blocked.returncode == 0, blocked.stderr


HEAVY = ("coral_core.run.runner", "coral_core.run.store", "coral_core.sandbox",
         "coral_core.config.launch", "coral_core.run.rundir", "coral_core.plugins", "pluggy",
         "matplotlib", "numpy")


def _imported(args: list[str]) -> tuple[str, list[str]]:
    """What `coral ARGS` prints, and which HEAVY modules it imported."""
    probe = ("import sys\nfrom coral_cli.app import main\ntry:\n    main(sys.argv[1:])\n"
             "except SystemExit:\n    pass\n"
             f"print(sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True,
                          text=True, env=coral_env(), timeout=120)
    return done.stdout, json.loads(done.stderr.strip().splitlines()[-1].replace("'", '"'))


def test_version_imports_no_plugin_and_no_run_machinery():
    from coral_core import __version__

    printed, imported = _imported(["--version"])
    assert printed == f"coral {__version__}\n"
    assert imported == []


def test_help_lists_plugins_commands_without_the_runner():
    printed, imported = _imported(["--help"])
    assert "fim" in printed and "mutation" in printed
    assert "coral_core.run.runner" not in imported and "matplotlib" not in imported
