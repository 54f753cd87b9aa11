"""The `coral` command: a thin layer over coral_core (one module per command group)."""

from __future__ import annotations

import atexit
import errno
import logging
import os
import shlex
import signal
import sys
import threading
import traceback
from typing import Any

import typer

try:  # typer >= 0.20 vendors click; older versions use the click package
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover
    from click import exceptions as click_errors

from coral_core import __version__
from coral_core.errors import UserError
from coral_core.files.stdout import silence
from coral_core.switches import check_switches
from coral_core.shown import printable
from coral_core.terminal import CONTEXT, CoralCommand, CoralGroup

# Each command module imports what its command runs when it runs: `coral --version` imports
# no plugin and no run machinery, `coral --help` only the plugins (for their commands).
from . import datasets_cmd, evaluate, export_cmd, plugins_cmd, report, run

log = logging.getLogger("coral")


class Root(CoralGroup):
    """`coral`: its own commands, then those plugins add (coral_register_commands). Plugins
    are loaded for that only when needed: to list the commands (help), or to find a name
    that is not Coral's own; `coral --version` and `coral run` load none for it."""

    plugin_commands_added = False

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not args and self.no_args_is_help:  # the help shown lists plugins' commands
            self.add_plugin_commands()
        return super().parse_args(ctx, args)

    def list_commands(self, ctx: Any) -> list[str]:
        self.add_plugin_commands()
        return super().list_commands(ctx)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.commands:
            self.add_plugin_commands()
        command = super().get_command(ctx, cmd_name)
        if cmd_name == "run" and command is not None:  # with the flags plugins add to it
            run.add_plugin_flags(command)
        return command

    def add_plugin_commands(self) -> None:
        """Call each plugin's coral_register_commands with a Typer of its own, and add what
        it built. A hook that raises (or builds a command typer cannot make) is reported in
        one line, as a register hook's failure is, and its plugin adds no command; a name
        that is taken already is an error, as for every other kind of name."""
        if self.plugin_commands_added:
            return
        self.plugin_commands_added = True
        from coral_core import plugins
        from coral_core.failures import PLUGIN_FAULTS, describe

        owners: dict[str, str] = {}
        for plugin, call in plugins.implementations("coral_register_commands"):
            cli = typer.Typer()
            try:
                call(cli=cli)
                commands = typer.main.get_group(cli).commands
            except PLUGIN_FAULTS as error:  # a plugin's bug must not break `coral`
                log.warning("plugin '%s' failed in coral_register_commands and was skipped: "
                            "%s", plugin, describe(error))
                log.debug("traceback of plugin '%s':", plugin, exc_info=error)
                continue
            if not commands:  # `@cli.command` without its parentheses registers nothing
                log.warning("plugin '%s' implements coral_register_commands but added no "
                            "command (decorate with @cli.command(), parentheses included)",
                            plugin)
            for name, command in commands.items():
                if name in owners:
                    raise plugins.NameConflict(
                        f"command '{name}' is added by both '{owners[name]}' and '{plugin}'; "
                        "disable one with CORAL_DISABLE_PLUGINS")
                if name in self.commands:
                    raise plugins.NameConflict(
                        f"command '{name}' is Coral's own; plugin '{plugin}' cannot add it "
                        "(disable the plugin with CORAL_DISABLE_PLUGINS)")
                owners[name] = plugin
                self.add_command(command, name)


app = typer.Typer(
    name="coral", cls=Root, no_args_is_help=True, add_completion=False,
    pretty_exceptions_enable=False, context_settings=CONTEXT,
    help="Score code models honestly, and search for the configuration that scores best.",
)
app.command("run", cls=CoralCommand)(run.run)
app.command("evaluate", cls=CoralCommand)(evaluate.evaluate)
app.command("report", cls=CoralCommand)(report.report)
app.command("export", cls=CoralCommand, help=export_cmd.HELP)(export_cmd.export)
app.add_typer(plugins_cmd.app, name="plugins", cls=CoralGroup)
app.add_typer(datasets_cmd.app, name="datasets", cls=CoralGroup)

NOISY = ("bandit", "stevedore", "httpx", "httpcore", "urllib3", "filelock", "asyncio")
_state = {"verbose": False}


class _Formatter(logging.Formatter):
    """'coral: warning: ...' (a traceback, with -v, follows on its own lines); control
    characters from what a user, a model or a plugin wrote are shown as escapes."""

    def format(self, record: logging.LogRecord) -> str:
        record.levelname_lower = record.levelname.lower()
        return printable(super().format(record))


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"coral {__version__}\n")
        raise typer.Exit(0)


def _verbose(value: bool) -> None:
    """Eager, so that it holds before plugins are loaded for --help or a plugin's command."""
    if value:
        _state["verbose"] = True
        logging.getLogger().setLevel(logging.DEBUG)


@app.callback()
def root(
    version: bool = typer.Option(False, "--version", is_eager=True, callback=_version,
                                 help="Print Coral's version and exit."),
    verbose: bool = typer.Option(False, "-v", "--verbose", is_eager=True, callback=_verbose,
                                 help="Debug logging, and tracebacks of plugin errors."),
) -> None:
    """Score code models honestly, and search for the configuration that scores best."""


LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


MESSAGE_CHARS = 2000  # a 2 MB task id came back whole in its error (a bad-input pass)


def _fail(message: str, code: int = 2) -> None:
    said = " ".join(printable(message).split())
    if len(said) > MESSAGE_CHARS:  # its start and its end (where the hint is) are kept
        cut = len(said) - MESSAGE_CHARS
        said = f"{said[:MESSAGE_CHARS - 500]} [... {cut} characters ...] {said[-500:]}"
    sys.stderr.write(f"coral: error: {said}\n")
    sys.stderr.flush()
    raise SystemExit(code)


def _setup_logging() -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(_Formatter("coral: %(levelname_lower)s: %(message)s"))
    root_logger = logging.getLogger()
    root_logger.handlers[:] = [handler]
    level = os.environ.get("CORAL_LOG_LEVEL", "").strip().upper() or "WARNING"
    if level not in LEVELS:
        _fail(f"CORAL_LOG_LEVEL={os.environ['CORAL_LOG_LEVEL']!r}: give one of "
              f"{', '.join(LEVELS)}")
    root_logger.setLevel(level)
    for noisy in NOISY:
        logging.getLogger(noisy).setLevel(logging.ERROR)


def _interrupted() -> None:
    """^C outside a run's own handling: say so and exit now, without joining worker threads
    at interpreter exit (one waiting on a worker would hold the exit, and a second ^C there
    printed a traceback)."""
    sys.stdout.flush()
    sys.stderr.write("coral: error: interrupted\n")
    sys.stderr.flush()
    cleanup = threading.Thread(target=atexit._run_exitfuncs, daemon=True)  # kill sandboxes
    cleanup.start()
    cleanup.join(2.0)
    os._exit(130)


def _terminated(signum: int, frame: object) -> None:
    """SIGTERM (a scheduler's stop, `kill PID`) ends a command as Ctrl-C does: an
    interrupted run is marked so and prints the command that resumes it."""
    raise KeyboardInterrupt


class _NotRaised(Exception):
    """Stands for the runner's Interrupted where no run was imported (none raised it)."""


def _run_interrupted() -> type[Exception]:
    """coral_core.run.runner.Interrupted, looked up only when something was raised, so that
    the runner is imported by the commands that run, not by `coral --version`."""
    runner = sys.modules.get("coral_core.run.runner")
    return getattr(runner, "Interrupted", _NotRaised)


_UNWRITABLE = (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG)


def _path_problem(error: BaseException) -> str | None:
    """A path the user gave that the system cannot follow (too long, a loop of links, a
    file where a folder must be...), or limits too low to start a thread, as one line; None
    for any other error. Found by fuzzing and red-team passes as tracebacks from wherever
    the path was first used or the thread first started."""
    if isinstance(error, OSError) and error.filename is not None:
        return f"cannot use {error.filename}: {error.strerror or error}"
    if isinstance(error, OSError) and error.errno in _UNWRITABLE:  # a write past the guard
        return f"cannot write output: {error.strerror or error}"
    if isinstance(error, RuntimeError) and str(error).startswith("Symlink loop"):
        return f"cannot use a path: {error} (a loop of symbolic links)"
    if isinstance(error, RuntimeError) and str(error) == "can't start new thread":
        return ("cannot start a thread: this process's limits are too low (ulimit -v, -u); "
                "a run stopped here resumes with coral run --resume")
    return None


def main(argv: list[str] | None = None) -> None:
    """Entry point: user errors end with one line on stderr and exit status 2."""
    _setup_logging()
    try:
        os.getcwd()  # every relative path and default folder is resolved against it
        check_switches()
    except FileNotFoundError:
        _fail("the current folder no longer exists (it was deleted); cd to one that does")
    except UserError as error:
        _fail(str(error))
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminated)
    try:
        result = app(args=argv, standalone_mode=False, prog_name="coral")
    except _run_interrupted() as stopped:
        # Work in flight was abandoned; exit now rather than wait for its threads.
        sys.stdout.flush()
        sys.stderr.write("coral: interrupted; resume with: "
                         f"coral run --resume {shlex.quote(stopped.run_dir)}\n")
        sys.stderr.flush()
        os._exit(130)
    except UserError as error:
        if _state["verbose"]:
            traceback.print_exception(error, file=sys.stderr)
        _fail(str(error))
    except click_errors.NoArgsIsHelpError as error:
        error.show()
        raise SystemExit(2)
    except click_errors.ClickException as error:
        _fail(error.format_message())
    except typer.Abort:
        _fail("aborted", 130)
    except typer.Exit as done:
        raise SystemExit(done.exit_code)
    except KeyboardInterrupt as stopped:
        if _state["verbose"]:
            traceback.print_exception(stopped, file=sys.stderr)
        _interrupted()
    except (OSError, RuntimeError) as error:
        why = _path_problem(error)
        if why is None:
            raise
        if isinstance(error, OSError) and error.errno in _UNWRITABLE:
            silence(sys.stdout)  # what it still buffers must not fail again at exit
        if _state["verbose"]:
            traceback.print_exception(error, file=sys.stderr)
        _fail(why)
    if result == 130:  # typer's answer to ^C (KeyboardInterrupt), returned, not raised
        _interrupted()
    raise SystemExit(result if isinstance(result, int) else 0)


if __name__ == "__main__":
    main()
