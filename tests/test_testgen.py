"""Test generation (`testgen`): model-written pytest files scored in the sandbox against the
correct program, the buggy one and cosmic-ray's mutants; hostile test files; the baseline's
snapshot tests; the command line end to end."""

from __future__ import annotations

import json
import os

import pytest

from conftest import coral_env, run_coral

GOOD = '''import pytest
from bitcount import bitcount


@pytest.mark.parametrize("n, expected", [(127, 7), (128, 1), (0, 0), (255, 8)])
def test_counts(n, expected):
    assert bitcount(n) == expected


class TestSmall:
    def test_one(self):
        assert bitcount(1) == 1
'''

WEAK = '''from bitcount import bitcount


def test_zero():
    assert bitcount(0) == 0
'''

WRONG = '''from bitcount import bitcount


def test_right():
    assert bitcount(3) == 2


def test_wrong():
    assert bitcount(3) == 3
'''


@pytest.fixture(scope="module")
def scoring(data_dir):
    from coral_core.execution import ExecutionContext
    from coral_core.sandbox import Sandbox, SandboxPolicy
    from coral_plugins.datasets.testgen import Testgen

    os.environ.setdefault("CORAL_DATA_DIR", str(data_dir))
    dataset = Testgen(str(data_dir))
    sandbox = Sandbox(SandboxPolicy(), workers=2)
    context = ExecutionContext(sandbox)
    yield dataset, context
    context.close()
    sandbox.close()


def evaluate(scoring, code: str, problem: str = "bitcount", **options):
    from coral_core.types import Candidate
    from coral_plugins.evaluators.testgen.evaluator import TestgenEvaluator

    dataset, context = scoring
    task = dataset.tasks("all", [problem])[0]
    return TestgenEvaluator(**options).evaluate(Candidate(task, code), context)


@pytest.mark.loaded
def test_a_good_suite_passes_reveals_covers_and_kills(scoring):
    first = evaluate(scoring, GOOD)
    assert first.objectives["tests_pass"] == 1.0
    assert first.objectives["bug_revealed"] == 1.0
    assert first.objectives["line_coverage"] == 1.0
    mutation = first.details["mutation"]
    assert mutation["mutants"] >= 15 and 0 < mutation["killed"] < mutation["mutants"]
    assert first.objectives["mutation_score"] == mutation["killed"] / mutation["mutants"]
    assert first.details["tests"] == 5 and first.details["revealed_by"]
    again = evaluate(scoring, GOOD + "\n")  # another text, the same tests: the same scores
    assert again.objectives == first.objectives


def test_a_weak_suite_reveals_nothing_and_covers_less(scoring):
    weak = evaluate(scoring, WEAK)
    assert weak.objectives["tests_pass"] == 1.0
    assert weak.objectives["bug_revealed"] == 0.0  # the buggy bitcount(0) is also 0
    assert weak.objectives["line_coverage"] < 1.0
    assert weak.details["coverage"]["missed"]
    good = evaluate(scoring, GOOD)
    assert weak.objectives["mutation_score"] < good.objectives["mutation_score"]


def test_a_suite_that_fails_on_the_correct_program_reveals_nothing(scoring):
    wrong = evaluate(scoring, WRONG)
    assert wrong.objectives["tests_pass"] == 0.5
    assert wrong.objectives["bug_revealed"] == 0.0  # its failure is not evidence of the bug
    assert wrong.details["failing_on_correct"][0][0] == "test_wrong"
    assert wrong.details["revealed_by"] is None  # not "test_wrong", which fails on both
    assert wrong.objectives["mutation_score"] > 0  # from test_right, the test that passes


XUNIT = """from bitcount import bitcount

CASES = []
CALLS = []


def setup_module(module):
    CASES.extend([(127, 7), (128, 1), (0, 0)])


def setup_function(function):
    CALLS.append(function.__name__)


def test_module_cases():
    assert CALLS == ["test_module_cases"]
    for n, want in CASES:
        assert bitcount(n) == want


class TestCounts:
    @classmethod
    def setup_class(cls):
        cls.shared = [(255, 8)]

    def setup_method(self, method):
        self.mine = list(self.shared)

    def test_shared(self):
        for n, want in self.mine:
            assert bitcount(n) == want


class TestBroken:
    def setup_method(self, method):
        raise RuntimeError("no fixture here")

    def test_never_runs(self):
        assert bitcount(1) == 1
"""


def test_xunit_setups_run_as_in_pytest_and_generator_tests_error(scoring):
    """setup_module / setup_function / setup_class / setup_method run as pytest runs them
    (a red-team pass found an honest xunit-style file failing every test); a test that
    yields errors, as pytest refuses it (it passed: calling it only made a generator); a
    file that runs no test covers nothing (an empty one had 0.25)."""
    scored = evaluate(scoring, XUNIT)
    outcomes = {o["test"]: (o["status"], o["detail"]) for o in scored.details["outcomes"]}
    assert outcomes["test_module_cases"][0] == "pass", outcomes
    assert outcomes["TestCounts::test_shared"][0] == "pass", outcomes
    assert outcomes["TestBroken::test_never_runs"] == (
        "error", "setup failed: RuntimeError: no fixture here")
    generator = evaluate(scoring, "from bitcount import bitcount\n\n\ndef test_nothing():\n"
                                  "    assert bitcount(1) == 99\n    yield\n")
    assert generator.objectives["tests_pass"] == 0.0
    assert generator.details["outcomes"][0]["status"] == "error"
    empty = evaluate(scoring, "from bitcount import bitcount\n")
    assert empty.objectives["line_coverage"] == 0.0


COLLECTION = """import pytest
from bitcount import bitcount


class Checks:
    def test_inherited(self):
        assert bitcount(3) == 2

    def test_inherited_wrong(self):
        assert bitcount(3) == 3


class TestSuite(Checks):
    @staticmethod
    def test_static():
        assert bitcount(1) == 1

    @staticmethod
    def test_static_wrong():
        assert bitcount(1) == 2

    @classmethod
    def test_class_wrong(cls):
        assert bitcount(0) == 1

    class TestNested:
        def test_nested_wrong(self):
            assert bitcount(7) == 4


class TestMore(TestSuite):
    def test_more(self):
        assert bitcount(8) == 1


class Helper:
    def test_never_collected(self):
        assert bitcount(1) == 5


def test_defaults(n=255, want=8):
    assert bitcount(n) == want


@pytest.mark.usefixtures("no_such_fixture")
def test_uses_a_fixture():
    assert bitcount(1) == 1


def test_asks_for_a_fixture(no_such_fixture):
    assert bitcount(1) == 1
"""


MARKS = """import pytest
from bitcount import bitcount

pytestmark = [pytest.mark.filterwarnings("ignore")]


def setup_module(module):
    pass


def setUpModule():
    raise RuntimeError("pytest prefers this one")


def test_ok():
    assert bitcount(3) == 2
"""

XFAILS = """import pytest
from bitcount import bitcount


@pytest.mark.xfail(False, reason="never")
def test_xfail_false_runs():
    assert bitcount(1) == 5


@pytest.mark.xfail(strict=True)
def test_strict_xpass():
    assert bitcount(1) == 1


@pytest.mark.xfail(raises=TypeError)
def test_other_exception():
    assert bitcount(1) == 5


@pytest.mark.xfail
def test_plain_xfail():
    assert bitcount(1) == 5


@pytest.mark.xfail
def test_plain_xpass():
    assert bitcount(1) == 1


@pytest.mark.xfail(run=False)
def test_not_run():
    assert bitcount(1) == 5


def test_imperative_xfail():
    if bitcount(1) != 1:
        pytest.xfail("differs")


@pytest.mark.skipif(False)
def test_skipif_without_reason():
    assert bitcount(1) == 1


@pytest.mark.skipif(True, condition=False, reason="the keyword wins")
def test_skipif_keyword():
    assert bitcount(1) == 2


@pytest.mark.parametrize("n", [pytest.param(1, id="a"), pytest.param(2, id="a")])
def test_duplicate_ids(n):
    assert bitcount(n) == 1


@pytest.mark.xfail(strict=True, reason="inherited")
class Base:
    def test_from_base(self):
        assert bitcount(1) == 1


@pytest.mark.usefixtures("no_such_fixture")
class TestOuter:
    class TestInner:
        def test_inner(self):
            assert bitcount(1) == 1


class TestSub(Base):
    pass


class TestTeardown:
    def test_first(self):
        assert bitcount(1) == 1

    @classmethod
    def teardown_class(cls):
        raise RuntimeError("teardown fails")
"""


PHASES = """import functools

import pytest
from bitcount import bitcount

STATE = {"setups": 0}


def teardown_function(function):
    if function is test_wrong_then_skipped:
        pytest.skip("a skip in teardown changes nothing")


def test_wrong_then_skipped():
    assert bitcount(1) == 2


@pytest.mark.xfail(strict=True, reason="outer")
@pytest.mark.parametrize("n", [pytest.param(1, marks=pytest.mark.xfail(reason="inner"),
                                             id="one")])
def test_function_marks_first(n):
    assert bitcount(n) == 1


@pytest.mark.parametrize(("n",), [(3,)], ids=["three"])
def test_tuple_names(n):
    assert bitcount(n) == 2


def check(n, want):
    assert bitcount(n) == want


test_partial = functools.partial(check, 1, 5)


@functools.lru_cache(maxsize=None)
def test_cached():
    assert bitcount(1) == 5


@pytest.mark.skip(False, reason="not a skipif")
def test_skip_with_an_argument():
    assert bitcount(1) == 1


@pytest.mark.filterwarnings("error")
def test_returns_a_value():
    return bitcount(1)


class TestA:
    @classmethod
    def setup_class(cls):
        STATE["setups"] += 1

    def test_once(self):
        assert STATE["setups"] == 1


TestB = TestA


class Helper:  # a red-team pass: bound at module level, pytest 9 errors on `self`, `cls`
    def test_b(self):
        assert bitcount(127) == 7

    @classmethod
    def c(cls):
        assert bitcount(127) == 7


test_bound = Helper().test_b
test_bound_classmethod = Helper.c


class TestBorrows:
    test_bound_in_a_class = Helper().test_b
"""


def _pytest_outcomes(data_dir, tmp_path, text):
    """Real pytest's outcome per test id on the correct bitcount, as Coral's statuses (an
    xfailed test skipped, an xpassed one passed, a pass with a teardown error an error)."""
    import subprocess
    import sys

    folder = tmp_path / f"file{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    (folder / "bitcount.py").write_bytes(
        (data_dir / "quixbugs" / "correct_python_programs" / "bitcount.py").read_bytes())
    (folder / "test_file.py").write_text(text, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p",
                           "no:cacheprovider", "test_file.py"], cwd=folder,
                          capture_output=True, text=True)
    words = {"PASSED": "pass", "FAILED": "fail", "ERROR": "error", "SKIPPED": "skip",
             "XFAIL": "skip", "XPASS": "pass"}
    theirs = {}
    for line in done.stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word in words and "test_file.py::" in rest:  # "XFAIL at setup of test_file..."
            test = rest.split("test_file.py::", 1)[1].split(" ")[0]
            if theirs.get(test) != "error":
                theirs[test] = words[word]
    return theirs


@pytest.mark.parametrize("text, count", [(COLLECTION, 16), (MARKS, 1), (XFAILS, 14),
                                         (PHASES, 12)],
                         ids=["collection", "xunit", "marks", "phases"])
def test_tests_are_collected_and_judged_as_pytest_does(scoring, data_dir, tmp_path, text,
                                                       count):
    """The same tests as pytest's, with its verdicts on the correct program. Red-team
    passes hid tests that fail on it where the harness did not look (static methods,
    nested classes, inherited methods), or where it read pytest's rules otherwise (an
    xfail that runs, a strict xpass, pytest.xfail(), a boolean skipif without a reason, a
    base class's marks, setUpModule before setup_module, a teardown that raises; a skip in
    teardown, the function's marks before its parameters', a partial or a cached test,
    ("n",) names, a class under two names), and the files scored bug_revealed 1.0."""
    theirs = _pytest_outcomes(data_dir, tmp_path, text)
    assert len(theirs) == count, theirs
    scored = evaluate(scoring, text)
    assert not scored.details.get("refused"), scored.details
    counted = {test: status for test, status in theirs.items() if status != "skip"}
    assert {o["test"]: o["status"] for o in scored.details["outcomes"]} == counted
    assert scored.details["skipped"] == len(theirs) - len(counted)
    assert scored.objectives["bug_revealed"] == 0.0  # tests fail on the correct program


@pytest.mark.parametrize("setup", [
    "    if sieve(10) != [2, 3, 5, 7]:\n        pytest.skip('the program differs')\n",
    "    assert sieve(10) == [2, 3, 5, 7]\n",  # with the test's xfail: an expected failure
])
def test_a_setup_that_skips_or_xfails_on_the_bug_reveals_nothing(scoring, setup):
    """pytest skips, or counts as xfailed, a test whose setup skips or raises under an
    xfail mark: on the buggy program nothing fails. A red-team pass saw Coral call it an
    error there, and credit the bug and the mutants' kills."""
    scored = evaluate(scoring, "import pytest\nfrom sieve import sieve\n\n\n"
                               "def setup_function(function):\n" + setup + "\n\n"
                               "@pytest.mark.xfail(reason='kept')\n"
                               "def test_ok():\n    assert sieve(10) == [2, 3, 5, 7]\n",
                      problem="sieve")
    assert scored.objectives["tests_pass"] == 1.0  # it passes on the correct program
    assert scored.objectives["bug_revealed"] == 0.0
    assert scored.details["revealed_by"] is None


@pytest.mark.parametrize("text", [
    "@pytest.mark.parametrize('n', [0, 1])\ndef test_it(n=5):\n    assert bitcount(n) == 0\n",
    "@pytest.mark.parametrize('n, m', [(0, 1)])\ndef test_it(n):\n    assert bitcount(n) == 0\n",
    "@pytest.mark.parametrize('n', [0])\n@pytest.mark.parametrize('n', [1])\n"
    "def test_it(n):\n    assert bitcount(n) >= 0\n",
    "@pytest.mark.parametrize('n', [0], indirect=True)\ndef test_it(n):\n    assert 1\n",
    "from bitcount import bitcount as test_it\n",
])
def test_what_pytest_refuses_to_run_errors(scoring, text):
    """pytest refuses these at collection (or errors the test); a red-team pass saw their
    values dropped or passed raw, and the tests pass."""
    scored = evaluate(scoring, "import pytest\nfrom bitcount import bitcount\n\n\n"
                               "def test_ok():\n    assert bitcount(3) == 2\n\n\n" + text)
    outcomes = {o["test"].split("[")[0]: o["status"] for o in scored.details["outcomes"]}
    assert outcomes == {"test_ok": "pass", "test_it": "error"}, scored.details
    assert scored.objectives["bug_revealed"] == 0.0


def test_a_file_of_more_tests_than_are_run_fails_to_load_whole(scoring):
    many = ("import pytest\nfrom bitcount import bitcount\n\n\n"
            "@pytest.mark.parametrize('n', range(600))\n"
            "def test_many(n):\n    assert bitcount(2 ** (n % 8)) == 1\n\n\n"
            "def test_reveals():\n    assert bitcount(0) == 0\n")
    scored = evaluate(scoring, many)
    assert scored.objectives == dict.fromkeys(scored.objectives, 0.0)
    assert "the file has 601 tests; Coral runs at most 500" in scored.details["error"]


def test_mutation_verdicts_equal_coral_mutation_run(scoring, tmp_path):
    """The same cosmic-ray mutants and verdicts as `coral mutation run` on the same
    program and tests (which are cosmic-ray's, tests/test_mutation.py), mutants that do not
    compile aside."""
    from coral_plugins.evaluators.mutation.campaign import run_mutation

    dataset, _ = scoring
    program = dataset.tasks("all", ["bitcount"])[0].metadata["program"]
    (tmp_path / "bitcount.py").write_text(program)
    (tmp_path / "test_bitcount.py").write_text(GOOD)
    summary = run_mutation(tmp_path / "bitcount.py", [tmp_path / "test_bitcount.py"],
                           session_path=tmp_path / "s.sqlite", workers=2, project=tmp_path)
    theirs = {(row["operator"], row["occurrence"]) for row in summary["mutants"]
              if row["verdict"] == "survived"}
    ours = evaluate(scoring, GOOD).details["mutation"]
    assert {(s["operator"], s["occurrence"]) for s in ours["survivors"]} == theirs
    competent = [row for row in summary["mutants"] if row["detail"] != "mutant does not compile"]
    assert ours["mutants"] == len(competent)


HOSTILE_EDITS = '''import bitcount as program
from bitcount import bitcount


def honest(n):
    count = 0
    while n:
        n &= n - 1
        count += 1
    return count


program.bitcount = honest


def test_counts():
    assert program.bitcount(127) == 7
'''

LOOPS = '''from bitcount import bitcount


def test_forever():
    while True:
        try:
            while True:
                pass
        except BaseException:
            pass
'''


def test_a_suite_that_edits_the_program_earns_nothing_from_it(scoring):
    edited = evaluate(scoring, HOSTILE_EDITS)
    assert edited.objectives["tests_pass"] == 1.0  # it tests its own copy, which is right
    assert edited.objectives["bug_revealed"] == 0.0  # ... so the buggy program goes unseen
    assert edited.objectives["mutation_score"] == 0.0
    assert edited.objectives["line_coverage"] < 0.5


@pytest.mark.loaded
def test_a_suite_that_never_finishes_is_timed_out(scoring):
    looped = evaluate(scoring, LOOPS, test_timeout=0.5, suite_timeout=3.0)
    assert set(looped.objectives.values()) == {0.0}
    assert "ran out of CPU time (3 s)" in looped.details["error"]


# Files that test only bitcount(0) == 0 (true of the buggy program too) in ways that once
# made later runs differ from the first: a 400-character id cut differently, an id drawn at
# random, a skipped test whose side effect a later test checks (it used to be left out of
# later runs), a slow parametrize generator (collection used to eat a mutant run's time).
SAME_AS_WEAK = {
    "long_id": """import pytest
from bitcount import bitcount


@pytest.mark.parametrize("n, want", [pytest.param(0, 0, id="x" * 400)])
def test_zero(n, want):
    assert bitcount(n) == want
""",
    "random_id": """import random
import pytest
from bitcount import bitcount


@pytest.mark.parametrize("n", [pytest.param(0, id=str(random.Random().random()))])
def test_zero(n):
    assert bitcount(n) == 0
""",
    "skip_state": """import pytest
from bitcount import bitcount

ran = []


def test_a():
    ran.append(1)
    pytest.skip("not counted, but it ran")


def test_zero():
    assert bitcount(0) == 0
    assert ran
""",
    "slow_collection": """import pytest
from bitcount import bitcount


def values():
    total = 0
    for i in range(3000000):
        total += i
    yield 0


@pytest.mark.parametrize("n", values())
def test_zero(n):
    assert bitcount(n) == 0
""",
}


@pytest.mark.parametrize("name", [pytest.param(name, marks=[pytest.mark.loaded])
                                  if name == "slow_collection" else name
                                  for name in sorted(SAME_AS_WEAK)])
def test_runs_of_a_file_cannot_differ_by_its_own_doing(scoring, name):
    got = evaluate(scoring, SAME_AS_WEAK[name]).objectives
    weak = evaluate(scoring, WEAK).objectives
    assert got == weak  # random_id's ids are the same in every run: random draws the seed


@pytest.mark.parametrize("trick", [
    "from bitcount import bitcount\ndef test():\n    assert bitcount.__code__.co_code\n",
    "import inspect\nfrom bitcount import bitcount\n"
    "def test():\n    assert '&=' in inspect.getsource(bitcount)\n",
    "import collections\ndef test():\n    assert collections._sys.modules\n",
    "import typing\ndef test():\n    assert typing.sys.modules\n",
    "from bitcount import bitcount\ndef test():\n    assert getattr(bitcount, 'x' + 'y')\n",
    "def test():\n    assert '{0.__globals__}'.format(test)\n",
    "def test():\n    assert '{0.x}'.format(test)\n",
    "import sys\ndef test():\n    sys.settrace(None)\n",
    "import random\ndef test():\n    random._os._exit(0)\n",
    "def test():\n    eval('1')\n",
    "import enum\ndef test():\n    assert enum.bltns\n",
    "import functools\nfrom bitcount import bitcount\nclass S:\n"
    "    def __setattr__(self, name, value):\n        pass\ndef test():\n"
    "    functools.update_wrapper(S(), bitcount)\n",
    "from functools import singledispatch\ndef test():\n    pass\n",
    "from bitcount import bitcount\ndef test():\n    match bitcount:\n"
    "        case object(co_code=raw):\n            pass\n",
    "def f(x: print(1)):\n    pass\ndef test():\n    pass\n",
    "import dataclasses\ndef test():\n    pass\n",
    "D = '_' * 2\nSpy = type('Spy', (), {D + 'eq' + D: None})\ndef test():\n    pass\n",
    "import enum\ndef test():\n    pass\n",
    "__name__ = '__main__'\nif __name__ == '__main__':\n    import os\n",
    "import pytest\ndef test(monkeypatch):\n    pytest.importorskip('os')\n",
    "from bitcount import bitcount\ndef test():\n"
    "    try:\n        bitcount(None)\n    except TypeError as e:\n"
    "        assert e.__traceback__.tb_frame.f_globals\n",
    # a third red-team pass: a module reached under another spelling skipped its API check
    "import pytest\ndef plugins(framework):\n    return framework.PytestPluginManager()\n"
    "def test():\n    plugins(pytest).import_plugin('dis')\n",
    "import pytest\ndef test():\n    assert [pytest][0].main\n",
    "import pytest\ndef helper():\n    pytest = None\ndef test():\n    assert pytest.main\n",
    "def test():\n    assert pytest.main\nimport pytest\n",
    "import pytest\nf = lambda pytest: pytest.main\ndef test():\n    pass\n",
    "import math as m\nimport cmath as m\ndef test():\n    pass\n",
    "import collections.abc as cabc\ndef test():\n    assert cabc.sys\n",
    "from typing.io import IO\ndef test():\n    pass\n",
    "import bitcount\ndef test():\n    assert bitcount.string\n",
    # a fourth: class patterns by position read attributes named by run-time strings
    "import collections\ndef get(obj, name):\n"
    "    class C(collections.namedtuple('B', [name])):\n        pass\n"
    "    match obj:\n        case C(value):\n            return value\ndef test():\n    pass\n",
    "T = type(int)\ndef test():\n    assert T\n",
    "def test():\n    assert 'co' + 'de' != 'co_code'\n",
    # a seventh: the OS's randomness failed a random share of runs (random draws the seed)
    "import random\ndef test():\n    assert random.SystemRandom().random() < 0.5\n",
    # an eighth: super(C, x) reached the C generator's own seed(), past the run's seed
    "import random\ndef test():\n    r = random.Random()\n    super(random.Random, r).seed()\n",
    "def test():\n    assert '{0.real}'.format(1)\n",  # .format reads attributes by name
    "T = '{}'\ndef test():\n    assert T.format(1)\n",  # unless it is on a plain literal
])
def test_a_suite_that_could_tell_versions_apart_is_refused(scoring, trick):
    refused = evaluate(scoring, trick)
    assert set(refused.objectives.values()) == {0.0}
    assert refused.details["refused"], refused.details


def test_the_screen_lets_ordinary_tests_through():
    from coral_core.sandbox.inside.testscreen import screen

    ordinary = GOOD + '''
from collections import deque
from typing import Callable, List, Optional, Tuple
import math


class Box:
    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return isinstance(other, Box) and self.value == other.value


class Sub(Box):
    def __init__(self, value):
        super().__init__(value)


class Vector:
    def __init__(self, code):
        self.code = code

    def __sub__(self, other):
        return Vector(self.code - other.code)

    def __enter__(self):
        return self

    def __exit__(self, *args):
        return False


def helper(x: Tuple[int, ...], f: Callable[[int], int], m: "Optional[int]") -> List[int]:
    return []


def test_more():
    with pytest.raises(TypeError):
        bitcount("x")
    assert math.isclose(0.1 + 0.2, pytest.approx(0.3))
    assert deque([1]) and Sub(1) == Box(1) and type(1) is int
    assert f"{bitcount(3)}" == "2" == str(format(3, "b").count("1"))
    assert "{} bits in {!r:>4}".format(bitcount(3), 3) == "2 bits in    3", "got {0}".format(3)
    with pytest.warns(DeprecationWarning):
        bitcount(0)
    with Vector(3) as v:
        assert (v - Vector(1)).code == 2 and hasattr(v, "code")


if __name__ == "__main__":
    pytest.main([__file__])
'''
    assert screen(ordinary, ["bitcount"]) == {"ok": True, "reasons": [], "tests": 3}
    refused = screen("import os\nimport os\n", ["bitcount"])
    assert refused["reasons"] == ["line 1: imports os"]  # once per rule


def test_the_baseline_writes_the_same_tests_for_the_same_seed_and_they_pass(scoring):
    from coral_core.types import GenerationRequest, SamplingParams
    from coral_plugins.models.baseline.model import create_baseline

    dataset, _ = scoring
    writer = create_baseline(dataset=dataset)
    try:
        task = dataset.tasks("test", ["to_base"])[0]
        request = GenerationRequest(task.prompt, SamplingParams(n=2, seed=3, stop=task.stop))
        first, second = writer.generate([request])[0], writer.generate([request])[0]
        assert [g.text for g in first] == [g.text for g in second]
        assert first[0].text != first[1].text  # two samples, two sets of inputs
        code = dataset.extract_code(task, first[0].text)
        assert "def test_to_base_" in code and "```" not in code
        scored = evaluate(scoring, code, "to_base")
        assert scored.objectives["tests_pass"] == 1.0
        assert scored.objectives["line_coverage"] > 0.5
    finally:
        writer.close()


def test_coral_run_testgen_end_to_end(data_dir, tmp_path):
    out = tmp_path / "run"
    done = run_coral("run", "--plugin", "testgen", "--samples", "1", "--problems",
                     "to_base,sieve", "--out", str(out), "--json", env=coral_env(data_dir))
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    per_problem = {p["problem"]: p for p in summary["problems"]}
    assert set(per_problem) == {"to_base", "sieve"}
    for problem in per_problem.values():
        assert set(problem["objectives"]) == {"tests_pass", "bug_revealed", "line_coverage",
                                              "mutation_score"}
        assert problem["objectives"]["tests_pass"] == 1.0
    again = run_coral("run", "--plugin", "testgen", "--samples", "1", "--problems",
                      "to_base,sieve", "--out", str(tmp_path / "again"), "--json",
                      env=coral_env(data_dir))
    assert json.loads(again.stdout)["problems"] == summary["problems"]


def test_coral_evaluate_a_test_file(data_dir, tmp_path):
    path = tmp_path / "bitcount.py"
    path.write_text(GOOD)
    done = run_coral("evaluate", "--plugin", "testgen", "--problem", "bitcount",
                     "--candidate", str(path), "--json", env=coral_env(data_dir))
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["passed"] is True
    assert document["objectives"]["bug_revealed"] == 1.0
    assert document["details"]["testgen"]["coverage"]["statements"] == 6


def test_a_training_problem_on_the_test_split_is_refused(data_dir):
    done = run_coral("run", "--plugin", "testgen", "--split", "test", "--problems",
                     "bitcount", "--samples", "1", env=coral_env(data_dir))
    assert done.returncode == 2
    assert "contamination" in done.stderr and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("option", ["max_mutants = -1", "test_timeout = 1e12",
                                    "suite_timeout = 1e308", "mutation_factor = 0"])
def test_bad_evaluator_options_are_one_line(data_dir, tmp_path, option):
    """1e12 seconds was accepted, then overflowed the OS's timers in every run: a bad
    option silently scored every file 0 (a bad-input sweep)."""
    config = tmp_path / "c.toml"
    config.write_text(f"[evaluators.options.testgen]\n{option}\n")
    done = run_coral("run", "--plugin", "testgen", "--config", str(config), "--samples", "1",
                     "--out", str(tmp_path / "r"), env=coral_env(data_dir))
    assert done.returncode == 2, done.stderr
    assert option.split()[0] in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_max_mutants_samples_with_the_seed(scoring):
    some = evaluate(scoring, GOOD, max_mutants=5, seed=1)
    assert some.details["mutation"]["mutants"] == 5
    assert evaluate(scoring, GOOD + "#\n", max_mutants=5, seed=1).objectives == some.objectives


def test_skip_mutation(scoring, monkeypatch):
    monkeypatch.setenv("SKIP_MUTATION", "true")
    skipped = evaluate(scoring, GOOD)
    assert skipped.objectives["mutation_score"] == 0.0
    assert skipped.details["mutation"]["available"] is False
    assert skipped.objectives["bug_revealed"] == 1.0


def test_graph_problems_offer_the_node_class(scoring):
    code = '''from node import Node
from breadth_first_search import breadth_first_search


def test_path():
    end = Node("end")
    start = Node("start", None, [end])
    assert breadth_first_search(start, end)


def test_no_path():
    assert not breadth_first_search(Node("a"), Node("b"))
'''
    scored = evaluate(scoring, code, "breadth_first_search")
    assert scored.objectives["tests_pass"] == 1.0, scored.details
