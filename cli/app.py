"""The `coral` command: a thin layer over coral_core (one module per command group)."""

from __future__ import annotations

import logging
import os
import shlex
import sys

import typer

try:  # typer >= 0.20 vendors click; older versions use the click package
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover
    from click import exceptions as click_errors

from coral_core.errors import UserError
from coral_core.runner import Interrupted

from . import datasets_cmd, evaluate, plugins_cmd, report, run

app = typer.Typer(
    name="coral", no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
    help="Score code models honestly, and search for the configuration that scores best.",
)
app.command("run")(run.run)
app.command("evaluate")(evaluate.evaluate)
app.command("report")(report.report)
app.add_typer(plugins_cmd.app, name="plugins")
app.add_typer(datasets_cmd.app, name="datasets")


def _fail(message: str, code: int = 2) -> None:
    sys.stderr.write(f"coral: error: {' '.join(message.split())}\n")
    sys.stderr.flush()
    raise SystemExit(code)


def main(argv: list[str] | None = None) -> None:
    """Entry point: user errors end with one line on stderr and exit status 2."""
    logging.basicConfig(
        level=os.environ.get("CORAL_LOG_LEVEL", "WARNING").upper(),
        format="coral: %(levelname)s: %(message)s",
    )
    for noisy in ("bandit", "stevedore", "httpx", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
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
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    raise SystemExit(result if isinstance(result, int) else 0)


if __name__ == "__main__":
    main()
