"""The `coral` console script. Importing the command takes tens of milliseconds; a ^C in
that window raised KeyboardInterrupt from some import and printed a traceback. Until the
command's own handling is in place, SIGINT ends the process by the signal, quietly."""

from __future__ import annotations

import signal


def main() -> None:
    quiet = signal.getsignal(signal.SIGINT) is signal.default_int_handler  # not if ignored
    if quiet:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    from coral_cli.streams import make_streams_safe

    make_streams_safe()
    from coral_cli.app import main as command

    if quiet:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    command()
