"""Every configuration key, declared once: its type, default, range, meaning, `coral run`
flag, and how a search and a trial's components may treat it.

What reads the settings derives from `SETTINGS`: the schema and defaults
(`schema.SCHEMA`, `DEFAULTS`, `FIXED`), the reference in docs/configuration.md
(`reference`), the flags a run takes (`launch.PLACES` and their checks, and the help
text's "(config: KEY, default VALUE)" in cli/run.py), the keys a model's blueprint leaves
to each request (`blueprints.PER_REQUEST_KEYS`), the defaults of `types.SamplingParams` and
of the sandbox's memory limit, and the sampling knobs an evolution search tunes. A key is
added, or its default changed, here and nowhere else (tests/test_settings.py checks it).

Standard library only: `coral_core.types` reads its defaults here, and importing it must
stay cheap.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable

DAY = 86400  # a timeout beyond a day is a typo, and too large a number overflows the OS's
MAX_SAMPLES = 100_000  # per problem: more is a typo (each is held in memory while planned)
INT_BOUND = 2 ** 63  # integers are stored as SQLite and TOML 64-bit integers
MAX_TRIALS = 100_000  # trials in one run: each is a row in summary.json and the store
MAX_NEW_TOKENS = 1_000_000  # longer than any model's context: a larger value is a typo
MAX_TEMPERATURE = 100.0  # 50 times OpenAI's largest (2): a larger value is a typo


@dataclass(frozen=True)
class Range:
    """A numeric check: `low` <= value (`low` < value when `open_low`) and, when there is a
    `high`, value <= `high`. It says `below` when the low end is crossed and `above` (else
    `below`) when the high end is; `low` is also the least a flag of the key takes."""

    low: float
    high: float | None
    below: str
    above: str | None = None
    open_low: bool = False

    def __call__(self, value: Any) -> Any:
        if not (value > self.low if self.open_low else value >= self.low):
            return self.below
        if self.high is not None and not value <= self.high:
            return self.above or self.below
        return True


def some_weight(weights: dict[str, float]) -> bool | str:
    """A table of weights that are all 0 makes every fitness 0 (a red-team pass)."""
    if weights and not any(weight > 0 for weight in weights.values()):
        return ("gives every objective weight 0, so every fitness would be 0 (give one a "
                "weight > 0, or leave the table out for equal weights)")
    return True


def _no_empty(values: list[str]) -> bool | str:
    """An empty stop sequence matches everywhere: every reply would be cut to nothing."""
    return "holds an empty string (it would end every reply at once)" if "" in values else True


def _distinct(values: list[Any]) -> Any:
    seen: set[Any] = set()
    for value in values:
        if value in seen:
            return f"lists {value!r} twice"
        seen.add(value)
    return True


@dataclass(frozen=True)
class Setting:
    """One configuration key.

    kind: "str", "bool", "int", "float", "list[str]", "table" (free-form plugin options),
    "table[float]" (names to numbers) or "space" ([search.space]).
    check: returns True or what is wrong ("must be >= 0"); None: any value of the kind.
    flag: the `coral run` flag that sets it, as its parameter name (`top_p` is --top-p);
    `metavar` and `help` describe that flag, `help` with {key} and {default} filled in
    from this setting (`flag_help`). A plugin's flag for a key of this table
    (`--ray-address`, the ray plugin's: coral_register_run_flags) has no `flag` here but
    takes its `metavar` and `help` from here.
    fixed: why no trial (search dimension or override) may vary it; None: a trial may.
    per_request: it shapes each request, not the model object: trials that differ only in
    such keys share one loaded model.
    knob: a sampling knob a search tunes (a `SamplingParams` field of the same name): its
    place among them in a genome (1, 2, ...; the order decides which value a seeded
    search draws for each); 0: not one.
    path: a path, made absolute against the current folder.
    relocatable: it says where something is, not what is computed: a resumed run may
    change it, and it is not part of the configuration's digest.
    """

    section: str
    key: str
    kind: str
    default: Any
    meaning: str
    check: Callable[[Any], Any] | None = None
    flag: str | None = None
    metavar: str | None = None
    help: str | None = None
    fixed: str | None = None
    per_request: bool = False
    knob: int = 0
    path: bool = False
    relocatable: bool = False

    @property
    def name(self) -> str:
        return f"{self.section}.{self.key}"


_RUN = "the run's own settings hold for every trial"
_SEARCH = "it configures the search itself"


def _rank_by(value: str) -> bool | str:
    """An objective, fitness, or pass@K with K a whole number from 1 (pass@0 was taken)."""
    if not value:
        return "must name an objective (or fitness)"
    if value.startswith("pass@"):
        k = value[len("pass@"):]
        if not (k.isascii() and k.isdigit() and 1 <= int(k) <= 100000):
            return "must be pass@K with K from 1 to 100000"
        if k != str(int(k)):  # the summary names pass@1, which pass@01 never matched
            return f"must be written pass@{int(k)}"
    return True


def _pinned(value: list[str]) -> bool | str:
    """`model.KEY` (or a leaf under `model.options`) for a [model] key Coral has: a
    misspelt one pinned nothing, without a word (a red-team pass)."""
    from coral_core.suggest import did_you_mean

    keys = sorted(item.key for item in SETTINGS if item.section == "model")
    for entry in value:
        section, _, key = entry.partition(".")
        name = key.split(".", 1)[0]
        if section != "model" or name not in keys:
            hint = did_you_mean(entry, [f"model.{k}" for k in keys]) if section == "model" \
                else ""
            return f"names {entry!r}, not a model key (model.{{{', '.join(keys)}}}){hint}"
    return True


_WHERE = "it says where the work runs, not what it computes"
_RESOURCES = "it sets the resources a run uses, not what it computes"

SETTINGS: tuple[Setting, ...] = (
    # [dataset]
    Setting("dataset", "name", "str", "",
            "The data set (a name from `coral datasets list`); a preset sets it."),
    Setting("dataset", "split", "str", "test",
            "Which problems: a split the data set has (QuixBugs: train, test, extra, all). "
            "`--split`.",
            flag="split", metavar="SPLIT",
            help="Data set split, e.g. train | test | extra | all (config: {key})."),
    Setting("dataset", "problems", "list[str]", [],
            "Only these problems (ids from `coral datasets show NAME`); empty = the whole "
            "split. `--problems a,b`.",
            check=_distinct, flag="problems", metavar="A,B",
            help="Only these problems, comma-separated (config: {key})."),
    Setting("dataset", "limit", "int", 0,
            "Only the first N problems of the selection; 0 = all. `--limit N`.",
            check=Range(0, INT_BOUND - 1, "must be >= 0 (0 = every problem)",
                        "must be at most 2**63 - 1"),
            flag="limit", metavar="N",
            help="Only the first N problems of the split (config: {key}, 0 = all)."),
    Setting("dataset", "data_dir", "str", "",
            "Folder holding the data set's folder; empty = `CORAL_DATA_DIR`, then the "
            "fetched copy. `--data-dir`; may relocate a resumed run.",
            flag="data_dir", metavar="DIR",
            help="Folder holding the data set (else CORAL_DATA_DIR, else the fetched copy; "
                 "may relocate a resumed run).",
            fixed="it relocates the data, not what is computed", path=True, relocatable=True),
    Setting("dataset", "options", "table", {},
            "Passed to the data set plugin's factory as keyword arguments."),
    # [model]
    Setting("model", "spec", "str", "baseline",
            "`baseline`, `reference`, `hf:PATH_OR_ID`, `openai:MODEL` or a model plugin's "
            "`PREFIX:TARGET`. `--model`.",
            flag="model", metavar="SPEC",
            help="baseline | reference | hf:PATH_OR_ID | openai:MODEL (config: {key})"),
    Setting("model", "base_url", "str", "",
            "Server URL for models served over HTTP (`openai:`); empty = `OPENAI_BASE_URL`. "
            "`--base-url`; may relocate a resumed run.",
            flag="base_url", metavar="URL",
            help="OpenAI-compatible server URL (may relocate a resumed run) (config: {key}).",
            fixed="it relocates the server, not what is computed", relocatable=True),
    Setting("model", "adapter", "str", "",
            "A peft LoRA/DoRA adapter folder applied to the model (models that support "
            "adapters only, e.g. `hf:`).",
            per_request=True, path=True),
    Setting("model", "temperature", "float", 0.8,
            "Sampling temperature; 0 = greedy. `--temperature`.",
            check=Range(0, MAX_TEMPERATURE, "must be >= 0",
                        f"must be at most {MAX_TEMPERATURE:g}"),
            flag="temperature", metavar="T",
            help="Sampling temperature (config: {key}, default {default}).",
            per_request=True, knob=1),
    Setting("model", "top_p", "float", 0.95,
            "Nucleus sampling: keep the smallest set of tokens whose probability reaches "
            "top_p. `--top-p`.",
            check=Range(0, 1, "must be in (0, 1]", open_low=True),
            flag="top_p", metavar="P",
            help="Nucleus sampling (config: {key}, default {default}).",
            per_request=True, knob=2),
    Setting("model", "top_k", "int", 0,
            "Keep only the k most likely tokens; 0 = no limit.",
            check=Range(0, None, "must be >= 0"), per_request=True, knob=3),
    Setting("model", "max_new_tokens", "int", 512,
            "Longest reply, in tokens. `--max-new-tokens`.",
            check=Range(1, MAX_NEW_TOKENS, "must be >= 1", f"must be at most {MAX_NEW_TOKENS}"),
            flag="max_new_tokens", metavar="N",
            help="Longest reply in tokens (config: {key}, default {default}).",
            per_request=True, knob=5),
    Setting("model", "repetition_penalty", "float", 1.0,
            "Penalty on repeated tokens; 1.0 = none.",
            check=Range(0, None, "must be > 0", open_low=True), per_request=True, knob=4),
    Setting("model", "stop", "list[str]", [],
            "Stop sequences, added to the task's own.", per_request=True, check=_no_empty),
    Setting("model", "batch_size", "int", 16,
            "Requests sent to the model at a time.",
            check=Range(1, None, "must be >= 1"), per_request=True),
    Setting("model", "options", "table", {},
            "The model plugin's own options (e.g. `dtype` for `hf:`, `concurrency` for "
            "`openai:`). `--model-arg KEY=VALUE`."),
    # [evaluators]
    Setting("evaluators", "use", "list[str]", ["tests"],
            "Evaluators to run on every candidate (names from `coral plugins list`).",
            check=_distinct),
    Setting("evaluators", "weights", "table[float]", {},
            "Objective -> weight for fitness (the weighted mean); empty = equal weights. A "
            "table given here replaces the one before it whole: narrowing `use` on a "
            "preset, give the weights of the objectives left (or `{}`), else the preset's "
            "name objectives nothing produces, which is refused.", check=some_weight),
    Setting("evaluators", "gate", "str", "",
            "An objective that, when 0, sets every objective to 0 (QuixBugs: syntax)."),
    Setting("evaluators", "options", "table", {},
            "`[evaluators.options.NAME]`: keyword arguments for evaluator NAME."),
    # [search]
    Setting("search", "strategy", "str", "single",
            "`single`, `grid`, `random` or a search plugin's strategy.", fixed=_SEARCH),
    Setting("search", "rank_by", "str", "fitness",
            "What names the best trial: `fitness`, an objective, or `pass@K`.",
            check=_rank_by, fixed=_SEARCH),
    Setting("search", "space", "space", {},
            "`\"section.key\" = [values]` (or `{low, high}` ranges for random): the "
            "dimensions a search varies.", fixed=_SEARCH),
    Setting("search", "budget", "int", 0,
            "Most trials a strategy proposes (at most 100000); 0 = the strategy's default.",
            check=Range(0, MAX_TRIALS, "must be >= 1 (or 0 for the strategy's default)",
                        f"must be at most {MAX_TRIALS} (the most trials a run may have)"),
            fixed=_SEARCH),
    Setting("search", "options", "table", {},
            "Keyword arguments for the strategy's factory.", fixed=_SEARCH),
    Setting("search", "pinned", "list[str]", [],
            "`model.*` keys no trial varies: those a file or flag sets are added (a strategy "
            "with dimensions of its own, such as evolution's genes, keeps them as set).",
            check=_pinned, fixed=_SEARCH),
    # [execution]
    Setting("execution", "executor", "str", "local",
            "`local`, or an executor plugin's (e.g. `ray`). `--executor`.",
            flag="executor", metavar="NAME",
            help="Where work runs: local, or an executor plugin's (config: {key}).",
            fixed=_WHERE),
    Setting("execution", "ray_address", "str", "",
            "Ray cluster address for the ray executor. `--ray-address`.",
            metavar="ADDR",  # the flag is the ray plugin's (coral_register_run_flags)
            help="Ray cluster address, for --executor ray (config: {key}).", fixed=_WHERE),
    Setting("execution", "workers", "int", 0,
            "Sandbox slots running candidates at once (at most 4096); 0 = one per core (with "
            "the ray executor: per node, 0 = the node's CPUs).",
            check=Range(0, 4096, "must be >= 0 (0 = one per core)",
                        "must be at most 4096 (each is a sandbox worker process)"),
            fixed=_RESOURCES),
    Setting("execution", "generation_actors", "int", 0,
            "Ray executor: actors that each hold the model; 0 = one per GPU in the cluster "
            "(one without GPUs). See docs/ray.md.",
            check=Range(0, 4096, "must be in [0, 4096] (0 = one per GPU, or one without "
                        "GPUs)"),
            fixed=_RESOURCES),
    Setting("execution", "evaluation_actors", "int", 0,
            "Ray executor: actors that each hold a sandbox pool; 0 = one per node.",
            check=Range(0, 4096, "must be in [0, 4096] (0 = one per node)"), fixed=_RESOURCES),
    Setting("execution", "parallel_trials", "int", 0,
            "Trials of one search batch run at once when they share a model and scorers; 0 = "
            "the executor's choice (local: 1; ray: two per generation actor).",
            check=Range(0, 4096, "must be in [0, 4096] (0 = the executor's choice)"),
            fixed=_RESOURCES),
    Setting("execution", "test_timeout", "float", 5.0,
            "CPU seconds a test may use (the cap when timeouts are relative).",
            check=Range(0, DAY, f"must be in (0, {DAY}] seconds", open_low=True)),
    Setting("execution", "timeout_factor", "float", 0.0,
            "> 0: each test's timeout is this many times the reference solution's time "
            "(between timeout_floor and test_timeout); 0 = test_timeout for every test.",
            check=Range(0, 1e6, "must be in [0, 1e6] (0 = off)")),
    Setting("execution", "timeout_floor", "float", 0.25,
            "The least a relative timeout may be, in seconds.",
            check=Range(0, DAY, f"must be in (0, {DAY}] seconds", open_low=True)),
    Setting("execution", "memory_mb", "int", 1024,
            "Memory a candidate may use, in MiB.",
            check=Range(64, 2 ** 30, "must be in [64, 2**30]")),
    Setting("execution", "isolation", "str", "auto",
            "`auto` (bubblewrap where installed), `bwrap` (required) or `none`.",
            check=lambda v: v in ("auto", "bwrap", "none") or "must be auto, bwrap or none"),
    # [run]
    Setting("run", "samples", "int", 10,
            "Samples per problem (n of pass@k). `--samples`.",
            check=Range(1, MAX_SAMPLES, f"must be in [1, {MAX_SAMPLES}]"),
            flag="samples", metavar="N", help="Samples per problem (config: {key}).",
            fixed=_RUN),
    Setting("run", "seed", "int", 0,
            "Run seed: each sample's seed derives from (seed, data set, task, sample). "
            "`--seed`.",
            check=Range(0, INT_BOUND - 1, "must be >= 0", "must be at most 2**63 - 1"),
            flag="seed", metavar="S",
            help="Run seed: every sample's seed derives from it (config: {key}, default "
                 "{default}).",
            fixed=_RUN),
    Setting("run", "out", "str", "",
            "The run directory; empty = runs/DATASET-MODEL-TIMESTAMP. `--out`.",
            flag="out", metavar="DIR",
            help="Run directory to create (default: runs/DATASET-MODEL-TIMESTAMP).",
            fixed=_RUN, path=True, relocatable=True),
    Setting("run", "fail_fast", "bool", False,
            "Stop at the first evaluator or lifecycle-hook error instead of recording it "
            "(scored 0, counted in the summary) and going on. `--fail-fast`.",
            flag="fail_fast",
            help="Stop at the first evaluator or hook error instead of recording it and "
                 "going on (config: {key}).",
            fixed=_RUN),
)

BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
BY_FLAG: dict[str, Setting] = {s.flag: s for s in SETTINGS if s.flag}

# The sampling knobs a search tunes (each a key of [model] and a field of SamplingParams),
# in genome order.
SAMPLING_KNOBS: tuple[str, ...] = tuple(
    s.key for s in sorted((s for s in SETTINGS if s.knob and s.per_request and not s.fixed),
                          key=lambda s: s.knob))


def setting(name: str) -> Setting:
    """The setting of a dotted key ('model.temperature')."""
    return BY_NAME[name]


def default(name: str) -> Any:
    """A key's default (a copy: lists and tables are not shared)."""
    return copy.deepcopy(BY_NAME[name].default)


def defaults() -> dict[str, dict[str, Any]]:
    """Every key's default, section by section: what a configuration starts from."""
    result: dict[str, dict[str, Any]] = {}
    for item in SETTINGS:
        result.setdefault(item.section, {})[item.key] = copy.deepcopy(item.default)
    return result


def _shown(value: Any) -> str:
    return str(value)


def flag_help(name: str) -> str:
    """The help text of the flag that sets `name`, its key and default filled in."""
    item = BY_NAME[name]
    if item.help is None:
        raise KeyError(f"{name} has no flag")
    return item.help.format(key=item.name, default=_shown(item.default))


def metavar(name: str) -> str | None:
    """The metavar of the flag that sets `name`."""
    return BY_NAME[name].metavar


def flag_options(name: str) -> dict[str, str]:
    """typer.Option's `help` (and `metavar`, where the flag takes a value) for the flag
    that sets `name`."""
    item = BY_NAME[name]
    options = {"help": flag_help(name)}
    if item.metavar is not None:
        options["metavar"] = item.metavar
    return options
