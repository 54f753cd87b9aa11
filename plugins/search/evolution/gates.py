"""Threshold gates that rise with the generation (CORAL-X's gates, on a schedule).

`[search.options] gates = {bugfix = [0.0, 0.5]}` sets, for an objective, the threshold of
the first and of the last generation; `schedule` (`linear`, `sqrt` or `sigmoid`) says how
it rises in between, reaching the last value exactly at the last generation. A genome whose
objective mean is below its generation's threshold fails the gate: it is recorded with its
scores and the reason, and NSGA-II treats it as infeasible (Optuna's constrained
domination: a feasible genome beats it, and among failures the smaller shortfall wins).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from coral_core.config.schema import OptionInvalid

OPTIONS = ("search", "options")  # where these keys live: an error names the file and line

SCHEDULES = ("linear", "sqrt", "sigmoid")
SIGMOID_STEEPNESS = 10.0


def progress(schedule: str, generation: int, generations: int) -> float:
    """How far the gates have risen at `generation` (0-based): 0 at the first, 1 at the
    last generation."""
    if generations <= 1:
        return 1.0
    x = min(max(generation / (generations - 1), 0.0), 1.0)
    if schedule == "linear":
        return x
    if schedule == "sqrt":
        return math.sqrt(x)
    if schedule == "sigmoid":  # a logistic curve rescaled to pass through (0, 0) and (1, 1)
        k = SIGMOID_STEEPNESS

        def s(t: float) -> float:
            return 1.0 / (1.0 + math.exp(-k * (t - 0.5)))
        return (s(x) - s(0.0)) / (s(1.0) - s(0.0))
    raise ValueError(schedule)


@dataclass(frozen=True)
class Gates:
    """Per-objective thresholds (start, end) on a schedule."""

    thresholds: Mapping[str, tuple[float, float]]
    schedule: str
    generations: int

    @classmethod
    def parse(cls, gates: Any, schedule: Any, generations: int,
              objectives: Sequence[str]) -> "Gates":
        if schedule not in SCHEDULES:
            raise OptionInvalid(OPTIONS + ("schedule",),
                                f"[search.options] schedule = {schedule!r}: choose one of "
                                f"{', '.join(SCHEDULES)}")
        if not isinstance(gates, Mapping):
            raise OptionInvalid(OPTIONS + ("gates",),
                                "[search.options] gates must be a table: objective = [start, end]")
        thresholds = {}
        for name, pair in gates.items():
            if name not in objectives:
                raise OptionInvalid(OPTIONS + ("gates", name),
                                    f"[search.options] gates.{name}: no such objective "
                                    f"(objectives: {', '.join(objectives)})")
            if (not isinstance(pair, list) or len(pair) != 2
                    or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                               for v in pair)):
                raise OptionInvalid(OPTIONS + ("gates", name),
                                    f"[search.options] gates.{name} must be [start, end], "
                                    "two numbers in [0, 1]")
            start, end = float(pair[0]), float(pair[1])
            if not (0.0 <= start <= 1.0 and 0.0 <= end <= 1.0):
                raise OptionInvalid(OPTIONS + ("gates", name),
                                    f"[search.options] gates.{name}: thresholds must be in "
                                    "[0, 1]")
            if start > end:
                raise OptionInvalid(OPTIONS + ("gates", name),
                                    f"[search.options] gates.{name}: start {start} > end {end} "
                                    "(gates rise)")
            thresholds[name] = (start, end)
        return cls(thresholds, schedule, generations)

    def at(self, generation: int) -> dict[str, float]:
        """Each gated objective's threshold at `generation` (0-based)."""
        p = progress(self.schedule, generation, self.generations)
        return {name: round(start + (end - start) * p, 6)
                for name, (start, end) in self.thresholds.items()}

    def check(self, generation: int, values: Mapping[str, float],
              ) -> tuple[list[float], str | None]:
        """The constraint values (threshold - value; <= 0 passes) and, for a failure, the
        reason in words."""
        thresholds = self.at(generation)
        constraints, reasons = [], []
        for name, threshold in thresholds.items():
            value = float(values.get(name, 0.0))
            constraints.append(round(threshold - value, 9))
            if value < threshold:
                reasons.append(f"{name} {value:.4f} < {threshold:.4f}")
        reason = None
        if reasons:
            reason = (f"{'; '.join(reasons)} (gate of generation {generation + 1} of "
                      f"{self.generations}, {self.schedule})")
        return constraints, reason
