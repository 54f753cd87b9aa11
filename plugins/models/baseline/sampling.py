"""Ranking and sampling the baseline's candidates, reproducibly.

A candidate's probability is proportional to weight ** (1 / temperature): temperature 1
samples the prior as learned, lower sharpens it, 0 always gives the top-ranked
candidate. Draws use `random.Random` seeded per sample (`coral_core.seeds.sample_seed`,
never Python's salted `hash()`, never set order), so the same seed gives the same text on
every machine.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Mapping, Sequence

from coral_core.types import SamplingParams

from .edits import KINDS
from .prior import Prior
from .render import Variant


@dataclass(frozen=True)
class Ranked:
    """A candidate program and its prior weight."""

    text: str
    weight: float


def rank(variants: Sequence[Variant], prior: Prior,
         family_weights: Mapping[str, float] | None = None) -> list[Ranked]:
    """Best first; equal weights keep the enumeration order. `family_weights` multiplies
    the prior's weight of each edit by its family's factor (1 where not given)."""
    if family_weights:
        def weight(variant: Variant) -> float:
            return max(prior.origin_weight(origin) * family_weights.get(
                KINDS.get(origin.kind, origin.kind), 1.0) for origin in variant.origins)
    else:
        weight = prior.weight
    weighted = [Ranked(v.text, weight(v)) for v in variants]
    order = sorted(range(len(weighted)), key=lambda i: (-weighted[i].weight, i))
    return [weighted[i] for i in order]


def sampling_distribution(ranked: Sequence[Ranked],
                          params: SamplingParams) -> list[tuple[Ranked, float]]:
    """The candidates that may be drawn, with their probabilities, in ranked order.

    p ~ weight ** (1 / T) (in log space, so a small T cannot overflow) over the top_k
    candidates (all when top_k is 0); then top_p keeps the shortest ranked prefix whose
    probability reaches top_p. T <= 0 gives the top candidate.
    """
    if params.temperature <= 0 or len(ranked) == 1:
        return [(ranked[0], 1.0)]
    pool = list(ranked[:params.top_k] if params.top_k > 0 else ranked)
    logits = [math.log(max(r.weight, 1e-300)) / params.temperature for r in pool]
    top = max(logits)
    masses = [math.exp(logit - top) for logit in logits]
    total = sum(masses)
    probabilities = [mass / total for mass in masses]
    if 0 < params.top_p < 1:
        kept, reached = 0, 0.0
        while kept < len(pool) and reached < params.top_p:
            reached += probabilities[kept]
            kept += 1
        pool, probabilities = pool[:kept], [p / reached for p in probabilities[:kept]]
    return list(zip(pool, probabilities))


def draw(distribution: Sequence[tuple[Ranked, float]], seed: int) -> Ranked:
    """One candidate: the inverse CDF at one `random.Random(seed)` draw."""
    point = random.Random(seed).random()
    cumulative = 0.0
    for candidate, probability in distribution:
        cumulative += probability
        if point < cumulative:
            return candidate
    return distribution[-1][0]
