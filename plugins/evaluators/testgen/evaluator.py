"""The `testgen` evaluator: how good is a test file a model wrote for a program?

Four objectives, each from runs in the sandbox (suite.py), never from the test file's word:
- tests_pass: the fraction of its tests that pass on the correct program;
- bug_revealed: 1.0 when every test passes on the correct program and at least one fails on
  the buggy one (a suite that fails on the correct program reveals nothing: its failures
  are not evidence of the bug);
- line_coverage: the correct program's statements (coverage.py's parser) its tests execute;
- mutation_score: of cosmic-ray's mutants of the correct program, the fraction that the
  tests passing on it tell apart (judge.py), a mutant that none of them reaches surviving
  unrun.
The test file is screened first (inside/testscreen.py): one that could tell program versions
apart by anything but calling them scores 0 everywhere, with the reasons.
"""

from __future__ import annotations

import importlib.util
import math
import random
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping

from coral_core.errors import UserError
from coral_core.execution import ExecutionContext
from coral_core.sandbox import analyzer_for
from coral_core.types import Candidate, Evaluation

from ..mutation.runner import skip_requested
from .judge import Judge
from .mutants import Mutant, mutants_of, variant_of
from .suite import PRELOAD, SOURCES, SuiteRun, run_suite

OBJECTIVES = ("tests_pass", "bug_revealed", "line_coverage", "mutation_score")
SHOWN = 20


def _positive(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value <= 0:
        raise UserError(f"[evaluators.options.testgen] {what} must be a number > 0, "
                        f"not {value!r}")
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
            raise UserError("[evaluators.options.testgen] max_mutants must be an integer >= 0"
                            f" (0: all), not {max_mutants!r}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise UserError(f"[evaluators.options.testgen] seed must be an integer, not {seed!r}")
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
        sandbox = context.preloaded(PRELOAD, SOURCES)

        def run(source: str, **options: Any) -> SuiteRun:
            return run_suite(sandbox, candidate.code, (name, source), support,
                             ceiling=self.suite_timeout, **options)

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
        revealed_by = judge.told_apart(run(buggy.source, **judge.options()), buggy)
        program_lines = statements(meta["program"])
        executed = program_lines & set(lines)
        mutation = self._mutation(run, judge, name, meta["program"], green, lines,
                                  sandbox.workers)
        objectives = {
            "tests_pass": len(green) / len(counted) if counted else 0.0,
            "bug_revealed": 1.0 if all_pass and revealed_by else 0.0,
            "line_coverage": len(executed) / len(program_lines) if program_lines else 0.0,
            "mutation_score": mutation.pop("score"),
        }
        details = {
            "tests": len(counted), "passed": len(green),
            "skipped": len(correct.tests) - len(counted),
            "failing_on_correct": [[t.name, t.status, t.detail] for t in counted
                                   if t.status != "pass"][:SHOWN],
            "revealed_by": revealed_by,
            "coverage": {"statements": len(program_lines), "executed": len(executed),
                         "missed": sorted(program_lines - executed)},
            "mutation": mutation, "seconds": round(time.monotonic() - started, 3),
        }
        return Evaluation(objectives, details)

    def _mutation(self, run, judge: "Judge", name: str, program: str, green: list[str],
                  lines: Mapping[int, tuple[str, ...]], workers: int) -> dict:
        if skip_requested():
            return {"score": 0.0, "available": False, "why": "SKIP_MUTATION=true"}
        mutants = list(mutants_of(name, program))
        if self.max_mutants and len(mutants) > self.max_mutants:
            mutants = sorted(random.Random(self.seed).sample(mutants, self.max_mutants),
                             key=lambda m: (m.operator, m.occurrence))
        if not green:
            return {"score": 0.0, "available": True, "mutants": len(mutants), "killed": 0,
                    "why": "no test passes on the correct program"}
        reached = {line for line, tests in lines.items() if set(tests) & set(green)}

        def verdict(mutant: Mutant) -> tuple[Mutant, bool, bool]:
            if judge.unseen(mutant, reached):
                return mutant, False, False  # no passing test executes it: it survives
            return mutant, judge.told_apart(run(mutant.source, **judge.options()),
                                            mutant) is not None, True

        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            verdicts = list(pool.map(verdict, mutants))
        killed = sum(1 for _, dead, _ in verdicts if dead)
        survivors = [{"operator": m.operator, "occurrence": m.occurrence,
                      "lines": sorted(m.lines), "reached": ran}
                     for m, dead, ran in verdicts if not dead]
        return {"score": killed / len(mutants) if mutants else 0.0, "available": True,
                "mutants": len(mutants), "killed": killed,
                "unreached": sum(1 for _, _, ran in verdicts if not ran),
                "survivors": survivors}

    def _zero(self, details: dict, started: float) -> Evaluation:
        details["seconds"] = round(time.monotonic() - started, 3)
        return Evaluation({name: 0.0 for name in OBJECTIVES}, details)
