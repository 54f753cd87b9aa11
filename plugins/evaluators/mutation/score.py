"""Scores from a session: Coral's (executed mutants only) and cosmic-ray's, with both
intervals (cr-rate's, and the one with the finite-population correction)."""

from __future__ import annotations

import math

Z95 = 1.960  # cr-rate's z for --confidence 95.0


def verdict_of(result) -> str:
    """cosmic-ray's WorkResult as one word: killed, survived, incompetent, no-test, skipped."""
    outcome = getattr(result.test_outcome, "value", result.test_outcome)
    if outcome in ("killed", "survived", "incompetent"):
        return outcome
    return getattr(result.worker_outcome, "value", str(result.worker_outcome))


def summarize(results: dict, total: int) -> dict:
    """`results`: {job_id: WorkResult}; `total`: the session's mutants."""
    counts = {"killed": 0, "survived": 0, "incompetent": 0, "no-test": 0, "skipped": 0,
              "timeout": 0}
    cosmic_killed = 0
    for result in results.values():
        verdict = verdict_of(result)
        counts[verdict] = counts.get(verdict, 0) + 1
        if verdict == "killed" and (result.output or "") == "timeout":
            counts["timeout"] += 1
        cosmic_killed += result.is_killed  # cosmic-ray: anything but survived is killed
    executed = counts["killed"] + counts["survived"]
    n = len(results)
    score = 100.0 * counts["killed"] / executed if executed else -1.0
    # cr-rate: survival = (1 - kills / results) * 100, half-width z*sqrt(p(100-p)/n)*(1-sqrt(n/N))
    cr_rate = (1 - cosmic_killed / n) * 100 if n else -1.0
    if n and total:
        spread = math.sqrt(cr_rate * (100 - cr_rate) / n) * Z95
        cr_half = spread * (1 - math.sqrt(n / total))
        fpc_half = spread * math.sqrt(max(0.0, 1 - n / total))
    else:
        cr_half = fpc_half = -1.0
    if executed and total:
        p = score
        own = math.sqrt(p * (100 - p) / executed) * Z95 * math.sqrt(max(0.0, 1 - n / total))
    else:
        own = -1.0
    return {
        "mutation_score": round(score, 4),
        "mutation_num": total,
        "mutation_uncertainty": round(cr_half, 4) if cr_half >= 0 else -1.0,
        "mutation_uncertainty_fpc": round(fpc_half, 4) if fpc_half >= 0 else -1.0,
        "mutation_score_uncertainty": round(own, 4) if own >= 0 else -1.0,
        "cosmic_ray_score": round(100 - cr_rate, 4) if n else -1.0,
        "cosmic_ray_survival_rate": round(cr_rate, 4) if n else -1.0,
        "completed": n,
        "counts": counts,
    }


def unavailable(reason: str) -> dict:
    return {"mutation_score": -1.0, "mutation_num": -1, "mutation_uncertainty": -1.0,
            "mutation_uncertainty_fpc": -1.0, "mutation_score_uncertainty": -1.0,
            "cosmic_ray_score": -1.0, "cosmic_ray_survival_rate": -1.0, "completed": 0,
            "counts": {}, "mutants": [], "skipped": reason}
