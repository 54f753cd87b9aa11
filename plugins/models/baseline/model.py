"""The baseline model object: samples single-edit repairs of the prompt's program.

It reads the buggy program out of the prompt (`prompt.program_in`), proposes every
single-edit variant of its functions (`edits`), ranks them by a prior learned
from the data set's training problems only (`prior`), and samples one per
generation: a variant's probability is proportional to weight ** (1 / temperature),
temperature 0 gives the top-ranked variant, top_k and top_p cut the ranked list. Each
sample has its own `random.Random` seeded with `coral_core.seeds.sample_seed(request
seed, sample index)`, so the same seed gives the same text.

It never sees the tests or the reference program of the problem it repairs: only the
prompt, and `dataset.training_examples()`, which refuses non-training problems.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import threading
import time
from collections import OrderedDict
from typing import Any, Mapping, Sequence

from coral_core.config.schema import OptionInvalid
from coral_core.errors import UserError
from coral_core.seeds import sample_seed
from coral_core.stops import cut_at_stop
from coral_core.suggest import did_you_mean
from coral_core.types import Generation, GenerationRequest, Tunable

from . import NAME
from .edits import FAMILIES
from .prior import Prior, problem_pairs
from .prior_cache import cached_prior
from .prompt import program_in
from .render import Variant, enumerate_variants
from .sampling import Ranked, draw, rank, sampling_distribution

log = logging.getLogger(__name__)

CLOSING_FENCE = "\n```\n"
_CACHED_PROGRAMS = 64


@functools.lru_cache(maxsize=_CACHED_PROGRAMS)
def variants_of(program: str) -> tuple[Variant, ...]:
    """`enumerate_variants`, once per process for the same program: a search makes a model
    per trial (family weights are genes), and each enumerated every prompt's variants
    again (4.3 of the 19.4 s of a small evolution run). Frozen, so shared as they are; kept
    without their canonical trees, which ranking does not read (a megabyte for a large
    program)."""
    return tuple(Variant(v.text, v.origins) for v in enumerate_variants(program))


class BaselineModel:
    """Samples single-edit repairs of the prompt's program (see the module docstring)."""

    name = NAME
    supports_adapters = False  # no weights to adapt

    def __init__(self, dataset: Any, family_weights: Mapping[str, float] | None = None):
        if dataset is None or not callable(getattr(dataset, "training_examples", None)):
            name = getattr(dataset, "name", "?")
            raise UserError(
                f"baseline: repairs programs of data sets with training examples "
                f"({', '.join(trainable_datasets()) or 'none installed'}), writes tests for "
                f"testgen and infills FIM tasks; it has nothing for '{name}': "
                "try --model reference to check a data set end to end, or a code model: "
                "--model hf:PATH_OR_ID or --model openai:MODEL"
            )
        self.dataset = dataset
        self.family_weights = dict(family_weights or {})
        self._prior: Prior | None = None
        self._ranked: OrderedDict[str, list[Ranked]] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def prior(self) -> Prior:
        """Learned on first use from the training examples (never other problems)."""
        if self._prior is None:
            examples = self.dataset.training_examples()
            if not problem_pairs(examples):
                raise UserError(
                    "baseline: the data set has no training examples with a source and a "
                    "solution program to learn from"
                )
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
            variants = variants_of(program)
        except (SyntaxError, ValueError) as error:
            raise UserError(f"baseline: the prompt's program does not parse: {error}") from None
        ranked = rank(variants, self.prior, self.family_weights) or [Ranked(program, 1.0)]
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
        if request.adapter:  # refused before a run starts; kept for direct callers
            raise UserError("baseline: adapters are not supported (it has no weights)")
        started = time.perf_counter()
        distribution = sampling_distribution(self.ranked(program_in(request.prompt)),
                                             request.params)
        generations = []
        for index in range(request.params.n):
            chosen = draw(distribution, sample_seed(request.params.seed, index))
            text, _ = cut_at_stop(chosen.text.rstrip("\n") + CLOSING_FENCE, request.params.stop)
            now = time.perf_counter()
            generations.append(Generation(text=text, seconds=now - started,
                                          finish_reason="stop"))
            started = now
        return generations


def trainable_datasets() -> list[str]:
    """The registered data sets that offer training examples (the ones this model can
    learn a prior from)."""
    from coral_core import plugins

    entries = plugins.registry().entries["datasets"]
    return sorted(name for name, entry in entries.items()
                  if callable(getattr(entry.factory, "training_examples", None)))


def create_baseline(target: str = "", *, dataset: Any = None,
                    family_weights: Any = None) -> Any:
    """The factory Coral calls for ``--model baseline`` (it passes the run's data set).
    `[model.options] family_weights = {operator = 2.0, ...}` scales the learned prior of
    each edit family (the evolution strategy's genes for this model). For a data set whose
    candidates are test files (testgen), the baseline writes snapshot tests instead; for
    one whose candidates are completions (fim), it infills from the prompt's context."""
    check_options(target, {})
    if getattr(dataset, "candidate_kind", "program") == "tests":
        if family_weights is not None:
            raise UserError("baseline: family_weights weigh repairs; the test writer "
                            "(testgen) takes no options")
        from .tests_writer import BaselineTestWriter

        return BaselineTestWriter(dataset)
    if getattr(dataset, "candidate_kind", "program") == "completion":
        if family_weights is not None:
            raise UserError("baseline: family_weights weigh repairs; the infiller (FIM) "
                            "takes no options")
        from .infill import BaselineInfiller

        return BaselineInfiller()
    return BaselineModel(dataset, check_family_weights(family_weights))


def check_options(target: str, options: Mapping[str, Any]) -> None:
    """What `create_baseline` refuses, without learning a prior: `coral run --dry-run` and
    each search-space value are checked by it before the run directory exists."""
    if target:
        raise UserError(f"baseline: takes no target (use --model baseline, not baseline:{target})")
    check_family_weights(options.get("family_weights"))


def check_family_weights(value: Any) -> dict[str, float]:
    """A table of edit family -> factor >= 0 (finite); one clear error otherwise."""
    if value is None:
        return {}
    where = ("model", "options", "family_weights")
    if not isinstance(value, Mapping):
        raise OptionInvalid(where, "[model.options] family_weights must be a table of edit "
                                   f"family = factor (families: {', '.join(FAMILIES)})")
    weights = {}
    for family, factor in value.items():
        if family not in FAMILIES:
            raise OptionInvalid((*where, str(family)),
                                f"[model.options] family_weights: unknown edit family "
                                f"'{family}'{did_you_mean(str(family), FAMILIES)} (families: "
                                f"{', '.join(FAMILIES)})")
        if (isinstance(factor, bool) or not isinstance(factor, (int, float))
                or not math.isfinite(factor) or factor < 0):
            raise OptionInvalid((*where, str(family)),
                                f"[model.options] family_weights.{family} must be a finite "
                                f"number >= 0, not {factor!r}")
        weights[family] = float(factor)
    return weights


# What a search may vary for this model (the evolution strategy reads these from the factory):
# the sampling knobs it honours (top_k is its candidate budget), and a factor on its learned
# prior per edit family, geometric choices around 1 (the prior as learned); a million is
# "only this family".
create_baseline.sampling_knobs = ("temperature", "top_p", "top_k")  # type: ignore[attr-defined]
create_baseline.check_options = check_options  # type: ignore[attr-defined]
FAMILY_TUNABLES = tuple(
    Tunable(f"{family}_weight", f"family_weights.{family}", (0.25, 0.5, 1.0, 2.0, 4.0),
            0.0, 1e6) for family in FAMILIES)


def baseline_tunables(dataset: Any) -> tuple[Tunable, ...]:
    """The weights weigh repairs: the infiller (fim) and the test writer (testgen) have no
    edit families, and refuse them."""
    repairs = getattr(dataset, "candidate_kind", "program") == "program"
    return FAMILY_TUNABLES if repairs else ()


create_baseline.tunables = baseline_tunables  # type: ignore[attr-defined]
