"""The plugin system, exercised through real distributions found by their entry points.

In-process tests put a distribution's folder on sys.path (where importlib.metadata finds
it exactly as it finds a pip-installed package) and name it in CORAL_PLUGINS; subprocess
tests do the same through PYTHONPATH. Entry-point autoloading is off in every test
(conftest), so only built-ins and the plugins a test installs are ever loaded.
"""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, coral_env, run_coral
from coral_core import hookspecs, plugins
from coral_core.errors import UserError
from coral_core.protocols import Executor
from plugin_kit import echo_model_distribution, kitchen_sink_distribution, make_distribution

HOOKS = [name for name, _ in inspect.getmembers(hookspecs, inspect.isfunction)
         if name.startswith("coral_")]
DOCS = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")


# -------------------------------------------------------------- documentation and coverage

@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_is_documented_with_its_exact_signature(hook):
    signature = f"{hook}{inspect.signature(getattr(hookspecs, hook))}"
    assert f"### {signature}" in DOCS, f"docs/plugins.md lacks a '### {signature}' section"


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_has_a_test_of_its_own(hook, kitchen_run):
    """A test named for the hook, that uses the kitchen-sink run, in which Coral really
    called the kitchen-sink plugin's implementation of the hook."""
    test = globals().get(f"test_hook_{hook}")
    assert test is not None, f"tests/test_plugins.py has no test_hook_{hook}"
    assert "kitchen_run" in inspect.signature(test).parameters, f"test_hook_{hook}"
    assert hook in kitchen_run["called"], f"Coral never called the plugin's {hook}"


def _documented_files() -> dict[str, str]:
    """`File \\`path\\`:` followed by a fenced block, in docs/plugins.md."""
    pattern = re.compile(r"File `([^`]+)`:\s*\n\s*```[a-z]*\n(.*?)```", re.S)
    return {path: body for path, body in pattern.findall(DOCS)}


def test_documented_example_package_installs_and_its_objective_reaches_a_run(tmp_path, data_dir):
    files = _documented_files()
    assert {"coral-brevity/pyproject.toml", "coral-brevity/coral_brevity.py"} <= set(files)
    for relative, body in files.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(body)
    site = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(site), str(tmp_path / "coral-brevity")],
        capture_output=True, text=True)
    assert install.returncode == 0, install.stderr
    assert list(site.glob("coral_brevity-1.0.0.dist-info/entry_points.txt"))
    echo_model_distribution(site)
    env = coral_env(data_dir, PYTHONPATH=str(site), CORAL_PLUGINS="brevity,echo")

    listed = run_coral("plugins", "list", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    brevity = next(p for p in json.loads(listed.stdout) if p["name"] == "brevity")
    assert brevity["source"] == "coral-brevity 1.0.0"
    assert brevity["evaluators"] == ["brevity"] and brevity["objectives"] == ["brevity"]

    config = tmp_path / "brevity.toml"
    config.write_text(
        '[evaluators]\nuse = ["tests", "style", "brevity"]\ngate = ""\n'
        '[evaluators.weights]\nbugfix = 0.5\nbrevity = 0.5\n'
        '[evaluators.options.brevity]\nslack = 1.0\n')
    result = run_coral("run", "--plugin", "quixbugs", "--model", "echo", "--config", str(config),
                       "--samples", "2", "--out", str(tmp_path / "run"), "--json", env=env)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert set(summary["objectives"]) == {"bugfix", "style", "brevity"}
    assert all("brevity" in p["objectives"] for p in summary["problems"])
    assert 0 < summary["objectives"]["brevity"] <= 1


# -------------------------------------------------------------- one run through every hook

@pytest.fixture(scope="module")
def kitchen_run(tmp_path_factory, data_dir):
    root = tmp_path_factory.mktemp("kitchen")
    site = kitchen_sink_distribution(root / "site")
    events, called = root / "events.jsonl", root / "called.txt"
    env = coral_env(data_dir, PYTHONPATH=str(site), CORAL_PLUGINS="kitchen",
                    KITCHEN_EVENTS=str(events), KITCHEN_HOOKS=str(called))
    result = run_coral("run", "--plugin", "arith", "--out", str(root / "run"), "--json",
                       "--hottest", "0.7", env=env)  # the plugin's own run flag
    assert result.returncode == 0, result.stderr
    served = run_coral("kitchen", "--dish", "stew", env=env)  # the plugin's own command
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    return {"summary": json.loads(result.stdout), "events": lines, "env": env, "root": root,
            "site": site, "called": set(called.read_text().split()), "served": served}


def _lifecycle(events: list[dict]) -> list[dict]:
    return [e for e in events if e["event"] != "executor"]


def test_hook_coral_register_datasets(kitchen_run):
    summary = kitchen_run["summary"]
    assert summary["dataset"] == "arith"
    assert [p["problem"] for p in summary["problems"]] == ["double", "square"]
    listed = json.loads(run_coral("datasets", "list", "--json", env=kitchen_run["env"]).stdout)
    assert {"name": "arith", "plugin": "kitchen"}.items() <= next(
        d for d in listed if d["name"] == "arith").items()


def test_hook_coral_register_models(kitchen_run):
    summary = kitchen_run["summary"]
    assert summary["model"] == "doubler"
    by_problem = {p["problem"]: p for p in summary["problems"]}
    assert by_problem["double"]["c"] == 2 and by_problem["square"]["c"] == 0
    assert summary["fixed"] == 1


def test_hook_coral_register_evaluators(kitchen_run):
    summary = kitchen_run["summary"]
    assert set(summary["objectives"]) == {"bugfix", "shortness"}
    assert summary["objectives"]["shortness"] == pytest.approx(0.5)


def test_hook_coral_register_search_strategies(kitchen_run):
    tells = [e for e in kitchen_run["events"] if e["event"] == "tell"]
    assert len(tells) == 1 and tells[0]["count"] == 2
    trials = {e["trial"] for e in kitchen_run["events"] if e["event"] == "record"}
    assert trials == {0, 1}


def test_hook_coral_register_run_flags(kitchen_run):
    """`--hottest 0.7` reached the strategy's option; `coral run --help` lists the flag;
    a value of the wrong type is one line naming it; a resume refuses it."""
    trials = kitchen_run["summary"]["trials"]
    assert [t["overrides"]["model"]["temperature"] for t in trials] == [0.1, 0.7]
    helped = run_coral("run", "--help", env={**kitchen_run["env"], "COLUMNS": "120"})
    assert "--hottest" in helped.stdout and "The second trial's temperature." in helped.stdout
    bad = run_coral("run", "--plugin", "arith", "--hottest", "warm", "--dry-run",
                    env=kitchen_run["env"])
    assert bad.returncode == 2 and "'--hottest'" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    resumed = run_coral("run", "--resume", str(kitchen_run["root"] / "run"), "--hottest", "0.2",
                        env=kitchen_run["env"])
    assert resumed.returncode == 2 and "drop --hottest" in resumed.stderr


def test_hook_coral_register_executors(kitchen_run, monkeypatch):
    calls = [e["call"] for e in kitchen_run["events"] if e["event"] == "executor"]
    assert "generate" in calls and "submit" in calls, "the run went through 'inline'"
    monkeypatch.syspath_prepend(str(kitchen_run["site"]))
    monkeypatch.setenv("CORAL_PLUGINS", "kitchen")
    plugins.reset()
    entry = plugins.registry().get("executors", "inline")
    assert entry.plugin == "kitchen"
    assert plugins.registry().get("executors", "local").plugin == "coral_core.executors.local"
    executor = entry.factory({"executor": "inline", "workers": 1})
    try:
        assert isinstance(executor, Executor) and executor.name == "inline"
        assert executor.settings == {"executor": "inline", "workers": 1}
    finally:
        executor.close()
    assert executor.closed is True


def test_hook_coral_register_experiments(kitchen_run):
    summary = kitchen_run["summary"]
    assert summary["samples"] == 2 and summary["split"] == "all"
    config = (kitchen_run["root"] / "run" / "config.toml").read_text()
    assert 'strategy = "two-temperatures"' in config


def test_hook_coral_run_started(kitchen_run):
    started = [e for e in kitchen_run["events"] if e["event"] == "started"]
    assert started == [{"event": "started", "run_dir": str(kitchen_run["root"] / "run"),
                        "resumed": False, "split": "all"}]
    assert _lifecycle(kitchen_run["events"])[0]["event"] == "started"


def test_hook_coral_record_written(kitchen_run):
    records = [e for e in kitchen_run["events"] if e["event"] == "record"]
    # 2 trials x 2 problems x 2 samples, one generation and one evaluation record each
    assert len(records) == 16
    assert sorted({(r["kind"], r["trial"]) for r in records}) == [
        ("evaluation", 0), ("evaluation", 1), ("generation", 0), ("generation", 1)]


def test_hook_coral_run_finished(kitchen_run):
    assert _lifecycle(kitchen_run["events"])[-1] == {"event": "finished", "fixed": 1,
                                                     "objectives": ["bugfix", "shortness"]}


def test_hook_coral_register_commands(kitchen_run):
    served = kitchen_run["served"]
    assert served.returncode == 0, served.stderr
    assert served.stdout == "the kitchen serves stew\n" and served.stderr == ""
    listed = run_coral("--help", env={**kitchen_run["env"], "COLUMNS": "120"})
    assert listed.returncode == 0, listed.stderr
    commands = re.findall(r"^│ (\S+) ", listed.stdout.split("Commands", 1)[1], re.M)
    assert commands[0] == "run" and commands[-1] == "kitchen"  # Coral's own, then plugins'
    assert {"fim", "mutation"} <= set(commands)  # the built-in plugins' commands
    assert "Serve a dish (a plugin's own command)." in listed.stdout
    own = run_coral("kitchen", "--help", env=kitchen_run["env"])
    assert own.returncode == 0 and "--dish" in own.stdout and "What to serve." in own.stdout


# -------------------------------------------------------------- discovery and blocking

def test_third_party_plugin_is_listed_with_its_distribution(kitchen_run):
    listed = json.loads(run_coral("plugins", "list", "--json", env=kitchen_run["env"]).stdout)
    kitchen = next(p for p in listed if p["name"] == "kitchen")
    assert kitchen["source"] == "coral-kitchen-sink 2.3.4"
    assert kitchen["models"] == ["doubler"] and kitchen["objectives"] == ["shortness"]
    assert kitchen["executors"] == ["inline"]
    assert sorted(kitchen["hooks"]) == sorted(HOOKS)
    builtin = {p["name"]: p for p in listed if p["source"] == "builtin"}
    assert {name: builtin[name].get("models") for name in BUILTIN_MODELS} == BUILTIN_MODELS
    assert builtin["coral_plugins.evaluators.style"]["evaluators"] == ["style"]


BUILTIN_MODELS = {"coral_plugins.models.baseline": ["baseline"],
                  "coral_plugins.models.hf": ["hf"], "coral_plugins.models.openai": ["openai"],
                  "coral_plugins.models.reference": ["reference"]}


def test_disabled_plugins_are_not_loaded(kitchen_run, data_dir):
    env = {**kitchen_run["env"], "CORAL_DISABLE_PLUGINS": "coral_plugins.evaluators.style, kitchen"}
    names = {p["name"] for p in json.loads(run_coral("plugins", "list", "--json", env=env).stdout)}
    assert "coral_plugins.evaluators.style" not in names and "kitchen" not in names
    assert "coral_plugins.evaluators.security" in names
    result = run_coral("run", "--plugin", "quixbugs", "--out", str(kitchen_run["root"] / "x"),
                       env=env)
    assert result.returncode == 2 and "unknown evaluator 'style'" in result.stderr


def test_two_plugins_registering_one_name_is_an_error(tmp_path, data_dir):
    site = make_distribution(tmp_path / "site", "coral-impostor", {"coral_impostor": '''
        from coral_core.hookspecs import hookimpl

        @hookimpl
        def coral_register_evaluators(register):
            register("tests", object)
    '''}, {"impostor": "coral_impostor"})
    result = run_coral("plugins", "list", env=coral_env(data_dir, PYTHONPATH=str(site),
                                                        CORAL_PLUGINS="impostor"))
    assert result.returncode == 2
    assert ("evaluators name 'tests' is registered by both 'coral_plugins.evaluators.tests' "
            "and 'impostor'; disable one with CORAL_DISABLE_PLUGINS") in result.stderr


@pytest.mark.parametrize("registered, said", [
    ('register("samples", RunFlag(("run", "samples"), int, "Mine."))',
     "run flag 'samples' is Coral's own; plugin 'flagger' cannot add it"),
    ('register("json", RunFlag(("run", "json"), str, "Mine."))',
     "run flag 'json' is Coral's own; plugin 'flagger' cannot add it"),
    ('register("mine", "--mine")', "plugin 'flagger' registered run flag 'mine' that is not a "
     "RunFlag"),
    # a red-team pass: a traceback from every `coral run`, and from its --help
    ('register("bad name!", RunFlag(("search", "options", "x"), int, "Mine."))',
     "plugin 'flagger' registered run flag 'bad name!': a flag's name is letters, digits"),
    # a newcomer's pass: a dotted path was read key by letter ("unknown section [e]")
    ('register("budget", RunFlag("evaluators.options.length.budget", int, "Mine."))',
     "registered run flag 'budget' whose path 'evaluators.options.length.budget' is not a "
     "tuple of keys"),
    ('register("my-flag", RunFlag(("search", "options", "x"), int, "Mine."))\n'
     '            register("my_flag", RunFlag(("search", "options", "y"), int, "Mine."))',
     "run flag --my-flag is registered twice"),
])
def test_a_run_flag_that_cannot_be_added_is_one_line(tmp_path, data_dir, registered, said):
    site = make_distribution(tmp_path / "site", "coral-flagger", {"coral_flagger": f'''
        from coral_core.hookspecs import hookimpl
        from coral_core.types import RunFlag

        @hookimpl
        def coral_register_run_flags(register):
            {registered}
    '''}, {"flagger": "coral_flagger"})
    env = coral_env(data_dir, PYTHONPATH=str(site), CORAL_PLUGINS="flagger")
    for args in (("run", "--plugin", "quixbugs", "--dry-run"), ("run", "--help")):
        result = run_coral(*args, env=env)
        assert result.returncode == 2, result.stdout
        assert result.stderr.startswith("coral: error: ") and said in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1


def test_a_run_flag_named_with_dashes_is_the_same_flag(tmp_path, data_dir):
    """A newcomer's pass: `length-budget` broke every `coral run`, though the flag it names
    is --length-budget."""
    site = make_distribution(tmp_path / "site", "coral-dashed", {"coral_dashed": '''
        from coral_core.hookspecs import hookimpl
        from coral_core.types import RunFlag

        @hookimpl
        def coral_register_run_flags(register):
            register("budget-of-mine", RunFlag(("search", "options", "mine"), int, "Mine."))
    '''}, {"dashed": "coral_dashed"})
    env = coral_env(data_dir, PYTHONPATH=str(site), CORAL_PLUGINS="dashed")
    shown = run_coral("run", "--help", env=env)
    assert shown.returncode == 0, shown.stderr
    assert "--budget-of-mine" in shown.stdout
    given = run_coral("run", "--plugin", "quixbugs", "--budget-of-mine", "3", "--dry-run",
                      env=env)  # reaches the strategy, which names the flag that set it
    assert given.returncode == 2 and "command line (--budget-of-mine)" in given.stderr


def test_a_plugin_that_fails_to_import_is_reported_and_skipped(tmp_path, data_dir):
    """The diagnostic command stays usable: the broken plugin is listed as failed with its
    file, line and the exception's last line; the others load; -v adds the traceback."""
    site = make_distribution(tmp_path / "site", "coral-broken",
                             {"coral_broken": "X = 1\nimport nope\n"},
                             {"broken": "coral_broken"})
    echo_model_distribution(site)
    env = coral_env(data_dir, PYTHONPATH=str(site), CORAL_PLUGINS="broken,echo")
    listed = run_coral("plugins", "list", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    broken = next(p for p in json.loads(listed.stdout) if p["name"] == "broken")
    where = f"{site / 'coral_broken.py'}:2: ModuleNotFoundError: No module named 'nope'"
    assert broken["status"] == "failed" and broken["error"] == where
    assert next(p for p in json.loads(listed.stdout) if p["name"] == "echo")["status"] == \
        "loaded"
    assert f"plugin 'broken' failed to load and was skipped: {where}" in listed.stderr
    assert "Traceback" not in listed.stderr

    table = run_coral("plugins", "list", env=env)
    assert table.returncode == 0 and "failed" in table.stdout and "broken" in table.stdout
    datasets = run_coral("datasets", "list", env=env)
    assert datasets.returncode == 0 and "quixbugs" in datasets.stdout
    verbose = run_coral("-v", "plugins", "list", env=env)
    assert verbose.returncode == 0 and "Traceback" in verbose.stderr
    assert "import nope" in verbose.stderr

    result = run_coral("run", "--plugin", "quixbugs", "--model", "echo", "--samples", "1",
                       "--limit", "1", "--out", str(tmp_path / "run"), "--json", env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["problems"][0]["n"] == 1


@pytest.mark.parametrize("exits", ["raise SystemExit(3)", "import sys\nsys.exit('bye')",
                                   "raise GeneratorExit"])
def test_a_plugin_that_exits_at_import_is_reported_like_any_failure(tmp_path, data_dir, exits):
    site = make_distribution(tmp_path / "site", "coral-quitter", {"coral_quitter": exits},
                             {"quitter": "coral_quitter"})
    env = coral_env(data_dir, PYTHONPATH=str(site), CORAL_PLUGINS="quitter")
    listed = run_coral("plugins", "list", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    quitter = next(p for p in json.loads(listed.stdout) if p["name"] == "quitter")
    assert quitter["status"] == "failed" and "Exit" in quitter["error"]
    assert "plugin 'quitter' failed to load and was skipped" in listed.stderr
    result = run_coral("run", "--plugin", "quixbugs", "--dry-run", env=env)
    assert result.returncode == 0, result.stderr


def test_a_plugin_whose_register_hook_raises_is_skipped_whole(tmp_path, monkeypatch):
    site = make_distribution(tmp_path / "site", "coral-half", {"coral_half": '''
        from coral_core.hookspecs import hookimpl

        @hookimpl
        def coral_register_models(register):
            register("half", object)

        @hookimpl
        def coral_register_evaluators(register):
            register("halfway", object)
            raise RuntimeError("boom")
    '''}, {"half": "coral_half"})
    registry = _loaded(monkeypatch, site, CORAL_PLUGINS="half")
    half = next(info for info in registry.plugins if info.name == "half")
    assert half.status == "failed" and half.error.endswith("RuntimeError: boom")
    assert "coral_half.py:" in half.error
    assert "half" not in registry.names("models") and "halfway" not in registry.names(
        "evaluators")
    with pytest.raises(UserError, match=r"unknown model 'half'.*plugin 'half' failed to load"):
        registry.get("models", "half")


def test_hook_mistakes_are_said_not_silent_or_a_traceback(tmp_path, monkeypatch, caplog):
    """A newcomer's pass: a hook parameter not named `register` was pluggy's traceback from
    every command; a misspelled hook name, or a hook without @hookimpl, was silent (the
    plugin "loaded" and its data set was unknown)."""
    site = make_distribution(tmp_path / "site", "coral-slips", {
        "coral_slip_param": '''
        from coral_core.hookspecs import hookimpl

        @hookimpl
        def coral_register_datasets(register):  # pluggy adds it, then refuses the next
            register("slipped", object)

        @hookimpl
        def coral_register_models(reg):
            reg("slipped", object)
    ''', "coral_slip_names": '''
        from coral_core.hookspecs import hookimpl

        @hookimpl
        def coral_register_dataset(register):
            register("singular", object)

        def coral_register_models(register):
            register("unmarked", object)
    '''}, {"param": "coral_slip_param", "names": "coral_slip_names"})
    with caplog.at_level("WARNING"):
        registry = _loaded(monkeypatch, site, CORAL_PLUGINS="param,names")
    param = next(info for info in registry.plugins if info.name == "param")
    assert param.status == "failed" and "reg" in param.error and "\n" not in param.error
    assert "plugin 'param' does not fit Coral's hooks and was skipped" in caplog.text
    assert "baseline" in registry.names("models")  # the others load as before
    assert "slipped" not in registry.names("datasets")  # nothing of the skipped one
    assert ("plugin 'names': coral_register_dataset is no hook of Coral's (did you mean "
            "'coral_register_datasets'") in caplog.text
    assert "plugin 'names': coral_register_models is not marked @hookimpl" in caplog.text


@pytest.mark.parametrize("hook, registered, words", [
    ("coral_register_experiments", '"odd", 42',
     "experiment 'odd': a int, not a configuration table"),
    ("coral_register_datasets", '"odd", 42', "dataset 'odd': a int, not a factory to call"),
])
def test_what_cannot_be_used_is_refused_when_registered(tmp_path, monkeypatch, hook,
                                                        registered, words):
    """A red-team plugin's preset or factory that was an int failed only when used, with a
    traceback."""
    module = f"coral_odd_{len(words)}"  # each its own: a module is imported once
    site = make_distribution(tmp_path / "site", "coral-odd", {module: f'''
        from coral_core.hookspecs import hookimpl
        from coral_core.types import RunFlag

        @hookimpl
        def {hook}(register):
            register({registered})
    '''}, {"odd": module})
    registry = _loaded(monkeypatch, site, CORAL_PLUGINS="odd")
    odd = next(info for info in registry.plugins if info.name == "odd")
    assert odd.status == "failed" and words in odd.error
    assert "baseline" in registry.names("models")  # the others load as before


def test_a_disabled_name_that_matches_no_plugin_is_warned_about(caplog, monkeypatch):
    monkeypatch.setenv("CORAL_DISABLE_PLUGINS", "coral_core.executors.locl")
    plugins.reset()
    with caplog.at_level("WARNING"):
        registry = plugins.registry()
    assert "local" in registry.names("executors")
    assert ("CORAL_DISABLE_PLUGINS names 'coral_core.executors.locl', which matches no plugin "
            "(did you mean 'coral_core.executors.local'") in caplog.text


def test_unknown_names_get_a_did_you_mean():
    registry = plugins.registry()
    for kind, typo, meant in (("experiments", "quixbug", "quixbugs"),
                              ("models", "basline", "baseline"),
                              ("evaluators", "secrity", "security"),
                              ("datasets", "quixbgs", "quixbugs"),
                              ("search_strategies", "gird", "grid")):
        with pytest.raises(UserError, match=f"did you mean '{meant}'"):
            registry.get(kind, typo)


# -------------------------------------------------------------- names and autoloading, in process

TERSE = '''
    from coral_core.hookspecs import hookimpl
    from coral_core.types import Evaluation


    class Terse:
        name = "terse"
        objectives = ("terse",)

        def evaluate(self, candidate, context):
            return Evaluation({"terse": 1.0})


    @hookimpl
    def coral_register_evaluators(register):
        register("terse", Terse)
'''


def _install(root: Path, module: str, entry_point: str) -> Path:
    """A distribution providing the `terse` evaluator from `module` under `entry_point`."""
    return make_distribution(root, f"coral-{module.replace('_', '-')}", {module: TERSE},
                             {entry_point: module})


def _loaded(monkeypatch, site: Path, **env: str) -> plugins.Registry:
    monkeypatch.syspath_prepend(str(site))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    plugins.reset()
    return plugins.registry()


def _names(registry: plugins.Registry) -> list[str]:
    return [info.name for info in registry.plugins]


def test_builtins_are_registered_under_their_dotted_module_names():
    registry = plugins.registry()
    assert _names(registry) == list(plugins.BUILTIN_PLUGINS)
    assert all(info.source == "builtin" for info in registry.plugins)
    assert registry.get("evaluators", "style").plugin == "coral_plugins.evaluators.style"
    assert registry.get("models", "hf").plugin == "coral_plugins.models.hf"


def test_a_third_party_plugin_named_like_a_builtin_loads_beside_it(tmp_path, monkeypatch):
    site = _install(tmp_path, "coral_terse_style", "style")
    registry = _loaded(monkeypatch, site, CORAL_PLUGINS="style")
    assert _names(registry)[-1] == "style"
    assert "coral_plugins.evaluators.style" in _names(registry)
    third_party = next(info for info in registry.plugins if info.name == "style")
    assert third_party.source == "coral-coral-terse-style 0.1.0"
    assert registry.get("evaluators", "terse").plugin == "style"
    assert registry.get("evaluators", "style").plugin == "coral_plugins.evaluators.style"


def test_autoload_off_loads_only_the_named_entry_points(tmp_path, monkeypatch):
    site = _install(tmp_path, "coral_terse_quiet", "quiet")
    assert "quiet" not in _names(_loaded(monkeypatch, site))  # conftest: autoload is off
    assert _names(_loaded(monkeypatch, site, CORAL_PLUGINS="quiet"))[-1] == "quiet"
    monkeypatch.delenv("CORAL_PLUGINS")
    assert _names(_loaded(monkeypatch, site, CORAL_DISABLE_PLUGIN_AUTOLOAD="0"))[-1] == "quiet"
    monkeypatch.delenv("CORAL_DISABLE_PLUGIN_AUTOLOAD")
    assert _names(_loaded(monkeypatch, site))[-1] == "quiet"  # autoload is the default


def test_disabling_wins_and_blocks_by_exact_name(tmp_path, monkeypatch):
    site = _install(tmp_path, "coral_terse_blocked", "blocked")
    registry = _loaded(monkeypatch, site, CORAL_PLUGINS="blocked",
                       CORAL_DISABLE_PLUGINS="blocked,coral_plugins.evaluators.style")
    assert "blocked" not in _names(registry)
    assert not {"style", "terse"} & set(registry.names("evaluators"))
    assert "tests" in registry.names("evaluators")
    registry = _loaded(monkeypatch, site, CORAL_DISABLE_PLUGINS="style")  # no plugin's name
    assert "style" in registry.names("evaluators") and "blocked" in _names(registry)


def test_naming_an_entry_point_that_is_not_installed_is_an_error(monkeypatch):
    monkeypatch.setenv("CORAL_PLUGINS", "nowhere")
    with pytest.raises(UserError, match="CORAL_PLUGINS names 'nowhere', but no installed"):
        plugins.registry()


def test_an_entry_point_named_like_a_builtin_module_is_an_error(tmp_path, monkeypatch):
    site = _install(tmp_path, "coral_terse_clash", "coral_plugins.evaluators.style")
    with pytest.raises(UserError, match="two plugins are named 'coral_plugins.evaluators.style': "
                                        "builtin and coral-coral-terse-clash 0.1.0"):
        _loaded(monkeypatch, site, CORAL_PLUGINS="coral_plugins.evaluators.style")


def test_register_hooks_are_called_through_pluggy_one_plugin_at_a_time(tmp_path, monkeypatch):
    """A hook-call monitor sees every call, which a direct call of the function would
    bypass; each call reaches exactly one plugin's implementation."""
    site = _install(tmp_path, "coral_terse_traced", "traced")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("CORAL_PLUGINS", "traced")
    manager, _, _ = plugins._make_manager()
    seen: list[tuple[str, list[str]]] = []
    manager.add_hookcall_monitoring(
        lambda name, impls, kwargs: seen.append((name, [i.plugin_name for i in impls])),
        lambda outcome, name, impls, kwargs: None)
    found = plugins._collect(manager, "evaluators")
    assert seen == [("coral_register_evaluators", [name]) for name in (
        "coral_plugins.evaluators.tests", "coral_plugins.evaluators.style",
        "coral_plugins.evaluators.security", "coral_plugins.evaluators.syntax",
        "coral_plugins.evaluators.runtime", "coral_plugins.evaluators.mutation",
        "coral_plugins.evaluators.fim", "coral_plugins.evaluators.fim_tests",
        "coral_plugins.evaluators.testgen", "coral_plugins.evaluators.humaneval",
        "traced")]
    assert {name: entry.plugin for name, entry in found.items()} == {
        "tests": "coral_plugins.evaluators.tests", "style": "coral_plugins.evaluators.style",
        "security": "coral_plugins.evaluators.security",
        "syntax": "coral_plugins.evaluators.syntax",
        "runtime": "coral_plugins.evaluators.runtime", "fim": "coral_plugins.evaluators.fim",
        "mutation_gate": "coral_plugins.evaluators.mutation",
        "testgen": "coral_plugins.evaluators.testgen",
        "fim_tests": "coral_plugins.evaluators.fim_tests",
        "humaneval": "coral_plugins.evaluators.humaneval", "terse": "traced"}


@pytest.mark.parametrize("text, line", [
    ('[evaluators]\nuse = ["tests", "style"]\n', 2),
    ('[evaluators]\nuse = ["tests"]\n[evaluators.options.style]\nmax_line_length = 100\n', 3),
])
def test_a_config_naming_a_blocked_plugin_says_where_and_why(tmp_path, data_dir, text, line):
    config = tmp_path / "c.toml"
    config.write_text(text)
    env = coral_env(data_dir, CORAL_DISABLE_PLUGINS="coral_plugins.evaluators.style")
    result = run_coral("run", "--plugin", "quixbugs", "--config", str(config), "--dry-run",
                       env=env)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert f"{config} (line {line})" in result.stderr, result.stderr
    assert "CORAL_DISABLE_PLUGINS blocks 'coral_plugins.evaluators.style'" in result.stderr
