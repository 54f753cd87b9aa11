"""The FIM template self-test: trivially infillable canaries, completed before a run.

A template that is wrong for the model (sentinels in the wrong order, a family guessed
wrong, a base model without FIM training) does not fail loudly: the model writes plausible
text and every score is merely low. Three canaries whose middle any FIM-trained model gets
right are completed greedily before the first real infilling request; a model that misses
them is reported (or, with `fim_self_test = "require"`, refused) before a grid spends hours.
A canary passes when the reply, whitespace removed, starts with one of its answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from coral_core.errors import UserError
from coral_core.types import GenerationRequest, Prompt, SamplingParams

MODES = ("warn", "require", "off")


@dataclass(frozen=True)
class Canary:
    name: str
    prefix: str
    suffix: str
    answers: tuple[str, ...]

    def passes(self, reply: str) -> bool:
        squeezed = "".join(reply.split())
        return any(squeezed.startswith("".join(answer.split())) for answer in self.answers)


CANARIES = (
    Canary("counting", "numbers = [1, 2, 3, 4, 5, ", " 9, 10, 11, 12]\n", ("6, 7, 8,",)),
    Canary("alphabet", "letters = 'abcdefgh", "pqrstuvwxyz'\nprint(letters)\n",
           ("ijklmno",)),
    Canary("return", 'def add(a, b):\n    """Return the sum of a and b."""\n    return ',
           "\n\n\nassert add(2, 3) == 5\n", ("a + b", "b + a", "a+b")),
)


@dataclass(frozen=True)
class SelfTest:
    template: str
    passed: tuple[str, ...]
    failed: tuple[tuple[str, str], ...]  # (canary, what the model wrote)

    @property
    def ok(self) -> bool:
        return not self.failed

    def summary(self, model: str) -> str:
        total = len(self.passed) + len(self.failed)
        text = (f"{model}: FIM self-test with template '{self.template}': "
                f"{len(self.passed)}/{total} canaries infilled")
        if self.failed:
            name, wrote = self.failed[0]
            text += (f" (e.g. '{name}' got {wrote[:40]!r}); the template may be wrong for "
                     "this model (set fim_template), or the model was not trained for FIM")
        return text


def run_self_test(generate: Callable[[Sequence[GenerationRequest]], Any],
                  template: str) -> SelfTest:
    """Complete every canary greedily with `generate` (a model's generate method)."""
    params = SamplingParams(temperature=0.0, max_new_tokens=16, stop=("\n",), n=1, seed=0)
    requests = [GenerationRequest(Prompt(prefix=c.prefix, suffix=c.suffix), params)
                for c in CANARIES]
    replies = [generations[0].text for generations in generate(requests)]
    passed = tuple(c.name for c, reply in zip(CANARIES, replies) if c.passes(reply))
    failed = tuple((c.name, reply) for c, reply in zip(CANARIES, replies)
                   if not c.passes(reply))
    return SelfTest(template, passed, failed)


def check_mode(mode: Any) -> str:
    if mode not in MODES:
        raise UserError(f"fim_self_test = {mode!r} (expected one of {', '.join(MODES)})")
    return str(mode)
