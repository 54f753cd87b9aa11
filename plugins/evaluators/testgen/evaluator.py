"""The `testgen` evaluator: how good is a test file a model wrote for a program?

Four objectives, each from runs in the sandbox (suite.py), never from the test file's word:
- tests_pass: the fraction of its tests that pass on the correct program;
- bug_revealed: 1.0 when every test passes on the correct program and at least one fails on
  the buggy one (a suite that fails on the correct program reveals nothing: its failures
  are not evidence of the bug);
- line_coverage: the correct program's statements (coverage.py's parser) its tests execute
  (loading the program counts, as an import by the test file does under pytest; a file
  that runs no test covers nothing);
- mutation_score: of cosmic-ray's mutants of the correct program, the fraction that the
  tests passing on it tell apart (judge.py), a mutant that none of them reaches surviving
  unrun.
The test file is screened first (inside/testscreen.py): one that could tell program versions
apart by anything but calling them scores 0 everywhere, with the reasons.

The correct program is judged again (AGAIN times), at random places among the buggy
program and the mutants. A file whose tests do not pass on it every time (one fails, other
tests are collected, loading differs) tells apart nothing: bug_revealed and mutation_score
are 0 and `details.inconsistent` says why. That closes the class of files that know which run they
are in, by chance or through state that outlives a run (a worker's PID counter, a tmpfs's
inode counter, the clock): the correct run is always a file's first, so such a file could
otherwise fail every later run and be credited with every kill.
"""

from __future__ import annotations

import importlib.util
import math
import random
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from coral_core.config.schema import DAY, OptionInvalid
from coral_core.errors import UserError
from coral_core.execution import ExecutionContext
from coral_core.mutation import skip_requested
from coral_core.sandbox import analyzer_for
from coral_core.types import Candidate, Evaluation

from .judge import Judge
from .mutants import Mutant, Variant, mutants_of, variant_of
from .suite import PRELOAD, SOURCES, SuiteRun, run_suite

OBJECTIVES = ("tests_pass", "bug_revealed", "line_coverage", "mutation_score")
# Judged runs of the correct program, hidden among the others (the module's docstring):
# a file that fails a share p of its runs at random keeps its kills (that share) only
# when all of the correct runs pass, (1 - p) ** (AGAIN + 1): on average at most a tenth
# of the mutants with 2. (`random` itself draws the same numbers in every run: suite.py.)
AGAIN = 2
SHOWN = 20
MAX_OUTCOMES = 500


def _positive(value: Any, what: str, most: float = DAY) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or not 0 < value <= most:
        raise OptionInvalid(("evaluators", "options", "testgen", what),
                            f"[evaluators.options.testgen] {what} must be a number in "
                            f"(0, {most:g}], not {value!r}")
    return float(value)


def statements(source: str) -> frozenset[int]:
    """The program's statement lines as coverage.py counts them."""
    from coverage.parser import PythonParser

    parser = PythonParser(text=source)
    parser.parse_source()
    return frozenset(parser.statements)


class TestgenEvaluator:
    """Options: test_timeout (CPU seconds per test on the correct program), suite_timeout
    (per run), mutation_factor (a test may take this many times its CPU time on the correct
    program before a mutant counts as killed by a timeout, at least 0.2 s), max_mutants (0:
    all; else a seeded sample of that many), seed."""

    name = "testgen"
    objectives = OBJECTIVES
    __test__ = False

    def __init__(self, test_timeout: float = 2.0, suite_timeout: float = 30.0,
                 mutation_factor: float = 10.0, max_mutants: int = 0, seed: int = 0):
        self.test_timeout = _positive(test_timeout, "test_timeout")
        self.suite_timeout = _positive(suite_timeout, "suite_timeout")
        self.mutation_factor = _positive(mutation_factor, "mutation_factor")
        if isinstance(max_mutants, bool) or not isinstance(max_mutants, int) or max_mutants < 0:
            raise OptionInvalid(("evaluators", "options", "testgen", "max_mutants"),
                                "[evaluators.options.testgen] max_mutants must be an "
                                f"integer >= 0 (0: all), not {max_mutants!r}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise OptionInvalid(("evaluators", "options", "testgen", "seed"),
                                "[evaluators.options.testgen] seed must be an integer, "
                                f"not {seed!r}")
        self.max_mutants, self.seed = max_mutants, seed
        missing = [m for m in ("pytest", "coverage", "cosmic_ray")
                   if importlib.util.find_spec(m) is None]
        if missing:
            raise UserError(f"the testgen evaluator needs {', '.join(missing)}: "
                            "pip install 'coral-engine[mutation]'")

    def evaluate(self, candidate: Candidate, context: ExecutionContext) -> Evaluation:
        started = time.monotonic()
        meta = candidate.task.metadata
        if "program" not in meta or "buggy" not in meta:
            raise UserError(f"the testgen evaluator scores test files for testgen tasks; task "
                            f"'{candidate.task.id}' of {candidate.task.dataset} is not one")
        name = meta["module"]
        support = tuple((s[0], s[1]) for s in meta.get("support", ()))
        screen = analyzer_for(context).ask(
            "screen", candidate.code, {"modules": [name, *(s[0] for s in support)]})
        if "error" in screen or not screen["ok"]:
            reasons = screen.get("reasons") or [screen.get("error", "")]
            return self._zero({"refused": reasons}, started)
        return self.unscreened(candidate, context, started)

    def unscreened(self, candidate: Candidate, context: ExecutionContext,
                   started: float | None = None) -> Evaluation:
        """The file's scores from its runs alone, as if it had passed the screen: what the
        runs' structure guarantees without it (the tests call this with hostile files)."""
        started = time.monotonic() if started is None else started
        meta = candidate.task.metadata
        name = meta["module"]
        support = tuple((s[0], s[1]) for s in meta.get("support", ()))
        sandbox = context.preloaded(PRELOAD, SOURCES)

        def run(source: str, **options: Any) -> SuiteRun:
            return run_suite(sandbox, candidate.code, (name, source), support,
                             ceiling=self.suite_timeout, seed=self.seed, **options)

        correct = run(meta["program"], coverage=True, budget=self.test_timeout,
                      timeout=self.suite_timeout)
        if correct.error or not correct.finished:
            return self._zero({"error": correct.error or "the run stopped early"}, started)
        lines = correct.lines or {}
        judge = Judge(correct, self.test_timeout, self.mutation_factor, self.suite_timeout,
                      frozenset(line for line, tests in lines.items() if "" in tests))
        counted = correct.counted()
        green = correct.passed()
        all_pass = bool(counted) and len(green) == len(counted)
        buggy = variant_of(meta["program"], meta["buggy"])
        mutants, mutation = self._mutants(name, meta["program"])
        reached = {line for line, tests in lines.items() if set(tests) & set(green)}
        ran = [m for m in mutants if green and not judge.unseen(m, reached)]
        again = [Variant(meta["program"], frozenset(), in_function=False)] * AGAIN
        verdicts = judged(run, judge, [buggy, *again, *ran], sandbox.workers)
        revealed_by, kills = verdicts[0], verdicts[1 + AGAIN:]
        differed = next((v for v in verdicts[1:1 + AGAIN] if v is not None), None)
        if differed is not None:  # the module's docstring: none of its verdicts is evidence
            revealed_by, kills = None, [None] * len(ran)
        if mutation["available"]:
            killed = {id(m) for m, told in zip(ran, kills) if told is not None}
            running = {id(m) for m in ran}
            mutation.update(
                score=len(killed) / len(mutants) if mutants else 0.0, killed=len(killed),
                unreached=len(mutants) - len(ran),
                survivors=[{"operator": m.operator, "occurrence": m.occurrence,
                            "lines": sorted(m.lines), "reached": id(m) in running}
                           for m in mutants if id(m) not in killed])
            if not green:
                mutation["why"] = "no test passes on the correct program"
            elif differed is not None:
                mutation["why"] = "the file's tests did not pass again on the correct program"
        program_lines = statements(meta["program"])
        executed = program_lines & set(lines)
        objectives = {
            "tests_pass": len(green) / len(counted) if counted else 0.0,
            "bug_revealed": 1.0 if all_pass and revealed_by else 0.0,
            # a file that runs no test covers nothing (the program's own loading ran its
            # `def` lines: an empty file had 0.25 on gcd)
            "line_coverage": (len(executed) / len(program_lines)
                              if program_lines and counted else 0.0),
            "mutation_score": mutation.pop("score"),
        }
        details = {
            "tests": len(counted), "passed": len(green),
            "skipped": len(correct.tests) - len(counted),
            "failing_on_correct": [[t.name, t.status, t.detail] for t in counted
                                   if t.status != "pass"][:SHOWN],
            # each test on the correct program, as `coral evaluate` shows a candidate's tests
            "outcomes": [{"test": t.name, "status": t.status, "detail": t.detail}
                         for t in counted][:MAX_OUTCOMES],
            # only where it counts: a suite failing on the correct program reveals nothing
            "revealed_by": revealed_by if all_pass else None,
            "coverage": {"statements": len(program_lines), "executed": len(executed),
                         "missed": sorted(program_lines - executed)},
            "mutation": mutation, "seconds": round(time.monotonic() - started, 3),
        }
        if differed is not None:
            details["inconsistent"] = (f"{differed}: the correct program, run again among "
                                       "the other versions, was told apart from itself")
        return Evaluation(objectives, details)

    def _mutants(self, name: str, program: str) -> tuple[list[Mutant], dict]:
        """The mutants to judge (a seeded sample of max_mutants), and the mutation details."""
        if skip_requested():
            return [], {"score": 0.0, "available": False, "why": "SKIP_MUTATION=true"}
        mutants = list(mutants_of(name, program))
        if self.max_mutants and len(mutants) > self.max_mutants:
            mutants = sorted(random.Random(self.seed).sample(mutants, self.max_mutants),
                             key=lambda m: (m.operator, m.occurrence))
        return mutants, {"available": True, "mutants": len(mutants)}

    def _zero(self, details: dict, started: float) -> Evaluation:
        details["seconds"] = round(time.monotonic() - started, 3)
        return Evaluation({name: 0.0 for name in OBJECTIVES}, details)


def judged(run, judge: Judge, variants: list[Variant], workers: int) -> list[str | None]:
    """For each variant, the test that told it from the correct program (judge.py), or None.

    The runs go in an order drawn from the OS's randomness, not from the seed, which the
    test file could compute: a run's place among them says nothing of the version it
    tests. A file whose verdicts do not depend on the order (any file the hidden runs of
    the correct program find consistent) gets the same verdicts in every order, so its
    scores are still the seed's."""
    order = list(range(len(variants)))
    random.SystemRandom().shuffle(order)
    verdicts: list[str | None] = [None] * len(variants)

    def one(index: int) -> None:
        variant = variants[index]
        verdicts[index] = judge.told_apart(run(variant.source, **judge.options()), variant)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        list(pool.map(one, order))
    return verdicts
