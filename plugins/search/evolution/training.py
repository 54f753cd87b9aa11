"""The adapters of a generation: one per distinct heavy-gene set, trained once.

`AdapterTrainer.adapter(genes)` calls the model factory's `train_adapter` (hf's: content-addressed
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
from typing import Any, Callable, Mapping

from coral_core.config.schema import INT_BOUND, OptionInvalid
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


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and v == v  # not NaN


# Each key's check and its bounds in words (docs/evolution.md): large enough for any real
# fine-tune, small enough that a typo cannot ask for years of training.
CHECKS: dict[str, tuple[Any, str]] = {
    "steps": (lambda v: isinstance(v, int) and 0 <= v <= 1_000_000,
              "an integer in [0, 1000000]"),
    "epochs": (lambda v: _number(v) and 0 < v <= 1000, "a number in (0, 1000]"),
    "learning_rate": (lambda v: _number(v) and 0 < v <= 1, "a number in (0, 1]"),
    "batch_size": (lambda v: isinstance(v, int) and 1 <= v <= 4096,
                   "an integer in [1, 4096]"),
    "max_length": (lambda v: isinstance(v, int) and 8 <= v <= 1_048_576,
                   "an integer in [8, 1048576]"),
    "seed": (lambda v: v is None or (isinstance(v, int) and 0 <= v < INT_BOUND),
             "an integer in [0, 2**63 - 1]"),
    "cache_dir": (lambda v: isinstance(v, str), "a folder"),
}


def training_options(options: Mapping[str, Any], run_seed: int) -> dict[str, Any]:
    unknown = sorted(set(options) - set(DEFAULTS))
    if unknown:
        raise UserError(f"[search.options.training] has an unknown key '{unknown[0]}' "
                        f"(keys: {', '.join(DEFAULTS)})")
    merged = {**DEFAULTS, **options}
    for key, (ok, what) in CHECKS.items():
        if isinstance(merged[key], bool) or not ok(merged[key]):
            raise OptionInvalid(("search", "options", "training", key),
                                f"[search.options.training] {key} = {merged[key]!r} is not "
                                f"valid: {what}")
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

    def __init__(self, train: Callable[..., Any], target: str,
                 model_options: Mapping[str, Any], training: Mapping[str, Any],
                 examples_source: Any):
        self.train = train  # the model factory's `train_adapter`
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
        started = time.time()
        training = self.training
        path = self.train(
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
