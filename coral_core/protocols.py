"""The shapes that plugin objects must have. Duck-typed: no base class is required."""

from __future__ import annotations

from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Mapping, Protocol, Sequence, runtime_checkable

from coral_core.types import (Candidate, Evaluation, Generation, GenerationRequest,
                              ScoredCandidate, Task, TrainingExample)

if TYPE_CHECKING:
    from coral_core.config.blueprints import ModelBlueprint, ScoringBlueprint
    from coral_core.execution import ExecutionContext


@runtime_checkable
class Dataset(Protocol):
    """Yields tasks. `splits` lists the names `tasks()` accepts."""

    name: str
    splits: tuple[str, ...]

    def tasks(self, split: str, problems: Sequence[str] = ()) -> list[Task]: ...

    def extract_code(self, task: Task, text: str) -> str: ...


@runtime_checkable
class TrainableDataset(Dataset, Protocol):
    """A data set that can feed adapter training (never with a non-training problem)."""

    def training_examples(self, problems: Sequence[str] = ()) -> list[TrainingExample]: ...


@runtime_checkable
class Model(Protocol):
    """Completes prompts. Returns, per request, `request.params.n` generations.

    The model renders each request's structured Prompt (chat template, FIM template).
    `supports_adapters` (default False when absent) says whether `request.adapter` may be
    set: a configuration that sets an adapter for a model without it is refused before
    the run starts.
    """

    name: str

    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Generation]]: ...


@runtime_checkable
class Evaluator(Protocol):
    """Scores one candidate into the objectives it names, each in [0, 1]."""

    name: str
    objectives: tuple[str, ...]

    def evaluate(self, candidate: Candidate, context: "ExecutionContext") -> Evaluation: ...


@runtime_checkable
class SearchStrategy(Protocol):
    """Ask/tell search over configuration overrides (mappings in TOML shape).

    `ask()` returns the next batch of configurations, or an empty list when the search
    is over; `tell()` receives each configuration with its objective means.
    """

    def ask(self) -> list[Mapping[str, Any]]: ...

    def tell(self, results: Sequence[tuple[Mapping[str, Any], Mapping[str, float]]]) -> None: ...

    def state(self) -> Any:
        """JSON-serialisable state, saved in the run store after every ask and tell."""
        ...

    def restore(self, state: Any) -> None:
        """Continue from a saved `state()` (resume)."""
        ...


@runtime_checkable
class Executor(Protocol):
    """Where generation and evaluation run: the runner sends work through this and only
    the driver writes the run store.

    Work names its components by blueprint (plain, picklable configuration with a
    digest); the executor builds each where it runs, once per distinct blueprint, and
    reuses it. `cancel()` abandons work in flight (Ctrl-C): it must return quickly.
    """

    name: str

    def prepare(self, model: "ModelBlueprint", scoring: "ScoringBlueprint",
                adapters: Sequence[str] = ()) -> None:
        """Build what these name now (and check the adapters, where the model can), so
        that errors surface before any work."""
        ...

    def generate(self, model: "ModelBlueprint", requests: Sequence[GenerationRequest],
                 ) -> list[list[Generation]]: ...

    def submit(self, scoring: "ScoringBlueprint", task: Task, text: str,
               extract: bool = True) -> "Future[ScoredCandidate]": ...

    def cancel(self) -> None: ...

    def close(self) -> None: ...
