"""Candidates that attack the parent rather than the sandbox (issue 7, classes 2, 3 and 6).

Their code or their values are what the parent processes: a parse that recurses past the
interpreter's limit, linters that crash and print, a 900-term expression, coding cookies
and directives meant to game the style and security objectives, a number too large for a
float in an approximate comparison, hostile error messages. Each must end as an error or a
worst score for that candidate, with the batch going on, JSON alone on stdout, and the
scores of identical programs the same with or without directives.
"""

from __future__ import annotations

import json
import math

import pytest

from coral_core.execution import ExecutionContext
from coral_core.scoring.program_tests import Expect
from coral_core.sandbox import Sandbox, SandboxPolicy, StepResult
from coral_core.scoring.scorer import Scorer
from coral_core.types import Candidate
from coral_core.scoring.verdicts import Outcome, judge_case
from coral_plugins.datasets.quixbugs import QuixBugs
from coral_plugins.evaluators.runtime import RuntimeEvaluator
from coral_plugins.evaluators.security import SecurityEvaluator
from coral_plugins.evaluators.style import StyleEvaluator
from coral_plugins.evaluators.syntax import SyntaxEvaluator
from coral_plugins.evaluators.tests import TestsEvaluator
from conftest import coral_env, run_coral

pytestmark = pytest.mark.loaded  # make test runs it beside CPU hogs

GCD = "def gcd(a, b):\n    return a if b == 0 else gcd(b, a % b)\n"
INSECURE = ("import os{noqa}\nimport subprocess\n\n\ndef gcd(a,b):{noqa}\n"
            "    subprocess.call('echo ' + str(a), shell=True){noqa}\n"
            "    eval(str(b)){noqa}\n"
            "    return a if b==0 else gcd(b, a % b){noqa}\n")

HOSTILE = {  # name -> code scored against gcd
    "deep_unary": "def gcd(a, b):\n    return " + "-" * 100000 + "a\n",
    "deep_attributes": "def gcd(a, b):\n    return a" + ".b" * 100000 + "\n",
    "long_sum_crashes_pyflakes": "a = 1\nx = " + "+".join(["a"] * 900) + "\n" + GCD,
    "longer_sum_crashes_the_parser": "x = " + "+".join(["a"] * 5000) + "\n" + GCD,
    "null_byte": GCD + "\0\n",
    "byte_order_mark": "\ufeff" + GCD,
    "unknown_coding_cookie": "# coding: no-such-codec\n" + GCD,
    "markup_and_escapes_in_errors": ("def gcd(a, b):\n"
                                     "    raise ValueError('[/] [bold red]x\\x1b[2J\\x07')\n"),
}


@pytest.fixture(scope="module")
def gcd(data_dir):
    return QuixBugs(data_dir=str(data_dir)).task("gcd")


@pytest.fixture(scope="module")
def scorer(data_dir):
    sandbox = Sandbox(SandboxPolicy(timeout=2.0))
    context = ExecutionContext(sandbox)
    evaluators = [TestsEvaluator(), StyleEvaluator(), SecurityEvaluator(), SyntaxEvaluator(),
                  RuntimeEvaluator()]
    yield Scorer(evaluators, context)  # no gate: each objective is seen on its own
    context.close()
    sandbox.close()


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_code_scores_without_raising(name, scorer, gcd, capfd):
    scored = scorer.score(Candidate(gcd, HOSTILE[name]))
    out, _ = capfd.readouterr()
    assert out == "", f"something printed on our stdout: {out[:300]!r}"
    assert all(isinstance(v, float) and 0.0 <= v <= 1.0 for v in scored.objectives.values())
    for outcome in scored.details["tests"]["outcomes"]:
        assert type(outcome["detail"]) is str and len(outcome["detail"]) <= 400
    if name != "markup_and_escapes_in_errors":
        assert scored.objectives["bugfix"] <= 1.0


@pytest.mark.parametrize("name", ["deep_unary", "deep_attributes",
                                  "longer_sum_crashes_the_parser"])
def test_code_the_parser_cannot_take_scores_zero_syntax(name, scorer, gcd):
    scored = scorer.score(Candidate(gcd, HOSTILE[name]))
    assert scored.objectives["syntax"] == 0.0
    assert scored.objectives["style"] == 0.0 and scored.objectives["security"] == 0.0, (
        scored.details)


def test_a_crashing_linter_gives_the_worst_score_not_the_best(scorer, gcd):
    """pyflakes recurses past its limit on a 900-term sum (flake8 then printed and counted
    no violation: 0.97); the program itself runs and passes."""
    scored = scorer.score(Candidate(gcd, HOSTILE["long_sum_crashes_pyflakes"]))
    assert scored.objectives["style"] == 0.0, scored.details["style"]
    assert "error" in scored.details["style"]
    assert scored.objectives["bugfix"] == 1.0


def test_directives_do_not_change_style_or_security(scorer, gcd):
    plain = INSECURE.format(noqa="")
    silenced = "# flake8: noqa\n" + INSECURE.format(noqa="  # noqa  # nosec")
    a, b = scorer.score(Candidate(gcd, plain)), scorer.score(Candidate(gcd, silenced))
    assert b.objectives["security"] == a.objectives["security"] < 0.8
    assert b.details["security"]["high"] == a.details["security"]["high"] >= 1
    assert b.details["style"]["violations"] >= a.details["style"]["violations"] > 0
    assert b.objectives["style"] <= a.objectives["style"] < 0.97


@pytest.mark.parametrize("cookie", ["# coding: no-such-codec", "# -*- coding: latin-1 -*-",
                                    "# vim: set fileencoding=utf-7 :"])
def test_a_coding_cookie_does_not_hide_the_program_from_bandit(cookie, scorer, gcd):
    """Python ignores the cookie when it runs the text; so do the linters (bandit used to
    skip a file whose cookie names no codec, scoring 1.0, while the program ran)."""
    plain = INSECURE.format(noqa="")
    cookied = scorer.score(Candidate(gcd, cookie + "\n" + plain))
    reference = scorer.score(Candidate(gcd, "# a comment\n" + plain))
    assert cookied.details["tests"]["tests"] == reference.details["tests"]["tests"]
    assert cookied.objectives["security"] == reference.objectives["security"] < 0.8
    assert cookied.details["style"]["codes"] == reference.details["style"]["codes"]


def test_a_utf7_cookie_cannot_make_the_linters_read_another_program(scorer, gcd):
    """Under its cookie, `+AAo-` is a newline: bandit and flake8 would lint a different text
    than the one Python runs (which ignores the cookie: for it, `+AAo-` is plain text)."""
    code = "# coding: utf-7\n" + GCD + "x = 1  # +AAo-import os+AAo-eval(input())\n"
    assert code.encode().decode("utf-7").count("\neval(input())") == 1  # what it would hide
    scored = scorer.score(Candidate(gcd, code))
    assert scored.details["security"]["medium"] == 0, scored.details["security"]
    assert "F401" not in scored.details["style"]["codes"]


def test_huge_numbers_in_an_approximate_comparison_fail_without_raising():
    step = StepResult("ok", (10 ** 400,))
    for value in (10 ** 400, -(10 ** 400), math.inf, math.nan, True, "1.0", None):
        case = _case(Expect("approx", 1.0, tolerance=0.01))
        outcome = judge_case(case, StepResult("ok", (value,)))
        assert isinstance(outcome, Outcome) and outcome.status == "fail"
        assert len(outcome.detail) <= 300
    assert judge_case(_case(Expect("approx", 1.0, tolerance=0.01)), step).status == "fail"


def test_comparisons_of_deep_or_odd_values_never_raise():
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    for expected, got in ((deep, deep), ([1, 2], {1: 2}), (1, 10 ** 400), ({1}, frozenset())):
        outcome = judge_case(_case(Expect("eq", expected)), StepResult("ok", (got,)))
        assert outcome.status in ("pass", "fail") and len(outcome.detail) <= 300


def _case(expect: Expect):
    from coral_core.scoring.program_tests import Case, Step

    return Case("t", Step("f", ()), (expect,))


def test_a_batch_with_every_hostile_candidate_goes_on(tmp_path, data_dir):
    """`coral evaluate --candidate-dir --json`: one document per file, JSON alone on stdout,
    the good candidate passing."""
    folder = tmp_path / "candidates"
    folder.mkdir()
    for index, name in enumerate(sorted(HOSTILE)):
        (folder / f"gcd__{index}_{name}.py").write_text(HOSTILE[name], encoding="utf-8",
                                                        errors="surrogatepass")
    (folder / "gcd__good.py").write_text(GCD)
    (folder / "sqrt__huge.py").write_text("def sqrt(x, epsilon):\n    return 10 ** 400\n")
    done = run_coral("evaluate", "--plugin", "quixbugs", "--candidate-dir", str(folder),
                     "--json", env=coral_env(data_dir), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    documents = json.loads(done.stdout)
    assert len(documents) == len(HOSTILE) + 2
    by_file = {d["file"].rsplit("/", 1)[1]: d for d in documents}
    assert by_file["gcd__good.py"]["passed"] is True
    assert {o["status"] for o in by_file["sqrt__huge.py"]["outcomes"]} == {"fail"}
