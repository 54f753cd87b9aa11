"""The cost ledger: what each genome, each generation, the whole search and its front cost.

Per trial, the run store holds every generation (prompt and completion tokens, seconds) and
every evaluation (seconds); `trial_costs` sums them, read-only, from the store's SQLite
file while the run is writing it (WAL). Adapter training seconds come from the adapters
themselves (recorded with each adapter when it was trained), so a resumed run or a cache
hit reports the same cost. Wall-clock figures are measurements, not part of the search's
deterministic output: they vary from run to run.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Iterable, Mapping

from coral_core.run.store import RunStore

FIELDS = ("samples", "prompt_tokens", "completion_tokens", "generation_seconds",
          "evaluation_seconds")


def empty() -> dict[str, float]:
    return {name: 0 for name in FIELDS}


def trial_costs(run_dir: str | Path) -> dict[int, dict[str, float]]:
    """{trial: {samples, prompt_tokens, completion_tokens, generation_seconds,
    evaluation_seconds}} for every trial with stored work."""
    path = Path(run_dir) / RunStore.FILENAME
    if not path.is_file():
        return {}
    connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        costs: dict[int, dict[str, float]] = {}
        for trial, count, prompt, completion, seconds in connection.execute(
                "SELECT trial, COUNT(*), SUM(COALESCE(prompt_tokens, 0)), "
                "SUM(COALESCE(completion_tokens, 0)), SUM(seconds) FROM generations "
                "GROUP BY trial"):
            costs[int(trial)] = {"samples": int(count), "prompt_tokens": int(prompt or 0),
                                 "completion_tokens": int(completion or 0),
                                 "generation_seconds": float(seconds or 0.0),
                                 "evaluation_seconds": 0.0}
        for trial, seconds in connection.execute(
                "SELECT trial, SUM(seconds) FROM evaluations GROUP BY trial"):
            costs.setdefault(int(trial), empty())["evaluation_seconds"] = float(seconds or 0.0)
    except sqlite3.Error:
        return {}
    finally:
        connection.close()
    return costs


def add(total: dict[str, float], part: Mapping[str, float]) -> dict[str, float]:
    for name in FIELDS:
        total[name] = total.get(name, 0) + part.get(name, 0)
    return total


def rounded(costs: Mapping[str, float]) -> dict[str, float]:
    return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in costs.items()}


def tokens(costs: Mapping[str, float]) -> int:
    return int(costs.get("prompt_tokens", 0) + costs.get("completion_tokens", 0))


def summed(trials: Iterable[int], costs: Mapping[int, Mapping[str, float]],
           adapters: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The cost of a set of trials and of the distinct adapters they used."""
    total = empty()
    for trial in set(trials):
        add(total, costs.get(trial, {}))
    seen = {a["key"]: a for a in adapters if a}
    total = rounded(total)
    total["tokens"] = tokens(total)
    total["adapters"] = len(seen)
    total["train_seconds"] = round(sum(a["seconds"] for a in seen.values()), 3)
    return total
