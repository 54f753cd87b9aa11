"""The reliability gate: does a mutation score reach its target?"""

from __future__ import annotations

from pathlib import Path

from coral_core.types import Candidate, Evaluation

BELOW = "Mutation score below target."
UNAVAILABLE = "Mutation score unavailable; rerun mutation testing."


def gate(score: float, target: float) -> dict:
    """{passed, reasons, critique} for a score (0-100, -1 unavailable) and a target (0-100;
    0 or less disables the gate)."""
    reasons: list[str] = []
    critique: list[str] = []
    if target > 0.0:
        if score < 0.0:
            reasons.append(UNAVAILABLE)
        elif score < target:
            reasons.append(BELOW)
        if reasons:
            critique.append(f"Improve mutation score from {score:.2f}% toward {target:.2f}%.")
    return {"passed": not reasons, "reasons": reasons, "critique": critique}


def session_score(path: Path | None) -> float:
    """Coral's score of a stored session, or -1 when there is none (or nothing executed)."""
    if path is None or not Path(path).is_file():
        return -1.0
    from .campaign import report
    from coral_core.mutation.session import Session

    session = Session(Path(path))
    try:
        return float(report(session)["mutation_score"])
    finally:
        session.close()


class MutationGate:
    """Evaluator `mutation_gate`: objective 1.0 when the session's score reaches the target,
    else score / target (0.0 when unavailable); reasons and critique in the details.

    The session is the option `session`, or the task's `metadata["mutation_session"]`."""

    name = "mutation_gate"
    objectives = ("mutation_gate",)

    def __init__(self, mutation_target: float = 80.0, session: str | None = None):
        self.target = float(mutation_target)
        self.session = session

    def evaluate(self, candidate: Candidate, context: object) -> Evaluation:
        path = self.session or candidate.task.metadata.get("mutation_session")
        score = session_score(Path(path) if path else None)
        verdict = gate(score, self.target)
        if verdict["passed"]:
            value = 1.0
        elif score < 0 or self.target <= 0:
            value = 0.0
        else:
            value = max(0.0, min(1.0, score / self.target))
        return Evaluation({"mutation_gate": value},
                          {"mutation_score": score, "mutation_target": self.target, **verdict})
