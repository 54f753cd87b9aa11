"""Fixed cost: how long a small command takes from process start to its answer, measured
against a bare interpreter start in the same run.

    python benchmarks/startup.py [--data-dir DIR] [--rounds 9]

Prints, best and median of the rounds, for: `python -c pass` (the floor: the same
interpreter, started the same way), `coral --version`, `coral --help`, and `coral evaluate`
of ONE candidate (QuixBugs' gcd, fixed) with the tests only and with all five objectives;
each also as a multiple of the floor, which is what to compare across machines and loads.
Targets (the speed issue): `--version` under 0.2 s and one candidate, tests only, under
0.3 s on a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TESTS_ONLY = """[evaluators]
use = ["tests"]
weights = {bugfix = 1.0}
gate = ""
"""


def timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path,
                        default=Path(os.environ.get("CORAL_DATA_DIR", "../shared/datasets")))
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    bin_dir = Path(sys.executable).parent
    coral = str(bin_dir / "coral")
    # Bytecode caching as a user's install has it (this machine sets PYTHONDONTWRITEBYTECODE,
    # which would add compiling every module to every start); the first round writes it.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["CORAL_DATA_DIR"] = str(args.data_dir.resolve())
    candidate = args.data_dir / "quixbugs" / "correct_python_programs" / "gcd.py"
    with tempfile.TemporaryDirectory() as scratch:
        config = Path(scratch) / "tests-only.toml"
        config.write_text(TESTS_ONLY)
        evaluate = [coral, "evaluate", "--plugin", "quixbugs", "--problem", "gcd",
                    "--candidate", str(candidate), "--json"]
        commands = {
            "python -c pass (floor)": [sys.executable, "-c", "pass"],
            "coral --version": [coral, "--version"],
            "coral --help": [coral, "--help"],
            "coral evaluate, 1 candidate, tests only": [*evaluate, "--config", str(config)],
            "coral evaluate, 1 candidate, 5 objectives": evaluate,
        }
        for command in commands.values():  # warm-up: bytecode written, files cached
            timed(command, env)
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.rounds):  # interleaved, so that a busy moment hits every command
            for name, command in commands.items():
                times[name].append(timed(command, env))
    floor = statistics.median(times["python -c pass (floor)"])
    print(f"{'command':44} {'best s':>7} {'median s':>9} {'x floor':>8}")
    for name, seconds in times.items():
        median = statistics.median(seconds)
        print(f"{name:44} {min(seconds):7.3f} {median:9.3f} {median / floor:8.1f}")


if __name__ == "__main__":
    main()
