"""Values that cross boundaries between the core and plugins.

They are frozen so that a plugin cannot change what another plugin (or the run store)
already saw. Mappings inside them are treated as read-only by convention.
"""

from __future__ import annotations

import hashlib
import json
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

from coral_core.scoring.program_tests import ExecutionSpec
# standard library only: this module stays cheap to import
from coral_core.config.settings import default


@dataclass(frozen=True)
class SamplingParams:
    """How to sample; `seed` makes a request reproducible on backends that honour it. The
    knobs default to the configuration's defaults (`coral_core.config.settings`)."""

    temperature: float = default("model.temperature")
    top_p: float = default("model.top_p")
    top_k: int = default("model.top_k")
    max_new_tokens: int = default("model.max_new_tokens")
    repetition_penalty: float = default("model.repetition_penalty")
    stop: tuple[str, ...] = tuple(default("model.stop"))
    n: int = 1  # samples per request (a run's `run.samples` are requested one by one)
    seed: int = 0  # the sample's own seed, derived from `run.seed` (coral_core.seeds)


@dataclass(frozen=True)
class Message:
    """One turn of a chat prompt."""

    role: str
    content: str


@dataclass(frozen=True)
class Prompt:
    """What a model sees, as structured data; the model plugin renders it.

    One shape each: `instruction` (text, wrapped in the model's chat template where it
    has one), `messages` (a chat), or `prefix` + `suffix` (fill in the middle, rendered
    with the model family's FIM template).
    """

    instruction: str = ""
    messages: tuple[Message, ...] = ()
    prefix: str | None = None
    suffix: str | None = None

    def __post_init__(self) -> None:
        shapes = (bool(self.instruction), bool(self.messages),
                  self.prefix is not None or self.suffix is not None)
        if sum(shapes) > 1:
            raise ValueError("a Prompt is an instruction, messages or a prefix/suffix pair")

    @property
    def kind(self) -> str:
        """"instruction", "chat" or "infill"."""
        if self.messages:
            return "chat"
        if self.prefix is not None or self.suffix is not None:
            return "infill"
        return "instruction"

    def as_messages(self) -> tuple[Message, ...]:
        """The prompt as chat turns (an instruction is one user turn)."""
        if self.kind == "infill":
            raise ValueError("an infilling prompt has no chat form")
        return self.messages or (Message("user", self.instruction),)

    def digest(self) -> str:
        """A content digest: resume checks stored samples against it."""
        payload = json.dumps([self.instruction, [[m.role, m.content] for m in self.messages],
                              self.prefix, self.suffix], ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class GenerationRequest:
    """One prompt to complete `params.n` times.

    `adapter` is a path to a peft adapter directory (LoRA or DoRA) applied on top of the
    base model for this request only; a model without `supports_adapters` is refused
    one before the run starts.
    """

    prompt: Prompt
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
class Success:
    """What solving a task means: `objective` >= `threshold`, after the scorer's gate.

    QuixBugs: bugfix >= 1.0 (every test passes); FIM: exact match; test generation: a
    mutation-score target. A task without one has no c, pass@k or fixed.
    """

    objective: str
    threshold: float = 1.0

    def met(self, objectives: Mapping[str, float]) -> bool:
        return objectives.get(self.objective, 0.0) >= self.threshold


@dataclass(frozen=True)
class Task:
    """One problem of a data set.

    `prompt` is what the model sees; `source` the input program where there is one (for
    QuixBugs, the buggy program); `reference` a known-good solution, used only by
    evaluators, never by models. `stop` holds the task's own stop sequences (the
    configuration adds to them). `candidate_kind` says what a reply becomes: "program",
    "completion" or "tests".
    """

    id: str
    dataset: str
    split: str
    prompt: Prompt
    source: str = ""
    reference: str = ""
    execution: ExecutionSpec | None = None
    success: Success | None = None
    stop: tuple[str, ...] = ()
    candidate_kind: str = "program"
    seen_in_training: bool = False
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def digest(self) -> str:
        """A content digest of everything that makes or judges an answer (the tests, the
        reference, the metadata evaluators read...): resume refuses a run whose stored
        verdicts were given by a task that has since changed."""
        payload = json.dumps(_canonical(self), ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


def _canonical(value: Any) -> Any:
    """Plain JSON data for `value`, the same in every process: dict keys and set members in
    a sorted order (a set of strings iterates in a per-process order)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return repr(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [type(value).__name__, {f.name: _canonical(getattr(value, f.name))
                                       for f in dataclasses.fields(value)}]
    if isinstance(value, Mapping):
        pairs = [[_canonical(k), _canonical(v)] for k, v in value.items()]
        return ["map", sorted(pairs, key=lambda pair: json.dumps(pair[0]))]
    if isinstance(value, (set, frozenset)):
        return ["set", sorted((_canonical(v) for v in value), key=json.dumps)]
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, bytes):
        return ["bytes", value.hex()]
    return ["repr", type(value).__name__, repr(value)]


@dataclass(frozen=True)
class TrainingExample:
    """An adapter-training example, rendered by its data set: the model sees `prompt`
    (rendered by the model plugin exactly as at evaluation) and learns `answer` (loss on
    the answer only). `source` / `solution` are the raw program pair, for learners that
    need no prompt (the weight-free baseline)."""

    task_id: str
    prompt: Prompt
    answer: str
    source: str = ""
    solution: str = ""


@dataclass(frozen=True)
class Candidate:
    """What a reply became for a task (a program, a completion or a test suite, as the
    task's `candidate_kind` says), or what was read from a file."""

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


@dataclass(frozen=True)
class Tunable:
    """A model option a search may vary, published by the model's factory (its `tunables`),
    so that a strategy knows a backend's own knobs without importing its plugin: the
    `[model.options]` entry at the dotted `option`, the `choices` tried unless a user sets
    the gene's values, and the [`low`, `high`] bounds any value must lie in."""

    name: str
    option: str
    choices: tuple[float, ...]
    low: float
    high: float


@dataclass(frozen=True)
class RunFlag:
    """A `coral run` flag a plugin adds (coral_register_run_flags): `--NAME VALUE` sets the
    configuration key at `path` (e.g. ("search", "options", "population")), typed as `kind`
    (int, float or str); an int below `least` is refused with the flag's name."""

    path: tuple[str, ...]
    kind: type
    help: str
    metavar: str = ""
    least: int | None = None


@dataclass(frozen=True)
class ScoredCandidate:
    """A candidate's objectives after the gate, its fitness, and whether it meets its
    task's success criterion (None where the task defines none)."""

    objectives: Mapping[str, float]
    fitness: float
    passed: bool | None
    details: Mapping[str, Any] = field(default_factory=dict)
    code: str = ""
    seconds: float = 0.0
