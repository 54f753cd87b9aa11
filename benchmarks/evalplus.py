"""Coral against EvalPlus's own checker on the same distinct candidates, in one run.

The baseline is EvalPlus 0.3.1's `untrusted_check` (a forked process per candidate,
human-eval's reliability guard, signal-based time limits, no OS sandbox), called as its
`evaluate` calls it: from a process pool of `--workers` processes, in a fresh interpreter
whose start is counted. Against it, `coral evaluate --candidate-dir` (bubblewrap, a worker
per core, every isolation layer on), CLI start included, with the tests only and with all
five objectives. The candidates are QuixBugs' gcd, made distinct by a comment (Coral runs an
identical program once), 6 test inputs each; every verdict must be "pass" on both sides.
Prints seconds, ms per candidate and Coral's speed as a multiple of EvalPlus's (higher is
faster), each the median of --rounds.

Needs `pip install --no-deps evalplus==0.3.1` (its evaluator needs only numpy and psutil;
the rest of its dependencies are for generation). Usage:
python benchmarks/evalplus.py [--candidates 200] [--workers 2] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess  # nosec B404 - runs this interpreter and coral with fixed arguments
import sys
import tempfile
import time
from pathlib import Path

TESTS_ONLY = '[evaluators]\nuse = ["tests"]\nweights = {bugfix = 1.0}\ngate = ""\n'
EVALPLUS = """
import json, sys, time
from concurrent.futures import ProcessPoolExecutor
from evalplus.eval import untrusted_check

job = json.load(open(sys.argv[1]))

def check(code):
    return untrusted_check("humaneval", code, job["inputs"], job["entry_point"],
                           job["expected"], 0, job["ref_time"])[0]

started = time.perf_counter()
with ProcessPoolExecutor(max_workers=job["workers"]) as pool:
    verdicts = list(pool.map(check, job["codes"]))
print(json.dumps({"verdicts": verdicts, "seconds": time.perf_counter() - started}))
"""


def _timed(command: list[str], env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)  # nosec B603
    if done.returncode != 0:
        raise SystemExit(f"{command[0]} failed: {done.stderr[-2000:]}")
    return time.perf_counter() - started, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("CORAL_DATA_DIR", ""))
    parser.add_argument("--candidates", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from coral_plugins.datasets.quixbugs import QuixBugs

    task = QuixBugs(data_dir=args.data_dir or None).task("gcd")
    cases = task.execution.cases
    codes = [f"{task.reference}\n# candidate {i}\n" for i in range(args.candidates)]
    coral = str(Path(sys.executable).with_name("coral"))
    env = {**os.environ, "CORAL_DATA_DIR": str(Path(args.data_dir).absolute())}
    folder = Path(tempfile.mkdtemp(prefix="coral-evalplus-"))
    try:
        candidates = folder / "candidates"
        candidates.mkdir()
        for i, code in enumerate(codes):
            (candidates / f"gcd__{i}.py").write_text(code, encoding="utf-8")
        job = folder / "job.json"
        job.write_text(json.dumps({
            "codes": codes, "entry_point": "gcd", "workers": args.workers,
            "inputs": [list(c.step.args) for c in cases],
            "expected": [c.expects[0].value for c in cases],
            "ref_time": [0.001] * len(cases)}), encoding="utf-8")
        (folder / "tests.toml").write_text(TESTS_ONLY + f"[execution]\nworkers = "
                                           f"{args.workers}\n", encoding="utf-8")
        (folder / "all.toml").write_text(f"[execution]\nworkers = {args.workers}\n",
                                         encoding="utf-8")
        figures: dict[str, list[float]] = {"evalplus": [], "evalplus, pool only": [],
                                           "coral, tests only": [], "coral, 5 objectives": []}
        for _ in range(args.rounds):
            seconds, out = _timed([sys.executable, "-c", EVALPLUS, str(job)], env)
            report = json.loads(out)
            assert report["verdicts"] == ["pass"] * len(codes), set(report["verdicts"])
            figures["evalplus"].append(seconds)
            figures["evalplus, pool only"].append(report["seconds"])
            for label, config in (("coral, tests only", "tests.toml"),
                                  ("coral, 5 objectives", "all.toml")):
                seconds, out = _timed([coral, "evaluate", "--plugin", "quixbugs",
                                       "--candidate-dir", str(candidates), "--config",
                                       str(folder / config), "--json"], env)
                assert all(d["passed"] for d in json.loads(out)), label
                figures[label].append(seconds)
    finally:
        shutil.rmtree(folder)
    baseline = statistics.median(figures["evalplus"])
    print(f"{len(codes)} distinct gcd candidates, {len(cases)} tests each, {args.workers} "
          f"workers, median of {args.rounds}:")
    for label, values in figures.items():
        seconds = statistics.median(values)
        print(f"  {label:<22} {seconds:6.2f} s  {1000 * seconds / len(codes):6.2f} ms each"
              f"  {baseline / seconds:5.2f}x EvalPlus")


if __name__ == "__main__":
    main()
