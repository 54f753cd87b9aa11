"""Run a command beside CPU hogs: `python benchmarks/loaded.py [--per-core N] -- COMMAND...`.

Starts N busy-looping processes per core (2 by default), runs COMMAND, stops the hogs
whatever happens, and exits with COMMAND's status. `make test-loaded` runs the test suite
this way: a result that changes when the machine is busy is a bug.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
from typing import Iterator

HOG = "while True:\n    pass\n"


@contextlib.contextmanager
def cpu_hogs(per_core: int = 2) -> Iterator[int]:
    """`per_core` busy-looping processes per core while the block runs."""
    count = per_core * (os.cpu_count() or 1)
    hogs = [subprocess.Popen([sys.executable, "-c", HOG], start_new_session=True)
            for _ in range(count)]
    try:
        yield count
    finally:
        for hog in hogs:
            try:
                os.killpg(hog.pid, signal.SIGKILL)
            except OSError:
                pass
            hog.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-core", type=int, default=2)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give a command after --")
    with cpu_hogs(args.per_core) as count:
        sys.stderr.write(f"loaded.py: {count} CPU hogs running beside: {' '.join(command)}\n")
        sys.stderr.flush()
        return subprocess.call(command)


if __name__ == "__main__":
    sys.exit(main())
