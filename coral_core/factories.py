"""Building the plugin objects a resolved configuration names (shared by run and evaluate)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from . import plugins
from .errors import UserError
from .execution import ExecutionContext
from .protocols import Dataset, Model
from .sandbox import Sandbox, SandboxPolicy
from .scoring import Scorer
from .store import RunStore
from .types import SamplingParams

EXECUTORS = ("local",)


def experiment_preset(name: str) -> dict[str, Any]:
    """The named experiment's configuration layer (what `--plugin NAME` means)."""
    from .config import validate

    preset = plugins.registry().get("experiments", name).factory
    return validate(preset, f"experiment '{name}'")


def build_dataset(config: Mapping[str, Any]) -> Dataset:
    section = config["dataset"]
    if not section["name"]:
        raise UserError("no data set configured (set [dataset] name, or use --plugin)")
    options = dict(section["options"])
    if section["data_dir"]:
        options["data_dir"] = section["data_dir"]
    return plugins.build("datasets", section["name"], **options)


def parse_model_spec(spec: str) -> tuple[str, str]:
    prefix, _, target = spec.partition(":")
    return prefix, target


def build_model(config: Mapping[str, Any], dataset: Dataset | None = None) -> Model:
    """`PREFIX:TARGET` -> factory(TARGET, **options); a factory that declares a `dataset`
    parameter also gets the run's data set (the baseline learns its prior from it)."""
    section = config["model"]
    prefix, target = parse_model_spec(section["spec"])
    entry = plugins.registry().get("models", prefix)
    options = dict(section["options"])
    if section["base_url"]:
        options["base_url"] = section["base_url"]
    if dataset is not None and plugins.accepts(entry.factory, "dataset"):
        options["dataset"] = dataset
    return plugins.instantiate(entry.factory, f"model '{prefix}'", target, **options)


def sampling_params(config: Mapping[str, Any], seed: int) -> SamplingParams:
    section = config["model"]
    return SamplingParams(
        temperature=section["temperature"], top_p=section["top_p"], top_k=section["top_k"],
        max_new_tokens=section["max_new_tokens"],
        repetition_penalty=section["repetition_penalty"], stop=tuple(section["stop"]), n=1,
        seed=seed,
    )


def build_sandbox(config: Mapping[str, Any], hidden: tuple[str, ...] = ()) -> Sandbox:
    section = config["execution"]
    if section["executor"] not in EXECUTORS:
        raise UserError(f"unknown executor '{section['executor']}' "
                        f"(available: {', '.join(EXECUTORS)})")
    policy = SandboxPolicy(
        timeout=section["test_timeout"], load_timeout=max(5.0, section["test_timeout"]),
        memory_mb=section["memory_mb"], isolation=section["isolation"], hidden=hidden,
    )
    return Sandbox(policy, workers=section["workers"] or None)


@dataclass
class Scoring:
    """The evaluators in use, their shared context and the sandbox under them."""

    scorer: Scorer
    context: ExecutionContext
    sandbox: Sandbox

    def close(self) -> None:
        self.context.close()
        self.sandbox.close()


def build_scoring(
    config: Mapping[str, Any], store: RunStore | None = None, hidden: tuple[str, ...] = (),
) -> Scoring:
    section = config["evaluators"]
    if not section["use"]:
        raise UserError("no evaluators configured ([evaluators] use is empty)")
    evaluators = []
    for name in section["use"]:
        options = section["options"].get(name, {})
        if not isinstance(options, dict):
            raise UserError(f"[evaluators.options.{name}] must be a table")
        evaluators.append(plugins.build("evaluators", name, **options))
    sandbox = build_sandbox(config, hidden)
    execution = config["execution"]
    context = ExecutionContext(
        sandbox, timeout_factor=execution["timeout_factor"],
        timeout_floor=execution["timeout_floor"], store=store,
    )
    try:
        scorer = Scorer(evaluators, context, section["weights"], section["gate"])
    except UserError:
        sandbox.close()
        raise
    return Scoring(scorer, context, sandbox)
