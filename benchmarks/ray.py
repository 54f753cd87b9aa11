"""The same QuixBugs run on the local executor and on Ray: overhead per candidate, scaling.

Runs `coral run --plugin quixbugs` (the built-in baseline model, seed 0) three or more ways
in one go: `--executor local`, then a local Ray with 1 evaluation actor and with 2 (each
actor holding a sandbox pool of `--workers` slots), and prints each wall time, the time per
candidate, its ratio to the local run measured in this same invocation, and whether the
summary equals the local one (it must). Ray's start-up (about 10-20 s on 2 cores) is
inside the Ray figures: it is what a user pays once per run.

Usage: python benchmarks/ray.py [--samples 10] [--workers 1] [--actors 1,2]
Needs CORAL_DATA_DIR (or QuixBugs fetched) and `pip install 'coral-engine[ray]'`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from coral_core.results.reporting import timeless

CORAL = str(Path(sys.executable).with_name("coral"))


def run(label: str, folder: Path, samples: int, workers: int, actors: int = 0,
        ) -> tuple[float, dict]:
    config = folder / f"{label}.toml"
    executor = f'executor = "ray"\nevaluation_actors = {actors}\n' if actors else ""
    config.write_text(f"[run]\nsamples = {samples}\n[execution]\nworkers = {workers}\n"
                      + executor)
    started = time.perf_counter()
    done = subprocess.run([CORAL, "run", "--plugin", "quixbugs", "--config", str(config),
                           "--out", str(folder / label), "--json"],
                          capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{label}: coral run failed: {done.stderr.strip()[-500:]}")
    return seconds, json.loads(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--actors", default="1,2")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="coral-bench-ray-") as tmp:
        folder = Path(tmp)
        base_seconds, base = run("local", folder, args.samples, args.workers)
        candidates = len(base["problems"]) * args.samples
        rows = [("local", base_seconds, True)]
        for actors in [int(a) for a in args.actors.split(",")]:
            seconds, summary = run(f"ray-{actors}", folder, args.samples, args.workers,
                                   actors)
            rows.append((f"ray, {actors} evaluation actor(s)", seconds,
                         timeless(summary) == timeless(base)))
        print(f"{candidates} candidates ({len(base['problems'])} problems x {args.samples} "
              f"samples), {args.workers} sandbox worker(s) per actor")
        print(f"{'executor':34} {'wall s':>8} {'ms/candidate':>13} {'vs local':>9} same")
        for label, seconds, same in rows:
            print(f"{label:34} {seconds:8.1f} {1000 * seconds / candidates:13.1f} "
                  f"{seconds / base_seconds:9.2f} {'yes' if same else 'NO'}")
        return 0 if all(same for _, _, same in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
