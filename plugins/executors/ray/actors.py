"""What runs inside Ray's worker processes: each actor wraps a `local` executor, so a node
builds and reuses components exactly as a single machine does (one model per generation
actor, one pre-warmed sandbox pool per evaluation actor), and scores the same way."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any, Mapping, Sequence

from coral_core.config.blueprints import ModelBlueprint, ScoringBlueprint
from coral_core.executors.ray_cluster import adopt
from coral_core.errors import UserError
from coral_core.executors.in_process import LocalExecutor
from coral_core.run.factories import check_model
from coral_core.types import Generation, GenerationRequest, ScoredCandidate, Task


class GenerationWorker:
    """Holds one model (built once per blueprint digest) and swaps adapters per batch."""

    def __init__(self, settings: Mapping[str, Any], environment: dict[str, str] | None = None):
        adopt(environment)
        self.local = LocalExecutor(settings)

    def prepare(self, model: ModelBlueprint, adapters: Sequence[str]) -> int:
        self.local.prepare_model(model, adapters)
        return os.getpid()

    def generate(self, model: ModelBlueprint, requests: Sequence[GenerationRequest],
                 ) -> list[list[Generation]]:
        return self.local.generate(model, requests)

    def check_models(self, sections: Sequence[tuple[str, Mapping[str, Any]]]) -> str | None:
        """The first of these model sections (each with the override that gave it) that
        this machine refuses, said as one line; None when it builds them all."""
        for said, section in sections:
            try:
                check_model(section, here=True)
            except UserError as error:
                return f"{said}: {error}"
        return None

    def close(self) -> None:
        self.local.close()


class EvaluationWorker:
    """A node's sandbox pool of `workers` slots (its share of the node's CPUs, as Ray counts
    them: inside a container os.cpu_count() may be the host's); Ray runs up to
    `max_concurrency` calls at once on threads, as the local executor's thread pool does."""

    def __init__(self, settings: Mapping[str, Any], workers: int,
                 environment: dict[str, str] | None = None):
        adopt(environment)
        self.workers = workers
        self.local = LocalExecutor({**settings, "workers": workers})

    def _sized(self, scoring: ScoringBlueprint) -> ScoringBlueprint:
        """The blueprint with this actor's pool size (same digest: same scorers)."""
        return replace(scoring, execution={**scoring.execution, "workers": self.workers})

    def prepare(self, scoring: ScoringBlueprint) -> int:
        self.local.scoring(self._sized(scoring))
        return os.getpid()

    def score(self, scoring: ScoringBlueprint, task: Task, text: str,
              extract: bool) -> ScoredCandidate:
        return self.local.submit(self._sized(scoring), task, text, extract).result()

    def close(self) -> None:
        self.local.close()
