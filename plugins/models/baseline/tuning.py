"""Choosing the prior's shrinkage by leave-one-problem-out on the training split.

For each training problem that a single edit can fix, the prior is learned from the
other training problems, and the held-out problem's chance of being fixed by `samples`
draws is computed exactly from the sampling distribution (1 - (1 - p_fix) ** samples).
Their sum is the expected number of held-out problems fixed; `SHRINK` in
`prior` is the value that maximises it. Test and extra problems play no part.

Run ``python -m coral_plugins.models.baseline.tuning [DATA_DIR]`` to redo the choice.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from typing import Iterable, Sequence

from coral_core.types import SamplingParams, TrainingExample

from .prior import prior_from_labels, problem_pairs
from .render import Origin, Variant, enumerate_variants, normalized
from .sampling import rank, sampling_distribution

log = logging.getLogger(__name__)

SHRINKS = (10.0, 20.0, 30.0, 40.0, 60.0, 80.0, 160.0)


@dataclass(frozen=True)
class Labelled:
    """One training problem's variants, which of them fix it, and its edits' labels."""

    problem: str
    variants: tuple[Variant, ...]
    fixes: frozenset[str]
    edits: tuple[tuple[Origin, bool], ...]


def label_problems(examples: Iterable[TrainingExample]) -> list[Labelled]:
    labelled = []
    for problem, (buggy, correct) in problem_pairs(examples).items():
        target = normalized(correct)
        variants = tuple(enumerate_variants(buggy))
        fixes = frozenset(v.text for v in variants
                          if (v.canonical or normalized(v.text)) == target)
        edits = tuple((origin, v.text in fixes) for v in variants for origin in v.origins)
        labelled.append(Labelled(problem, variants, fixes, edits))
    return labelled


def held_out_hits(problems: Sequence[Labelled], shrink: float, samples: int = 50,
                  params: SamplingParams = SamplingParams()) -> float:
    """Expected number of problems fixed when each is held out of the prior's data."""
    total = 0.0
    for held in problems:
        if not held.fixes:
            continue
        rest = [edit for other in problems if other is not held for edit in other.edits]
        prior = prior_from_labels(rest, shrink)
        distribution = sampling_distribution(rank(held.variants, prior), params)
        p_fix = sum(p for candidate, p in distribution if candidate.text in held.fixes)
        total += 1.0 - (1.0 - p_fix) ** samples
    return total


def best_shrink(problems: Sequence[Labelled], shrinks: Sequence[float] = SHRINKS) -> float:
    scores = {shrink: held_out_hits(problems, shrink) for shrink in shrinks}
    for shrink, score in scores.items():
        log.info("shrink %6.1f: %.2f held-out training problems fixed (expected, n=50)",
                 shrink, score)
    return max(scores, key=lambda shrink: (scores[shrink], -shrink))


def main(argv: Sequence[str] = ()) -> None:
    from coral_core import plugins

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    options = {"data_dir": argv[0]} if argv else {}
    problems = label_problems(plugins.build("datasets", "quixbugs", **options)
                              .training_examples())
    log.info("best shrink: %.1f", best_shrink(problems))


if __name__ == "__main__":
    main(sys.argv[1:])
