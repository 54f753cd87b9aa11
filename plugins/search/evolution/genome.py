"""Genes, their ranges, and how a genome becomes a trial's overrides.

A genome has cheap knobs (sampling: temperature, top_p, top_k, repetition_penalty,
max_new_tokens; for the baseline also a weight per edit family, its "edit-kind weights",
top_k being its candidate budget), which change only generation, and, for models that take
adapters, heavy
genes (rank, alpha, dropout, target_modules, kind), which select the adapter a genome is
evaluated with. Every gene is always present (Optuna's NSGA-II samples only the search
space every trial shares), so a model's gene set is fixed for the whole search.

Heavy genes are discrete choices, so that genomes share adapters (an adapter is trained
once per distinct heavy-gene set). Cheap knobs are ranges on a grid (`step`), or choices.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from coral_core.errors import UserError
from coral_core.suggest import did_you_mean
from coral_core.types import AdapterGenes
from coral_plugins.models.baseline.edits import FAMILIES

HEAVY = ("rank", "alpha", "dropout", "target_modules", "kind")
CHEAP = ("temperature", "top_p", "top_k", "repetition_penalty", "max_new_tokens")
ADAPTER_KEY = "model.adapter"


@dataclass(frozen=True)
class Gene:
    """One gene: a list of `choices`, or a numeric range [low, high] on a grid of `step`.

    `feature` names the CA feature that sets it in the CA-seeded first generation, and
    `key` the configuration key it overrides (heavy genes override `model.adapter`
    together, through the adapter they select)."""

    name: str
    feature: str
    key: str | None = None
    choices: tuple[Any, ...] | None = None
    low: float = 0.0
    high: float = 0.0
    step: float = 0.0
    integer: bool = False

    def distribution(self) -> Any:
        from optuna.distributions import (
            CategoricalDistribution, FloatDistribution, IntDistribution,
        )
        if self.choices is not None:
            return CategoricalDistribution(self.choices)
        if self.integer:
            return IntDistribution(int(self.low), int(self.high), step=int(self.step))
        return FloatDistribution(self.low, self.high, step=self.step)

    def from_feature(self, value: float) -> Any:
        """The gene's value for a feature value in [0, 1] (0 -> first/low, 1 -> last/high)."""
        value = min(max(float(value), 0.0), 1.0)
        if self.choices is not None:
            return self.choices[min(int(value * len(self.choices)), len(self.choices) - 1)]
        points = int(round((self.high - self.low) / self.step)) + 1
        index = min(int(value * points), points - 1)
        return self.clean(self.low + index * self.step)

    def clean(self, value: Any) -> Any:
        """A value as a trial uses it: ints as ints, floats rounded to 6 decimals."""
        if self.choices is not None:
            return value
        if self.integer:
            return int(round(value))
        return round(float(value), 6)


def _target(value: str) -> tuple[str, ...]:
    return tuple(part for part in value.split(",") if part)


DEFAULTS: dict[str, Gene] = {
    "temperature": Gene("temperature", "complexity", "model.temperature",
                        low=0.0, high=1.2, step=0.05),
    "top_p": Gene("top_p", "convergence", "model.top_p", low=0.5, high=1.0, step=0.05),
    "top_k": Gene("top_k", "intensity", "model.top_k", low=0, high=50, step=5, integer=True),
    "repetition_penalty": Gene("repetition_penalty", "periodicity", "model.repetition_penalty",
                               low=1.0, high=1.3, step=0.05),
    "max_new_tokens": Gene("max_new_tokens", "convergence", "model.max_new_tokens",
                           low=128, high=512, step=64, integer=True),
    "rank": Gene("rank", "complexity", choices=(4, 8, 16, 32)),
    "alpha": Gene("alpha", "intensity", choices=(8.0, 16.0, 32.0)),
    "dropout": Gene("dropout", "convergence", choices=(0.0, 0.05, 0.1)),
    "target_modules": Gene("target_modules", "periodicity",
                           choices=("q_proj,v_proj", "q_proj,k_proj,v_proj,o_proj")),
    "kind": Gene("kind", "intensity", choices=("lora", "dora")),
}

# The weight-free baseline's own genes: a factor on its learned prior for each edit family
# (`[model.options] family_weights`), geometric choices around 1 (the prior as learned).
FAMILY_GENES = tuple(f"{family}_weight" for family in FAMILIES)
_FEATURES = ("complexity", "intensity", "periodicity", "convergence")
DEFAULTS.update({
    gene: Gene(gene, _FEATURES[index % len(_FEATURES)],
               f"model.options.family_weights.{family}", choices=(0.25, 0.5, 1.0, 2.0, 4.0))
    for index, (gene, family) in enumerate(zip(FAMILY_GENES, FAMILIES))})

# The knobs each backend honours (others: every sampling knob).
MODEL_KNOBS = {
    "baseline": ("temperature", "top_p", "top_k", *FAMILY_GENES),
    "openai": ("temperature", "top_p", "max_new_tokens"),
}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _gene_from_option(base: Gene, spec: Any) -> Gene:
    name = base.name
    label = f"[search.options.genes] {name}"
    if isinstance(spec, list):
        if not spec:
            raise UserError(f"{label} is empty: give at least one value")
        values = list(spec)
        if name == "target_modules":
            values = []
            for item in spec:
                modules = item.split(",") if isinstance(item, str) else item
                if (not isinstance(modules, list) or not modules
                        or not all(isinstance(m, str) and m for m in modules)):
                    raise UserError(f"{label}: each value is a list of module names, "
                                    f"got {item!r}")
                values.append(",".join(sorted(set(modules))))
        elif name == "kind":
            bad = [v for v in values if v not in ("lora", "dora")]
            if bad:
                raise UserError(f"{label}: {bad[0]!r} is not an adapter kind (lora, dora)")
        elif not all(_is_number(v) for v in values):
            raise UserError(f"{label}: every value must be a number, got {values!r}")
        elif base.integer or name == "rank":
            if not all(float(v).is_integer() for v in values):
                raise UserError(f"{label}: every value must be an integer")
            values = [int(v) for v in values]
        else:
            values = [float(v) for v in values]
        values = list(dict.fromkeys(values))
        return Gene(name, base.feature, base.key, choices=tuple(values),
                    integer=base.integer)
    if isinstance(spec, Mapping):
        if base.choices is not None:
            raise UserError(f"{label} is a list of choices, not a range")
        unknown = sorted(set(spec) - {"low", "high", "step"})
        if unknown:
            raise UserError(f"{label}: unknown field '{unknown[0]}' (low, high, step)")
        low, high = spec.get("low", base.low), spec.get("high", base.high)
        step = spec.get("step", base.step)
        if not all(_is_number(v) for v in (low, high, step)):
            raise UserError(f"{label}: low, high and step must be numbers")
        if low > high:
            raise UserError(f"{label} is an empty range: low {low} > high {high}")
        if step <= 0:
            raise UserError(f"{label}: step must be > 0")
        if base.integer and not all(float(v).is_integer() for v in (low, high, step)):
            raise UserError(f"{label}: low, high and step must be integers")
        if not math.isclose(((high - low) / step) % 1.0, 0.0, abs_tol=1e-9) and not \
                math.isclose(((high - low) / step) % 1.0, 1.0, abs_tol=1e-9):
            raise UserError(f"{label}: high - low must be a multiple of step")
        return Gene(name, base.feature, base.key, low=low, high=high, step=step,
                    integer=base.integer)
    raise UserError(f"{label} must be a list of values or a table {{low, high, step}}")


@dataclass(frozen=True)
class GeneSpace:
    """The genes of one search, in a fixed order (cheap knobs, then heavy genes)."""

    genes: tuple[Gene, ...]
    heavy: bool = False

    @classmethod
    def for_model(cls, backend: str, adapters: bool, options: Mapping[str, Any]) -> "GeneSpace":
        """The genes a `backend` model honours (heavy genes only when it takes adapters),
        with the ranges `options` (`[search.options.genes]`) set."""
        knobs = MODEL_KNOBS.get(backend, CHEAP)
        names = list(knobs) + (list(HEAVY) if adapters else [])
        for name in options:
            if name not in names:
                if name in DEFAULTS:
                    why = ("it takes no adapters" if name in HEAVY
                           else f"it honours only {', '.join(knobs)}")
                    raise UserError(f"[search.options.genes] {name}: model '{backend}' does "
                                    f"not use this gene ({why})")
                raise UserError(f"[search.options.genes] has an unknown gene '{name}'"
                                f"{did_you_mean(name, list(DEFAULTS))} (genes: "
                                f"{', '.join(DEFAULTS)})")
        genes = []
        for name in names:
            gene = DEFAULTS[name]
            if name in options:
                gene = _gene_from_option(gene, options[name])
            genes.append(gene)
        return cls(tuple(genes), heavy=adapters)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(g.name for g in self.genes)

    def distributions(self) -> dict[str, Any]:
        return {g.name: g.distribution() for g in self.genes}

    def target_modules(self) -> set[str]:
        for gene in self.genes:
            if gene.name == "target_modules":
                return {m for choice in gene.choices or () for m in _target(choice)}
        return set()

    def _reading(self, gene: Gene, features: Mapping[str, float]) -> float:
        if gene.name == "kind":  # the mean of two features (intensity alone sets alpha)
            return (features["complexity"] + features["intensity"]) / 2
        return features[gene.feature]

    def from_features(self, features: Mapping[str, float]) -> dict[str, Any]:
        """The genes one CA's features give on their own (feature 0 -> the first choice or
        the low end, 1 -> the last choice or the high end)."""
        return {g.name: g.from_feature(self._reading(g, features)) for g in self.genes}

    def seed_population(self, features: Sequence[Mapping[str, float]]) -> list[dict[str, Any]]:
        """The CA-seeded first generation: for each gene, the genomes are ranked by their
        CA's reading of it (ties: the earlier genome first), and rank r of P takes the
        value at (r + 0.5) / P of the gene's range, so the features order the genomes and
        the population spans every gene's range however the features cluster."""
        count = len(features)
        population: list[dict[str, Any]] = [{} for _ in range(count)]
        for gene in self.genes:
            readings = [self._reading(gene, found) for found in features]
            order = sorted(range(count), key=lambda i: (readings[i], i))
            for rank, index in enumerate(order):
                population[index][gene.name] = gene.from_feature((rank + 0.5) / count)
        return [self.clean(params) for params in population]

    def clean(self, params: Mapping[str, Any]) -> dict[str, Any]:
        return {g.name: g.clean(params[g.name]) for g in self.genes}

    def adapter_genes(self, params: Mapping[str, Any]) -> AdapterGenes | None:
        if not self.heavy:
            return None
        return AdapterGenes(rank=int(params["rank"]), alpha=float(params["alpha"]),
                            dropout=float(params["dropout"]),
                            target_modules=_target(params["target_modules"]),
                            kind=str(params["kind"]))

    def heavy_key(self, params: Mapping[str, Any]) -> str | None:
        """A stable name for a heavy-gene set (genomes with equal keys share an adapter)."""
        if not self.heavy:
            return None
        return "|".join(f"{name}={params[name]}" for name in HEAVY)

    def overrides(self, params: Mapping[str, Any], adapter: str | None) -> dict[str, Any]:
        """The trial overrides of a genome: each cheap knob's key, and `model.adapter`."""
        result = {g.key: g.clean(params[g.name]) for g in self.genes if g.key}
        if self.heavy:
            result[ADAPTER_KEY] = adapter
        return dict(sorted(result.items()))
