"""Sandbox throughput, measured in one run on one machine, with baselines from the same run.

    python benchmarks/sandbox.py [--data-dir DIR] [--candidates 400] [--skip-upstream]

Prints, for one problem (bitcount, 9 tests), distinct candidates per second and ms per
candidate for:
  - Coral's pre-warmed sandbox, tests only, and with all five objectives (flake8, bandit
    and parsing in the sandbox's analysis workers);
  - a fresh `python -I` process per candidate, and a fresh one inside bubblewrap;
  - unsafe in-process exec (no isolation at all: the floor);
then `coral evaluate --candidate-dir` on 200 distinct candidates (CLI start-up included),
and the wall time of scoring all 80 upstream programs against the upstream pytest suite
(5 s per-test timeout both).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from coral_core.scoring.verdicts import judge_case
from coral_core.config.blueprints import ScoringBlueprint
from coral_core.run.factories import build_scoring
from coral_core.config.experiment import merge
from coral_core.sandbox import Job, JobTemplate, Sandbox, SandboxPolicy
from coral_core.sandbox.policy import bwrap_available, bwrap_command
from coral_core.types import Candidate
from coral_plugins.datasets.quixbugs import PRESET, QuixBugs

ROOT = Path(__file__).resolve().parents[1]

# What a fresh interpreter runs per candidate: the same work as the sandbox child.
FRESH_RUNNER = r"""
import json, sys, types
job = json.loads(sys.stdin.read())
module = types.ModuleType(job["module"])
exec(compile(job["code"], "candidate.py", "exec"), module.__dict__)
out = []
for step in job["steps"]:
    try:
        out.append(["ok", getattr(module, step["call"])(*step["args"])])
    except Exception as error:
        out.append(["error", repr(error)])
print(json.dumps(out))
"""


ROUNDS = 3  # every figure is the median of this many rounds (this machine's timings wander)


def median_of_rounds(measure, *args) -> float:
    return statistics.median(measure(*args) for _ in range(ROUNDS))


def distinct(code: str, count: int) -> list[str]:
    return [f"{code}\n# candidate {i}\n" for i in range(count)]


def rate(label: str, seconds: float, count: int) -> float:
    per = 1000 * seconds / count
    print(f"  {label:<48} {count / seconds:9.1f} candidates/s  {per:8.2f} ms each")
    return per


def bench_coral_latency(task, codes) -> float:
    """One candidate at a time on one worker: what a single evaluation waits for."""
    policy = SandboxPolicy(timeout=5.0)
    template = JobTemplate(task.execution, policy)  # as the evaluation context does
    with Sandbox(policy, workers=1) as sandbox:
        sandbox.run(template.job(task.reference))
        started = time.perf_counter()
        for code in codes:
            sandbox.run(template.job(code))
        return time.perf_counter() - started


def bench_coral_tests_only(task, codes, workers) -> float:
    policy = SandboxPolicy(timeout=5.0)
    template = JobTemplate(task.execution, policy)
    with Sandbox(policy, workers=workers) as sandbox:
        for _ in range(workers + 1):  # start every slot
            sandbox.run(template.job(task.reference + "\n#warm"))
        started = time.perf_counter()
        futures = [sandbox.submit(template.job(code)) for code in codes]
        for future in futures:
            result = future.result()
            assert all(judge_case(c, s).status == "pass"
                       for c, s in zip(task.execution.cases, result.steps))
        return time.perf_counter() - started


def bench_coral_all_objectives(task, codes, workers) -> float:
    config = merge(PRESET, {"execution": {"workers": workers}})
    scoring = build_scoring(ScoringBlueprint.of(config))
    try:
        # warm every slot and every analysis worker (flake8, bandit), and the reference
        warm = [task.reference + f"\n#warm {i}" for i in range(workers * 2)]
        with ThreadPoolExecutor(workers * 2) as pool:
            list(pool.map(lambda c: scoring.scorer.score(Candidate(task, c)), warm))
        started = time.perf_counter()
        with ThreadPoolExecutor(workers * 2) as pool:
            scored = list(pool.map(lambda c: scoring.scorer.score(Candidate(task, c)), codes))
        assert all(s.passed for s in scored)
        return time.perf_counter() - started
    finally:
        scoring.close()


def _job_text(task, code) -> str:
    steps = [{"call": c.step.call, "args": list(c.step.args)} for c in task.execution.cases]
    return json.dumps({"module": task.execution.module, "code": code, "steps": steps})


def bench_fresh(task, codes, workers, sandboxed: bool) -> float:
    if sandboxed:
        base = bwrap_command(SandboxPolicy(), sys.executable)
        prefix = base[: base.index(sys.executable)] + [sys.executable, "-I", "-c", FRESH_RUNNER]
    else:
        prefix = [sys.executable, "-I", "-c", FRESH_RUNNER]

    def one(code: str) -> None:
        result = subprocess.run(prefix, input=_job_text(task, code), capture_output=True,
                                text=True, timeout=60)
        assert result.returncode == 0, result.stderr

    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, codes))
    return time.perf_counter() - started


def bench_in_process(task, codes) -> float:
    import types

    started = time.perf_counter()
    for code in codes:
        module = types.ModuleType(task.execution.module)
        # the unsafe floor: no isolation at all
        exec(compile(code, "candidate.py", "exec"), module.__dict__)  # nosec B102
        for case in task.execution.cases:
            getattr(module, case.step.call)(*case.step.args)
    return time.perf_counter() - started


def bench_cli(data_dir: Path, task, count: int) -> float:
    folder = Path(tempfile.mkdtemp(prefix="coral-bench-"))
    try:
        for i, code in enumerate(distinct(task.reference, count)):
            (folder / f"{task.id}__{i}.py").write_text(code)
        coral = str(Path(sys.executable).with_name("coral"))
        env = {**os.environ, "CORAL_DATA_DIR": str(data_dir)}
        started = time.perf_counter()
        result = subprocess.run([coral, "evaluate", "--plugin", "quixbugs", "--candidate-dir",
                                 str(folder), "--json"], capture_output=True, text=True, env=env)
        elapsed = time.perf_counter() - started
        assert result.returncode == 0, result.stderr
        assert sum(d["passed"] for d in json.loads(result.stdout)) == count
        return elapsed
    finally:
        shutil.rmtree(folder)


def bench_upstream(data_dir: Path, workers: int) -> tuple[float, float]:
    dataset = QuixBugs(data_dir=str(data_dir))
    tasks = dataset.tasks("all")
    policy = SandboxPolicy(timeout=5.0)
    started = time.perf_counter()
    with Sandbox(policy, workers=workers) as sandbox:
        futures = [sandbox.submit(Job.build(t.execution, code, policy))
                   for t in tasks for code in (t.source, t.reference)]
        for future in futures:
            future.result()
    coral = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "quixbugs"
        shutil.copytree(data_dir / "quixbugs", copy)
        started = time.perf_counter()
        for flags in ([], ["--correct"]):
            subprocess.run([sys.executable, "-m", "pytest", "python_testcases", "-q",
                            "-p", "no:cacheprovider", "--timeout=5", *flags], cwd=copy,
                           capture_output=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
        upstream = time.perf_counter() - started
    return coral, upstream


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_data = os.environ.get("CORAL_DATA_DIR", str(ROOT.parent / "shared" / "datasets"))
    parser.add_argument("--data-dir", default=default_data)
    parser.add_argument("--candidates", type=int, default=400)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--skip-upstream", action="store_true")
    args = parser.parse_args()
    data_dir = Path(args.data_dir)
    task = QuixBugs(data_dir=str(data_dir)).task("bitcount")
    codes = distinct(task.reference, args.candidates)
    few = codes[: max(50, args.candidates // 4)]
    isolated, why = bwrap_available()
    print(f"machine: {os.cpu_count()} cores, {args.workers} workers; bubblewrap: "
          f"{'yes' if isolated else 'NO (' + why + ')'}")
    print(f"one problem ({task.id}, {len(task.execution.cases)} tests), distinct candidates, "
          f"median of {ROUNDS} rounds")
    print(" throughput, all workers busy:")
    coral_tests = rate("coral sandbox, tests only",
                       median_of_rounds(bench_coral_tests_only, task, codes, args.workers),
                       len(codes))
    coral_all = rate("coral sandbox, all five objectives",
                     median_of_rounds(bench_coral_all_objectives, task,
                                      distinct(task.reference + "\n#b", len(codes)), args.workers),
                     len(codes))
    fresh = rate("fresh python -I per candidate",
                 median_of_rounds(bench_fresh, task, few, args.workers, False), len(few))
    fresh_bwrap = None
    if isolated:
        fresh_bwrap = rate("fresh python -I in bubblewrap per candidate",
                           median_of_rounds(bench_fresh, task, few, args.workers, True), len(few))
    unsafe = rate("unsafe in-process exec (1 thread, no isolation)",
                  median_of_rounds(bench_in_process, task, codes), len(codes))
    print(" latency, one candidate at a time:")
    coral_one = rate("coral sandbox, tests only", median_of_rounds(
        bench_coral_latency, task, codes[: len(few) * 4]), len(few) * 4)
    fresh_one = None
    if isolated:
        fresh_one = rate("fresh python -I in bubblewrap", median_of_rounds(
            bench_fresh, task, few[: len(few) // 2], 1, True), len(few) // 2)
    print("ratios:")
    if fresh_bwrap:
        print(f"  fresh sandboxed interpreter / coral tests-only, throughput: "
              f"{fresh_bwrap / coral_tests:6.1f}x   (target >= 10x)")
        print(f"  fresh sandboxed interpreter / coral tests-only, latency:    "
              f"{fresh_one / coral_one:6.1f}x")
    print(f"  fresh interpreter / coral tests-only, throughput:           "
          f"{fresh / coral_tests:6.1f}x")
    print(f"  coral tests-only / unsafe exec:                             "
          f"{coral_tests / unsafe:6.1f}x")
    print(f"  targets: tests-only {coral_tests:.2f} ms (< 3), "
          f"all objectives {coral_all:.2f} ms (< 15)")
    cli = bench_cli(data_dir, task, 200)
    print(f"coral evaluate --candidate-dir, 200 distinct candidates: {cli:.2f} s, "
          f"{1000 * cli / 200:.1f} ms each with CLI start-up (target < 25)")
    if not args.skip_upstream:
        coral, upstream = bench_upstream(data_dir, args.workers)
        print(f"all 80 upstream programs: coral {coral:.1f} s, upstream pytest {upstream:.1f} s, "
              f"ratio {coral / upstream:.2f} (target <= 0.55)")


if __name__ == "__main__":
    main()
