"""Scoring a test file as hostile code (the testgen evaluator: the screen, two sandboxed
processes per run, the correct program run twice, in pre-warmed workers) against the whole
`coral mutation run` command (trusted tests, forked pytest workers, no sandbox, a
cosmic-ray session on disk) on the same programs, tests and cosmic-ray mutants, in one run:
seconds, ratio, and the kills of each. The tests are QuixBugs' own.

    .venv/bin/python benchmarks/testgen.py                      # six problems
    .venv/bin/python benchmarks/testgen.py --problems gcd,lis --workers 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PROBLEMS = "bitcount,quicksort,lis,sieve,gcd,pascal"


def mutation_run(name: str, program: str, tests: str, workers: int) -> tuple[float, dict]:
    """`coral mutation run` in a project folder of its own: (seconds, its JSON)."""
    with tempfile.TemporaryDirectory(prefix="coral-bench-") as folder:
        project = Path(folder)
        (project / f"{name}.py").write_text(program, encoding="utf-8")
        (project / f"test_{name}.py").write_text(tests, encoding="utf-8")
        started = time.perf_counter()
        done = subprocess.run(
            [str(BIN / "coral"), "mutation", "run", "--module", f"{name}.py", "--tests",
             f"test_{name}.py", "--workers", str(workers), "--json"],
            cwd=project, capture_output=True, text=True, check=True)
        return time.perf_counter() - started, json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", default=PROBLEMS)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    from coral_core.data.locate import find_dataset_dir
    from coral_core.execution import ExecutionContext
    from coral_core.sandbox import Sandbox, SandboxPolicy
    from coral_core.types import Candidate
    from coral_plugins.datasets.quixbugs_tests import standalone_test_file
    from coral_plugins.datasets.testgen import Testgen
    from coral_plugins.evaluators.testgen.evaluator import TestgenEvaluator

    root = find_dataset_dir("quixbugs")
    dataset = Testgen()
    table = Table(title=f"scoring QuixBugs' own tests, {args.workers} workers, "
                        f"{os.cpu_count()} cores")
    for column in ("problem", "mutants", "killed (testgen / mutation run)", "testgen s",
                   "mutation run s", "ratio"):
        table.add_column(column, justify="left" if column == "problem" else "right")
    totals = [0.0, 0.0]
    sandbox = Sandbox(SandboxPolicy(), workers=args.workers)
    context = ExecutionContext(sandbox)
    try:
        warm = dataset.tasks("all", ["gcd"])[0]  # start the workers outside the timings
        TestgenEvaluator(max_mutants=1).evaluate(
            Candidate(warm, standalone_test_file(root, "gcd")), context)
        for name in args.problems.split(","):
            task = dataset.tasks("all", [name])[0]
            tests = standalone_test_file(root, name)
            started = time.perf_counter()
            scored = TestgenEvaluator().evaluate(Candidate(task, tests), context)
            ours = time.perf_counter() - started
            theirs, summary = mutation_run(name, task.metadata["program"], tests, args.workers)
            mutation = scored.details.get("mutation", {})
            killed = sum(1 for row in summary["mutants"] if row["verdict"] == "killed"
                         and row.get("detail") != "mutant does not compile")
            totals[0] += ours
            totals[1] += theirs
            table.add_row(name, str(mutation.get("mutants", "-")),
                          f"{mutation.get('killed', '-')} / {killed}", f"{ours:.1f}",
                          f"{theirs:.1f}", f"{ours / theirs:.2f}x")
    finally:
        context.close()
        sandbox.close()
    table.add_row("all", "", "", f"{totals[0]:.1f}", f"{totals[1]:.1f}",
                  f"{totals[0] / totals[1]:.2f}x")
    Console().print(table)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
