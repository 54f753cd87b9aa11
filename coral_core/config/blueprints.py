"""Blueprints: the parts of a resolved configuration that build a trial's components.

A blueprint is plain, picklable data with a digest. The runner names components by
blueprint; an executor builds each where its work runs (a thread here, a Ray actor
elsewhere) once per distinct digest, so trials that differ only in sampling knobs share
one model, and trials that change the model or the scorers get their own.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Mapping

from coral_core.config.settings import SETTINGS

# Model keys that shape each request, not the model object: trials that differ only in
# these share one loaded model (an adapter is applied per request batch, on the same base).
PER_REQUEST_KEYS = tuple(s.key for s in SETTINGS if s.section == "model" and s.per_request)


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _plain(value: Mapping[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(value, default=str))


@dataclass(frozen=True)
class DatasetBlueprint:
    section: Mapping[str, Any]
    digest: str

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> "DatasetBlueprint":
        section = _plain(config["dataset"])
        return cls(section, _digest(section))


@dataclass(frozen=True)
class ModelBlueprint:
    """The model section less the per-request keys (sampling knobs, adapter), and the data
    set (a model factory that takes `dataset` gets it: the baseline learns its prior
    there)."""

    section: Mapping[str, Any]
    dataset: DatasetBlueprint
    digest: str

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> "ModelBlueprint":
        section = {k: v for k, v in _plain(config["model"]).items() if k not in PER_REQUEST_KEYS}
        dataset = DatasetBlueprint.of(config)
        return cls(section, dataset, _digest([section, dataset.digest]))

    @property
    def identity(self) -> str:
        """What a stored sample's digest names: the model less where it is served from."""
        return _digest({k: v for k, v in self.section.items() if k != "base_url"})


@dataclass(frozen=True)
class ScoringBlueprint:
    """Evaluators, weights, gate and execution limits; `hidden` paths the sandbox hides
    (the run directory; the executor adds the data set's folder)."""

    evaluators: Mapping[str, Any]
    execution: Mapping[str, Any]
    dataset: DatasetBlueprint
    hidden: tuple[str, ...]
    digest: str

    @classmethod
    def of(cls, config: Mapping[str, Any], hidden: tuple[str, ...] = ()) -> "ScoringBlueprint":
        evaluators, execution = _plain(config["evaluators"]), _plain(config["execution"])
        dataset = DatasetBlueprint.of(config)
        return cls(evaluators, execution, dataset, tuple(hidden),
                   _digest([evaluators, execution, dataset.digest, list(hidden)]))
