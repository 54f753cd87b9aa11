"""The baseline's prior: which single edits fixed the training problems.

For every training problem (its buggy and its correct program: the `source` and
`solution` of its `training_examples()`), every single-edit variant of the buggy program
is compared with the correct program by normalised syntax tree (layout, comments,
docstrings and the direction of comparisons ignored); nothing is executed. An edit
"fixes" the problem when its variant matches.

An edit's weight is the fix rate of its kind (fixing edits / edits proposed), shrunk
towards its family's rate, and that towards the overall rate, so that a kind never seen
to fix anything keeps some mass; times a factor, learned and shrunk the same way, for
edits that delete what ends a `while` loop (they rarely fix anything and often never
stop). Only training problems are ever seen; the shrinkage strength was chosen by
leave-one-problem-out on the training split (docs/models-baseline.md).
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from coral_core.types import TrainingExample

from .edits import KINDS
from .render import Origin, Variant, enumerate_variants, normalized

log = logging.getLogger(__name__)

SHRINK = 40.0  # pseudo-count, in proposed edits, of every shrinkage step


@dataclass(frozen=True)
class Counts:
    """Edits proposed, and edits that fixed their problem, per feature value."""

    proposed: Mapping[str, int] = field(default_factory=dict)
    fixing: Mapping[str, int] = field(default_factory=dict)

    def rate(self, key: str, towards: float, shrink: float) -> float:
        return ((self.fixing.get(key, 0) + shrink * towards)
                / (self.proposed.get(key, 0) + shrink))


@dataclass(frozen=True)
class Prior:
    """Edit weights learned from training problems (see `learn_prior`)."""

    kinds: Counts
    families: Counts
    loop_exits: Counts
    problems: tuple[str, ...] = ()
    fixed: tuple[str, ...] = ()
    shrink: float = SHRINK

    @property
    def base_rate(self) -> float:
        proposed = sum(self.kinds.proposed.values())
        fixing = sum(self.kinds.fixing.values())
        return (fixing + 1.0) / (proposed + 2.0)

    def kind_rate(self, kind: str) -> float:
        family = self.families.rate(KINDS.get(kind, kind), self.base_rate, self.shrink)
        return self.kinds.rate(kind, family, self.shrink)

    def loop_exit_factor(self, loop_exit: bool) -> float:
        base = self.base_rate
        return self.loop_exits.rate(_flag(loop_exit), base, self.shrink) / base

    def origin_weight(self, origin: Origin) -> float:
        return self.kind_rate(origin.kind) * self.loop_exit_factor(origin.loop_exit)

    def weight(self, variant: Variant) -> float:
        """How likely the variant is the fix: the likeliest edit that makes it decides."""
        return max(self.origin_weight(origin) for origin in variant.origins)


def _flag(loop_exit: bool) -> str:
    return "loop_exit" if loop_exit else "other"


def _tally(pairs: Iterable[tuple[str, bool]]) -> Counts:
    proposed: Counter[str] = Counter()
    fixing: Counter[str] = Counter()
    for key, fixes in pairs:
        proposed[key] += 1
        fixing[key] += fixes
    return Counts(dict(sorted(proposed.items())), dict(sorted(fixing.items())))


def problem_pairs(examples: Iterable[TrainingExample]) -> dict[str, tuple[str, str]]:
    """One (buggy, correct) pair per problem, from the examples' `source` and `solution`
    (its instruction variants share them); examples without both are skipped."""
    pairs: dict[str, tuple[str, str]] = {}
    for example in examples:
        if example.source and example.solution:
            pairs.setdefault(example.task_id, (example.source, example.solution))
    return dict(sorted(pairs.items()))


def label_edits(buggy: str, correct: str) -> list[tuple[Origin, bool]]:
    """Every edit proposed for `buggy`, and whether its variant is `correct`."""
    target = normalized(correct)
    try:
        variants = enumerate_variants(buggy)
    except (SyntaxError, ValueError):
        return []
    return [(origin, (v.canonical or normalized(v.text)) == target)
            for v in variants for origin in v.origins]


def prior_from_labels(labelled: Sequence[tuple[Origin, bool]], shrink: float = SHRINK,
                      problems: tuple[str, ...] = (), fixed: tuple[str, ...] = ()) -> Prior:
    return Prior(
        kinds=_tally((o.kind, f) for o, f in labelled),
        families=_tally((KINDS.get(o.kind, o.kind), f) for o, f in labelled),
        loop_exits=_tally((_flag(o.loop_exit), f) for o, f in labelled),
        problems=problems, fixed=fixed, shrink=shrink,
    )


def learn_prior(examples: Iterable[TrainingExample], shrink: float = SHRINK) -> Prior:
    """Count, per feature, the edits proposed and those that fixed a training problem."""
    labelled: list[tuple[Origin, bool]] = []
    fixed: list[str] = []
    pairs = problem_pairs(examples)
    for problem, (buggy, correct) in pairs.items():
        edits = label_edits(buggy, correct)
        if any(fixes for _, fixes in edits):
            fixed.append(problem)
        labelled += edits
    log.info("baseline prior: %d edits proposed on %d training problems; "
             "a single edit fixes %d of them", len(labelled), len(pairs), len(fixed))
    return prior_from_labels(labelled, shrink, tuple(pairs), tuple(fixed))


def examples_digest(examples: Iterable[TrainingExample]) -> str:
    """A content key for the training data: the prior is cached under it (prior_cache.py)."""
    digest = hashlib.sha256()
    for problem, (buggy, correct) in problem_pairs(examples).items():
        for part in (problem, buggy, correct):
            digest.update(part.encode("utf-8"))
            digest.update(b"\0")
    return digest.hexdigest()
