"""Samples out (`coral export`, one line per sample) and in (`coral evaluate --samples`,
EvalPlus's JSONL), and the `reference` model that checks a data set end to end."""

from __future__ import annotations

import csv
import io
import json

import pytest

from conftest import coral_env, run_coral
from plugin_kit import echo_model_distribution

ROW_KEYS = {"trial", "task", "sample", "split", "seen_in_training", "prompt_digest", "prompt",
            "reply", "candidate", "verdict", "passed", "result", "error", "fitness",
            "objectives", "tests"}


@pytest.fixture(scope="module")
def run(tmp_path_factory, data_dir):
    root = tmp_path_factory.mktemp("samples-io")
    env = coral_env(data_dir, PYTHONPATH=str(echo_model_distribution(root / "site")))
    out = root / "run"
    result = run_coral("run", "--plugin", "quixbugs", "--model", "echo", "--limit", "3",
                       "--samples", "2", "--out", str(out), "--json", env=env)
    assert result.returncode == 0, result.stderr
    return {"env": env, "out": out, "summary": json.loads(result.stdout), "root": root}


def test_export_jsonl_has_one_line_per_sample_with_prompt_reply_candidate_verdict(run):
    result = run_coral("export", str(run["out"]), env=run["env"])
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(rows) == 3 * 2 and all(set(row) == ROW_KEYS for row in rows)
    assert [(r["task"], r["sample"]) for r in rows] == [
        (p, i) for p in ("kheapsort", "lcs_length", "next_palindrome") for i in (0, 1)]
    first = rows[0]
    assert "Fix the buggy Python function in kheapsort.py" in first["prompt"]
    assert "def kheapsort" in first["reply"] and first["candidate"].startswith("def kheapsort")
    assert first["verdict"] in ("pass", "fail") and len(first["prompt_digest"]) == 64
    assert set(first["objectives"]) == {"bugfix", "style", "security", "syntax", "runtime"}
    assert set(first["tests"]) == {"total", "passed", "failed", "timeout", "error"}
    by_problem = {p["problem"]: p for p in run["summary"]["problems"]}
    for problem, summary in by_problem.items():
        passed = sum(r["verdict"] == "pass" for r in rows if r["task"] == problem)
        assert passed == summary["c"]


def test_export_csv_flattens_objectives_and_writes_a_file(run, tmp_path):
    target = tmp_path / "samples.csv"
    result = run_coral("export", str(run["out"]), "--format", "csv", "-o", str(target),
                       env=run["env"])
    assert result.returncode == 0, result.stderr
    assert "wrote 6 samples" in result.stderr
    rows = list(csv.DictReader(io.StringIO(target.read_text())))
    assert len(rows) == 6 and {"objective.bugfix", "tests.total", "prompt", "reply",
                               "candidate", "verdict"} <= set(rows[0])
    assert rows[0]["task"] == "kheapsort" and "\n" in rows[0]["prompt"]


def test_export_errors_are_one_line(run, tmp_path):
    for args, message in ((["--format", "xml"], "--format must be one of jsonl, csv"),
                          (["--trial", "7"], "has no trial 7")):
        result = run_coral("export", str(run["out"]), *args, env=run["env"])
        assert result.returncode == 2 and message in result.stderr
    result = run_coral("export", str(tmp_path), env=run["env"])
    assert result.returncode == 2 and "is not a Coral run directory" in result.stderr


def test_samples_from_elsewhere_are_rescored_into_a_runs_summary(run, data_dir, tmp_path):
    programs = data_dir / "quixbugs"
    good = (programs / "correct_python_programs" / "sieve.py").read_text()
    bad = (programs / "python_programs" / "sieve.py").read_text()
    samples = tmp_path / "samples.jsonl"
    samples.write_text("\n".join(json.dumps(line) for line in [
        {"task_id": "QuixBugs/sieve", "solution": good},
        {"task_id": "sieve", "completion": f"Here you go:\n```python\n{bad}```\n"},
        {"task_id": "gcd", "solution": (programs / "correct_python_programs" / "gcd.py")
         .read_text(), "extra": "ignored"},
        {"task_id": "gcd", "solution": "def gcd(a, b):\n    return 1\n"},
    ]) + "\n\n")
    result = run_coral("evaluate", "--plugin", "quixbugs", "--samples", str(samples),
                       "--json", env=run["env"])
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert {"problems", "pass_at_k", "objectives", "fixed", "intervals", "errors"} <= set(
        summary)
    by_problem = {p["problem"]: p for p in summary["problems"]}
    assert (by_problem["sieve"]["n"], by_problem["sieve"]["c"]) == (2, 1)
    assert (by_problem["gcd"]["c"], by_problem["gcd"]["seen_in_training"]) == (1, True)
    assert summary["pass_at_k"] == {"1": 0.5, "2": 1.0} and summary["fixed"] == 2
    table = run_coral("evaluate", "--plugin", "quixbugs", "--samples", str(samples),
                      env=run["env"])
    assert "overall: 2/2 solved" in table.stdout and "95% CI" in table.stdout


@pytest.mark.parametrize("lines, message", [
    (['{"task_id": "gcd", "solution": "x"}', "{oops"], ":2: malformed JSON"),
    (['[1, 2]'], ":1: expected an object"),
    (['{"solution": "x"}'], ":1: 'task_id' must be a non-empty string"),
    (['{"task_id": "gcd"}'], ":1: needs 'solution'"),
    (['{"task_id": "gdc", "solution": "x"}'], ":1: unknown QuixBugs problem 'gdc' "
                                              "(did you mean 'gcd'?)"),
])
def test_malformed_samples_are_one_line_naming_the_line(run, tmp_path, lines, message):
    samples = tmp_path / "samples.jsonl"
    samples.write_text("\n".join(lines) + "\n")
    result = run_coral("evaluate", "--plugin", "quixbugs", "--samples", str(samples),
                       env=run["env"])
    assert result.returncode == 2, result.stdout
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_reference_model_solves_every_quixbugs_test_problem(run):
    result = run_coral("run", "--plugin", "quixbugs", "--model", "reference", "--samples", "1",
                       "--out", str(run["root"] / "reference"), "--json", env=run["env"])
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["fixed"] == 8 and summary["pass_at_k"] == {"1": 1.0}


def test_samples_with_different_counts_per_task_say_so(run, data_dir, tmp_path):
    good = (data_dir / "quixbugs" / "correct_python_programs" / "gcd.py").read_text()
    samples = tmp_path / "samples.jsonl"
    samples.write_text("\n".join(json.dumps(line) for line in [
        {"task_id": "gcd", "solution": good}, {"task_id": "gcd", "solution": good},
        {"task_id": "gcd", "solution": "x = 1\n"}, {"task_id": "sieve", "solution": "x = 1\n"},
    ]) + "\n")
    result = run_coral("evaluate", "--plugin", "quixbugs", "--samples", str(samples),
                       "--json", env=run["env"])
    summary = json.loads(result.stdout)
    assert (summary["samples"], summary["samples_min"]) == (3, 1)
    table = run_coral("evaluate", "--plugin", "quixbugs", "--samples", str(samples),
                      env=run["env"])
    assert "1-3 samples per problem" in table.stdout


def test_a_named_split_refuses_samples_of_another_split(run, data_dir, tmp_path):
    """gcd and bitcount are training problems: with --split test they are refused (one
    line naming the file and line), without --split they are scored and no test problems
    are reported missing."""
    good = (data_dir / "quixbugs" / "correct_python_programs" / "gcd.py").read_text()
    samples = tmp_path / "samples.jsonl"
    samples.write_text(json.dumps({"task_id": "sieve", "solution": "x = 1\n"}) + "\n"
                       + json.dumps({"task_id": "gcd", "solution": good}) + "\n")
    refused = run_coral("evaluate", "--plugin", "quixbugs", "--samples", str(samples),
                        "--split", "test", env=run["env"])
    assert refused.returncode == 2, refused.stdout
    assert f"{samples}:2: task 'gcd' is in the train split, not in test" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    samples.write_text(json.dumps({"task_id": "gcd", "solution": good}) + "\n")
    scored = run_coral("evaluate", "--plugin", "quixbugs", "--samples", str(samples),
                       env=run["env"])
    assert scored.returncode == 0, scored.stderr
    assert "had no samples" not in scored.stdout + scored.stderr
