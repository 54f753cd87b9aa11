"""Building the plugin objects that a configuration or a blueprint names.

Shared by `coral run` (through an executor), `coral evaluate` and the checks that refuse a
configuration before a run starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from coral_core import plugins
from coral_core.config.blueprints import DatasetBlueprint, ModelBlueprint, ScoringBlueprint
from coral_core.config.schema import OptionInvalid
from coral_core.errors import UserError
from coral_core.execution import ExecutionContext
from coral_core.config.options import accepts, check_call, check_table, takes
from coral_core.protocols import Dataset, Executor, Model
from coral_core.sandbox import Sandbox, SandboxPolicy
from coral_core.scoring.scorer import Scorer
from coral_core.suggest import did_you_mean, unknown
from coral_core.types import SamplingParams, Task


def experiment_preset(name: str) -> dict[str, Any]:
    """The named experiment's configuration layer (what `--plugin NAME` means)."""
    from coral_core.config.experiment import validate

    preset = plugins.registry().get("experiments", name).factory
    if callable(preset):  # built when used, so it may start from another plugin's preset
        preset = preset()
    if not isinstance(preset, Mapping):
        raise UserError(f"experiment '{name}' is a {type(preset).__name__}, not a "
                        "configuration table (docs/plugins.md)")
    return validate(preset, f"experiment '{name}'")


def build_dataset(blueprint: DatasetBlueprint) -> Dataset:
    section = blueprint.section
    if not section["name"]:
        raise UserError("no data set configured (set [dataset] name, or use --plugin)")
    options = dict(section["options"])
    entry = plugins.registry().get("datasets", section["name"])
    check_table(entry.factory, f"data set '{section['name']}'", options,
                ("dataset", "options"))
    if section["data_dir"]:
        options["data_dir"] = section["data_dir"]
    return plugins.build("datasets", section["name"], **options)


def check_split(dataset: Dataset, name: str, split: str,
                where: Callable[[tuple[str, ...]], str] | None = None) -> None:
    """A split the data set has (any, for one that names none), or one line that says
    where the configuration set it."""
    splits = tuple(getattr(dataset, "splits", ()))
    if splits and split not in splits:
        at = where(("dataset", "split")) if where is not None else ""
        raise UserError(f"{at + ': ' if at else ''}unknown split '{split}'"
                        f"{did_you_mean(split, splits)} (data set '{name}' has "
                        f"{', '.join(splits)})")


def check_tasks(name: str, tasks: list[Any]) -> None:
    """What a data set plugin gave is tasks, each id once: a duplicate failed the run's
    store with an IntegrityError traceback, and left the run directory (a red-team pass)."""
    seen: set[str] = set()
    for task in tasks:
        if not isinstance(task, Task):
            raise UserError(f"data set '{name}' gave a {type(task).__name__} where a Task "
                            "belongs (docs/plugins.md)")
        if not isinstance(task.id, str) or not task.id:
            raise UserError(f"data set '{name}' gave a task whose id is {task.id!r}; ids are "
                            "non-empty strings")
        if not _utf8(task.id):  # the store's write of it was a traceback, a run left behind
            raise UserError(f"data set '{name}' gave a task id that UTF-8 cannot hold (a lone "
                            f"surrogate): {task.id!r}")
        if task.id in seen:
            raise UserError(f"data set '{name}' gave task '{task.id}' twice; ids are unique")
        seen.add(task.id)


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def extracted_code(dataset: Dataset, task: Task, text: str) -> str:
    """The data set's extraction of a reply, checked: a plugin that returns something other
    than a str broke its contract (the configuration's fault, not the candidate's)."""
    code = dataset.extract_code(task, text)
    if not isinstance(code, str):
        raise UserError(f"data set '{getattr(dataset, 'name', '?')}' extract_code gave a "
                        f"{type(code).__name__} where the candidate's code (a str) belongs "
                        "(docs/plugins.md)")
    return code


def data_root(dataset: Dataset) -> str:
    """The folder a data set reads (hidden from candidates), or ''."""
    return str(getattr(dataset, "root", "") or "")


def data_set_names() -> list[str]:
    """The folder names the registered data sets read in a data directory (testgen reads
    quixbugs/: a factory's `data_name`)."""
    registry = plugins.registry()
    names = {getattr(registry.entries["datasets"][name].factory, "data_name", name)
             for name in registry.names("datasets")}
    return sorted(name for name in names if isinstance(name, str))


def data_folders(dataset: Dataset) -> tuple[str, ...]:
    """The folders candidates must not see, as real paths: the data set's, and every
    registered data set's beside it in the same data directory (a red-team pass scoring
    HumanEval read HumanEval/0's answer from the infilling set's files, and QuixBugs'
    correct programs, where the data directory lay under a folder the sandbox shows)."""
    root = data_root(dataset)
    if not root:
        return ()
    folder = Path(root).resolve()
    beside = (folder.parent / name for name in data_set_names())
    return tuple(dict.fromkeys([str(folder), *(str(p.resolve()) for p in beside
                                               if p.is_dir())]))


def parse_model_spec(spec: str) -> tuple[str, str]:
    prefix, _, target = spec.partition(":")
    return prefix, target


def model_entry(section: Mapping[str, Any]) -> Any:
    return plugins.registry().get("models", parse_model_spec(section["spec"])[0])


def check_model(section: Mapping[str, Any], here: bool = True) -> None:
    """What can be refused without building the model: an unknown backend, options it
    does not take (with a did-you-mean), a server URL for a model that has no server, an
    adapter it cannot apply or its factory's `check_adapter(target, path)` refuses, and
    option values the factory's `check_options(target, options)` refuses
    (docs/plugins.md). `here`: whether the model will be built on this machine; where it
    will not (Ray actors), a checker that takes `here` leaves out what depends on the
    machine (its devices, its files)."""
    prefix, target = parse_model_spec(section["spec"])
    entry = model_entry(section)
    if section.get("adapter") and not getattr(entry.factory, "supports_adapters", False):
        raise OptionInvalid(("model", "adapter"), f"model '{prefix}' cannot apply adapters, "
                            f"but 'model.adapter' is set ({section['adapter']})")
    adapter_checker = getattr(entry.factory, "check_adapter", None)
    if section.get("adapter") and callable(adapter_checker):
        adapter_checker(target, section["adapter"], **_where_built(adapter_checker, here))
    if section["base_url"] and not takes(entry.factory, "base_url"):
        raise UserError(f"model '{prefix}' is not served over HTTP, so --base-url (model."
                        f"base_url = {section['base_url']!r}) does not apply to it; it is "
                        "for servers such as openai:MODEL")
    check_table(entry.factory, f"model '{prefix}'", section["options"], ("model", "options"),
                positional=1)
    options = _model_options(section)
    checker = getattr(entry.factory, "check_options", None)
    if callable(checker):  # values only the plugin can judge, without building the model
        try:
            checker(target, dict(options), **_where_built(checker, here))
        except OptionInvalid:
            raise
        except UserError as error:  # said at the [model.options] table (or the flag)
            raise OptionInvalid(("model", "options"), str(error)) from None
    if accepts(entry.factory, "dataset"):
        options["dataset"] = None
    check_call(entry.factory, f"model '{prefix}'", target, **options)


def _where_built(checker: Any, here: bool) -> dict[str, bool]:
    """`here=` for a checker that asks for it (one written before it existed does not)."""
    return {"here": here} if accepts(checker, "here") else {}


def _model_options(section: Mapping[str, Any]) -> dict[str, Any]:
    options = dict(section["options"])
    if section["base_url"]:
        options["base_url"] = section["base_url"]
    return options


def build_model(blueprint: ModelBlueprint, dataset: Dataset | None = None) -> Model:
    """`PREFIX:TARGET` -> factory(TARGET, **options); a factory that declares a `dataset`
    parameter also gets the data set (the baseline learns its prior from it)."""
    section = blueprint.section
    check_model(section)
    prefix, target = parse_model_spec(section["spec"])
    entry = model_entry(section)
    options = _model_options(section)
    if accepts(entry.factory, "dataset"):
        options["dataset"] = dataset if dataset is not None else build_dataset(blueprint.dataset)
    return plugins.instantiate(entry.factory, f"model '{prefix}'", target, **options)


def sampling_params(config: Mapping[str, Any], seed: int, task: Task | None = None,
                    ) -> SamplingParams:
    """The configuration's knobs; stop sequences are the task's then the configuration's."""
    section = config["model"]
    stops = tuple(dict.fromkeys((*(task.stop if task else ()), *section["stop"])))
    return SamplingParams(
        temperature=section["temperature"], top_p=section["top_p"], top_k=section["top_k"],
        max_new_tokens=section["max_new_tokens"],
        repetition_penalty=section["repetition_penalty"], stop=stops, n=1, seed=seed,
    )


def build_executor(settings: Mapping[str, Any]) -> Executor:
    name = settings["executor"]
    entry = plugins.registry().get("executors", name)
    return plugins.instantiate(entry.factory, f"executor '{name}'", dict(settings))


def check_executor(settings: Mapping[str, Any]) -> None:
    """The executor's name and what its factory's optional `check_settings(settings)`
    refuses without starting anything (docs/plugins.md)."""
    try:
        entry = plugins.registry().get("executors", settings["executor"])
    except OptionInvalid:
        raise
    except UserError as error:  # said at the file and line (or flag) that named it
        raise OptionInvalid(("execution", "executor"), str(error)) from None
    checker = getattr(entry.factory, "check_settings", None)
    if callable(checker):
        checker(settings)
    if settings.get("ray_address") and settings["executor"] == "local":
        # the local executor never reads it: a user who named a cluster meant to use it
        raise UserError(f"--ray-address ([execution] ray_address) '{settings['ray_address']}' is "
                        "read only by the ray executor; "
                        "add --executor ray (or drop the address to run here)")


def builds_models_here(settings: Mapping[str, Any]) -> bool:
    """Whether the executor builds its models on this machine: an executor factory's
    `builds_models_here`, a bool or a function of the `[execution]` settings (Ray's: only
    for a Ray of its own), True where it has none."""
    entry = plugins.registry().get("executors", settings["executor"])
    here = getattr(entry.factory, "builds_models_here", True)
    return bool(here(settings) if callable(here) else here)


def build_sandbox(execution: Mapping[str, Any], hidden: Sequence[str] = ()) -> Sandbox:
    policy = SandboxPolicy(
        timeout=execution["test_timeout"], load_timeout=max(5.0, execution["test_timeout"]),
        memory_mb=execution["memory_mb"], isolation=execution["isolation"],
        hidden=tuple(hidden),
    )
    return Sandbox(policy, workers=execution["workers"] or None)


def build_evaluators(section: Mapping[str, Any]) -> list[Any]:
    """The evaluators `use` names, with their options. Options for an evaluator that is
    not registered are refused (a typo would otherwise be ignored); options for one that
    is registered but not in use are allowed (a search may switch it on)."""
    if not section["use"]:
        raise UserError("no evaluators configured ([evaluators] use is empty)")
    known = plugins.registry().entries["evaluators"]
    for name in section["options"]:
        if name not in known:
            raise OptionInvalid(("evaluators", "options", name),
                                f"[evaluators.options.{name}]: " + unknown(
                                    "evaluator", name, known,
                                    plugins.registry().missing_hint()))
    evaluators = []
    for name in section["use"]:
        options = section["options"].get(name, {})
        if not isinstance(options, dict):
            raise UserError(f"[evaluators.options.{name}] must be a table")
        try:
            entry = plugins.registry().get("evaluators", name)
        except UserError as error:
            raise OptionInvalid(("evaluators", "use"), f"[evaluators] use: {error}") from None
        check_table(entry.factory, f"evaluator '{name}'", options,
                    ("evaluators", "options", name))
        evaluators.append(plugins.build("evaluators", name, **options))
    return evaluators


def check_scoring(blueprint: ScoringBlueprint, tasks: Sequence[Task]) -> None:
    """Evaluators, weights, gate and the tasks' success objectives, without a sandbox."""
    section = blueprint.evaluators
    scorer = Scorer(build_evaluators(section), None, section["weights"],  # type: ignore[arg-type]
                    section["gate"])
    scorer.check_tasks(tasks)


@dataclass
class Scoring:
    """The evaluators in use, their shared context and the sandbox under them."""

    scorer: Scorer
    context: ExecutionContext
    sandbox: Sandbox

    def close(self) -> None:
        self.context.close()
        self.sandbox.close()


def build_scoring(blueprint: ScoringBlueprint, dataset: Dataset | None = None) -> Scoring:
    section, execution = blueprint.evaluators, blueprint.execution
    evaluators = build_evaluators(section)
    hidden = (*blueprint.hidden, *(data_folders(dataset) if dataset is not None else ()))
    sandbox = build_sandbox(execution, tuple(str(Path(p).resolve()) for p in hidden if p))
    context = ExecutionContext(sandbox, timeout_factor=execution["timeout_factor"],
                               timeout_floor=execution["timeout_floor"])
    try:
        scorer = Scorer(evaluators, context, section["weights"], section["gate"])
    except UserError:
        sandbox.close()
        raise
    return Scoring(scorer, context, sandbox)
