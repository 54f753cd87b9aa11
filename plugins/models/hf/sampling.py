"""Per-row sampling and stopping for batched `generate`, so that each row keeps its own
parameters and seed whatever else shares its batch.

transformers applies one GenerationConfig to a whole batch and samples from one global
RNG, so a row's text would depend on its neighbours. Instead we run greedy decoding with
`SeededSampler`: per row it applies the repetition penalty, temperature, top-k and top-p,
then adds Gumbel noise drawn from the row's own `torch.Generator`, seeded with
`coral_core.seeds.sample_seed(request seed, sample index)`. The argmax of logits + Gumbel
noise is an exact sample from the softmax (the Gumbel-max trick), so greedy decoding of
the processed scores samples correctly. `RowStopper` ends each row at its own stop
string, EOS or token budget.

torch/transformers are imported lazily (see `build_sampler`/`build_stopper`), since the
classes must subclass transformers' bases.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from coral_core.seeds import sample_seed


@dataclass(frozen=True)
class RowSpec:
    """What one batch row samples with."""

    temperature: float
    top_p: float
    top_k: int
    repetition_penalty: float
    max_new_tokens: int
    stop: tuple[str, ...]
    seed: int
    sample_index: int


def build_sampler(rows: Sequence[RowSpec], pad_lengths: Sequence[int], device: Any) -> Any:
    """A LogitsProcessor applying each row's knobs and seeded Gumbel noise.

    `pad_lengths[i]` is how many left-pad tokens row i has: they are excluded from the
    repetition penalty, so that padding cannot change a row's distribution.
    """
    import torch
    from transformers import LogitsProcessor

    class SeededSampler(LogitsProcessor):
        def __init__(self) -> None:
            self.sampled = [sampled(r.temperature) for r in rows]
            self.temperature = torch.tensor(
                [r.temperature if on else 1.0 for r, on in zip(rows, self.sampled)],
                device=device).unsqueeze(1)
            self.filtered = any(r.top_k > 0 or 0 < r.top_p < 1 for r in rows)
            self.generators = [
                torch.Generator(device=device).manual_seed(sample_seed(r.seed, r.sample_index))
                if on else None
                for r, on in zip(rows, self.sampled)
            ]

        def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> Any:
            scores = scores.float()
            for i, spec in enumerate(rows):
                if spec.repetition_penalty != 1.0:
                    seen = input_ids[i, pad_lengths[i]:]
                    picked = scores[i].gather(0, seen)
                    picked = torch.where(
                        picked < 0, picked * spec.repetition_penalty,
                        picked / spec.repetition_penalty,
                    )
                    scores[i].scatter_(0, seen, picked)
            if not any(self.sampled):
                return scores
            warped = scores / self.temperature
            if self.filtered:
                warped = _filter(warped, rows)
            for i, generator in enumerate(self.generators):
                if generator is None:
                    continue
                uniform = torch.rand(
                    warped.shape[1], generator=generator, device=warped.device
                ).clamp_(min=torch.finfo(torch.float32).tiny, max=1.0 - 1e-7)
                scores[i] = warped[i] - torch.log(-torch.log(uniform))
            return scores

    return SeededSampler()


# Below this a temperature decodes greedily. It is what sampling at it gives anyway (scores
# divided by it are ~1e31 apart, and Gumbel noise is ~1), while in float32 a smaller one
# became 0 or made the scores infinite: at 1e-300 every sample came out empty.
GREEDY_BELOW = 1e-30


def sampled(temperature: float) -> bool:
    """Whether a row at `temperature` samples (else it decodes greedily)."""
    return temperature >= GREEDY_BELOW


def _filter(scores: Any, rows: Sequence[RowSpec]) -> Any:
    """Top-k then top-p (nucleus) per row, on temperature-scaled scores; -inf outside."""
    import torch

    vocab = scores.shape[1]
    ranked, order = scores.sort(dim=-1, descending=True, stable=True)
    positions = torch.arange(vocab, device=scores.device).unsqueeze(0)
    k = torch.tensor([r.top_k if r.top_k > 0 else vocab for r in rows], device=scores.device)
    keep = positions < k.unsqueeze(1)
    probs = ranked.masked_fill(~keep, float("-inf")).softmax(dim=-1)
    before = probs.cumsum(dim=-1) - probs  # mass of the better-ranked tokens
    top_p = torch.tensor([r.top_p if 0 < r.top_p < 1 else 1.0 for r in rows], device=scores.device)
    keep &= (before < top_p.unsqueeze(1)) | (positions == 0)
    mask = torch.zeros_like(keep).scatter(1, order, keep)
    return scores.masked_fill(~mask, float("-inf"))


def build_stopper(
    tokenizer: Any, rows: Sequence[RowSpec], prompt_width: int, eos_ids: set[int]
) -> Any:
    """A StoppingCriteria that ends each row at EOS, its first stop string or its budget.

    It records, per row, how many tokens were generated when it ended (`ended_at`) and why
    (`reasons`: "stop" or "length").
    """
    import torch
    from transformers import StoppingCriteria

    class RowStopper(StoppingCriteria):
        def __init__(self) -> None:
            self.ended_at: list[int | None] = [None] * len(rows)
            self.reasons: list[str] = ["length"] * len(rows)
            self.tokens: list[list[int]] = [[] for _ in rows]

        def __call__(self, input_ids: torch.LongTensor, scores: Any, **kwargs: Any) -> Any:
            produced = input_ids.shape[1] - prompt_width
            last = input_ids[:, -1].tolist()
            pending = [i for i, end in enumerate(self.ended_at) if end is None]
            for i in pending:
                self.tokens[i].append(last[i])
            with_stops = [i for i in pending if rows[i].stop and last[i] not in eos_ids]
            texts = tokenizer.batch_decode(
                [self.tokens[i] for i in with_stops], skip_special_tokens=True
            )
            hit = {i for i, text in zip(with_stops, texts) if any(s in text for s in rows[i].stop)}
            for i in pending:
                if last[i] in eos_ids or i in hit:
                    self.ended_at[i], self.reasons[i] = produced, "stop"
                elif produced >= rows[i].max_new_tokens:
                    self.ended_at[i], self.reasons[i] = produced, "length"
            done = [end is not None for end in self.ended_at]
            return torch.tensor(done, dtype=torch.bool, device=input_ids.device)

    return RowStopper()
