"""The five objectives, the syntax gate and the weighted fitness, on real candidates."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from coral_core.execution import ExecutionContext
from coral_core.sandbox import Sandbox, SandboxPolicy
from coral_core.scoring.scorer import Scorer, weighted_fitness
from coral_core.types import Candidate
from coral_plugins.datasets.quixbugs import QuixBugs
from coral_plugins.evaluators.runtime import RuntimeEvaluator, runtime_score
from coral_plugins.evaluators.security import SecurityEvaluator, security_score
from coral_plugins.evaluators.style import StyleEvaluator, style_score
from coral_plugins.evaluators.syntax import SyntaxEvaluator
from coral_plugins.evaluators.tests import TestsEvaluator

pytestmark = pytest.mark.loaded  # make test runs it beside CPU hogs

WEIGHTS = {"bugfix": 0.30, "security": 0.25, "syntax": 0.20, "style": 0.15, "runtime": 0.10}


@pytest.fixture(scope="module")
def scorer(data_dir):
    sandbox = Sandbox(SandboxPolicy(timeout=2.0))
    context = ExecutionContext(sandbox)
    evaluators = [TestsEvaluator(), StyleEvaluator(), SecurityEvaluator(), SyntaxEvaluator(),
                  RuntimeEvaluator()]
    yield Scorer(evaluators, context, WEIGHTS, gate="syntax")
    context.close()
    sandbox.close()


@pytest.fixture(scope="module")
def gcd(data_dir):
    return QuixBugs(data_dir=str(data_dir)).task("gcd")


def test_seed_formulas():
    assert style_score(0) == 0.97 and style_score(3) == pytest.approx(0.65)
    assert style_score(40) == 0.0
    assert security_score(0, 0) == 1.0 and security_score(1, 2) == pytest.approx(0.5)
    assert security_score(5, 0) == 0.0
    assert runtime_score(0.010, 0.010, 4, 4) == pytest.approx(1.0)
    assert runtime_score(0.021, 0.010, 4, 4) == pytest.approx(0.5)
    assert runtime_score(0.005, 0.010, 2, 4) == pytest.approx(0.5), "faster caps at 1, x pass rate"
    assert runtime_score(0.001, 0.010, 0, 4) == 0.0
    assert weighted_fitness({"a": 1.0, "b": 0.0}, {"a": 3.0, "b": 1.0}) == 0.75
    assert weighted_fitness({"a": 1.0, "extra": 0.0}, {"a": 1.0}) == 1.0
    # huge but finite weights summed to inf, and the fitness to 0.0 (a fuzzing pass)
    assert weighted_fitness({"a": 1.0, "b": 0.0}, {"a": 1e308, "b": 1e308}) == 0.5


def test_correct_program_scores_on_every_objective(scorer, gcd):
    scored = scorer.score(Candidate(gcd, gcd.reference))
    assert scored.passed
    assert scored.objectives["bugfix"] == 1.0 and scored.objectives["syntax"] == 0.9
    assert scored.objectives["security"] == 1.0
    assert 0.2 < scored.objectives["runtime"] <= 1.0  # itself vs the reference: noise only
    # 0.30 x 1 + 0.25 x 1 + 0.20 x 0.9 + 0.15 x style + 0.10 x runtime, over weights summing to 1
    expected = 0.30 + 0.25 + 0.18 + 0.15 * scored.objectives["style"] + 0.10 * scored.objectives[
        "runtime"]
    assert scored.fitness == pytest.approx(expected)


def test_buggy_program_gets_partial_bugfix(scorer, gcd):
    scored = scorer.score(Candidate(gcd, gcd.source))
    tests = scored.details["tests"]["tests"]
    assert not scored.passed and 0 < tests["passed"] < tests["total"]
    assert scored.objectives["bugfix"] == pytest.approx(tests["passed"] / tests["total"])


def test_flake8_and_bandit_findings_lower_style_and_security(scorer, gcd):
    code = ("import subprocess\nimport os\ndef gcd(a,b):\n  if a < 0:\n"
            "    subprocess.call(str(a), shell=True)\n    eval(str(b))\n"
            "  return a if b == 0 else gcd(b, a % b)\n")
    scored = scorer.score(Candidate(gcd, code))
    assert scored.passed
    assert scored.details["style"]["violations"] >= 4
    assert {"F401", "E231", "E111"} <= set(scored.details["style"]["codes"])
    assert scored.objectives["style"] == style_score(scored.details["style"]["violations"])
    assert scored.details["security"]["high"] >= 1
    assert scored.details["security"]["medium"] >= 1
    assert scored.objectives["security"] == security_score(scored.details["security"]["high"],
                                                           scored.details["security"]["medium"])
    assert scored.objectives["security"] <= 0.6


def test_calls_named_at_run_time_are_not_hidden_from_security(scorer, gcd):
    """A red-team pass scored 1.0 where the same calls, named in the source, scored 0.5:
    the names were built at run time, which bandit cannot see (hidden_calls.py)."""
    plain = ("import subprocess\nimport pickle\n\n\ndef gcd(a, b):\n"
             "    if a < 0:\n        subprocess.call(str(a), shell=True)\n"
             "        pickle.loads(b)\n    return a if b == 0 else gcd(b, a % b)\n")
    hidden = ("_run = __import__('sub' + 'process')\n_load = getattr(__import__('pick' + 'le'),"
              " 'lo' + 'ads')\n_opts = {'sh' + 'ell': True}\n\n\ndef gcd(a, b):\n"
              "    if a < 0:\n        getattr(_run, 'call')(str(a), **_opts)\n"
              "        _load(b)\n    return a if b == 0 else gcd(b, a % b)\n")
    scores = {name: scorer.score(Candidate(gcd, code)) for name, code in
              (("plain", plain), ("hidden", hidden), ("reference", gcd.reference))}
    assert all(s.passed for s in scores.values())
    assert scores["plain"].objectives["security"] < 1.0
    assert scores["hidden"].objectives["security"] <= 0.7, scores["hidden"].details["security"]
    assert {"CORAL1", "CORAL2"} <= set(scores["hidden"].details["security"]["tests"])
    assert scores["reference"].objectives["security"] == 1.0


def test_program_without_the_entry_point_is_gated_to_zero(scorer, gcd):
    for code in ("", "def not_gcd(a, b):\n    return a\n", "def gcd(a, b:\n"):
        scored = scorer.score(Candidate(gcd, code))
        assert all(value == 0.0 for value in scored.objectives.values()), code
        assert scored.fitness == 0.0


def test_passing_every_test_does_not_count_as_solved_through_the_gate(scorer, gcd):
    """A lambda passes every gcd test, but the syntax gate zeroes it: not passed, not in c."""
    code = "gcd = lambda a, b: a if b == 0 else gcd(b, a % b)\n"
    scored = scorer.score(Candidate(gcd, code))
    tests = scored.details["tests"]["tests"]
    assert tests["passed"] == tests["total"] > 0
    assert scored.objectives["bugfix"] == 0.0 and scored.fitness == 0.0
    assert scored.passed is False


def test_concurrent_style_checks_each_get_their_own_counts(gcd):
    """flake8's counts accumulate inside an analysis worker: checks running at the same
    time, on the same workers, must each get their own."""
    clean = "def gcd(a, b):\n    return a if b == 0 else gcd(b, a % b)\n"
    dirty = "import os\ndef gcd(a,b):\n  return a if b==0 else gcd(b,a%b)\n"
    with Sandbox(SandboxPolicy(), workers=2) as sandbox:
        context = ExecutionContext(sandbox)
        style = StyleEvaluator()
        codes = [(clean if i % 2 else dirty) + f"# {i}\n" for i in range(16)]
        with ThreadPoolExecutor(4) as pool:
            scored = list(pool.map(lambda code: style.evaluate(Candidate(gcd, code), context),
                                   codes))
    for i, evaluation in enumerate(scored):
        if i % 2:
            assert evaluation.objectives["style"] == 0.97, evaluation.details
        else:
            assert evaluation.objectives["style"] < 0.8
            assert {"F401", "E111"} <= set(evaluation.details["codes"])


def test_identical_candidates_are_evaluated_once(scorer, gcd):
    code = gcd.reference + "\n# cached\n"
    first = scorer.score(Candidate(gcd, code))
    assert scorer.score(Candidate(gcd, code)) is first


def test_relative_timeouts_follow_the_reference(data_dir):
    task = QuixBugs(data_dir=str(data_dir)).task("bitcount")
    with Sandbox(SandboxPolicy(timeout=5.0)) as sandbox:
        context = ExecutionContext(sandbox, timeout_factor=20.0, timeout_floor=0.2)
        timeouts = context.timeouts(task)
        assert len(timeouts) == len(task.execution.cases)
        assert all(t == 0.2 for t in timeouts), "microsecond references -> the floor"
        execution = context.execution(Candidate(task, task.source))  # loops forever
    assert {o.status for o in execution.outcomes} == {"timeout"}
    # each test stopped at its own 0.2 s of CPU time, not at the 5 s policy limit
    assert {o.detail for o in execution.outcomes} == {"timed out after 0.2 s of CPU time"}


def test_linters_work_without_bubblewrap_too(gcd):
    """The analysis workers run as the sandbox user without bubblewrap as well (their
    plugins are loaded before they drop privileges)."""
    code = "import os\ndef gcd(a,b):\n  eval(str(b))\n  return a if b==0 else gcd(b,a%b)\n"
    with Sandbox(SandboxPolicy(isolation="none"), workers=1) as sandbox:
        context = ExecutionContext(sandbox)
        style = StyleEvaluator(max_line_length=100, select=["E", "F"]).evaluate(
            Candidate(gcd, code), context)
        security = SecurityEvaluator().evaluate(Candidate(gcd, code), context)
        syntax = SyntaxEvaluator().evaluate(Candidate(gcd, code), context)
    assert {"F401", "E111"} <= set(style.details["codes"]), style.details
    assert security.details["medium"] >= 1, security.details
    assert syntax.objectives["syntax"] == 0.9
