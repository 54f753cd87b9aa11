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
import sys
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from coral_core.config.schema import (
    INT_BOUND, MAX_VALUES, Invalid, OptionInvalid, check_override, parse_path,
)
from coral_core.config.settings import SAMPLING_KNOBS
from coral_core.errors import UserError
from coral_core.suggest import did_you_mean
from coral_core.types import AdapterGenes, Tunable

HEAVY = ("rank", "alpha", "dropout", "target_modules", "kind")
CHEAP = SAMPLING_KNOBS  # the settings table's sampling knobs, in genome order
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

# A model's own genes come from its factory (`tunables`: see `coral_core.types.Tunable`), and
# so do the sampling knobs it honours (`sampling_knobs`; absent: every one of CHEAP).
_FEATURES = ("complexity", "intensity", "periodicity", "convergence")


def model_tunables(factory: Any, dataset: Any) -> tuple[Tunable, ...]:
    """A model's own genes: its factory's `tunables`, a tuple or, where they depend on the
    data set, a callable taking it (the baseline's weights weigh repairs: it has none for
    the data sets it infills or writes tests for)."""
    found = getattr(factory, "tunables", ())
    found = found(dataset) if callable(found) else found
    if not isinstance(found, (tuple, list)) or not all(isinstance(t, Tunable) for t in found):
        raise UserError(f"the model's factory published tunables {found!r}: give a tuple of "
                        "coral_core.types.Tunable (or a callable returning one)")
    return tuple(found)


def _own_gene(index: int, tunable: Tunable) -> Gene:
    return Gene(tunable.name, _FEATURES[index % len(_FEATURES)],
                f"model.options.{tunable.option}", choices=tuple(tunable.choices))


def _own_bounds(tunable: Tunable) -> tuple[Any, str]:
    low, high = tunable.low, tunable.high
    shown = [int(x) if float(x).is_integer() else x for x in (low, high)]
    return (lambda v: low <= v <= high), f"numbers in [{shown[0]}, {shown[1]}]"


# A gene's bounds, checked before the run: a range holds at most MAX_POINTS grid points
# (Optuna's stepped distributions are computed in `decimal`, which a step of 1e-300 breaks),
# and a float step is at least MIN_STEP, since gene values are rounded to 6 decimals.
MAX_POINTS = 1_000_000
MIN_STEP = 1e-6
# Genes whose key the schema cannot bound are bounded here: heavy genes set no key (LoRA
# ranks past a model's hidden size mean nothing; dropout is a probability); a model's own
# genes are bounded by its factory's `tunables`.
GENE_BOUNDS: dict[str, tuple[Any, str]] = {
    "rank": (lambda v: isinstance(v, int) and 1 <= v <= 4096, "integers in [1, 4096]"),
    "alpha": (lambda v: 0 < v <= 10_000, "numbers in (0, 10000]"),
    "dropout": (lambda v: 0 <= v < 1, "numbers in [0, 1)"),
}


def _is_number(value: Any) -> bool:
    """A finite float, or an integer of 64 bits (a larger one would overflow a float)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return -INT_BOUND <= value < INT_BOUND
    return isinstance(value, float) and math.isfinite(value)


def _refuse(name: str, message: str) -> OptionInvalid:
    return OptionInvalid(("search", "options", "genes", name), message)


def _fits(base: Gene, label: str, value: Any, bounds: Mapping[str, tuple[Any, str]]) -> None:
    """A gene value must fit its bounds and the key it overrides."""
    if base.name in bounds:
        ok, what = bounds[base.name]
        if not ok(value):
            raise _refuse(base.name, f"{label}: {value!r} is out of bounds ({what})")
    if base.key is not None:
        try:
            check_override(parse_path(base.key), value)
        except Invalid as error:
            raise _refuse(base.name, f"{label}: {error}") from None


def _points(label: str, name: str, low: float, high: float, step: float, integer: bool,
            ) -> None:
    """Refuse a degenerate step before anything divides by it (arithmetic, no loop)."""
    if step <= 0:
        raise _refuse(name, f"{label}: step must be > 0")
    if not integer and step < MIN_STEP:
        raise _refuse(name, f"{label}: step {step!r} is below {MIN_STEP:g} (gene values are "
                            "rounded to 6 decimals)")
    count = (high - low) / step + 1  # a float: inf or huge for a step far below the range
    if not math.isfinite(count) or count > MAX_POINTS:
        raise _refuse(name, f"{label}: step {step!r} gives {count:.3g} values from {low} to "
                            f"{high}: at most {MAX_POINTS} (use a larger step)")


def _gene_from_option(base: Gene, spec: Any, bounds: Mapping[str, tuple[Any, str]]) -> Gene:
    name = base.name
    label = f"[search.options.genes] {name}"
    if isinstance(spec, list):
        if not spec:
            raise _refuse(name, f"{label} is empty: give at least one value")
        if len(spec) > MAX_VALUES:
            raise _refuse(name, f"{label} has {len(spec)} values: at most {MAX_VALUES}")
        values = list(spec)
        if name == "target_modules":
            values = []
            for item in spec:
                modules = item.split(",") if isinstance(item, str) else item
                if (not isinstance(modules, list) or not modules
                        or not all(isinstance(m, str) and m for m in modules)):
                    raise _refuse(name, f"{label}: each value is a list of module "
                                        f"names, got {item!r}")
                values.append(",".join(sorted(set(modules))))
        elif name == "kind":
            bad = [v for v in values if v not in ("lora", "dora")]
            if bad:
                raise _refuse(name, f"{label}: {bad[0]!r} is not an adapter kind (lora, dora)")
        elif not all(_is_number(v) for v in values):
            raise _refuse(name, f"{label}: every value must be a number, got {values!r}")
        elif base.integer or name == "rank":
            if not all(float(v).is_integer() for v in values):
                raise _refuse(name, f"{label}: every value must be an integer")
            values = [int(v) for v in values]
        else:
            values = [float(v) for v in values]
        values = list(dict.fromkeys(values))
        for value in values:
            _fits(base, label, value, bounds)
        return Gene(name, base.feature, base.key, choices=tuple(values),
                    integer=base.integer)
    if isinstance(spec, Mapping):
        if base.choices is not None:
            raise _refuse(name, f"{label} is a list of choices, not a range")
        unknown = sorted(set(spec) - {"low", "high", "step"})
        if unknown:
            raise _refuse(name, f"{label}: unknown field '{unknown[0]}' (low, high, step)")
        low, high = spec.get("low", base.low), spec.get("high", base.high)
        step = spec.get("step", base.step)
        if not all(_is_number(v) for v in (low, high, step)):
            raise _refuse(name, f"{label}: low, high and step must be finite numbers")
        if low > high:
            raise _refuse(name, f"{label} is an empty range: low {low} > high {high}")
        if base.integer and not all(float(v).is_integer() for v in (low, high, step)):
            raise _refuse(name, f"{label}: low, high and step must be integers")
        for value in (low, high):
            _fits(base, label, int(value) if base.integer else value, bounds)
        _points(label, name, low, high, step, base.integer)
        span = (high - low) / step  # a whole number of steps, at least one unless low == high
        # high - low carries the rounding of numbers as large as low and high: 100 -
        # 99.999999 is 1e-6 only to 1e-8 of itself (a red-team pass)
        magnitude = max(abs(low), abs(high), 1.0)
        slack = 1e-9 * max(1.0, span) + 8 * sys.float_info.epsilon * magnitude / step
        if (abs(span - round(span)) > slack
                or (base.integer and (int(high) - int(low)) % int(step))
                or (high > low and round(span) < 1)):
            raise _refuse(name, f"{label}: high - low must be a multiple of step")
        return Gene(name, base.feature, base.key, low=low, high=high, step=step,
                    integer=base.integer)
    raise _refuse(name, f"{label} must be a list of values or a table {{low, high, step}}")


@dataclass(frozen=True)
class GeneSpace:
    """The genes of one search, in a fixed order (cheap knobs, then heavy genes)."""

    genes: tuple[Gene, ...]
    heavy: bool = False

    @classmethod
    def for_model(cls, backend: str, factory: Any, adapters: bool,
                  options: Mapping[str, Any], dataset: Any = None) -> "GeneSpace":
        """The genes a `backend` model honours on `dataset` (its factory's `sampling_knobs`
        and `tunables`; heavy genes only when it takes adapters), with the ranges `options`
        (`[search.options.genes]`) set."""
        tunables = model_tunables(factory, dataset)
        own = {t.name: _own_gene(index, t) for index, t in enumerate(tunables)}
        catalogue = {**DEFAULTS, **own}
        bounds = {**GENE_BOUNDS, **{t.name: _own_bounds(t) for t in tunables}}
        knobs = (*getattr(factory, "sampling_knobs", CHEAP), *own)
        names = list(knobs) + (list(HEAVY) if adapters else [])
        for name in options:
            if name not in names:
                if name in catalogue:
                    why = ("it takes no adapters" if name in HEAVY
                           else f"it honours only {', '.join(knobs)}")
                    raise _refuse(name, f"[search.options.genes] {name}: model '{backend}' "
                                        f"does not use this gene ({why})")
                raise _refuse(name, f"[search.options.genes] has an unknown gene '{name}'"
                                    f"{did_you_mean(name, list(catalogue))} (genes: "
                                    f"{', '.join(catalogue)})")
        genes = []
        for name in names:
            gene = catalogue[name]
            if name in options:
                gene = _gene_from_option(gene, options[name], bounds)
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
