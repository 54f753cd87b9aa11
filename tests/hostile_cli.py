"""Running the real `coral` command and measuring what it cost (wall time, peak memory).

The command runs in a child interpreter through `coral_cli.app.main`, exactly as the
console script does; on its way out the child writes its own peak resident set size
(VmHWM in /proc/self/status: the coral process only, not the sandbox workers or helpers
it starts) to a file that the test reads. Not getrusage's ru_maxrss: after a vfork+exec it
keeps the parent's peak (the pytest process that launched it), which has nothing to do with
the command. stdout and stderr are what a user sees.
"""

from __future__ import annotations

import json
import os
import subprocess  # nosec B404 - runs this interpreter with a fixed wrapper
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

_WRAPPER = """
import json, sys
out = sys.argv[1]
try:
    from coral_cli.app import main
    main(sys.argv[2:])
finally:
    with open("/proc/self/status") as status:
        peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    with open(out, "w") as handle:
        json.dump({"maxrss_kib": peak}, handle)
"""


@dataclass(frozen=True)
class Measured:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    peak_mib: float  # peak RSS of the coral process

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


def run_measured(*args: str, env: dict[str, str], timeout: float = 300) -> Measured:
    """Run `coral ARGS` in a child interpreter; return its outcome, time and peak memory."""
    with tempfile.TemporaryDirectory() as scratch:
        record = Path(scratch) / "rusage.json"
        started = time.monotonic()
        done = subprocess.run(  # nosec B603 - this interpreter, fixed wrapper
            [sys.executable, "-c", _WRAPPER, str(record), *args], capture_output=True,
            text=True, env=env, timeout=timeout)
        seconds = time.monotonic() - started
        peak = json.loads(record.read_text())["maxrss_kib"] / 1024 if record.exists() else -1.0
    return Measured(done.returncode, done.stdout, done.stderr, seconds, peak)


def leaks(secret: str, *places: Path | str) -> list[str]:
    """Which of `places` (files, folders searched recursively, or texts) contain `secret`."""
    found = []
    for place in places:
        if isinstance(place, Path):
            files = [place] if place.is_file() else [p for p in place.rglob("*") if p.is_file()]
            found += [str(p) for p in files if secret.encode() in p.read_bytes()]
        elif secret in place:
            found.append(f"text {place[:60]!r}...")
    return found


def base_env(**extra: str) -> dict[str, str]:
    """The caller's environment less CORAL_*, with plugin autoloading off (as conftest)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORAL_")}
    env["CORAL_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env.update(extra)
    return env
