"""The `coral` command: a thin layer over coral_core (one module per command group)."""

from __future__ import annotations

import atexit
import logging
import os
import shlex
import signal
import sys
import threading
import traceback

import typer

try:  # typer >= 0.20 vendors click; older versions use the click package
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover
    from click import exceptions as click_errors

from coral_core import __version__
from coral_core.errors import UserError
from coral_core.runner import Interrupted
from coral_core.tables import printable

from . import datasets_cmd, evaluate, export_cmd, fim_cmd, mutation_cmd, plugins_cmd, report, run
from .command import CONTEXT, CoralCommand, CoralGroup

app = typer.Typer(
    name="coral", cls=CoralGroup, no_args_is_help=True, add_completion=False,
    pretty_exceptions_enable=False, context_settings=CONTEXT,
    help="Score code models honestly, and search for the configuration that scores best.",
)
app.command("run", cls=CoralCommand)(run.run)
app.command("evaluate", cls=CoralCommand)(evaluate.evaluate)
app.command("report", cls=CoralCommand)(report.report)
app.command("export", cls=CoralCommand, help=export_cmd.HELP)(export_cmd.export)
app.add_typer(plugins_cmd.app, name="plugins", cls=CoralGroup)
app.add_typer(datasets_cmd.app, name="datasets", cls=CoralGroup)
app.add_typer(mutation_cmd.app, name="mutation", cls=CoralGroup)
app.add_typer(fim_cmd.app, name="fim", cls=CoralGroup)

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


@app.callback()
def root(
    version: bool = typer.Option(False, "--version", is_eager=True, callback=_version,
                                 help="Print Coral's version and exit."),
    verbose: bool = typer.Option(False, "-v", "--verbose",
                                 help="Debug logging, and tracebacks of plugin errors."),
) -> None:
    """Score code models honestly, and search for the configuration that scores best."""
    if verbose:
        _state["verbose"] = True
        logging.getLogger().setLevel(logging.DEBUG)


def _fail(message: str, code: int = 2) -> None:
    sys.stderr.write(f"coral: error: {' '.join(printable(message).split())}\n")
    sys.stderr.flush()
    raise SystemExit(code)


def _setup_logging() -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(_Formatter("coral: %(levelname_lower)s: %(message)s"))
    root_logger = logging.getLogger()
    root_logger.handlers[:] = [handler]
    root_logger.setLevel(os.environ.get("CORAL_LOG_LEVEL", "WARNING").upper())
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


def main(argv: list[str] | None = None) -> None:
    """Entry point: user errors end with one line on stderr and exit status 2."""
    _setup_logging()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminated)
    try:
        result = app(args=argv, standalone_mode=False, prog_name="coral")
    except Interrupted as stopped:
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
    if result == 130:  # typer's answer to ^C (KeyboardInterrupt), returned, not raised
        _interrupted()
    raise SystemExit(result if isinstance(result, int) else 0)


if __name__ == "__main__":
    main()
