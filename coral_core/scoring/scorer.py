"""Combining evaluators into one objective vector and a weighted fitness."""

from __future__ import annotations

import logging
import numbers
import threading
from typing import Any, Mapping, Sequence

from coral_core.config.schema import OptionInvalid
from coral_core.errors import UserError
from coral_core.failures import PLUGIN_FAULTS, describe
from coral_core.execution import ExecutionContext, code_digest
from coral_core.protocols import Evaluator
from coral_core.types import Candidate, Evaluation, ScoredCandidate, Task

log = logging.getLogger(__name__)


def failed_candidate(task: Task, error: BaseException, code: str = "",
                     objective_names: Sequence[str] = (), seconds: float = 0.0,
                     ) -> ScoredCandidate:
    """What a candidate whose scoring raised is recorded as: every objective 0, not
    passed (where the task defines success), and `details["error"]` saying where and what
    ('FILE:LINE: ExcType: message'), so that the run goes on and the summary counts it."""
    return ScoredCandidate({name: 0.0 for name in objective_names}, 0.0,
                           False if task.success is not None else None,
                           {"error": describe(error)}, code, seconds)


def weighted_fitness(objectives: Mapping[str, float], weights: Mapping[str, float]) -> float:
    """Sum of weight x objective over the weighted objectives, divided by the weights' sum.

    Objectives without a weight are reported but do not count; no weights at all means
    equal weights.
    """
    used = {name: weights.get(name, 0.0) for name in objectives} if weights else {
        name: 1.0 for name in objectives
    }
    largest = max(used.values(), default=0.0)
    if not largest > 0:
        return 0.0
    # as fractions of the largest: weights of 1e308 summed to inf, and the fitness to 0
    used = {name: w / largest for name, w in used.items()}
    return sum(objectives[name] * w for name, w in used.items()) / sum(used.values())


class Scorer:
    """Runs every evaluator on a candidate; results are cached by task and content.

    `gate`: when that objective is 0 (syntax: code that does not parse), every objective
    is 0 — an empty or broken program must not collect style or security points.
    """

    def __init__(
        self, evaluators: Sequence[Evaluator], context: ExecutionContext,
        weights: Mapping[str, float] | None = None, gate: str = "",
    ):
        self.evaluators = list(evaluators)
        self.context = context
        self.weights = dict(weights or {})
        self.gate = gate
        names: dict[str, str] = {}
        for evaluator in self.evaluators:
            declared = getattr(evaluator, "objectives", None)
            if isinstance(declared, (str, bytes)) or not isinstance(declared, (tuple, list)) \
                    or not all(isinstance(name, str) and name for name in declared):
                raise UserError(f"evaluator '{getattr(evaluator, 'name', '?')}' declares "
                                f"objectives = {declared!r}: give a tuple of names, e.g. "
                                "(\"length\",) (docs/plugins.md)")
            for objective in declared:
                if objective in names:
                    raise UserError(f"objective '{objective}' is produced by both "
                                    f"'{names[objective]}' and '{evaluator.name}'")
                names[objective] = evaluator.name
        unknown = sorted(set(self.weights) - set(names))
        if unknown:
            raise OptionInvalid(("evaluators", "weights"),
                                f"weights given for objectives no evaluator produces: "
                                f"{', '.join(unknown)} (produced: "
                                f"{', '.join(sorted(names))}); set [evaluators] weights "
                                "for the objectives in use, or weights = {} for equal "
                                "weights")
        if gate and gate not in names:
            raise OptionInvalid(("evaluators", "gate"),
                                f"gate objective '{gate}' is produced by no evaluator in use")
        self.objective_names = tuple(names)
        self._producers = names
        self._cache: dict[tuple[str, str, str], ScoredCandidate] = {}
        self._lock = threading.Lock()

    def check_tasks(self, tasks: Sequence[Task]) -> None:
        """Refuse, before any work, tasks whose success needs an objective not produced."""
        for task in tasks:
            if task.success is not None and task.success.objective not in self._producers:
                raise UserError(
                    f"task '{task.id}' counts as solved by objective "
                    f"'{task.success.objective}', which no evaluator in use produces "
                    f"(produced: {', '.join(sorted(self._producers))})")

    def score(self, candidate: Candidate) -> ScoredCandidate:
        """Every evaluator's objectives; the first evaluator that raises ends the scoring
        (a run records the candidate as failed, or stops with --fail-fast)."""
        key = (candidate.task.dataset, candidate.task.id, code_digest(candidate.code))
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        objectives: dict[str, float] = {}
        details: dict[str, Any] = {}
        for evaluator in self.evaluators:
            self._evaluate(evaluator, candidate, objectives, details)
        scored = self._scored(candidate, objectives, details)
        with self._lock:
            self._cache[key] = scored
        return scored

    def score_apart(self, candidate: Candidate) -> tuple[ScoredCandidate, dict[str, str]]:
        """Like `score`, but an evaluator that raises costs only its own objectives (0):
        the others' results are kept, and {evaluator: 'FILE:LINE: Exc: message'} says
        what failed (`coral evaluate` shows both)."""
        objectives: dict[str, float] = {}
        details: dict[str, Any] = {}
        errors: dict[str, str] = {}
        for evaluator in self.evaluators:
            try:
                self._evaluate(evaluator, candidate, objectives, details)
            except UserError:
                raise
            except PLUGIN_FAULTS as error:
                errors[evaluator.name] = describe(error)
                log.debug("evaluator '%s' raised on '%s'", evaluator.name, candidate.task.id,
                          exc_info=error)  # -v: the traceback
                objectives.update({name: 0.0 for name in evaluator.objectives})
        return self._scored(candidate, objectives, details), errors

    def _evaluate(self, evaluator: Evaluator, candidate: Candidate,
                  objectives: dict[str, float], details: dict[str, Any]) -> None:
        evaluation = evaluator.evaluate(candidate, self.context)
        # the plugin's contract, broken whatever the candidate: the trial stops
        if not isinstance(evaluation, Evaluation):
            raise UserError(f"evaluator '{evaluator.name}' returned a "
                            f"{type(evaluation).__name__}, not an Evaluation(objectives="
                            "{...}) (docs/plugins.md)")
        if not isinstance(evaluation.objectives, Mapping):
            raise UserError(f"evaluator '{evaluator.name}' returned objectives that are a "
                            f"{type(evaluation.objectives).__name__}, not a mapping")
        for name in evaluator.objectives:
            if name not in evaluation.objectives:  # maybe on one path: this candidate's
                raise TypeError(f"evaluator '{evaluator.name}' gave no objective '{name}', "
                                "which its `objectives` declare (it gave: "
                                f"{', '.join(map(str, evaluation.objectives)) or 'none'})")
            given = evaluation.objectives[name]
            if isinstance(given, bool) or not isinstance(given, numbers.Real):
                # a "0.9" or a True was taken as a number (a red-team plugin)
                raise TypeError(f"evaluator '{evaluator.name}' gave {name}={given!r}, not a "
                                "number in [0, 1]")
            value = float(given)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"evaluator '{evaluator.name}' gave {name}={value}, "
                                 "outside [0, 1]")
            objectives[name] = value
        if evaluation.details:
            details[evaluator.name] = dict(evaluation.details)

    def _scored(self, candidate: Candidate, objectives: dict[str, float],
                details: dict[str, Any]) -> ScoredCandidate:
        if self.gate and objectives.get(self.gate, 1.0) == 0.0:
            objectives = {name: 0.0 for name in objectives}
        success = candidate.task.success
        passed = success.met(objectives) if success is not None else None
        return ScoredCandidate(objectives, weighted_fitness(objectives, self.weights), passed,
                               details, candidate.code)
