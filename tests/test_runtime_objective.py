"""The runtime objective is a deterministic cost: the same in every run, 1.0 for a copy
of the reference, lower for a slower program, 0 for one that hides from the counter."""

from __future__ import annotations

import pytest

from coral_core.execution import ExecutionContext
from coral_core.sandbox import Sandbox, SandboxPolicy
from coral_core.types import Candidate
from coral_plugins.datasets.quixbugs import SPLITS, QuixBugs
from coral_plugins.evaluators.runtime import RuntimeEvaluator, cost_score

SLOW_SIEVE_LINE = "for n in range(2, max + 1):"


@pytest.fixture(scope="module")
def quixbugs(data_dir):
    return QuixBugs(data_dir=str(data_dir))


def _context(sandbox: Sandbox) -> ExecutionContext:
    return ExecutionContext(sandbox)


@pytest.mark.loaded
def test_cost_formula():
    assert cost_score(100, 100, 4, 4) == 1.0
    assert cost_score(400, 100, 4, 4) == 0.25
    assert cost_score(50, 100, 2, 4) == 0.5, "cheaper caps at 1, x pass rate"
    assert cost_score(-1, 100, 4, 4) == 0.0, "no honest count, no score"
    assert cost_score(100, 100, 0, 4) == 0.0


# Not `loaded`: all 40 copies take two minutes beside the hogs; this file's other tests
# check the same cost there.
def test_every_reference_copy_scores_exactly_one(quixbugs):
    evaluator = RuntimeEvaluator()
    with Sandbox(SandboxPolicy(timeout=5.0)) as sandbox:
        context = _context(sandbox)
        for name in SPLITS["all"]:
            task = quixbugs.task(name)
            copy = task.reference + "\n# a copy\n"
            evaluation = evaluator.evaluate(Candidate(task, copy), context)
            assert evaluation.objectives["runtime"] == 1.0, (name, evaluation.details)
            assert evaluation.details["cost"] == evaluation.details["reference_cost"] > 0


@pytest.mark.loaded
def test_a_slower_program_scores_lower_by_the_same_amount_every_time(quixbugs):
    task = quixbugs.task("sieve")
    assert SLOW_SIEVE_LINE in task.reference
    slow = task.reference.replace(SLOW_SIEVE_LINE,
                                  SLOW_SIEVE_LINE + "\n        for _ in range(n):\n"
                                                    "            pass")
    evaluator = RuntimeEvaluator()
    scores, costs = [], []
    for _ in range(2):  # two contexts, two sandboxes, two sets of workers
        with Sandbox(SandboxPolicy(timeout=5.0)) as sandbox:
            evaluation = evaluator.evaluate(Candidate(task, slow), _context(sandbox))
        scores.append(evaluation.objectives["runtime"])
        costs.append((evaluation.details["cost"], evaluation.details["reference_cost"]))
    assert scores[0] == scores[1] and costs[0] == costs[1]
    cost, reference = costs[0]
    assert cost > 2 * reference and scores[0] == pytest.approx(reference / cost)


@pytest.mark.loaded
def test_precomputing_while_loading_is_counted(quixbugs):
    task = quixbugs.task("sieve")
    table = ("_PRIMES = [p for p in range(2, 1001) if all(p % d for d in range(2, p))]\n"
             "_TABLE = {m: [p for p in _PRIMES if p <= m] for m in range(1001)}\n"
             "def sieve(max):\n    return _TABLE[max]\n")
    with Sandbox(SandboxPolicy(timeout=5.0)) as sandbox:
        context = _context(sandbox)
        evaluation = RuntimeEvaluator().evaluate(Candidate(task, table), context)
        passed = context.execution(Candidate(task, table)).counts["passed"]
    assert passed > 0
    assert evaluation.objectives["runtime"] < 0.1


@pytest.mark.parametrize("escape", [
    "import sys\nsys.settrace(None)\n",
    "import sys\n_real = sys.settrace\nsys.settrace(lambda *a: None)\n",
    # found by a red-team pass: one public attribute, and a slow gcd scored 1.0
    "import sys\nsys._getframe().f_trace_lines = False\n",
    "import sys\nsys._getframe().f_trace = None\n",
    "import sys\n_t = sys.gettrace()\nsys.settrace(None)\nsys.settrace(_t)\n",
    "import gc\n_found = [o for o in gc.get_objects() if type(o).__name__ == 'count']\n",
    "import threading\n_w = threading.Thread(target=lambda: sum(i * i for i in "
    "range(400000)))\n_w.start()\n_w.join()\n",
    "import os\n_p = os.fork()\nif _p == 0:\n    sum(i * i for i in range(400000))\n"
    "    os._exit(0)\nos.waitpid(_p, 0)\n",
    # found by a red-team pass: processes it never waits for made the count turn on the
    # kernel's timing (16,019 to 16,085 lines for one program, run to run)
    "import os\n_p = os.fork()\nif _p == 0:\n    os._exit(0)\n",
    "import subprocess\nsubprocess.Popen(['true'])\n",
    "import os\nos.posix_spawn('/bin/true', ['true'], {})\n",
])
@pytest.mark.loaded
def test_a_program_that_hides_from_the_counter_gets_no_runtime(quixbugs, escape):
    task = quixbugs.task("sieve")
    code = task.reference.replace("def sieve(max):", "def sieve(max):\n    " +
                                  escape.replace("\n", "\n    ").rstrip() + "\n    pass")
    with Sandbox(SandboxPolicy(timeout=5.0)) as sandbox:
        context = _context(sandbox)
        assert context.execution(Candidate(task, code)).passed
        evaluation = RuntimeEvaluator().evaluate(Candidate(task, code), context)
    assert evaluation.objectives["runtime"] == 0.0
    assert "hid lines from it" in evaluation.details["why"]


@pytest.mark.loaded
def test_time_mode_is_available(quixbugs):
    task = quixbugs.task("gcd")
    with Sandbox(SandboxPolicy(timeout=5.0)) as sandbox:
        context = ExecutionContext(sandbox)
        evaluation = RuntimeEvaluator(mode="time", repeats=3).evaluate(
            Candidate(task, task.reference), context)
    assert evaluation.details["mode"] == "time" and evaluation.details["repeats"] == 3
    assert 0.0 < evaluation.objectives["runtime"] <= 1.0
