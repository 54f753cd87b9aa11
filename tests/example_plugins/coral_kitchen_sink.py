"""A third-party plugin that implements every Coral hook (for the hook tests).

Every hook implementation appends its name to $KITCHEN_HOOKS when it runs, so a test
can tell which hooks Coral really called; events go to $KITCHEN_EVENTS.
"""
import json
import os
from concurrent.futures import Future

import typer

from coral_core import plugins
from coral_core.extract import extract_python
from coral_core.hookspecs import hookimpl
from coral_core.scoring.program_tests import Case, ExecutionSpec, Expect, Step
from coral_core.types import Evaluation, Generation, Prompt, RunFlag, Success, Task

PROBLEMS = {"double": [(1, 2), (4, 8), (-3, -6)], "square": [(2, 4), (3, 9), (-1, 1)]}


class Arithmetic:
    name = "arith"
    splits = ("all",)
    description = "two toy problems"

    def __init__(self, data_dir=None):
        self.data_dir = data_dir

    def tasks(self, split, problems=()):
        names = list(problems) or sorted(PROBLEMS)
        return [
            Task(id=name, dataset="arith", split="all",
                 prompt=Prompt(instruction=f"Write {name}(x).\n```python\n"),
                 success=Success("bugfix", 1.0),
                 reference=f"def {name}(x):\n    return x * 2\n",
                 execution=ExecutionSpec(module=name, cases=tuple(
                     Case(f"{name}[{i}]", Step(call=name, args=(a,)), (Expect("eq", b),))
                     for i, (a, b) in enumerate(PROBLEMS[name]))),
                 metadata={"entry_point": name})
            for name in names
        ]

    def extract_code(self, task, text):
        return extract_python(text, task.id)


class Doubler:
    """Answers every prompt with a doubling function: right for double only."""
    name = "doubler"

    def __init__(self, target=""):
        self.target = target

    def generate(self, requests):
        out = []
        for request in requests:
            name = request.prompt.instruction.split()[1].split("(")[0]
            text = f"def {name}(x):\n    return x * 2  # t={request.params.temperature}\n```"
            out.append([Generation(text)] * request.params.n)
        return out


class Length:
    name = "length"
    objectives = ("shortness",)

    def evaluate(self, candidate, context):
        return Evaluation({"shortness": 1.0 / max(1, len(candidate.code.splitlines()))})


class TwoTemperatures:
    def __init__(self, temperatures=(0.1, 0.9), hottest=None):
        if hottest is not None:  # `coral run --hottest T` (coral_register_run_flags)
            temperatures = (temperatures[0], hottest)
        self.pending = [list(temperatures)]
        self.told = []

    def ask(self):
        if not self.pending:
            return []
        return [{"model": {"temperature": t}} for t in self.pending.pop()]

    def tell(self, results):
        self.told.extend(results)
        _event("tell", count=len(results),
               fitness=[round(r[1]["fitness"], 6) for r in results])


class Inline:
    """An executor that finishes each evaluation job before `submit` returns; it hands
    the work to the built-in `local` executor (found through the registry), and passes
    on any other method the runner uses."""
    name = "inline"

    def __init__(self, settings):
        self.settings = dict(settings)
        self.inner = plugins.registry().get("executors", "local").factory(self.settings)
        self.closed = False

    def __getattr__(self, name):
        if "inner" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.__dict__["inner"], name)

    def generate(self, model, requests):
        _event("executor", call="generate", requests=len(requests))
        return self.inner.generate(model, requests)

    def submit(self, scoring, task, text, extract=True):
        _event("executor", call="submit", task=task.id)
        done = Future()
        try:
            done.set_result(self.inner.submit(scoring, task, text, extract).result())
        except BaseException as error:
            done.set_exception(error)
        return done

    def cancel(self):
        self.inner.cancel()

    def close(self):
        self.closed = True
        self.inner.close()


def _called(hook):
    path = os.environ.get("KITCHEN_HOOKS")
    if path:
        with open(path, "a") as handle:
            handle.write(hook + "\n")


def _event(event, **fields):
    path = os.environ.get("KITCHEN_EVENTS")
    if path:
        with open(path, "a") as handle:
            handle.write(json.dumps({"event": event, **fields}) + "\n")


@hookimpl
def coral_register_datasets(register):
    _called("coral_register_datasets")
    register("arith", Arithmetic)


@hookimpl
def coral_register_models(register):
    _called("coral_register_models")
    register("doubler", Doubler)


@hookimpl
def coral_register_evaluators(register):
    _called("coral_register_evaluators")
    register("length", Length)


@hookimpl
def coral_register_search_strategies(register):
    _called("coral_register_search_strategies")
    register("two-temperatures", TwoTemperatures)


@hookimpl
def coral_register_executors(register):
    _called("coral_register_executors")
    register("inline", Inline)


@hookimpl
def coral_register_experiments(register):
    _called("coral_register_experiments")
    register("arith", {
        "dataset": {"name": "arith", "split": "all"},
        "model": {"spec": "doubler"},
        "evaluators": {"use": ["tests", "length"], "weights": {"bugfix": 1.0}},
        "search": {"strategy": "two-temperatures"},
        "execution": {"executor": "inline"},
        "run": {"samples": 2},
    })


@hookimpl
def coral_register_run_flags(register):
    _called("coral_register_run_flags")
    register("hottest", RunFlag(("search", "options", "hottest"), float, metavar="T",
                                help="The second trial's temperature."))


@hookimpl
def coral_register_commands(cli):
    _called("coral_register_commands")

    @cli.command("kitchen")
    def kitchen(dish: str = typer.Option("soup", "--dish", help="What to serve.")):
        """Serve a dish (a plugin's own command)."""
        print(f"the kitchen serves {dish}")


@hookimpl
def coral_run_started(run):
    _called("coral_run_started")
    _event("started", run_dir=str(run.run_dir), resumed=run.resumed,
           split=run.config["dataset"]["split"])


@hookimpl
def coral_record_written(run, kind, record):
    _called("coral_record_written")
    _event("record", kind=kind, task=record.task_id, sample=record.sample, trial=record.trial)


@hookimpl
def coral_run_finished(run, summary):
    _called("coral_run_finished")
    _event("finished", fixed=summary["fixed"], objectives=sorted(summary["objectives"]))
