"""The adapters of a generation: one per distinct heavy-gene set, trained once.

`AdapterTrainer.adapter(genes)` calls the hf backend's `train_adapter` (content-addressed
cache: a second genome with the same heavy genes, a later generation, or a resumed run
finds the adapter there and trains nothing) on the data set's training examples, and says
what it cost: the training seconds recorded with the adapter, and whether this call
trained it or found it. Options come from `[search.options.training]`.
"""

from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from coral_core.errors import UserError
from coral_core.types import AdapterGenes

DEFAULTS: dict[str, Any] = {
    "steps": 0, "epochs": 3.0, "learning_rate": 2e-4, "batch_size": 8, "max_length": 1024,
    "seed": None, "cache_dir": "",
}


@dataclass(frozen=True)
class Adapter:
    path: str
    key: str
    seconds: float  # what training it cost (recorded with the adapter)
    trained: bool  # trained by this call (False: a cache hit)


def training_options(options: Mapping[str, Any], run_seed: int) -> dict[str, Any]:
    unknown = sorted(set(options) - set(DEFAULTS))
    if unknown:
        raise UserError(f"[search.options.training] has an unknown key '{unknown[0]}' "
                        f"(keys: {', '.join(DEFAULTS)})")
    merged = {**DEFAULTS, **options}
    checks = {"steps": lambda v: isinstance(v, int) and v >= 0,
              "epochs": lambda v: isinstance(v, (int, float)) and v > 0,
              "learning_rate": lambda v: isinstance(v, (int, float)) and v > 0,
              "batch_size": lambda v: isinstance(v, int) and v >= 1,
              "max_length": lambda v: isinstance(v, int) and v >= 8,
              "seed": lambda v: v is None or isinstance(v, int),
              "cache_dir": lambda v: isinstance(v, str)}
    for key, ok in checks.items():
        if isinstance(merged[key], bool) or not ok(merged[key]):
            raise UserError(f"[search.options.training] {key} = {merged[key]!r} is not valid")
    if merged["seed"] is None:
        merged["seed"] = run_seed
    return merged


@functools.lru_cache(maxsize=8)
def linear_modules(target: str, revision: str | None, trust_remote_code: bool) -> frozenset:
    """The names of the base model's linear layers (the modules an adapter can target),
    read from its configuration on the meta device: no weights are loaded."""
    from accelerate import init_empty_weights
    from transformers import AutoConfig, AutoModelForCausalLM
    import torch

    try:
        config = AutoConfig.from_pretrained(target, revision=revision,
                                            trust_remote_code=trust_remote_code)
        with init_empty_weights():
            model = AutoModelForCausalLM.from_config(config, trust_remote_code=trust_remote_code)
    except Exception as error:  # the model's own loader reports the cause at build time
        raise UserError(f"cannot read the configuration of hf:{target}: {error}") from None
    return frozenset(name.rsplit(".", 1)[-1] for name, module in model.named_modules()
                     if isinstance(module, torch.nn.Linear) and name)


class AdapterTrainer:
    """Trains (or finds) the adapter for a set of heavy genes on one base model."""

    def __init__(self, target: str, model_options: Mapping[str, Any],
                 training: Mapping[str, Any], examples_source: Any):
        self.target = target
        self.options = dict(model_options)
        self.training = dict(training)
        self._examples_source = examples_source
        self._examples: list | None = None

    def check_targets(self, wanted: set[str]) -> None:
        have = linear_modules(self.target, self.options.get("revision"),
                              bool(self.options.get("trust_remote_code", False)))
        missing = sorted(wanted - have)
        if missing:
            raise UserError(f"[search.options.genes] target_modules: hf:{self.target} has no "
                            f"module '{missing[0]}' (it has {', '.join(sorted(have))})")

    def examples(self) -> list:
        if self._examples is None:
            self._examples = list(self._examples_source())
        return self._examples

    def adapter(self, genes: AdapterGenes) -> Adapter:
        from coral_plugins.models.hf.adapters import train_adapter

        started = time.time()
        training = self.training
        path = train_adapter(
            self.target, genes, self.examples(), steps=training["steps"],
            epochs=float(training["epochs"]), learning_rate=float(training["learning_rate"]),
            batch_size=training["batch_size"], max_length=training["max_length"],
            seed=training["seed"], cache_dir=training["cache_dir"] or None,
            chat_template=self.options.get("chat_template"),
            revision=self.options.get("revision"), device=self.options.get("device"),
            dtype=self.options.get("dtype"),
        )
        written = Path(path) / "coral_adapter.json"
        record = json.loads(written.read_text())
        trained = written.stat().st_mtime >= started - 1.0  # published by this call
        return Adapter(str(Path(path).absolute()), str(record.get("key", Path(path).name)),
                       round(float(record.get("seconds", 0.0)), 3), trained)
