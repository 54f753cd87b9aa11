"""Scores that do not depend on the machine's load: the 80 upstream QuixBugs programs
(buggy and correct) scored three times on all five objectives, once on a quiet machine and
twice beside two CPU hogs per core, with fresh scorers each time. Prints the largest
difference of every objective between runs (target: 0 for each, in the default mode).

    python benchmarks/determinism.py [--data-dir DIR] [--mode cost|time]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from coral_core.config.blueprints import ScoringBlueprint
from coral_core.config.experiment import merge, validate
from coral_core.run.factories import build_scoring
from coral_core.types import Candidate
from coral_plugins.datasets.quixbugs import PRESET, QuixBugs

sys.path.insert(0, str(Path(__file__).parent))
from loaded import cpu_hogs  # noqa: E402


def score_all(dataset: QuixBugs, mode: str) -> dict[tuple[str, str], dict[str, float]]:
    config = merge(validate(PRESET, "preset"),
                   {"evaluators": {"options": {"runtime": {"mode": mode}}}})
    scoring = build_scoring(ScoringBlueprint.of(config), dataset)
    tasks = dataset.tasks("all")
    jobs = [(task, kind, code) for task in tasks
            for kind, code in (("buggy", task.source), ("correct", task.reference + "\n"))]
    try:
        with ThreadPoolExecutor(2 * scoring.sandbox.workers) as pool:
            scored = list(pool.map(lambda j: scoring.scorer.score(Candidate(j[0], j[2])), jobs))
    finally:
        scoring.close()
    return {(task.id, kind): dict(s.objectives) for (task, kind, _), s in zip(jobs, scored)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = os.environ.get("CORAL_DATA_DIR", str(Path(__file__).parents[2] / "shared"
                                                   / "datasets"))
    parser.add_argument("--data-dir", default=default)
    parser.add_argument("--mode", choices=("cost", "time"), default="cost")
    args = parser.parse_args()
    dataset = QuixBugs(data_dir=args.data_dir)
    runs, seconds = [], []
    for label in ("quiet", "loaded", "loaded"):
        started = time.perf_counter()
        if label == "quiet":
            runs.append(score_all(dataset, args.mode))
        else:
            with cpu_hogs(2):
                runs.append(score_all(dataset, args.mode))
        seconds.append(time.perf_counter() - started)
        print(f"{label:>7}: 80 programs scored in {seconds[-1]:.1f} s", flush=True)
    names = sorted({name for run in runs for objectives in run.values() for name in objectives})
    print(f"largest difference between the three runs (runtime mode: {args.mode}):")
    for name in names:
        worst, where = 0.0, ""
        for key in runs[0]:
            values = [run[key].get(name, 0.0) for run in runs]
            spread = max(values) - min(values)
            if spread > worst:
                worst, where = spread, f"{key[0]} ({key[1]})"
        print(f"  {name:>9}: {worst:.6f}" + (f"  at {where}" if worst else ""))


if __name__ == "__main__":
    main()
