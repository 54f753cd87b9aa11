"""Values that cross boundaries between the core and plugins.

They are frozen so that a plugin cannot change what another plugin (or the run store)
already saw. Mappings inside them are treated as read-only by convention.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True)
class SamplingParams:
    """How to sample; `seed` makes a request reproducible on backends that honour it."""

    temperature: float = 0.8
    top_p: float = 0.95
    top_k: int = 0
    max_new_tokens: int = 512
    repetition_penalty: float = 1.0
    stop: tuple[str, ...] = ()
    n: int = 1
    seed: int = 0


@dataclass(frozen=True)
class GenerationRequest:
    """One prompt to complete `params.n` times.

    `adapter` is a path to a peft adapter directory (LoRA or DoRA) applied on top of the
    base model for this request only; backends without adapters reject it.
    """

    prompt: str
    params: SamplingParams = SamplingParams()
    adapter: str | None = None
    task_id: str = ""


@dataclass(frozen=True)
class Generation:
    """One sample. Token counts are None where a backend cannot know them."""

    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    seconds: float = 0.0
    finish_reason: str = ""


@dataclass(frozen=True)
class Step:
    """One unit of work run inside the sandbox. It never carries an expected value.

    Either `call` names a function of the candidate module, called with `args` (JSON
    values; the result is projected by `project`: "value" or "list" for generators), or
    `script` names a function defined by the job's setup code (an upstream test function
    whose assertions were turned into recorded values).
    """

    call: str | None = None
    args: tuple[Any, ...] = ()
    project: str = "value"
    script: str | None = None


@dataclass(frozen=True)
class Expect:
    """One expectation, checked in the parent on values recorded by a step.

    kind: "eq" (record == value), "approx" (|record - value| <= tolerance), "truthy",
    "falsy", or "same" (two consecutive records are equal; objects compare by identity).
    """

    kind: str
    value: Any = None
    tolerance: float = 0.0

    @property
    def records(self) -> int:
        return 2 if self.kind == "same" else 1


@dataclass(frozen=True)
class Case:
    """A test case: what the sandbox runs, and what the parent expects of it."""

    name: str
    step: Step
    expects: tuple[Expect, ...]
    slow: bool = False


@dataclass(frozen=True)
class ExecutionSpec:
    """How to run a candidate program against a task's tests.

    The candidate is importable as `module`; `support` modules (name, source) are
    importable too; `setup` runs once after the candidate is imported.
    """

    module: str
    cases: tuple[Case, ...]
    support: tuple[tuple[str, str], ...] = ()
    setup: str = ""


@dataclass(frozen=True)
class Task:
    """One problem of a data set.

    `source` is the input program shown to the model (for QuixBugs, the buggy one);
    `reference` is a known-good solution, used only by evaluators, never by models.
    """

    id: str
    dataset: str
    split: str
    prompt: str
    source: str = ""
    reference: str = ""
    execution: ExecutionSpec | None = None
    seen_in_training: bool = False
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TrainingExample:
    """An instruction-tuning example; loss is taken on `output` only."""

    task_id: str
    instruction: str
    input: str
    output: str


@dataclass(frozen=True)
class Candidate:
    """A program proposed for a task (extracted from a model's text, or read from a file)."""

    task: Task
    code: str
    label: str = ""


@dataclass(frozen=True)
class Evaluation:
    """Named objectives in [0, 1] plus free-form, JSON-serialisable details."""

    objectives: Mapping[str, float]
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AdapterGenes:
    """The heavy genes: they decide which adapter is trained (and so cost training time)."""

    rank: int = 8
    alpha: float = 16.0
    dropout: float = 0.05
    target_modules: tuple[str, ...] = ("q_proj", "v_proj")
    kind: str = "lora"  # "lora" or "dora"
