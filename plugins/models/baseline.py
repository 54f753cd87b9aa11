"""The weight-free repair baseline, Coral's default model: ``--model baseline``.

It reads the buggy program out of the prompt (the fenced code block), proposes every
single-edit variant of its functions (baseline_edits), ranks them by a prior learned
from the data set's training problems only (baseline_prior), and samples one per
generation: a variant's probability is proportional to weight ** (1 / temperature),
temperature 0 gives the top-ranked variant, top_k and top_p cut the ranked list. Each
sample has its own `random.Random` seeded from the request seed (sample i > 0 of a
request derives its seed with SHA-256), so the same seed gives the same text.

It never sees the tests or the reference program of the problem it repairs: only the
prompt, and `dataset.training_examples()`, which refuses non-training problems.
"""

from __future__ import annotations

import ast
import hashlib
import logging
import re
import threading
import time
from collections import OrderedDict
from typing import Any, Sequence

from coral_core.errors import UserError
from coral_core.hookspecs import hookimpl
from coral_core.types import Generation, GenerationRequest

from .baseline_prior import Prior, cached_prior
from .baseline_render import enumerate_variants
from .baseline_sampling import Ranked, draw, rank, sample_seed, sampling_distribution

log = logging.getLogger(__name__)

NAME = "baseline"
CLOSING_FENCE = "\n```\n"
_BLOCK = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)
_MARKER = re.compile(r"buggy code\s*:?\s*$", re.IGNORECASE)
_CACHED_PROGRAMS = 64


def program_in(prompt: str) -> str:
    """The program to repair: the fenced block after "Buggy Code:" if there is one, else
    the first closed fenced Python block that parses. (The prompt's final, open fence is
    where the answer goes, and is not a block.)"""
    blocks: list[tuple[bool, str]] = []
    for match in _BLOCK.finditer(prompt):
        language, body = match.group(1).lower(), match.group(2).strip("\n")
        if language not in ("", "python", "py", "python3") or not body.strip():
            continue
        before = prompt[:match.start()].rstrip().rsplit("\n", 1)[-1]
        blocks.append((bool(_MARKER.search(before)), body))
    for _, body in sorted(blocks, key=lambda block: not block[0]):
        try:
            ast.parse(body)
        except (SyntaxError, ValueError):
            continue
        return body
    raise UserError(
        "baseline: the prompt holds no ```python code block with a program to repair "
        "(the baseline repairs the program shown in the prompt)"
    )


def _cut_at_stop(text: str, stop: Sequence[str]) -> str:
    cuts = [text.find(s) for s in stop if s and s in text]
    return text[:min(cuts)] if cuts else text


class BaselineModel:
    """Samples single-edit repairs of the prompt's program (see the module docstring)."""

    name = NAME

    def __init__(self, dataset: Any):
        if dataset is None or not callable(getattr(dataset, "training_examples", None)):
            raise UserError(
                "baseline: it learns which edits fix bugs from a data set's training "
                "examples, and this run's data set has none (use e.g. --plugin quixbugs)"
            )
        self.dataset = dataset
        self._prior: Prior | None = None
        self._ranked: OrderedDict[str, list[Ranked]] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def prior(self) -> Prior:
        """Learned on first use from the training examples (never other problems)."""
        if self._prior is None:
            examples = self.dataset.training_examples()
            if not examples:
                raise UserError("baseline: the data set has no training examples to learn from")
            self._prior = cached_prior(examples)
        return self._prior

    def ranked(self, program: str) -> list[Ranked]:
        """The program's variants, best first (ties in enumeration order); the program
        itself when no edit applies."""
        key = hashlib.sha256(program.encode("utf-8")).hexdigest()
        with self._lock:
            if key in self._ranked:
                self._ranked.move_to_end(key)
                return self._ranked[key]
        try:
            variants = enumerate_variants(program)
        except (SyntaxError, ValueError) as error:
            raise UserError(f"baseline: the prompt's program does not parse: {error}") from None
        ranked = rank(variants, self.prior) or [Ranked(program, 1.0)]
        if not variants:
            log.warning("baseline: no single edit applies to the program; returning it as is")
        log.debug("baseline: %d variants", len(variants))
        with self._lock:
            self._ranked[key] = ranked
            while len(self._ranked) > _CACHED_PROGRAMS:
                self._ranked.popitem(last=False)
        return ranked

    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Generation]]:
        return [self._complete(request) for request in requests]

    def _complete(self, request: GenerationRequest) -> list[Generation]:
        if request.adapter:
            raise UserError("baseline: adapters are not supported (it has no weights)")
        started = time.perf_counter()
        distribution = sampling_distribution(self.ranked(program_in(request.prompt)),
                                             request.params)
        generations = []
        for index in range(request.params.n):
            chosen = draw(distribution, sample_seed(request.params.seed, index))
            text = _cut_at_stop(chosen.text.rstrip("\n") + CLOSING_FENCE, request.params.stop)
            now = time.perf_counter()
            generations.append(Generation(text=text, seconds=now - started,
                                          finish_reason="stop"))
            started = now
        return generations


def create_baseline(target: str = "", *, dataset: Any = None) -> BaselineModel:
    """The factory Coral calls for ``--model baseline`` (it passes the run's data set)."""
    if target:
        raise UserError(f"baseline: takes no target (use --model baseline, not baseline:{target})")
    return BaselineModel(dataset)


@hookimpl
def coral_register_models(register: Any) -> None:
    register(NAME, create_baseline)
