"""Real third-party plugin distributions for tests: dist-info metadata with entry points.

`importlib.metadata` finds them on sys.path exactly as it finds a pip-installed package,
so Coral's entry-point discovery is exercised for real (no monkeypatched registry).
"""

from __future__ import annotations

import textwrap
from pathlib import Path


def make_distribution(root: Path, name: str, modules: dict[str, str],
                      entry_points: dict[str, str], version: str = "0.1.0") -> Path:
    """Write `modules` (module name -> source) and NAME-VERSION.dist-info into `root`."""
    root.mkdir(parents=True, exist_ok=True)
    for module, source in modules.items():
        (root / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    info = root / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8")
    lines = ["[coral]"] + [f"{ep} = {target}" for ep, target in entry_points.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (info / "RECORD").write_text("", encoding="utf-8")
    return root


ECHO_MODEL = '''
    """A deterministic test model: the buggy program from the prompt, marked with its seed.

    `delay` (seconds per request) lets a test kill a run part-way.
    """
    import random
    import re
    import time

    from coral_core.hookspecs import hookimpl
    from coral_core.types import Generation

    class EchoModel:
        name = "echo"

        def __init__(self, target="", delay=0.0):
            self.delay = float(delay)

        def generate(self, requests):
            results = []
            for request in requests:
                time.sleep(self.delay)
                text = request.prompt.instruction
                code = re.search(r"```python\\n(.*?)```", text, re.S).group(1)
                rng = random.Random(request.params.seed)
                variant = rng.randint(0, 9)
                if variant == 0:
                    code = "def broken(:\\n"
                results.append([Generation(code + f"\\n# variant {variant}\\n```\\n",
                                           prompt_tokens=len(text),
                                           completion_tokens=len(code), seconds=self.delay)])
            return results

    @hookimpl
    def coral_register_models(register):
        register("echo", EchoModel)
'''


def echo_model_distribution(root: Path) -> Path:
    return make_distribution(root, "coral-echo-model", {"coral_echo_model": ECHO_MODEL},
                             {"echo": "coral_echo_model"})


KITCHEN_SINK = '''
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
                     prompt=Prompt(instruction=f"Write {name}(x).\\n```python\\n"),
                     success=Success("bugfix", 1.0),
                     reference=f"def {name}(x):\\n    return x * 2\\n",
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
                text = f"def {name}(x):\\n    return x * 2  # t={request.params.temperature}\\n```"
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
                handle.write(hook + "\\n")


    def _event(event, **fields):
        path = os.environ.get("KITCHEN_EVENTS")
        if path:
            with open(path, "a") as handle:
                handle.write(json.dumps({"event": event, **fields}) + "\\n")


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
'''


def kitchen_sink_distribution(root: Path) -> Path:
    return make_distribution(root, "coral-kitchen-sink", {"coral_kitchen_sink": KITCHEN_SINK},
                             {"kitchen": "coral_kitchen_sink"}, version="2.3.4")


FLAKY = '''
    """An evaluator that raises on some candidates, and a record hook that raises on some
    records: one candidate's or one record's failure must not end a run."""
    from coral_core.hookspecs import hookimpl
    from coral_core.types import Evaluation


    class Flaky:
        name = "flaky"
        objectives = ("steady",)

        def evaluate(self, candidate, context):
            if "# variant 3" in candidate.code:
                raise ValueError("cannot score variant 3")
            return Evaluation({"steady": 1.0})


    @hookimpl
    def coral_register_evaluators(register):
        register("flaky", Flaky)


    @hookimpl
    def coral_record_written(run, kind, record):
        if kind == "generation" and record.sample == 1:
            raise RuntimeError("the dashboard is down")
'''


def flaky_distribution(root: Path) -> Path:
    return make_distribution(root, "coral-flaky", {"coral_flaky": FLAKY},
                             {"flaky": "coral_flaky"})
