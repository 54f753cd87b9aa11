"""The shapes that plugin objects must have. Duck-typed: no base class is required."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Protocol, Sequence, runtime_checkable

from .types import Candidate, Evaluation, Generation, GenerationRequest, Task, TrainingExample

if TYPE_CHECKING:
    from .evaluation import EvaluationContext


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
    """Completes prompts. Returns, per request, `request.params.n` generations."""

    name: str

    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Generation]]: ...


@runtime_checkable
class Evaluator(Protocol):
    """Scores one candidate into the objectives it names, each in [0, 1]."""

    name: str
    objectives: tuple[str, ...]

    def evaluate(self, candidate: Candidate, context: "EvaluationContext") -> Evaluation: ...


@runtime_checkable
class SearchStrategy(Protocol):
    """Ask/tell search over configuration overrides (mappings in TOML shape).

    `ask()` returns the next batch of configurations, or an empty list when the search
    is over; `tell()` receives each configuration with its objective means.
    """

    def ask(self) -> list[Mapping[str, Any]]: ...

    def tell(self, results: Sequence[tuple[Mapping[str, Any], Mapping[str, float]]]) -> None: ...
