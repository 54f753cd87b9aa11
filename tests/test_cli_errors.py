"""Errors a user can cause end with one line on stderr and exit status 2, never a traceback."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import coral_env, run_coral


@pytest.fixture(scope="module")
def files(tmp_path_factory, data_dir):
    root = tmp_path_factory.mktemp("inputs")
    good = (data_dir / "quixbugs" / "correct_python_programs" / "gcd.py").read_text()
    (root / "unknown_key.toml").write_text('[model]\ntemperature = 0.5\ntemprature = 0.7\n')
    (root / "wrong_type.toml").write_text('[run]\nseed = 1\nsamples = "ten"\n')
    (root / "malformed.toml").write_text('[run]\nsamples = = 3\n')
    (root / "unknown_section.toml").write_text('[modle]\nspec = "baseline"\n')
    (root / "bad_range.toml").write_text('[model]\ntop_p = 1.5\n')
    (root / "unknown_evaluator.toml").write_text('[evaluators]\nuse = ["tests", "nope"]\n')
    (root / "unknown_split.toml").write_text('[dataset]\nsplit = "validation"\n')
    (root / "pass0.toml").write_text('[search]\nrank_by = "pass@0"\n')
    (root / "pass01.toml").write_text('[search]\nrank_by = "pass@01"\n')
    (root / "pinned.toml").write_text('[search]\npinned = ["model.temprature"]\n')
    (root / "rank_bogus.toml").write_text('[search]\nrank_by = "bogus"\n')
    (root / "zero_weights.toml").write_text('[evaluators.weights]\nbugfix = 0\nstyle = 0.0\n')
    (root / "empty_stop.toml").write_text('[model]\nstop = ["x", ""]\n')
    (root / "pass5.toml").write_text('[search]\nrank_by = "pass@5"\n')
    (root / "nul.toml").write_text('[run]\nout = "runs/a\\u0000b"\n')
    (root / "gcd.py").write_text(good)
    (root / "latin1.py").write_bytes("def gcd(a, b):\n    return 'é'\n".encode("latin-1"))
    (root / "empty_data").mkdir()
    (root / "not_a_run").mkdir()
    (root / "not_a_run" / "notes.txt").write_text("hello")
    (root / "no_py").mkdir()
    (root / "init_py").mkdir()
    (root / "init_py" / "__init__.py").write_text("")
    (root / "dup.jsonl").write_text('{"task_id": "sieve", "task_id": "gcd", "solution": ""}\n')
    (root / "both.jsonl").write_text('{"task_id": "gcd", "solution": "", "completion": ""}\n')
    (root / "bad_gene_space.toml").write_text(
        '[search]\nstrategy = "grid"\n[search.space]\n'
        '"model.options.family_weights.operator" = [0.5, true]\n')
    (root / "zero_weight_space.toml").write_text(
        '[evaluators.weights]\nbugfix = 1.0\n[search]\nstrategy = "grid"\n'
        '[search.space]\n"evaluators.weights.bugfix" = [1.0, 0.0]\n')
    (root / "fim_n0.toml").write_text("[dataset.options]\nn = 0\n")
    (root / "nan.jsonl").write_text('{"task_id": "gcd", "solution": "", "score": NaN}\n')
    (root / "huge.jsonl").write_text('{"task_id": "gcd", "solution": "", "big": 1e999}\n')
    (root / "date_space.toml").write_text('[search]\nstrategy = "grid"\n[search.space]\n'
                                          '"model.top_k" = [1979-05-27, 5]\n')
    (root / "odd_list.toml").write_text('[dataset]\nproblems = ["gcd", 2]\n')
    (root / "bayes.toml").write_text('[search]\nstrategy = "bayes"\n')
    record = {"task_id": "X\ud800", "prompt": "def f():\n", "entry_point": "f",
              "canonical_solution": "    return 1\n",
              "test": "def check(candidate):\n    assert candidate() == 1\n"}
    (root / "surrogate.jsonl").write_text(json.dumps(record) + "\n")  # a "\\ud800" escape
    (root / "binary_py").mkdir()
    (root / "binary_py" / "a.py").write_bytes(bytes(range(256)) * 12)
    (root / "long_id.jsonl").write_text(json.dumps({"task_id": "q" * 100_000,
                                                    "solution": ""}) + "\n")
    (root / "single_space.toml").write_text('[search.space]\n"model.top_k" = [1, 2]\n')
    (root / "baseline_adapter.toml").write_text('[model]\nspec = "baseline"\nadapter = "/x"\n')
    (root / "train_dir").mkdir()
    (root / "train_dir" / "gcd.py").write_text(good)
    (root / "loop_a").symlink_to(root / "loop_b")
    (root / "loop_b").symlink_to(root / "loop_a")
    return root


LONG = "{" + "a" * 300 + "}"
CASES = {
    "unknown plugin": (["run", "--plugin", "nope"], "unknown experiment 'nope'"),
    "unknown model": (["run", "--plugin", "quixbugs", "--model", "gpt9:x"], "unknown model 'gpt9'"),
    "unknown evaluator": (["run", "--plugin", "quixbugs", "--config", "{unknown_evaluator.toml}"],
                          "unknown evaluator 'nope'"),
    "unknown key": (["run", "--plugin", "quixbugs", "--config", "{unknown_key.toml}"],
                    "unknown key 'model.temprature'"),
    "unknown section": (["run", "--plugin", "quixbugs", "--config", "{unknown_section.toml}"],
                        "unknown section [modle]"),
    "wrong type": (["run", "--plugin", "quixbugs", "--config", "{wrong_type.toml}"],
                   "'run.samples' must be an integer"),
    "out of range": (["run", "--plugin", "quixbugs", "--config", "{bad_range.toml}"],
                     "'model.top_p' must be in (0, 1]"),
    "malformed TOML": (["run", "--plugin", "quixbugs", "--config", "{malformed.toml}"],
                       "invalid TOML"),
    # a bad-input pass: "must be a list of strings, got list"; --split ignored by candidate
    # files (a training problem scored as a test problem); a data folder that is a file
    # listed every data set as missing, exit status 0
    "a list with an item of another kind": (
        ["run", "--plugin", "quixbugs", "--config", "{odd_list.toml}"],
        "'dataset.problems' must be a list of strings, got a list holding 2 (int)"),
    "a candidate of another split": (
        ["evaluate", "--plugin", "quixbugs", "--problem", "gcd", "--candidate", "{gcd.py}",
         "--split", "test"], "task 'gcd' is in the train split, not in test"),
    "a candidate folder of another split": (
        ["evaluate", "--plugin", "quixbugs", "--candidate-dir", "{train_dir}", "--split",
         "extra"], "task 'gcd' is in the train split, not in extra"),
    # ...and these were '.' by the time Coral saw them ("config . is a folder"): a path
    # given empty, an unset shell variable most often (`--out ""`, a string, is the default
    # folder: test_run_output.py)
    "an empty --config": (["run", "--plugin", "quixbugs", "--config", ""],
                          "'--config': an empty path"),
    "an empty --config=": (["run", "--plugin", "quixbugs", "--config="],
                           "'--config': an empty path"),
    "an empty run folder": (["report", ""], "'RUN_DIR': an empty path"),
    "an empty --samples": (["evaluate", "--plugin", "humaneval", "--samples", ""],
                           "'--samples': an empty path"),
    # a second bad-input pass: a lone surrogate in a task id was a traceback from the store
    # and left a run directory; a folder of files that gave no FIM task wrote an empty task
    # file, exit status 0
    "a task id that UTF-8 cannot hold": (
        ["run", "--plugin", "humaneval", "--data", "{surrogate.jsonl}", "--model",
         "reference", "--samples", "1"], "a task id that UTF-8 cannot hold"),
    "FIM tasks from files that give none": (
        ["fim", "build", "{binary_py}", "--out", "tasks.jsonl"], "gave a line task"),
    # ...and these named no file or line
    "an unknown strategy, at its line": (
        ["run", "--plugin", "quixbugs", "--config", "{bayes.toml}"],
        "bayes.toml (line 2): unknown search strategy 'bayes'"),
    "a space for a strategy that takes none, at its line": (
        ["run", "--plugin", "quixbugs", "--config", "{single_space.toml}"],
        "single_space.toml (line 1): [search.space] is set, but search strategy 'single'"),
    "an adapter for a model that takes none, at its line": (
        ["run", "--plugin", "quixbugs", "--config", "{baseline_adapter.toml}"],
        "baseline_adapter.toml (line 3): model 'baseline' cannot apply adapters"),
    "datasets list of a data folder that is a file": (
        ["datasets", "list", "--data-dir", "{gcd.py}"], "is not a folder; give a folder"),
    "datasets list of a data folder that does not exist": (
        ["datasets", "list", "--data-dir", "{absent}"], "does not exist; give a folder"),
    "missing config": (["run", "--plugin", "quixbugs", "--config", "{absent.toml}"],
                       "cannot read config"),
    "missing data dir": (["run", "--plugin", "quixbugs", "--data-dir", "{absent_dir}"],
                         "does not exist"),
    "empty data dir": (["run", "--plugin", "quixbugs", "--data-dir", "{empty_data}"],
                       "has no 'quixbugs' folder"),
    "unknown split": (["run", "--plugin", "quixbugs", "--config", "{unknown_split.toml}"],
                      "unknown split 'validation'"),
    "contamination": (["evaluate", "--plugin", "quixbugs", "--problem", "nope",
                       "--candidate", "{gcd.py}"], "unknown QuixBugs problem 'nope'"),
    "unreadable candidate": (["evaluate", "--plugin", "quixbugs", "--problem", "gcd",
                              "--candidate", "{absent.py}"], "cannot read candidate"),
    "candidate not UTF-8": (["evaluate", "--plugin", "quixbugs", "--problem", "gcd",
                             "--candidate", "{latin1.py}"], "is not UTF-8"),
    "candidate dir without programs": (["evaluate", "--plugin", "quixbugs", "--candidate-dir",
                                        "{no_py}"], "holds no .py files"),
    # a red-team pass: "unknown QuixBugs problem ''", naming no file
    "candidate dir with an __init__.py": (["evaluate", "--plugin", "quixbugs",
                                           "--candidate-dir", "{init_py}"],
                                          "__init__.py names no problem"),
    "bad --samples": (["run", "--plugin", "quixbugs", "--samples", "0"],
                      "--samples must be at least 1"),
    "huge --samples": (["run", "--plugin", "quixbugs", "--samples", "99999999999"],
                       "--samples must be in [1, 100000]"),
    "non-integer --samples": (["run", "--plugin", "quixbugs", "--samples", "many"],
                              "Invalid value for '--samples'"),
    "resume of a folder that is not a run": (["run", "--resume", "{not_a_run}"],
                                             "is not a Coral run directory"),
    "unknown executor": (["run", "--plugin", "quixbugs", "--executor", "slurm"],
                         "unknown executor 'slurm'"),
    "cluster address without ray": (["run", "--plugin", "quixbugs", "--ray-address", "auto"],
                                    "read only by the ray executor"),
    "mutation address without ray": (["mutation", "run", "--module", "{gcd.py}", "--tests",
                                      "{gcd.py}", "--ray-address", "auto"],
                                     "read only by the ray executor"),
    "unknown command": (["frobnicate"], "No such command"),
    "unknown option": (["run", "--plugin", "quixbugs", "--colour"], "No such option"),
    "report of a folder that is not a run": (["report", "{not_a_run}"],
                                             "is not a Coral run directory"),
    "fetch of an unknown data set": (["datasets", "fetch", "nope"], "unknown dataset 'nope'"),
    # found by a fuzzing pass: each was a traceback (or no deadline at all)
    "NUL in a config string": (["run", "--plugin", "quixbugs", "--config", "{nul.toml}"],
                               "NUL character"),
    "infinite fetch timeout": (["datasets", "fetch", "quixbugs", "--timeout", "inf"],
                               "--timeout inf"),
    "resume with a flag at zero": (["run", "--resume", "{not_a_run}", "--seed", "0"],
                                   "drop --seed"),
    "an option the data set does not take": (
        ["run", "--plugin", "quixbugs", "--prompt-style", "instruction", "--dry-run"],
        "command line (--prompt-style): [dataset.options]: data set 'quixbugs' has no option "
        "'prompt' (options: data_dir, include_slow)"),
    "a task file for a data set that reads none": (
        ["run", "--plugin", "quixbugs", "--data", "tasks.jsonl", "--dry-run"],
        "command line (--data): [dataset.options]: data set 'quixbugs' has no option 'path'"),
    "pass@0": (["run", "--plugin", "quixbugs", "--config", "{pass0.toml}"],
               "must be pass@K with K from 1 to 100000"),
    # a red-team pass: the summary names pass@1, so pass@01 failed the finished run
    "pass@01": (["run", "--plugin", "quixbugs", "--config", "{pass01.toml}", "--dry-run"],
                "must be written pass@1"),
    # a red-team pass: a misspelt key pinned nothing, without a word
    "a misspelt pinned key": (["run", "--plugin", "evolution", "--config", "{pinned.toml}",
                               "--dry-run"], "names 'model.temprature', not a model key"),
    # a red-team pass: both were found only once the run was done, its directory unusable
    "rank_by naming no objective": (["run", "--plugin", "quixbugs", "--config",
                                     "{rank_bogus.toml}"],
                                    "rank_by = 'bogus' names no objective of the evaluators"),
    "rank_by pass@K over the samples": (["run", "--plugin", "quixbugs", "--samples", "2",
                                         "--config", "{pass5.toml}"],
                                        "needs at least 5 samples per problem; the run takes 2"),
    # a fuzzing pass: a path the system cannot follow was a traceback where it was first used
    "a name too long for --out": (["run", "--plugin", "quixbugs", "--out", LONG],
                                  "File name too long"),
    "a name too long to report": (["report", LONG], "File name too long"),
    "a name too long for --candidate-dir": (["evaluate", "--plugin", "quixbugs",
                                             "--candidate-dir", LONG], "File name too long"),
    "a loop of links for --out": (["run", "--plugin", "quixbugs", "--out", "{loop_a}"],
                                  "a loop of symbolic links"),
    # found by a fuzzing pass: each was accepted without a word, and did something odd
    "every weight 0": (["run", "--plugin", "quixbugs", "--config", "{zero_weights.toml}"],
                       "gives every objective weight 0"),
    "an empty stop sequence": (["run", "--plugin", "quixbugs", "--config", "{empty_stop.toml}"],
                               "'model.stop' holds an empty string"),
    "--problems naming nothing": (["run", "--plugin", "quixbugs", "--problems", " , "],
                                  "--problems ' , ' names nothing"),
    "a FIM seed past 64 bits": (["fim", "build", "{no_py}", "--out", "{tasks.jsonl}", "--seed",
                                 str(2 ** 64)], "--seed must be in [-2**63, 2**63 - 1]"),
    "a sample naming its task twice": (["evaluate", "--plugin", "quixbugs", "--samples",
                                        "{dup.jsonl}"], "the key 'task_id' is given twice"),
    "a sample with a solution and a completion": (
        ["evaluate", "--plugin", "quixbugs", "--samples", "{both.jsonl}"],
        "has both 'solution' (a program) and 'completion'"),
    # a red-team pass: values only the model can judge passed --dry-run, then failed the run
    # naming no file or flag (and, as a search dimension, failed every resume of it)
    "a family weight out of range": (
        ["run", "--plugin", "quixbugs", "--model-arg", "family_weights={operator=-1}",
         "--dry-run"], "command line (--model-arg): [model.options] family_weights.operator "
        "must be a finite number >= 0, not -1"),
    "an openai option out of range": (
        ["run", "--plugin", "quixbugs", "--model", "openai:m", "--base-url",
         "http://127.0.0.1:9/v1", "--model-arg", "concurrency=0", "--dry-run"],
        "command line (--model-arg): openai: concurrency must be an integer >= 1"),
    "a model option out of range in a search space": (
        ["run", "--plugin", "quixbugs", "--config", "{bad_gene_space.toml}"],
        "[search.space] model.options.family_weights.operator = true: [model.options] "
        "family_weights.operator must be a finite number >= 0"),
    "a search value that leaves every weight 0": (
        ["run", "--plugin", "quixbugs", "--config", "{zero_weight_space.toml}"],
        "evaluators.weights.bugfix = 0.0: search strategy overrides: 'evaluators.weights' "
        "gives every objective weight 0"),
    "a FIM task count of 0": (["run", "--plugin", "fim", "--config", "{fim_n0.toml}",
                               "--dry-run"], "fim_n0.toml (line 2): fim: n must be at least 1"),
    # a red-team pass: NaN and 1e999 went on into --results, which was then not JSON
    "a sample holding NaN": (["evaluate", "--plugin", "quixbugs", "--samples", "{nan.jsonl}"],
                             "nan.jsonl:1: malformed JSON (NaN: JSON has no NaN or infinity)"),
    "a sample holding 1e999": (["evaluate", "--plugin", "quixbugs", "--samples",
                                "{huge.jsonl}"], "1e999 is out of a float's range"),
    # a red-team pass: a TOML date in a search space was a traceback from the run's digest
    "a date in a search space": (["run", "--plugin", "quixbugs", "--config",
                                  "{date_space.toml}", "--dry-run"],
                                 "date_space.toml (line 4): 'search.space.model.top_k' is a "
                                 "TOML date or time"),
    "--data-dir naming a file": (["run", "--plugin", "quixbugs", "--data-dir", "{gcd.py}"],
                                 "is not a folder"),
    "malformed base URL": (["run", "--plugin", "quixbugs", "--model", "openai:x",
                            "--base-url", "http://a..b:9/v1"], "is malformed"),
}


def test_a_bad_log_level_is_one_line(tmp_path, data_dir):
    env = {**coral_env(data_dir), "CORAL_LOG_LEVEL": "chatty"}
    result = run_coral("--version", env=env, cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        "coral: error: CORAL_LOG_LEVEL='chatty': give one of DEBUG, INFO, WARNING, ERROR, "
        "CRITICAL"]


@pytest.mark.parametrize("switch", ["CORAL_REQUIRE_BWRAP", "CORAL_DISABLE_PLUGIN_AUTOLOAD",
                                    "SKIP_MUTATION"])
def test_a_switch_that_is_neither_on_nor_off_is_one_line(tmp_path, data_dir, switch):
    """A fuzzing pass: `CORAL_REQUIRE_BWRAP=yes` (and any other value but "1") was read as
    off without a word. Every switch now reads 1/true/yes/on and 0/false/no/off alike."""
    env = {**coral_env(data_dir), switch: "maybe"}
    result = run_coral("datasets", "list", env=env, cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        f"coral: error: {switch}='maybe': give 1 or 0 (or true/false, yes/no, on/off)"]
    assert run_coral("datasets", "list", env={**env, switch: "Yes"},
                     cwd=tmp_path).returncode == 0


@pytest.mark.parametrize("name", list(CASES))
def test_user_error_is_one_line_and_status_2(name, files, tmp_path, data_dir):
    args, message = CASES[name]
    args = [str(files / a[1:-1]) if a.startswith("{") else a for a in args]
    result = run_coral(*args, env=coral_env(data_dir), cwd=tmp_path)
    assert result.returncode == 2, (name, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, (name, result.stderr)
    assert message in lines[0], (name, lines[0])
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "runs").exists(), "a failed start must not leave a run directory"


def test_a_refusal_leaves_no_file_and_says_a_long_name_in_short(files, tmp_path, data_dir):
    """A second bad-input pass: `fim build` of files that gave no task wrote an empty
    task file (exit status 0); a 100,000-character task id came back whole in its error
    line. The line keeps its start and its end, where the hint is."""
    env = coral_env(data_dir)
    built = run_coral("fim", "build", str(files / "binary_py"), "--out", "tasks.jsonl",
                      env=env, cwd=tmp_path)
    assert built.returncode == 2 and not (tmp_path / "tasks.jsonl").exists(), built.stderr
    said = run_coral("evaluate", "--plugin", "quixbugs", "--samples",
                     str(files / "long_id.jsonl"), env=env, cwd=tmp_path)
    assert said.returncode == 2 and said.stderr.count("\n") == 1, said.stderr[:300]
    assert len(said.stderr) < 2100 and "characters ...]" in said.stderr
    assert said.stderr.startswith("coral: error: ") and "qqqq" in said.stderr


@pytest.mark.parametrize("cache", ["file", "missing under /proc"])
def test_a_cache_that_cannot_be_used_is_one_line(tmp_path, data_dir, cache):
    """CORAL_CACHE_DIR naming a file (or a folder that cannot be made) was a traceback
    from `datasets fetch` and the FIM preset (a fuzzing pass)."""
    (tmp_path / "file").write_text("not a folder")
    where = tmp_path / "file" if cache == "file" else "/proc/coral-cannot-be-here"
    env = {**coral_env(data_dir), "CORAL_CACHE_DIR": str(where)}
    for args in (["datasets", "fetch", "quixbugs"], ["run", "--plugin", "fim", "--json"]):
        result = run_coral(*args, env=env, cwd=tmp_path)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.strip().splitlines() == [
            f"coral: error: cannot use Coral's cache folder {where} "
            f"({'Not a directory' if cache == 'file' else 'No such file or directory'}); "
            "set CORAL_CACHE_DIR to a folder you can write"], result.stderr


def _catches_sigint(pid: int) -> bool | None:
    """Whether the process has a handler for SIGINT (None: it has exited)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    caught = next(line for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(caught.split()[1], 16) & (1 << (signal.SIGINT - 1)))


def test_ctrl_c_while_the_command_imports_is_quiet(tmp_path, data_dir):
    """^C in the tens of milliseconds that `coral` spends importing printed a traceback from
    whatever module was loading. The console script now lets SIGINT end it by the signal
    until the command's own handling is in place. The signal is sent inside that window,
    found from the process's signal mask rather than from a timing guess; an interpreter
    that is exiting also drops its handler, so the run must not have started either."""
    out = tmp_path / "run"
    command = [str(Path(sys.executable).with_name("coral")), "run", "--plugin", "quixbugs",
               "--model", "reference", "--limit", "1", "--samples", "1", "--out", str(out)]
    for _ in range(20):
        process = subprocess.Popen(command, env=coral_env(data_dir), cwd=tmp_path,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, preexec_fn=_default_sigint)
        seen_python = False
        while (caught := _catches_sigint(process.pid)) is not None and process.poll() is None:
            seen_python = seen_python or caught  # the interpreter's own handler came first
            if seen_python and not caught:
                process.send_signal(signal.SIGINT)
                break
        stdout, stderr = process.communicate(timeout=120)
        if seen_python and caught is False:
            assert (process.returncode, stdout, stderr) == (-signal.SIGINT, "", "")
            assert not out.exists(), "the signal came after the command had started"
            return
    pytest.fail("never caught `coral` between its interpreter's start and its command")


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
