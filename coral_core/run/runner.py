"""A run: a search strategy proposes trials, each runs with its own resolved configuration,
and the summary names every trial and the best.

Everything a user can get wrong is checked by `check_run` before the run directory
exists. The strategy's state is saved in the store after every ask and every tell, so a
resumed run continues the same search: no finished trial or sample is redone.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from coral_core import __version__, plugins
from coral_core.config import experiment as configuration
from coral_core.config.launch import placed
from coral_core.config.blueprints import DatasetBlueprint, ModelBlueprint, ScoringBlueprint
from coral_core.config.schema import MAX_BATCH, MAX_TRIALS, OptionInvalid
from coral_core.files.decoding import json_value
from coral_core.errors import UserError
from coral_core.run.factories import (build_dataset, build_evaluators, build_executor,
                                      builds_models_here, check_executor, check_model,
                                      check_scoring, check_split, check_tasks, model_entry)
from coral_core.protocols import Dataset, Executor, SearchStrategy
from coral_core.run.rundir import SUMMARY_FILE, RunInfo
from coral_core.files.atomic import write_text_atomic
from coral_core.results.heatmap import write_heatmap
from coral_core.run.lifecycle import Lifecycle, hook_errors
from coral_core.config.options import accepts, check_table
from coral_core.results.paired import ranking_figure, runner_up_comparison
from coral_core.run.store import RunStore, RunStoreError, TrialRecord
from coral_core.suggest import did_you_mean
from coral_core.run.trial import (NoProgress, Progress, SharedProgress, TrialPlan, TrialRun,
                                  unchanged_tasks)
from coral_core.types import Task


class Interrupted(Exception):
    """Ctrl-C: work in flight was abandoned; the run can be resumed."""

    def __init__(self, run_dir: str):
        super().__init__(run_dir)
        self.run_dir = run_dir


def _nowhere(path: tuple[str, ...]) -> str:
    return ""


# Where a strategy's given arguments come from: each is checked there (`config.schema`).
GIVEN = {"space": "[search] space", "seed": "[run] seed", "budget": "[search] budget",
         "config": "the run's configuration"}


def build_strategy(config: Mapping[str, Any],
                   where: Callable[[tuple[str, ...]], str] = _nowhere) -> SearchStrategy:
    """The configured strategy; an option out of its bounds (`OptionInvalid`) is reported
    at the file and line (or the flag) that set it."""
    section = config["search"]
    name = section["strategy"]
    try:  # said at the file and line that named it, as the other keys are
        factory = plugins.registry().get("search_strategies", name).factory
    except UserError as error:
        raise placed(OptionInvalid(("search", "strategy"), str(error)), where) from None
    options = dict(section["options"])
    for key in options:
        if key in GIVEN:  # it would bypass the checks of the key that sets it
            at = where(("search", "options", key))
            raise UserError(f"{at + ': ' if at else ''}[search.options] {key} is not an "
                            f"option: it is set by {GIVEN[key]}")
    given = {"space": section["space"], "seed": config["run"]["seed"],
             "budget": section["budget"], "config": config}
    for key, value in given.items():
        if accepts(factory, key):
            options.setdefault(key, value)
    if section["space"] and not accepts(factory, "space"):
        raise placed(OptionInvalid(("search", "space"), (
            f"[search.space] is set, but search strategy '{name}' takes no space (use "
            "strategy = \"grid\" or \"random\")")), where)
    try:  # the user's options (an OptionInvalid names the file and line), then the call
        check_table(factory, f"search strategy '{name}'", section["options"],
                    ("search", "options"))
        return plugins.instantiate(factory, f"search strategy '{name}'", **options)
    except OptionInvalid as error:
        raise placed(error, where) from None


class Planner:
    """Resolves a trial's overrides into its configuration, tasks and blueprints, and
    checks them; data sets are built once per distinct data set section. `where(path)`
    names where a key was set ('FILE (line N)'), for errors found only now that the data
    set is known (a split it does not have). `models_here`: whether the executor builds
    models on this machine (the model's checks of devices and files are for that one);
    where it does not, `judged_elsewhere` collects each model section an override gave,
    with the override, for the executor to judge where models are built, until `prepare`
    takes them (`take_judged_elsewhere`); a trial's own value is judged at its trial."""

    def __init__(self, base: Mapping[str, Any], hidden: Sequence[str] = (),
                 where: Callable[[tuple[str, ...]], str] = _nowhere,
                 models_here: bool = True):
        self.base = base
        self.models_here = models_here
        self.hidden = tuple(hidden)
        self.where = where
        self._datasets: dict[str, Dataset] = {}
        self._tasks: dict[str, tuple[Task, ...]] = {}
        self._checked: set[str] = set()
        self.judged_elsewhere: list[tuple[str, dict[str, Any]]] = []
        self._collecting = not models_here

    def dataset(self, blueprint: DatasetBlueprint) -> Dataset:
        if blueprint.digest not in self._datasets:
            try:
                self._datasets[blueprint.digest] = build_dataset(blueprint)
            except OptionInvalid as error:
                raise placed(error, self.where) from None
        return self._datasets[blueprint.digest]

    def tasks(self, config: Mapping[str, Any]) -> tuple[Task, ...]:
        blueprint = DatasetBlueprint.of(config)
        if blueprint.digest not in self._tasks:
            self._tasks[blueprint.digest] = select_tasks(self.dataset(blueprint),
                                                         config["dataset"], self.where)
        return self._tasks[blueprint.digest]

    def plan(self, number: int, overrides: Mapping[str, Any]) -> TrialPlan:
        config = configuration.resolve(self.base, overrides) if overrides else dict(self.base)
        tasks = self.tasks(config)
        model = ModelBlueprint.of(config)
        scoring = ScoringBlueprint.of(config, self.hidden)
        model_key = f"{model.digest}/{config['model']['adapter']}"
        key = f"{scoring.digest}/{DatasetBlueprint.of(config).digest}"
        try:
            if model_key not in self._checked:
                check_model(config["model"], here=self.models_here)
                self._checked.add(model_key)
                if overrides and self._collecting:
                    said = ", ".join(f"{k} = {json.dumps(v)}" for k, v in overrides.items())
                    self.judged_elsewhere.append((said, copy.deepcopy(config["model"])))
            if key not in self._checked:
                check_scoring(scoring, tasks)
                self._checked.add(key)
        except OptionInvalid as error:  # say which file and line set the key
            raise placed(error, self.where) from None
        return TrialPlan(number, dict(overrides), config, tasks, model, scoring)

    def take_judged_elsewhere(self) -> list[tuple[str, dict[str, Any]]]:
        """The model sections collected so far; none are collected afterwards (a run's
        trials would otherwise grow the list with every adapter an evolution makes)."""
        taken, self.judged_elsewhere, self._collecting = self.judged_elsewhere, [], False
        return taken


@dataclass
class PreparedRun:
    """A run's strategy, planner and executor, built and checked before the run directory
    exists; the executor already holds the base configuration's model and scorers."""

    config: Mapping[str, Any]
    strategy: SearchStrategy
    planner: Planner
    executor: Executor

    def close(self) -> None:
        self.executor.close()


def select_tasks(dataset: Dataset, section: Mapping[str, Any],
                 where: Callable[[tuple[str, ...]], str] = _nowhere) -> tuple[Task, ...]:
    """The tasks a `[dataset]` section selects: its split (one the data set has), its
    problems (each one the data set gave), then the first `limit` of them."""
    split, problems = section["split"], list(section["problems"])
    check_split(dataset, section["name"], split, where)
    tasks = list(dataset.tasks(split, problems))
    check_tasks(section["name"], tasks)
    missing = [p for p in problems if p not in {t.id for t in tasks}]
    if missing:
        at = where(("dataset", "problems"))
        raise UserError(f"{at + ': ' if at else ''}data set '{section['name']}' gave no task "
                        f"'{missing[0]}' for split '{split}'"
                        f"{did_you_mean(missing[0], [t.id for t in tasks])}")
    if section["limit"]:
        tasks = tasks[:section["limit"]]
    if not tasks:
        raise UserError(f"data set '{section['name']}' gave no tasks for split '{split}'")
    return tuple(tasks)


def prepare(config: Mapping[str, Any], run_dir: Path,
            where: Callable[[tuple[str, ...]], str] = _nowhere) -> PreparedRun:
    """Refuse what would fail: the executor, the strategy and its space, the data set and
    its tasks, the model and evaluators of the base configuration (built now), and every
    value of the search space on its own (checked without building)."""
    planner, strategy = check_run(config, run_dir, where)
    executor = build_executor(config["execution"])
    base = planner.plan(0, {})
    try:
        adapter = config["model"]["adapter"]
        executor.prepare(base.model, base.scoring, (adapter,) if adapter else ())
        judge = getattr(executor, "check_models", None)
        sections = planner.take_judged_elsewhere()
        if sections and callable(judge):  # before the run, not at its trial
            judge(sections)
    except BaseException:
        executor.close()
        raise
    return PreparedRun(config, strategy, planner, executor)


def check_run(config: Mapping[str, Any], run_dir: Path,
              where: Callable[[tuple[str, ...]], str] = _nowhere,
              ) -> tuple[Planner, SearchStrategy]:
    """Everything `prepare` checks that builds nothing heavy (no model, no sandbox): the
    executor's name, the strategy (and the bounds of what it may ask for), the tasks, the
    model's options, the evaluators, every search-space value and each value a strategy's
    `probes()` names. `coral run --dry-run` stops here."""
    try:
        check_executor(config["execution"])
    except OptionInvalid as error:
        raise placed(error, where) from None
    strategy = build_strategy(config, where)
    planner = Planner(config, hidden=(str(Path(run_dir).absolute()),), where=where,
                      models_here=builds_models_here(config["execution"]))
    base = planner.plan(0, {})
    _check_rank_by(config)
    answers = getattr(model_entry(config["model"]).factory, "check_tasks", None)
    if callable(answers):  # tasks the model cannot answer (no reference to give...)
        answers(base.tasks)
    # A value's error is the value's, not the line of the base file it overrides (a FIM
    # template in the space was said at the [model.options] of the file).
    planner.where = _nowhere
    try:
        for key, values in config["search"]["space"].items():
            for value in _probe_values(values):
                try:
                    planner.plan(0, {key: value})
                except UserError as error:
                    raise UserError(f"[search.space] {key} = {json.dumps(value)}: "
                                    f"{error}") from None
        probes = getattr(strategy, "probes", None)  # values a strategy may propose, labelled
        for label, overrides in (probes() if callable(probes) else ()):
            try:
                planner.plan(0, overrides)
            except UserError as error:
                raise UserError(f"{label}: {error}") from None
    finally:
        planner.where = where
    return planner, strategy


def _check_rank_by(config: Mapping[str, Any]) -> None:
    """`rank_by` names what the trials will have: a bad one was found only when the
    finished run was summarised, which then failed for good (a red-team pass)."""
    rank_by, space = config["search"]["rank_by"], config["search"]["space"]
    if rank_by == "fitness":
        return
    if rank_by.startswith("pass@"):
        k, samples = int(rank_by[len("pass@"):]), config["run"]["samples"]
        if "run.samples" not in space and k > samples:
            raise UserError(f"[search] rank_by = '{rank_by}' needs at least {k} samples per "
                            f"problem; the run takes {samples} (--samples)")
        return
    if any(key.startswith("evaluators.") for key in space):
        return  # the trials' objectives differ: each is ranked by what it has
    names = sorted({name for evaluator in build_evaluators(config["evaluators"])
                    for name in evaluator.objectives})
    if rank_by not in names:
        raise UserError(f"[search] rank_by = '{rank_by}' names no objective of the evaluators "
                        f"in use ({', '.join(names)}), nor fitness or pass@K")


def _probe_values(values: Any) -> list[Any]:
    if isinstance(values, list):
        return values
    if "choices" in values:
        return list(values["choices"])
    return [values[end] for end in ("low", "high") if end in values]


def execute(info: RunInfo, session: PreparedRun, progress: Progress | None = None,
            ) -> dict[str, Any]:
    """Run (or continue) the run in `info.run_dir` to the end; return the summary."""
    progress = progress or NoProgress()
    config = info.config
    store = RunStore.in_run(info.run_dir)
    try:
        lifecycle = Lifecycle(store, config["run"]["fail_fast"])
        lifecycle.notify("coral_run_started", run=info)
        bind = getattr(session.strategy, "bind", None)
        if callable(bind):  # a strategy that reads its run's records (costs) learns where
            bind(info.run_dir)
        _search(info, session, store, progress, lifecycle)
        summary = build_summary(info, store.trials(), config["search"]["rank_by"],
                                hook_errors=hook_errors(store))
        artifacts = getattr(session.strategy, "write_artifacts", None)
        if callable(artifacts):  # plots and the like, beside summary.json
            artifacts(info.run_dir)
        summary["heatmap"] = write_heatmap(info.run_dir, summary)
        report = getattr(session.strategy, "summary", None)
        if callable(report):  # what the strategy found (a Pareto front, a cost ledger...)
            summary["search"] = report()
        write_text_atomic(info.run_dir / SUMMARY_FILE, json.dumps(summary, indent=2) + "\n")
        # A copy: a hook that edited the summary changed what was printed, not the file
        # (a red-team plugin); a hook that raises is counted like any other, and with
        # --fail-fast the run is left unfinished, to resume.
        lifecycle.notify("coral_run_finished", run=info, summary=copy.deepcopy(summary))
        if hook_errors(store) != summary["hook_errors"]:
            summary["hook_errors"] = hook_errors(store)
            write_text_atomic(info.run_dir / SUMMARY_FILE,
                              json.dumps(summary, indent=2) + "\n")
        store.set_meta("status", "finished")
        return summary
    except KeyboardInterrupt:
        with _deaf_to_interrupts():  # a second ^C (or one a wrapper forwards) must not cut
            store.set_meta("status", "interrupted")  # this short cleanup off half-way
            session.executor.cancel()
        raise Interrupted(str(info.run_dir)) from None
    finally:
        store.close()


@contextlib.contextmanager
def _deaf_to_interrupts() -> Iterator[None]:
    """SIGINT and SIGTERM ignored for a moment (main thread only: elsewhere Python cannot
    set handlers, and no signal lands there anyway)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {number: signal.signal(number, signal.SIG_IGN)
             for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in saved.items():
            signal.signal(number, handler)


def _strategy_state(strategy: SearchStrategy, told: int) -> str:
    state = strategy.state() if hasattr(strategy, "state") else None
    try:
        return json.dumps({"state": state, "told": told})
    except (TypeError, ValueError) as error:
        raise UserError(f"search strategy {type(strategy).__name__}'s state() is not JSON "
                        f"data ({error}); a run keeps it to resume (docs/plugins.md)") from None


def _search(info: RunInfo, session: PreparedRun, store: RunStore, progress: Progress,
            lifecycle: Lifecycle) -> None:
    strategy, planner = session.strategy, session.planner
    where = f"{store.path}: the saved search state"
    saved = json_value(store.meta("strategy") or "null", where)
    told = -1
    if saved is not None:
        batches = max((t.batch for t in store.trials()), default=-1)
        if (not isinstance(saved, dict) or set(saved) != {"told", "state"}
                or not isinstance(saved["told"], int) or isinstance(saved["told"], bool)
                or not -1 <= saved["told"] <= batches):
            raise RunStoreError(f"{where} has the wrong shape; the store is damaged")
        told = saved["told"]
        if saved["state"] is not None and hasattr(strategy, "restore"):
            try:
                strategy.restore(saved["state"])
            except (TypeError, KeyError, ValueError, AttributeError, IndexError) as error:
                raise RunStoreError(f"{where} cannot be restored ({type(error).__name__}: "
                                    f"{error}); the store is damaged") from None
    while True:
        trials = store.trials()
        batch_number = max((t.batch for t in trials), default=-1)
        if batch_number <= told:  # every batch asked so far was told: ask again
            proposals = strategy.ask()
            name = info.config["search"]["strategy"]
            if not proposals:
                if not trials:  # a run of no trials has no summary to give (a red-team
                    raise UserError(f"search strategy '{name}' proposed no trials")  # plugin)
                break
            if not isinstance(proposals, (list, tuple)) or not all(
                    isinstance(p, Mapping) for p in proposals):
                raise UserError(f"search strategy '{name}' proposed {type(proposals).__name__}"
                                " from ask(), not a list of override tables (docs/plugins.md)")
            _check_proposals(name, len(proposals), len(trials))
            batch_number += 1
            first = len(trials)
            plans = [planner.plan(first + i, p) for i, p in enumerate(proposals)]
            store.add_trials(batch_number, [
                (plan.number, dict(plan.overrides), configuration.digest(plan.config))
                for plan in plans], _strategy_state(strategy, told))
            trials = store.trials()
        batch = [t for t in trials if t.batch == batch_number]
        _run_batch(info, session, store, progress, lifecycle,
                   [t for t in batch if t.status != "finished"])
        results = [t for t in store.trials() if t.batch == batch_number]
        strategy.tell([(t.overrides, _told_values(t.result or {})) for t in results])
        told = batch_number
        store.set_meta("strategy", _strategy_state(strategy, told))


def _planned(info: RunInfo, planner: Planner, trial: TrialRecord) -> TrialPlan:
    plan = planner.plan(trial.trial, trial.overrides)
    if configuration.digest(plan.config) != trial.config_digest:
        raise UserError(f"{info.run_dir}: trial {trial.trial} resolves to another "
                        "configuration than it ran with; it cannot be resumed")
    return plan


def check_resume(info: RunInfo, session: PreparedRun) -> None:
    """What a resume's trials would refuse, checked before it records anything (a new
    --data-dir in config.toml): a refused resume changes nothing (a red-team pass found
    the relocation kept, and every later resume failing on it)."""
    store = RunStore.in_run(info.run_dir)
    try:
        for trial in store.trials():
            if trial.status != "finished":
                unchanged_tasks(store, info.run_dir, _planned(info, session.planner, trial))
    finally:
        store.close()


def _check_proposals(name: str, count: int, before: int) -> None:
    """A strategy (a plugin's, say) that asks for more than a run may hold is stopped with
    one line, before its proposals are planned or stored."""
    if count > MAX_BATCH:
        raise UserError(f"search strategy '{name}' proposed {count} trials at once: at most "
                        f"{MAX_BATCH} per batch")
    if before + count > MAX_TRIALS:
        raise UserError(f"search strategy '{name}' proposed {before + count} trials in all: a "
                        f"run has at most {MAX_TRIALS}")


def _run_batch(info: RunInfo, session: PreparedRun, store: RunStore, progress: Progress,
               lifecycle: Lifecycle, todo: Sequence[TrialRecord]) -> None:
    """Run a batch's unfinished trials: one after another, or several at once where the
    executor can (`parallel_trials`, Ray) and they share one model and one scorer set (a
    grid over sampling knobs, a generation's adapters), so no trial's components replace
    another's mid-work. Each trial's records are the same either way."""
    executor = session.executor
    plans = [_planned(info, session.planner, trial) for trial in todo]
    width = min(len(plans), max(1, int(getattr(executor, "parallel_trials", 1) or 1)))
    if width > 1 and len({(p.model.digest, p.scoring.digest) for p in plans}) > 1:
        width = 1
    label = getattr(progress, "label", None)  # which trials a progress line is about
    several = len(store.trials()) > 1
    if width <= 1:
        for plan in plans:
            if callable(label) and several:
                label(f"trial {plan.number}")
            _run_trial(info, plan, store, executor, progress, lifecycle)
        return
    if callable(label):
        label(f"trials {plans[0].number}-{plans[-1].number}")
    shared = SharedProgress(progress)
    pool = ThreadPoolExecutor(width, thread_name_prefix="coral-trial")
    try:
        futures = [pool.submit(_run_trial, info, plan, store, executor, shared, lifecycle)
                   for plan in plans]
        failed: BaseException | None = None
        for future in futures:
            try:
                future.result()
            except Exception as error:  # the first failure is reported, after the rest
                failed = failed or error
        if failed is not None:
            raise failed
    finally:  # Ctrl-C: do not wait for trials in flight (the executor is cancelled next)
        pool.shutdown(wait=False, cancel_futures=True)


def _run_trial(info: RunInfo, plan: TrialPlan, store: RunStore, executor: Executor,
               progress: Progress, lifecycle: Lifecycle) -> None:
    try:
        result = TrialRun(plan, store, executor, info, progress, lifecycle).run()
    except RunStoreError:
        raise
    except UserError as error:  # recorded; the run stops, and a resume retries it
        store.finish_trial(plan.number, "failed", None, str(error))
        raise UserError(f"trial {plan.number} failed: {error} (fix the cause, then "
                        f"'coral run --resume {info.run_dir}')") from None
    store.finish_trial(plan.number, "finished", result)


def _told_values(result: Mapping[str, Any]) -> dict[str, float]:
    values = dict(result.get("objectives", {}))
    values["fitness"] = result.get("fitness", 0.0)
    for k, v in result.get("pass_at_k", {}).items():
        values[f"pass@{k}"] = v
    return values


def rank_value(result: Mapping[str, Any] | None, rank_by: str) -> float | None:
    return ranking_figure(result, rank_by) if result else None


def build_summary(info: RunInfo, trials: Sequence[TrialRecord], rank_by: str,
                  partial: bool = False, hook_errors: int = 0, status: str = "finished",
                  ) -> dict[str, Any]:
    """Every trial, the best by `rank_by` (ties: the earlier trial), and the best trial's
    per-problem results at the top level (for a single configuration: its only one).
    Only finished trials are ranked; `partial` (an unfinished run's report): with none
    finished yet, the top level shows what a lone trial holds so far, and names no best.
    `hook_errors` counts lifecycle hook calls that raised; `status` is the run's."""
    config = info.config
    rows = []
    for trial in trials:
        result = trial.result or {}
        row: dict[str, Any] = {"trial": trial.trial, "overrides": trial.overrides,
                               "status": trial.status}
        for key in ("objectives", "fitness", "pass_at_k", "fixed", "errors"):
            if key in result:
                row[key] = result[key]
        if trial.error:
            row["error"] = trial.error
        rows.append(row)
    ranked = [(rank_value(t.result, rank_by), t) for t in trials if t.status == "finished"]
    ranked = [(v, t) for v, t in ranked if v is not None]
    if not ranked and any(t.status == "finished" for t in trials):
        raise UserError(f"[search] rank_by = '{rank_by}' names no objective the trials have")
    ranked.sort(key=lambda pair: (-pair[0], pair[1].trial))
    best = ranked[0][1] if ranked else None
    best_config = (configuration.resolve(config, best.overrides) if best and best.overrides
                   else config)
    shown = best or (trials[0] if partial and len(trials) == 1 else None)
    result = dict(shown.result) if shown and shown.result else {"problems": []}
    sandboxed = result.pop("sandboxed", None)
    return {
        "run_dir": os.path.abspath(info.run_dir),
        "status": status,
        "model": best_config["model"]["spec"],
        "dataset": best_config["dataset"]["name"],
        "split": best_config["dataset"]["split"],
        "samples": best_config["run"]["samples"],
        "seed": best_config["run"]["seed"],
        **result,
        "trials": rows,
        "best": {"trial": best.trial, "overrides": best.overrides, "rank_by": rank_by,
                 "value": rank_value(best.result, rank_by),
                 "runner_up": runner_up_comparison(ranked, rank_by, config["run"]["seed"]),
                 } if best else None,
        "sandboxed": sandboxed,
        "hook_errors": hook_errors,
        "coral_version": __version__,
    }
