"""An evaluator or a lifecycle hook that raises on one candidate or record: the error is
recorded and counted, and the run goes on; `--fail-fast` stops at the first one."""

from __future__ import annotations

import json

import pytest

from conftest import coral_env, run_coral
from plugin_kit import EXAMPLES, echo_model_distribution, flaky_distribution

CONFIG = '[evaluators]\nuse = ["tests", "flaky"]\ngate = ""\nweights = {}\n'


@pytest.fixture(scope="module")
def setting(tmp_path_factory, data_dir):
    root = tmp_path_factory.mktemp("errors")
    site = echo_model_distribution(root / "site")
    flaky_distribution(site)
    config = root / "flaky.toml"
    config.write_text(CONFIG)
    env = coral_env(data_dir, PYTHONPATH=str(site))
    return {"root": root, "env": env, "config": config}


def _run(setting, out: str, *extra: str):
    return run_coral("run", "--plugin", "quixbugs", "--model", "echo", "--config",
                     str(setting["config"]), "--samples", "4", "--seed", "0", "--out",
                     str(setting["root"] / out), *extra, env=setting["env"])


def test_errors_are_recorded_counted_and_the_run_goes_on(setting):
    result = _run(setting, "goes-on", "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    export = run_coral("export", str(setting["root"] / "goes-on"), env=setting["env"])
    rows = [json.loads(line) for line in export.stdout.splitlines()]
    failed = [r for r in rows if r["verdict"] == "error"]
    assert failed and len(failed) == summary["errors"] == sum(p["errors"]
                                                              for p in summary["problems"])
    source = (EXAMPLES / "coral_flaky.py").read_text().splitlines()
    line = next(n for n, text in enumerate(source, 1) if "raise ValueError" in text)
    for row in failed:
        assert "# variant 3" in row["candidate"]
        assert row["error"].endswith(f"coral_flaky.py:{line}: ValueError: cannot score "
                                     f"variant 3 of {row['task']}")
        assert row["objectives"] == {"bugfix": 0.0, "steady": 0.0} and row["fitness"] == 0.0
    assert all(r["error"] is None for r in rows if r["verdict"] != "error")
    # the record hook raised for every sample 1 (8 problems), the finished hook once (its
    # edits of the summary it was given reach neither stdout nor summary.json): counted
    assert summary["hook_errors"] == 9
    written = json.loads((setting["root"] / "goes-on" / "summary.json").read_text())
    assert written["hook_errors"] == 9 and written["fixed"] == summary["fixed"] != 999
    assert len(summary["problems"]) == 8
    warnings = [line for line in result.stderr.splitlines() if "coral_record_written" in line]
    assert len(warnings) == 1 and "RuntimeError: the dashboard is down" in warnings[0]
    assert "scoring sample" in result.stderr and "Traceback" not in result.stderr
    kinds = {row["error"] for row in failed}  # one message per problem
    assert result.stderr.count("recorded as an error (objectives 0)") == min(3, len(kinds))

    table = run_coral("report", str(setting["root"] / "goes-on"), env=setting["env"])
    assert "errors" in table.stdout and "9 lifecycle hook calls raised" in table.stdout


def test_more_kinds_of_error_than_are_shown_are_not_dropped_in_silence(setting):
    result = _run(setting, "many", "--samples", "12", "--json")
    assert result.returncode == 0, result.stderr
    export = run_coral("export", str(setting["root"] / "many"), env=setting["env"])
    kinds = {row["error"] for row in map(json.loads, export.stdout.splitlines())
             if row["verdict"] == "error"}  # one message per problem
    assert len(kinds) > 3
    assert result.stderr.count("recorded as an error (objectives 0)") == 3
    assert result.stderr.count("more scoring errors than the 3 shown") == 1


def test_fail_fast_stops_at_the_first_error_with_one_line(setting):
    result = _run(setting, "fails-fast", "--fail-fast")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert "stopped by --fail-fast" in lines[-1] and "Traceback" not in result.stderr
    assert "coral run --resume" in lines[-1]
