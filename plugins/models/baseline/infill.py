"""The baseline as an infiller (FIM data sets): what the visible context says comes next.

A weight-free floor for fill-in-the-middle, in the spirit of prompt-lookup decoding: the
text just before the hole (the longest tail of the prefix, 3-64 characters, that occurs
elsewhere in the prefix or the suffix) is looked up in the prompt's own prefix and suffix,
and what followed each occurrence (the 32 nearest the hole per side and length), to the end
of its line and at most 256 characters, is a candidate. A
candidate weighs (match length)^2 per occurrence, so long, repeated contexts win; the
part of it that the suffix already holds (closing brackets, say) is cut. With no match,
the candidate closes the brackets the hole's line left open.

It reads no file and never sees the ground truth: only the prompt a model would see. It
was chosen over an n-gram model of the standard library because the default FIM set is
built from the standard library itself (such a model would have read the task's file).
Sampling is the repair baseline's (`sampling`): temperature 0 gives the top candidate.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Sequence

from coral_core.errors import UserError
from coral_core.seeds import sample_seed
from coral_core.stops import cut_at_stop
from coral_core.types import Generation, GenerationRequest, Prompt

from .sampling import Ranked, draw, sampling_distribution

NAME = "baseline"
MATCH_LENGTHS = (64, 48, 32, 24, 16, 12, 8, 6, 4, 3)
OCCURRENCES = 32  # per key and per side, the nearest to the hole first
MAX_CHARS = 256  # of one continuation (a prompt is untrusted: its lines may be megabytes)
_CLOSERS = {"(": ")", "[": "]", "{": "}"}


def _line_end(text: str, start: int) -> str:
    """The rest of the line from `start`, at most MAX_CHARS of it."""
    end = text.find("\n", start, start + MAX_CHARS)
    return text[start:start + MAX_CHARS] if end < 0 else text[start:end]


def _occurrences(text: str, key: str, limit: int) -> list[int]:
    """Where `key` ends in `text[:limit]`, the last OCCURRENCES of them, nearest first."""
    found, stop = [], limit
    while len(found) < OCCURRENCES:
        start = text.rfind(key, 0, stop)
        if start < 0:
            break
        found.append(start + len(key))
        stop = start + len(key) - 1
    return found


def _without_suffix_overlap(candidate: str, suffix: str) -> str:
    """`candidate` less its longest tail that the suffix's first line starts with."""
    head = suffix[:len(candidate)].split("\n", 1)[0]
    for size in range(min(len(candidate), len(head)), 0, -1):
        if candidate.endswith(head[:size]):
            return candidate[:-size]
    return candidate


def _close_brackets(line: str) -> str:
    """The closers of the brackets `line` leaves open, innermost first (strings skipped)."""
    stack: list[str] = []
    quote = ""
    for char in line:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in _CLOSERS:
            stack.append(_CLOSERS[char])
        elif stack and char == stack[-1]:
            stack.pop()
    return "".join(reversed(stack))


def candidates(prefix: str, suffix: str) -> list[Ranked]:
    """Continuations of the hole from the visible context, best first (ties: first seen)."""
    weights: dict[str, float] = defaultdict(float)
    order: dict[str, int] = {}
    taken: set[tuple[str, int]] = set()  # an occurrence counts once, at its longest match
    for length in MATCH_LENGTHS:
        if len(prefix) < length:
            continue
        key = prefix[-length:]
        for where, text, limit in (("p", prefix, len(prefix) - 1), ("s", suffix, len(suffix))):
            for end in _occurrences(text, key, limit):
                if (where, end) not in taken:
                    taken.add((where, end))
                    found = _without_suffix_overlap(_line_end(text, end), suffix)
                    if found.strip():
                        weights[found] += float(length * length)
                        order.setdefault(found, len(order))
    ranked = sorted(weights, key=lambda c: (-weights[c], order[c]))
    if ranked:
        return [Ranked(c, weights[c]) for c in ranked]
    head = prefix[prefix.rfind("\n") + 1:][-MAX_CHARS:]
    return [Ranked(_without_suffix_overlap(_close_brackets(head), suffix), 1.0)]


class BaselineInfiller:
    """Completes infilling prompts from their own context (see the module docstring)."""

    name = NAME
    supports_adapters = False

    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Generation]]:
        return [self._complete(request) for request in requests]

    def _complete(self, request: GenerationRequest) -> list[Generation]:
        prompt: Prompt = request.prompt
        if prompt.kind != "infill":
            raise UserError("baseline: this data set's prompts are infilling prompts; "
                            f"got a{'n' if prompt.kind == 'instruction' else ''} "
                            f"{prompt.kind} prompt")
        started = time.perf_counter()
        distribution = sampling_distribution(candidates(prompt.prefix or "", prompt.suffix or ""),
                                             request.params)
        generations = []
        for index in range(request.params.n):
            chosen = draw(distribution, sample_seed(request.params.seed, index))
            text, _ = cut_at_stop(chosen.text, request.params.stop)
            now = time.perf_counter()
            generations.append(Generation(text=text, seconds=now - started,
                                          finish_reason="stop"))
            started = now
        return generations
