"""`coral evaluate`: the JSON contract for one candidate and for a folder of them."""

from __future__ import annotations

import json
import os

import pytest

from conftest import coral_env, interrupt_coral, run_coral

pytestmark = pytest.mark.loaded  # make test runs it beside CPU hogs

KEYS = {"problem", "passed", "tests", "outcomes", "objectives", "fitness"}


def test_single_candidate_json_contract(tmp_path, data_dir):
    candidate = data_dir / "quixbugs" / "python_programs" / "gcd.py"
    result = run_coral("evaluate", "--plugin", "quixbugs", "--problem", "gcd", "--candidate",
                       str(candidate), "--json", env=coral_env(data_dir))
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert KEYS <= set(document)
    assert document["problem"] == "gcd" and document["passed"] is False
    assert set(document["tests"]) == {"total", "passed", "failed", "timeout", "error"}
    assert document["tests"]["total"] == len(document["outcomes"]) == 6
    assert sum(document["tests"][k] for k in ("passed", "failed", "timeout", "error")) == 6
    assert all(o["status"] in ("pass", "fail", "timeout", "error") and "detail" in o
               for o in document["outcomes"])
    assert set(document["objectives"]) == {"bugfix", "style", "security", "runtime", "syntax"}
    assert 0 <= document["fitness"] <= 1


def test_candidate_dir_scores_every_file_against_the_problem_in_its_name(tmp_path, data_dir):
    folder = tmp_path / "fixes"
    folder.mkdir()
    programs = data_dir / "quixbugs"
    correct = (programs / "correct_python_programs" / "sieve.py").read_text()
    (folder / "sieve.py").write_text(correct)
    (folder / "sieve__buggy.py").write_text((programs / "python_programs" / "sieve.py").read_text())
    (folder / "gcd__attempt2.py").write_text("def gcd(a, b):\n    return 1\n")
    (folder / "notes.txt").write_text("ignored")
    result = run_coral("evaluate", "--plugin", "quixbugs", "--candidate-dir", str(folder),
                       "--json", env=coral_env(data_dir))
    assert result.returncode == 0, result.stderr
    documents = json.loads(result.stdout)
    by_file = {d["file"].rsplit("/", 1)[-1]: d for d in documents}
    assert set(by_file) == {"sieve.py", "sieve__buggy.py", "gcd__attempt2.py"}
    assert all(KEYS <= set(d) for d in documents)
    assert by_file["sieve.py"]["problem"] == "sieve" and by_file["sieve.py"]["passed"] is True
    assert by_file["sieve__buggy.py"]["passed"] is False
    assert by_file["gcd__attempt2.py"]["problem"] == "gcd"


def test_a_file_of_a_candidate_dir_that_cannot_be_read_is_its_own_error(tmp_path, data_dir):
    folder = tmp_path / "fixes"
    folder.mkdir()
    correct = data_dir / "quixbugs" / "correct_python_programs" / "gcd.py"
    (folder / "gcd.py").write_text(correct.read_text())
    (folder / "gcd__latin1.py").write_bytes("# caf\xe9\n".encode("latin-1"))
    os.mkfifo(folder / "gcd__fifo.py")
    # a red-team pass: a link out of the folder was read, and /etc/passwd's first line came
    # back in a SyntaxError; a link to a file in the folder is that file
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:secret\n")
    (folder / "gcd__out.py").symlink_to(secret)
    (folder / "gcd__in.py").symlink_to(folder / "gcd.py")
    # a stray file stopped the whole folder ("unknown QuixBugs problem 'utils'", exit 2)
    (folder / "utils.py").write_text("def helper():\n    return 1\n")
    (folder / "__init__.py").write_text("")
    # a red-team pass: a byte order mark (valid Python) was a SyntaxError in every test
    (folder / "gcd__bom.py").write_bytes(b"\xef\xbb\xbf" + (folder / "gcd.py").read_bytes())
    result = run_coral("evaluate", "--plugin", "quixbugs", "--candidate-dir", str(folder),
                       "--json", env=coral_env(data_dir), timeout=120)
    assert result.returncode == 0, result.stderr
    by_file = {d["file"].rsplit("/", 1)[-1]: d for d in json.loads(result.stdout)}
    assert by_file["gcd.py"]["passed"] is True and "error" not in by_file["gcd.py"]
    assert "not UTF-8" in by_file["gcd__latin1.py"]["error"]
    assert "FIFO" in by_file["gcd__fifo.py"]["error"]
    assert not by_file["gcd__fifo.py"]["passed"]
    assert "is a link that leads out of" in by_file["gcd__out.py"]["error"]
    assert "secret" not in result.stdout.replace(str(secret), "")
    assert by_file["gcd__in.py"]["passed"] is True
    assert "unknown QuixBugs problem 'utils'" in by_file["utils.py"]["error"]
    assert "__init__.py names no problem" in by_file["__init__.py"]["error"]
    assert by_file["utils.py"]["problem"] == "utils" and not by_file["utils.py"]["passed"]
    assert by_file["gcd__bom.py"]["passed"] is True
    for name in ("gcd__out.py", "gcd__in.py", "utils.py", "__init__.py", "gcd__bom.py"):
        os.unlink(folder / name)
    forged = folder / "gcd__x\ngcd.py - gcd: PASSED.py"  # a red-team pass
    forged.write_text("def gcd(a, b):\n    return 0\n")
    shown = run_coral("evaluate", "--plugin", "quixbugs", "--candidate-dir", str(folder),
                      env=coral_env(data_dir, COLUMNS="200"), timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "gcd__x\\ngcd.py - gcd: PASSED.py - gcd: FAILED" in shown.stdout
    assert not any(line.startswith("gcd.py - gcd: PASSED") for line in
                   shown.stdout.splitlines())
    forged.unlink()
    table = run_coral("evaluate", "--plugin", "quixbugs", "--candidate-dir", str(folder),
                      env=coral_env(data_dir, COLUMNS="160"), timeout=120)
    assert table.returncode == 0, table.stderr
    assert "3 files: 1 passed, 0 failed, 2 could not be scored" in table.stdout
    assert "gcd__latin1.py - gcd: NOT SCORED" in table.stdout  # not "FAILED (0/0 tests)"
    assert "0/0 tests" not in table.stdout


def test_a_candidate_dir_keeps_to_the_split_it_is_given(tmp_path, data_dir):
    """A bad-input pass: --split was checked, then ignored by candidate files, and gcd (a
    training problem) was scored on the test split. In a folder, a file of another split
    is that file's error, its row saying it was seen in training; the rest are scored."""
    folder = tmp_path / "fixes"
    folder.mkdir()
    for name in ("gcd", "sieve"):
        correct = data_dir / "quixbugs" / "correct_python_programs" / f"{name}.py"
        (folder / f"{name}.py").write_text(correct.read_text())
    result = run_coral("evaluate", "--plugin", "quixbugs", "--candidate-dir", str(folder),
                       "--split", "test", "--json", env=coral_env(data_dir), timeout=120)
    assert result.returncode == 0, result.stderr
    by_file = {d["file"].rsplit("/", 1)[-1]: d for d in json.loads(result.stdout)}
    assert by_file["sieve.py"]["passed"] is True and "error" not in by_file["sieve.py"]
    refused = by_file["gcd.py"]
    assert "task 'gcd' is in the train split, not in test" in refused["error"]
    assert refused["seen_in_training"] is True and refused["passed"] is False
    whole = run_coral("evaluate", "--plugin", "quixbugs", "--candidate-dir", str(folder),
                      "--json", env=coral_env(data_dir), timeout=120)  # no split named
    assert all(d["passed"] for d in json.loads(whole.stdout)), whole.stdout


def test_candidate_dir_with_an_unknown_problem_fails_before_scoring(tmp_path, data_dir):
    """No file of the folder names a problem of the data set: the wrong --plugin, most
    likely; one line, exit 2 (one stray file among candidates is that file's error)."""
    folder = tmp_path / "fixes"
    folder.mkdir()
    (folder / "nosuch.py").write_text("x = 1\n")
    result = run_coral("evaluate", "--plugin", "quixbugs", "--candidate-dir", str(folder),
                       env=coral_env(data_dir))
    assert result.returncode == 2 and "unknown QuixBugs problem 'nosuch'" in result.stderr


def test_human_output_shows_each_test(data_dir):
    candidate = data_dir / "quixbugs" / "correct_python_programs" / "gcd.py"
    result = run_coral("evaluate", "--plugin", "quixbugs", "--problem", "gcd", "--candidate",
                       str(candidate), env=coral_env(data_dir, COLUMNS="160"))
    assert result.returncode == 0, result.stderr
    assert "PASSED" in result.stdout and "gcd[5]" in result.stdout and "fitness" in result.stdout


def test_an_evaluator_that_raises_costs_only_its_own_objectives(tmp_path, data_dir):
    """The built-in tests and objectives are still reported; the error names the plugin's
    file and line; no traceback without -v."""
    from plugin_kit import flaky_distribution

    site = flaky_distribution(tmp_path / "site")
    config = tmp_path / "c.toml"
    config.write_text('[evaluators]\nuse = ["tests", "style", "flaky"]\ngate = ""\n'
                      "weights = {}\n")
    candidate = tmp_path / "gcd.py"
    correct = (data_dir / "quixbugs" / "correct_python_programs" / "gcd.py").read_text()
    candidate.write_text(correct + "# variant 3\n")
    env = coral_env(data_dir, PYTHONPATH=str(site), COLUMNS="200")
    args = ("evaluate", "--plugin", "quixbugs", "--problem", "gcd", "--candidate",
            str(candidate), "--config", str(config))
    result = run_coral(*args, "--json", env=env)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["tests"]["passed"] == document["tests"]["total"] > 0
    assert document["objectives"]["bugfix"] == 1.0 and document["objectives"]["steady"] == 0.0
    assert "coral_flaky.py:" in document["error"] and "ValueError" in document["error"]
    assert "Traceback" not in result.stderr
    human = run_coral(*args, env=env)
    assert human.returncode == 0 and "PASSED" in human.stdout and "gcd[0]" in human.stdout
    assert "bugfix 1.000" in human.stdout and "coral_flaky.py:" in human.stdout
    assert "Traceback" not in human.stderr
    verbose = run_coral("-v", *args, env=env)  # docs/plugins.md: the traceback with -v
    assert verbose.returncode == 0 and "Traceback" in verbose.stderr
    assert "coral_flaky.py" in verbose.stderr.split("Traceback", 1)[1]


def test_evaluate_shows_a_test_files_own_tests(tmp_path, data_dir):
    tests = tmp_path / "test_gcd.py"
    tests.write_text("from gcd import gcd\n\n\ndef test_one():\n    assert gcd(4, 2) == 2\n\n\n"
                     "def test_tmp(tmp_path):\n    assert gcd(1, 1) == 1\n")
    args = ("evaluate", "--plugin", "testgen", "--problem", "gcd", "--candidate", str(tests))
    result = run_coral(*args, "--json", env=coral_env(data_dir, SKIP_MUTATION="true"))
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["tests"]["total"] == 2 and document["tests"]["passed"] == 1
    assert [o["test"] for o in document["outcomes"]] == ["test_one", "test_tmp"]
    human = run_coral(*args, env=coral_env(data_dir, SKIP_MUTATION="true", COLUMNS="200"))
    assert "(1/2 tests)" in human.stdout and "tmp_path" in human.stdout


def test_a_program_that_rebinds_json_and_os_functions_is_scored_as_it_is(tmp_path, data_dir):
    """A red-team pass: a correct program that, at its top level, makes `json.dumps` indent
    (or rebinds `os.write`, `os.times`, `os._exit`) broke the lines that report its results,
    and failed. The sandbox's reporting takes them before any program loads."""
    programs = data_dir / "quixbugs"
    correct = (programs / "correct_python_programs" / "sieve.py").read_text()
    patches = ("import functools, json, os\n"
               "json.dumps = functools.partial(json.dumps, indent=2)\n"
               "json.loads = None\nos.write = lambda fd, data: len(data)\n"
               "os.times = None\nos._exit = None\n")
    candidate = tmp_path / "sieve.py"
    candidate.write_text(patches + correct)
    result = run_coral("evaluate", "--plugin", "quixbugs", "--problem", "sieve",
                       "--candidate", str(candidate), "--json", env=coral_env(data_dir))
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["passed"] is True, document["outcomes"]


def test_ctrl_c_drops_the_queued_files_of_a_candidate_dir(tmp_path, data_dir):
    """Ctrl-C during `--candidate-dir` ends it at once, as during `--samples` (where a
    red-team pass found every queued sample run first): exit 130, nothing on stdout."""
    folder = tmp_path / "fixes"
    folder.mkdir()
    for number in range(60):  # 1 s each while loading: 30 s of work on 2 cores
        (folder / f"gcd__{number}.py").write_text(
            f"import time  # {number}\ntime.sleep(1)\n\n\ndef gcd(a, b):\n    return 1\n")
    status, stdout, stderr, waited = interrupt_coral(
        "evaluate", "--plugin", "quixbugs", "--candidate-dir", str(folder), "--json",
        env=coral_env(data_dir))
    assert status == 130 and stdout == "", stderr[-2000:]
    assert waited < 15, f"{waited:.1f} s from Ctrl-C to the exit"
