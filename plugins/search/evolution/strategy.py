"""The `evolution` search strategy: CA-seeded NSGA-II over adapters and sampling knobs.

Generation 0 is seeded by cellular automata (`ca`): each genome's CA seed is drawn from a
generator seeded with the run's seed, the CA runs, and its features set the genes. Every
later generation is bred by Optuna's NSGA-II from everything told so far (`selection`).
A generation is one `ask()`: the genomes' adapters are trained first (one per distinct
heavy-gene set, cached by content), then each distinct configuration becomes one trial; a
genome whose configuration was already evaluated reuses that trial's scores (common random
numbers make a re-run identical) instead of costing a trial. `tell()` applies the
generation's gates and tells NSGA-II.

All state (genomes, scores, adapters, the sampler's random-state digest) is in `state()`;
`restore()` replays it into a fresh Optuna study, so a resumed run continues to the same
front as an uninterrupted one.
"""

from __future__ import annotations

import json
import logging
import statistics
from pathlib import Path
from typing import Any, Mapping, Sequence

from coral_core import plugins
from coral_core.config.blueprints import DatasetBlueprint
from coral_core.config.schema import OptionInvalid
from coral_core.errors import UserError
from coral_core.run.factories import build_dataset, model_entry, parse_model_spec

from . import ca, ledger
from .gates import Gates
from .genome import GeneSpace
from .selection import Selection, hypervolume, non_dominated, replay_mismatch
from .training import AdapterTrainer, training_options

log = logging.getLogger(__name__)

STATE_VERSION = 1
DEFAULT_GATES = {"syntax": [0.0, 0.5]}
# What a search may ask for (docs/evolution.md). Every genome stays in the saved state
# (replayed into Optuna on resume), so the state grows with population x generations.
MAX_POPULATION = 1000  # NSGA-II's non-dominated sort is quadratic in it
MAX_GENERATIONS = 1000
MAX_GENOMES = 10_000  # population x generations
MAX_TOKENS = 10 ** 12  # a stop budget: more than any run generates
MAX_TRAIN_SECONDS = 366 * 86400  # a year


def _evaluator_objectives(config: Mapping[str, Any]) -> list[str]:
    names: list[str] = []
    for evaluator in config["evaluators"]["use"]:
        factory = plugins.registry().get("evaluators", evaluator).factory
        for name in getattr(factory, "objectives", ()) or ():
            if name not in names:
                names.append(name)
    return names


def _integer(name: str, value: Any, least: int, most: int) -> int:
    """An integer option in [least, most]; out of it, one line naming the key and bound."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise OptionInvalid(("search", "options", name),
                            f"[search.options] {name} = {value!r}: must be an integer >= {least}")
    if value > most:
        raise OptionInvalid(("search", "options", name),
                            f"[search.options] {name} = {value!r}: must be an integer <= {most}")
    return value


def _shaped(name: str, value: Any, kind: type, what: str) -> Any:
    """An option of a given shape (a table, a list of names), or one line naming it."""
    if value is not None and (not isinstance(value, kind) or (
            kind is list and not all(isinstance(item, str) for item in value))):
        raise OptionInvalid(("search", "options", name),
                            f"[search.options] {name} = {value!r}: must be {what}")
    return value


class EvolutionSearch:
    """NSGA-II over genomes; see the module's documentation and docs/evolution.md."""

    @staticmethod
    def report_text(search: Mapping[str, Any]) -> str:
        """The front, per-generation statistics and cost ledger, as `coral report` prints."""
        from .report import report_text

        return report_text(search)

    @staticmethod
    def report_grids(search: Mapping[str, Any]) -> list[Any]:
        """The same as tables (drawn for a terminal, Markdown in a pipe) and lines."""
        from .report import report_grids

        return report_grids(search)

    def __init__(self, population: int = 8, generations: int = 4, seed: int = 0,
                 config: Mapping[str, Any] | None = None,
                 objectives: Sequence[str] | None = None, gates: Any = None,
                 schedule: str = "linear", genes: Mapping[str, Any] | None = None,
                 training: Mapping[str, Any] | None = None,
                 plot_objectives: Sequence[str] | None = None,
                 max_tokens: int = 0, max_train_seconds: float = 0.0) -> None:
        if config is None:
            raise UserError("search strategy 'evolution' needs the run's configuration")
        self.population = _integer("population", population, 2, MAX_POPULATION)
        self.generations = _integer("generations", generations, 1, MAX_GENERATIONS)
        if self.population * self.generations > MAX_GENOMES:
            raise OptionInvalid(("search", "options", "population"), (
                f"[search.options] population x generations = {self.population} x "
                f"{self.generations}: at most {MAX_GENOMES} genomes (each is kept in the "
                "run's saved search state)"))
        self.max_tokens = _integer("max_tokens", max_tokens, 0, MAX_TOKENS)
        if (isinstance(max_train_seconds, bool) or not isinstance(max_train_seconds, (int, float))
                or not 0 <= max_train_seconds <= MAX_TRAIN_SECONDS):
            raise OptionInvalid(("search", "options", "max_train_seconds"), (
                f"[search.options] max_train_seconds = {max_train_seconds!r}: must be a "
                f"number in [0, {MAX_TRAIN_SECONDS}] (0: none)"))
        self.max_train_seconds = float(max_train_seconds)
        self.seed = int(seed)
        _shaped("genes", genes, dict, "a table of genes")
        _shaped("training", training, dict, "a table")
        _shaped("objectives", objectives, list, "a list of objective names")
        _shaped("plot_objectives", plot_objectives, list, "a list of two objective names")

        produced = _evaluator_objectives(config)
        self.objectives = list(objectives) if objectives is not None else produced
        unknown = [name for name in self.objectives if name not in produced]
        if unknown or len(set(self.objectives)) != len(self.objectives) or not self.objectives:
            raise OptionInvalid(("search", "options", "objectives"),
                                f"[search.options] objectives = {list(self.objectives)!r}: name "
                                "distinct objectives the evaluators produce "
                                f"({', '.join(produced)})")
        if gates is None:
            gates = {k: v for k, v in DEFAULT_GATES.items() if k in self.objectives}
        self.gates = Gates.parse(gates, schedule, self.generations, self.objectives)
        self.plot_objectives = list(plot_objectives or self._default_plot())
        if (len(set(self.plot_objectives)) != 2 or len(self.plot_objectives) != 2
                or any(name not in self.objectives for name in self.plot_objectives)):
            raise OptionInvalid(("search", "options", "plot_objectives"),
                                f"[search.options] plot_objectives = {self.plot_objectives!r}: "
                                f"name two different objectives ({', '.join(self.objectives)})")

        model = config["model"]
        backend, target = parse_model_spec(model["spec"])
        factory = model_entry(model).factory
        train = getattr(factory, "train_adapter", None)
        heavy = bool(getattr(factory, "supports_adapters", False)) and callable(train)
        if heavy and model["adapter"]:
            raise UserError(f"[model] adapter = {model['adapter']!r}: the evolution search "
                            "chooses each genome's adapter; leave model.adapter unset")
        dataset = build_dataset(DatasetBlueprint.of(config))
        self.space = _pinned(
            GeneSpace.for_model(backend, factory, heavy, dict(genes or {}), dataset),
            backend, factory, heavy, dict(genes or {}), config, dataset)
        self._check_held_out(dataset, config)
        self.trainer: AdapterTrainer | None = None
        if heavy:
            settings = training_options(dict(training or {}), self.seed)
            self.trainer = AdapterTrainer(train, target, model["options"], settings,
                                          dataset.training_examples)
            self.trainer.check_targets(self.space.target_modules())
        elif training:
            raise OptionInvalid(("search", "options", "training"),
                                f"[search.options.training] is set, but model '{backend}' is "
                                "not trained by the evolution search (it takes no adapters)")

        self.seeds = ca.draw_seeds(self.seed, self.population)
        found = [ca.features(ca.run(ca_seed)) for ca_seed in self.seeds]
        self.initial = list(zip(self.seeds, found, self.space.seed_population(found)))
        self._selection = self._new_selection()
        self._generations: list[dict[str, Any]] = []  # each: genomes, told, rng
        self._keys: dict[str, dict[str, Any]] = {}  # overrides key -> trial, values
        self._adapters: dict[str, dict[str, Any]] = {}  # heavy key -> adapter record
        self._proposed = 0
        self._stopped: str | None = None
        self._run_dir: Path | None = None
        self._report: dict[str, Any] | None = None

    # ----- checks
    def _default_plot(self) -> list[str]:
        preferred = [name for name in ("bugfix", "style") if name in self.objectives]
        rest = [name for name in self.objectives if name not in preferred]
        return (preferred + rest + self.objectives)[:2]

    @staticmethod
    def _check_held_out(dataset: Any, config: Mapping[str, Any]) -> None:
        from coral_core.run.runner import select_tasks

        tasks = select_tasks(dataset, config["dataset"])
        seen = [task.id for task in tasks if task.seen_in_training]
        if seen:
            raise UserError(f"the evolution search scores genomes on held-out problems only, "
                            f"but split '{config['dataset']['split']}' has training problem "
                            f"'{seen[0]}' (use the test split)")
        examples = getattr(dataset, "training_examples", None)
        if callable(examples):
            trained_on = {example.task_id for example in examples()}
            overlap = sorted(trained_on & {task.id for task in tasks})
            if overlap:
                raise UserError(f"problem '{overlap[0]}' is both trained on and scored: "
                                "choose problems outside the training set")

    def probes(self) -> list[tuple[str, dict[str, Any]]]:
        """(label, overrides) for each gene's ends and choices: the runner plans each one
        before the run directory exists, as it does every value of `[search.space]`."""
        found = []
        for gene in self.space.genes:
            if gene.key is None:
                continue
            values = gene.choices if gene.choices is not None else (gene.low, gene.high)
            for value in dict.fromkeys(gene.clean(v) for v in values):
                found.append((f"[search.options.genes] {gene.name} = {value!r}",
                              {gene.key: value}))
        return found

    def _new_selection(self) -> Selection:
        return Selection(self.space.distributions(), self.objectives, self.population,
                         self.seed, gated=bool(self.gates.thresholds))

    # ----- the run directory (for costs)
    def bind(self, run_dir: str | Path) -> None:
        self._run_dir = Path(run_dir)

    def _costs(self) -> dict[int, dict[str, float]]:
        return ledger.trial_costs(self._run_dir) if self._run_dir else {}

    # ----- ask / tell
    def _budget_reason(self) -> str | None:
        if self.max_train_seconds:
            spent = sum(a["seconds"] for a in self._adapters.values())
            if spent >= self.max_train_seconds:
                return (f"max_train_seconds reached after generation {len(self._generations)}"
                        f" ({spent:.1f} s >= {self.max_train_seconds:g} s)")
        if self.max_tokens and self._run_dir is not None:
            spent = sum(ledger.tokens(c) for c in self._costs().values())
            if spent >= self.max_tokens:
                return (f"max_tokens reached after generation {len(self._generations)} "
                        f"({spent} >= {self.max_tokens})")
        return None

    def _ask_genes(self, number: int) -> list[dict[str, Any]]:
        if number == 0:
            asked = self._selection.ask(enqueued=[genes for _, _, genes in self.initial])
        else:
            asked = self._selection.ask(count=self.population)
        return [self.space.clean(params) for params in asked]

    def _adapter(self, genes: Mapping[str, Any], generation: int) -> str | None:
        heavy = self.space.heavy_key(genes)
        if heavy is None or self.trainer is None:
            return None
        if heavy not in self._adapters:
            made = self.trainer.adapter(self.space.adapter_genes(genes))
            self._adapters[heavy] = {"heavy": heavy, "key": made.key, "path": made.path,
                                     "seconds": made.seconds, "trained": made.trained,
                                     "generation": generation}
        return self._adapters[heavy]["path"]

    def ask(self) -> list[dict[str, Any]]:
        while True:
            if self._generations and not self._generations[-1]["told"]:
                raise RuntimeError("evolution: asked again before the generation was told")
            number = len(self._generations)
            if self._stopped or number >= self.generations:
                return []
            if number:
                self._stopped = self._budget_reason()
                if self._stopped:
                    return []
            genomes, proposals = [], []
            for index, genes in enumerate(self._ask_genes(number)):
                adapter = self._adapter(genes, number)
                overrides = self.space.overrides(genes, adapter)
                key = json.dumps(overrides, sort_keys=True)
                genome = {"generation": number, "index": index, "genes": genes,
                          "adapter": adapter, "key": key}
                if number == 0:
                    seed, found, _ = self.initial[index]
                    genome.update(origin="ca", ca=seed.as_dict(), features=found)
                else:
                    genome["origin"] = "nsga2"
                if key in self._keys:
                    genome["reused"] = True
                else:
                    self._keys[key] = {"trial": self._proposed, "values": None}
                    self._proposed += 1
                    proposals.append(overrides)
                genome["trial"] = self._keys[key]["trial"]
                genomes.append(genome)
            self._generations.append({"genomes": genomes, "told": False, "rng": None})
            if proposals:
                return proposals
            self._tell_generation()  # every genome was evaluated before: nothing to run

    def tell(self, results: Sequence[tuple[Mapping[str, Any], Mapping[str, float]]]) -> None:
        for overrides, values in results:
            key = json.dumps(dict(overrides), sort_keys=True)
            if key not in self._keys:
                raise RuntimeError(f"evolution: told about a trial it did not propose: {key}")
            self._keys[key]["values"] = {k: float(v) for k, v in values.items()}
        self._tell_generation()

    def _vector(self, values: Mapping[str, float]) -> list[float]:
        missing = [name for name in self.objectives if name not in values]
        if missing:
            raise UserError(f"the evolution search optimises '{missing[0]}', but the trials "
                            "report no such objective")
        return [float(values[name]) for name in self.objectives]

    def _tell_generation(self) -> None:
        generation = self._generations[-1]
        number = len(self._generations) - 1
        vectors, constraints = [], []
        for genome in generation["genomes"]:
            values = self._keys[genome["key"]]["values"]
            if values is None:
                raise RuntimeError(f"evolution: no result for trial {genome['trial']}")
            vectors.append(self._vector(values))
            limits, reason = self.gates.check(number, values)
            constraints.append(limits)
            genome["gate"] = {"passed": reason is None, "reason": reason}
        self._selection.tell(vectors, constraints)
        generation["told"] = True
        generation["rng"] = self._selection.rng_digest()

    # ----- state
    def state(self) -> dict[str, Any]:
        return {"version": STATE_VERSION, "generations": self._generations,
                "keys": self._keys, "adapters": self._adapters, "proposed": self._proposed,
                "stopped": self._stopped}

    def restore(self, state: Mapping[str, Any]) -> None:
        if state.get("version") != STATE_VERSION:
            raise UserError("cannot resume: the evolution search's saved state has another "
                            "version")
        saved = json.loads(json.dumps(state))
        self._selection = self._new_selection()
        self._keys = saved["keys"]
        self._adapters = saved["adapters"]
        self._proposed = int(saved["proposed"])
        self._stopped = saved["stopped"]
        self._generations = []
        for number, generation in enumerate(saved["generations"]):
            asked = self._ask_genes(number)
            for index, (genes, genome) in enumerate(zip(asked, generation["genomes"])):
                if genes != genome["genes"]:
                    raise replay_mismatch(number, index)
            self._generations.append(generation)
            if generation["told"]:
                self._tell_generation()
                if generation["rng"] != saved["generations"][number]["rng"]:
                    raise UserError("cannot resume the evolution search: the sampler's random "
                                    f"state after generation {number + 1} differs from the "
                                    "saved one (was Optuna upgraded?)")

    # ----- what was found
    def _distinct(self) -> list[dict[str, Any]]:
        """Each distinct evaluated configuration once (its latest genome), trial order."""
        latest: dict[str, dict[str, Any]] = {}
        for generation in self._generations:
            if generation["told"]:
                for genome in generation["genomes"]:
                    latest[genome["key"]] = genome
        return sorted(latest.values(), key=lambda g: g["trial"])

    def _member(self, genome: Mapping[str, Any]) -> dict[str, Any]:
        values = self._keys[genome["key"]]["values"]
        entry = {"trial": genome["trial"], "generation": genome["generation"],
                 "genome": {"genes": genome["genes"], "origin": genome["origin"]},
                 "adapter": genome["adapter"],
                 "overrides": json.loads(genome["key"]),
                 "objectives": {name: values[name] for name in self.objectives},
                 "fitness": values.get("fitness"),
                 "pass_at_k": {k[5:]: v for k, v in values.items() if k.startswith("pass@")},
                 "gate": genome["gate"]}
        if "ca" in genome:
            entry["genome"]["ca"] = genome["ca"]
            entry["genome"]["features"] = genome["features"]
        heavy = self.space.heavy_key(genome["genes"])
        if heavy is not None:
            entry["adapter_key"] = self._adapters[heavy]["key"]
        return entry

    def pareto_front(self) -> tuple[list[dict[str, Any]], bool]:
        """The non-dominated genomes among those that passed their gate (or, when none
        did, among all), and whether the gate applied."""
        distinct = self._distinct()
        passed = [g for g in distinct if g["gate"]["passed"]]
        pool = passed or distinct
        if not pool:
            return [], bool(passed)
        points = [self._vector(self._keys[g["key"]]["values"]) for g in pool]
        mask = non_dominated(points)
        return [self._member(g) for g, keep in zip(pool, mask) if keep], bool(passed)

    def _generation_stats(self, costs: Mapping[int, Mapping[str, float]]) -> list[dict]:
        rows, seen_points, counted = [], [], set()
        for number, generation in enumerate(self._generations):
            if not generation["told"]:
                continue
            genomes = generation["genomes"]
            values = [self._keys[g["key"]]["values"] for g in genomes]
            new = [g for g in genomes if g["trial"] not in counted]
            counted.update(g["trial"] for g in genomes)
            seen_points += [self._vector(self._keys[g["key"]]["values"]) for g in new]
            fitness = [v.get("fitness", 0.0) for v in values]
            spent = ledger.summed([g["trial"] for g in new], costs,
                                  [a for a in self._adapters.values()
                                   if a["generation"] == number])
            rows.append({
                "generation": number, "genomes": len(genomes), "trials": len(new),
                "passed_gate": sum(g["gate"]["passed"] for g in genomes),
                "thresholds": self.gates.at(number),
                "best": {name: max(v[name] for v in values) for name in self.objectives},
                "median": {name: round(statistics.median(v[name] for v in values), 6)
                           for name in self.objectives},
                "best_fitness": max(fitness), "median_fitness": round(
                    statistics.median(fitness), 6),
                "hypervolume": hypervolume(seen_points),
                "cost": spent,
            })
        return rows

    @staticmethod
    def _listed(genome: Mapping[str, Any]) -> dict[str, Any]:
        fields = ("generation", "index", "trial", "origin", "genes", "adapter", "gate")
        entry = {name: genome.get(name) for name in fields}
        if genome.get("reused"):
            entry["reused"] = True  # its configuration was evaluated before: no new trial
        return entry

    def summary(self) -> dict[str, Any]:
        costs = self._costs()
        front, gated = self.pareto_front()
        distinct = self._distinct()
        adapters = list(self._adapters.values())
        total = ledger.summed([g["trial"] for g in distinct], costs, adapters)
        front_adapters = [self._adapters[h] for h in {self.space.heavy_key(m["genome"]["genes"])
                                                      for m in front} if h is not None]
        report = {
            "strategy": "evolution", "seed": self.seed, "population": self.population,
            "generations": self.generations, "objectives": self.objectives,
            "gates": {"schedule": self.gates.schedule,
                      "thresholds": {k: list(v) for k, v in self.gates.thresholds.items()}},
            "stopped": self._stopped,
            "pareto_front": front,
            "front_passed_gate": gated,
            "per_generation": self._generation_stats(costs),
            "genomes": [self._listed(g) for gen in self._generations for g in gen["genomes"]],
            "adapters": adapters,
            "ledger": {"search": total,
                       "front": ledger.summed([m["trial"] for m in front], costs,
                                              front_adapters),
                       "measured": self._run_dir is not None},
        }
        self._report = report
        return report

    def write_artifacts(self, run_dir: str | Path) -> None:
        from .plots import generations_plot, pareto_plot

        run_dir = Path(run_dir)
        if self._run_dir is None:
            self.bind(run_dir)
        report = self.summary()
        members = {m["trial"] for m in report["pareto_front"]}
        genomes = [self._member(g) for g in self._distinct()]
        x, y = self.plot_objectives
        pareto_plot(run_dir / "pareto.png", genomes, members, x, y)
        if report["per_generation"]:
            generations_plot(run_dir / "generations.png", report["per_generation"],
                             self.objectives)


def _pinned(space: GeneSpace, backend: str, factory: Any, heavy: bool,
            genes: dict[str, Any], config: Mapping[str, Any], dataset: Any) -> GeneSpace:
    """The space with each gene whose key the user set (`search.pinned`, from a file or a
    flag) held at that value, unless [search.options.genes] gives its range: a flag is not
    silently outvoted by the search."""
    pinned = set(config.get("search", {}).get("pinned", ()))
    held = {}
    for gene in space.genes:
        if gene.key in pinned and gene.name not in genes:
            value: Any = config
            for part in gene.key.split("."):
                value = value.get(part) if isinstance(value, Mapping) else None
            if value is not None:
                held[gene.name] = [value]
                log.warning("%s is set explicitly, so the evolution search does not vary it",
                            gene.key)
    if not held:
        return space
    try:
        return GeneSpace.for_model(backend, factory, heavy, {**genes, **held}, dataset)
    except OptionInvalid as error:  # the user's value, not a [search.options.genes] range
        key = next(g.key for g in space.genes if g.name == error.path[-1])
        raise UserError(f"{key} = {held[error.path[-1]][0]!r} is set explicitly, so the "
                        f"evolution search holds its gene '{error.path[-1]}' there, but "
                        f"{str(error).split(': ', 2)[-1]}") from None
