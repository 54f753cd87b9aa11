"""The default model's runs with the baseline's prior learned (an empty cache: a new
machine) and read back (the same cache, as every later run on that machine), in one go.

Times `coral run --plugin quixbugs --seed 0` (the README's main job) and a small
evolution search (4 genomes x 3 generations on 3 problems), each first with a fresh
`CORAL_CACHE_DIR` and then again with the cache the first run left, and checks that the
two give the same summary (the prior read back is the one learned). Prints each wall time
and the cold / warm ratio. Usage: python benchmarks/baseline.py [--samples 50]
Needs CORAL_DATA_DIR (or QuixBugs fetched).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess  # nosec B404 - runs coral with fixed arguments
import sys
import tempfile
import time
from pathlib import Path

from coral_core.results.reporting import timeless

CORAL = str(Path(sys.executable).with_name("coral"))
EVOLUTION = """[dataset]
problems = ["sieve", "wrap", "lcs_length"]
[run]
samples = 2
seed = 3
[search]
strategy = "evolution"
[search.options]
population = 4
generations = 3
"""


def timed(args: list[str], env: dict[str, str]) -> tuple[float, dict]:
    started = time.perf_counter()
    done = subprocess.run([CORAL, *args, "--json"], env=env, capture_output=True,
                          text=True)  # nosec B603
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"coral {' '.join(args)} failed: {done.stderr[-2000:]}")
    return seconds, timeless(json.loads(done.stdout))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        env = {**os.environ, "CORAL_CACHE_DIR": str(root / "cache")}
        (root / "evolution.toml").write_text(EVOLUTION, encoding="utf-8")
        jobs = {
            f"coral run --plugin quixbugs ({8 * args.samples} samples)": [
                "run", "--plugin", "quixbugs", "--seed", "0", "--samples",
                str(args.samples)],
            "evolution, 4 x 3 genomes, 3 problems": [
                "run", "--plugin", "evolution", "--config", str(root / "evolution.toml")],
        }
        print(f"{'run':44} {'cold s':>7} {'warm s':>7} {'cold/warm':>9} same")
        for index, (label, command) in enumerate(jobs.items()):
            shutil.rmtree(root / "cache", ignore_errors=True)  # a new machine's
            cold, first = timed([*command, "--out", str(root / f"cold{index}")], env)
            warm, second = timed([*command, "--out", str(root / f"warm{index}")], env)
            same = "yes" if first == second else "NO"
            print(f"{label:44} {cold:7.1f} {warm:7.1f} {cold / warm:9.2f} {same}")


if __name__ == "__main__":
    main()
