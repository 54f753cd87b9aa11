"""Files that are not what Coral expects: links planted in a run directory, FIFOs and
devices where a file should be, documents nested or numbered to break a parser, stores and
summaries of the wrong shape. Each ends in one line and exit status 2 (or is skipped where
a walk meets it), quickly, and nothing outside the run directory is touched."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import stat
import subprocess  # nosec B404 - runs this interpreter with fixed code
import sys
import threading
from pathlib import Path

import pytest

from conftest import data_root
from hostile_cli import base_env, run_measured

DEEP_JSON = "[" * 100_000 + "]" * 100_000
LONG_INT = "1" * 5000


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, data_dir: Path) -> Path:
    out = tmp_path_factory.mktemp("runs") / "one"
    result = run_measured("run", "--plugin", "quixbugs", "--model", "reference", "--samples",
                          "1", "--limit", "1", "--out", str(out), "--json",
                          env=base_env(CORAL_DATA_DIR=str(data_dir)))
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture
def env(data_dir: Path) -> dict[str, str]:
    return base_env(CORAL_DATA_DIR=str(data_dir))


@pytest.fixture
def run_copy(finished_run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(finished_run, copy)
    return copy


def _unfinished(run_dir: Path) -> Path:
    # closed here, not whenever the collector gets to it: the last connection to close
    # deletes -wal and -shm, and one closed late deleted a link planted after this (the
    # resume then found nothing to refuse)
    with contextlib.closing(sqlite3.connect(run_dir / "coral.sqlite")) as db, db:
        db.execute("UPDATE meta SET value = 'running' WHERE key = 'status'")
    return run_dir


def _refused(result, *words: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert len(result.error_lines) == 1, result.stderr
    assert result.error_lines[0].startswith("coral: error: "), result.stderr
    for word in words:
        assert word in result.stderr, result.stderr
    assert result.seconds < 60, result


def _outside(tmp_path: Path) -> tuple[Path, bytes]:
    victim = tmp_path / "victim.txt"
    content = b"precious, not Coral's\n"
    victim.write_bytes(content)
    return victim, content


@pytest.mark.parametrize("name", [".lock", "coral.sqlite-wal", "coral.sqlite-shm",
                                  "coral.sqlite-journal"])
@pytest.mark.parametrize("link", ["symbolic", "hard"])
def test_a_planted_link_in_a_run_directory_is_never_written_through(run_copy, tmp_path, env,
                                                                    name, link):
    run_dir = _unfinished(run_copy)
    victim, content = _outside(tmp_path)
    planted = run_dir / name
    planted.unlink(missing_ok=True)
    if link == "symbolic":
        planted.symlink_to(victim)
    else:
        os.link(victim, planted)
    before = victim.stat()
    result = run_measured("run", "--resume", str(run_dir), env=env)
    _refused(result, name)
    assert victim.read_bytes() == content
    assert victim.stat().st_mtime_ns == before.st_mtime_ns


def test_a_store_that_is_a_link_out_of_the_run_is_refused(run_copy, tmp_path, env):
    real = tmp_path / "elsewhere.sqlite"
    shutil.move(run_copy / "coral.sqlite", real)
    (run_copy / "coral.sqlite").symlink_to(real)
    for args in (("report", str(run_copy)), ("run", "--resume", str(run_copy)),
                 ("export", str(run_copy))):
        _refused(run_measured(*args, env=env), "symbolic link")


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "link-out"])
def test_a_summary_that_is_not_a_file_is_refused_without_blocking(run_copy, tmp_path, env,
                                                                  kind):
    summary = run_copy / "summary.json"
    summary.unlink()
    if kind == "fifo":
        os.mkfifo(summary)
    elif kind == "dev-zero":
        summary.symlink_to("/dev/zero")
    else:
        outside = tmp_path / "summary.json"
        outside.write_text("{}")
        summary.symlink_to(outside)
    _refused(run_measured("report", str(run_copy), env=env, timeout=60), "summary")


@pytest.mark.parametrize("text, words", [
    ("[1, 2]", "not an object"),
    ('{"dataset": "quixbugs", "split": "test", "model": "m", "samples": 1, "seed": 0, '
     '"problems": "gcd"}', "'problems' is a str"),
    ('{"dataset": "q", "split": "t", "model": "m", "samples": 1, "seed": 0, '
     '"problems": [{"problem": "gcd", "pass_at_k": {"1": "all"}}]}', "not numbers"),
    ('{"dataset": "q"}', "no 'split'"),
    (DEEP_JSON, "nested deeper"),
    ('{"seed": ' + LONG_INT + "}", "number of 5000 characters"),
    ('{"seed": NaN}', "JSON has no NaN"),
])
def test_a_summary_of_the_wrong_shape_is_one_line(run_copy, env, text, words):
    (run_copy / "summary.json").write_text(text)
    for args in (("report", str(run_copy)), ("report", str(run_copy), "--json")):
        _refused(run_measured(*args, env=env), words)


@pytest.mark.parametrize("sql, words", [
    ("UPDATE evaluations SET objectives = '[1, 2]'", "wrong shape"),
    ("UPDATE evaluations SET objectives = '{\"bugfix\": \"high\"}'", "not numbers"),
    ("UPDATE evaluations SET details = '" + DEEP_JSON[:20_000] + "'", "nested deeper"),
    ("UPDATE evaluations SET fitness = 'x'", "wrong type"),
    ("UPDATE generations SET params = '{\"a\": " + LONG_INT + "}'", "number of 5000"),
    ("UPDATE tasks SET seen_in_training = 'yes'", "wrong type"),
    ("UPDATE prompts SET prompt = '{\"messages\": [1]}'", "unexpected shape"),
    ("UPDATE meta SET value = '[1]' WHERE key = 'hook_errors'", "wrong shape"),
    # a red-team pass: both reached an export as Infinity and NaN, which is not JSON
    ("UPDATE evaluations SET fitness = 9e999", "holds inf, not a finite number"),
    ("UPDATE evaluations SET objectives = '{\"bugfix\": NaN}'", "JSON has no NaN"),
])
def test_a_store_with_wrongly_typed_rows_is_one_line(run_copy, env, sql, words):
    run_dir = _unfinished(run_copy)
    (run_dir / "summary.json").unlink()
    with contextlib.closing(sqlite3.connect(run_dir / "coral.sqlite")) as db, db:
        db.execute("INSERT OR REPLACE INTO meta VALUES ('hook_errors', "
                   "'{\"count\": 0, \"errors\": []}')")
        db.execute(sql)
    outcomes = [run_measured("report", str(run_dir), env=env),
                run_measured("export", str(run_dir), env=env)]
    assert any(words in o.stderr for o in outcomes), [o.stderr for o in outcomes]
    for outcome in outcomes:
        assert outcome.returncode in (0, 2), outcome.stderr
        assert "Traceback" not in outcome.stderr
        if outcome.returncode == 2:
            assert len(outcome.error_lines) == 1, outcome.stderr


@pytest.mark.parametrize("text, words", [
    ("[run]\nseed = " + "[" * 100_000, "nested deeper"),
    ("[run]\nseed = " + LONG_INT, "out of range"),
    ("[run]\nseed = 99999999999999999999", "out of range"),
    ("[" + ".".join(["a"] * 1_000_000) + "]\n", "dotted parts"),
    ("[execution]\nworkers = 100000\n", "at most 4096"),
    ('[search]\nstrategy = "evolution"\n[search.options]\ngenes = [1]\n',
     "(line 4): search strategy 'evolution' option 'genes' takes a TOML table"),
    ('[search]\nstrategy = "evolution"\n[search.options]\nplot_objectives = "bugfix"\n',
     "(line 4): search strategy 'evolution' option 'plot_objectives' takes a TOML list"),
    (".".join(["a"] * 1_000_000) + " = 1\n", "dotted parts"),
])
def test_a_config_that_breaks_parsers_is_one_line(tmp_path, env, text, words):
    config = tmp_path / "c.toml"
    config.write_text(text)
    _refused(run_measured("run", "--plugin", "quixbugs", "--config", str(config),
                          "--dry-run", env=env), words, str(config))


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_inputs_that_are_not_files_are_refused_without_blocking(tmp_path, env, kind):
    def special(name: str) -> Path:
        path = tmp_path / name
        if kind == "fifo":
            os.mkfifo(path)
        else:
            path.symlink_to("/dev/zero")
        return path

    cases = [
        ("evaluate", "--plugin", "quixbugs", "--problem", "gcd", "--candidate",
         str(special("gcd.py"))),
        ("evaluate", "--plugin", "quixbugs", "--samples", str(special("s.jsonl"))),
        ("run", "--plugin", "quixbugs", "--config", str(special("c.toml")), "--dry-run"),
        ("evaluate", "--plugin", "fim", "--data", str(special("tasks.jsonl")),
         "--predictions", str(special("p.jsonl"))),
    ]
    for args in cases:
        _refused(run_measured(*args, env=env, timeout=60), "not a regular file")


def test_samples_with_raw_line_separators_are_read_as_json_reads_them(tmp_path, env):
    samples = tmp_path / "s.jsonl"
    program = "def gcd(a, b):\n    return a if not b else gcd(b, a % b)  # \u2028 \u0085\n"
    samples.write_text(json.dumps({"task_id": "gcd", "solution": program},
                                  ensure_ascii=False) + "\n", encoding="utf-8")
    assert "\u2028" in samples.read_text(encoding="utf-8")
    result = run_measured("evaluate", "--plugin", "quixbugs", "--samples", str(samples),
                          "--json", env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["problems"][0]["c"] == 1


@pytest.mark.parametrize("text, words", [
    (DEEP_JSON, "nested deeper"),
    ('{"task_id": "gcd", "solution": "x", "n": ' + LONG_INT + "}", "number of 5000"),
])
def test_samples_that_break_parsers_are_one_line(tmp_path, env, text, words):
    samples = tmp_path / "s.jsonl"
    samples.write_text(text + "\n")
    _refused(run_measured("evaluate", "--plugin", "quixbugs", "--samples", str(samples),
                          env=env), words, f"{samples}:1")


def test_a_data_file_that_links_out_of_the_data_directory_is_refused(tmp_path, data_dir):
    copy = tmp_path / "data" / "quixbugs"
    shutil.copytree(data_dir / "quixbugs", copy, symlinks=True)
    outside = tmp_path / "gcd.py"
    shutil.move(copy / "python_programs" / "gcd.py", outside)
    (copy / "python_programs" / "gcd.py").symlink_to(outside)
    result = run_measured("run", "--plugin", "quixbugs", "--problems", "gcd", "--split",
                          "train", "--samples", "1", "--out", str(tmp_path / "r"),
                          env=base_env(CORAL_DATA_DIR=str(tmp_path / "data")))
    _refused(result, "leads out of")
    assert not (tmp_path / "r").exists()


def test_fim_build_skips_sources_that_are_not_files(tmp_path, env):
    src = tmp_path / "src"
    src.mkdir()
    (src / "good.py").write_text("def f(a, b):\n    total = a + b\n    return total * 2\n\n\n"
                                 "def g(x):\n    return [y for y in range(x) if y % 2]\n")
    os.mkfifo(src / "pipe.py")
    (src / "zero.py").symlink_to("/dev/zero")
    out = tmp_path / "tasks.jsonl"
    result = run_measured("fim", "build", str(src), "--out", str(out), "--n", "2", env=env,
                          timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.seconds < 60 and out.read_text().count("\n") >= 1


def test_what_a_user_typed_is_escaped_before_it_is_printed(tmp_path, env):
    config = tmp_path / "c.toml"
    config.write_text('[search]\nstrategy = "gr\\u001b[31mid"\n')
    result = run_measured("run", "--plugin", "quixbugs", "--config", str(config),
                          "--dry-run", env=env)
    assert result.returncode == 2 and "\x1b" not in result.stderr, repr(result.stderr)
    assert "\\x1b" in result.stderr and len(result.error_lines) == 1


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_module_to_mutate_that_is_not_a_file_is_refused_without_blocking(tmp_path, kind):
    project = tmp_path / "project"
    project.mkdir()
    module = project / "calc.py"
    if kind == "fifo":
        os.mkfifo(module)
    else:
        module.symlink_to("/dev/zero")
    (project / "test_calc.py").write_text("def test_nothing():\n    assert True\n")
    env = base_env()
    wrapper = ("import os, sys; os.chdir(sys.argv[1]); from coral_cli.app import main; "
               "main(sys.argv[2:])")
    done = subprocess.run([sys.executable, "-c", wrapper, str(project), "mutation", "run",
                           "--module", "calc.py", "--tests", "test_calc.py"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not list(project.glob("*.sqlite"))


@pytest.mark.parametrize("appended", ["testdata = 9**9**9", 'testdata = "x" * (10**10)',
                                      "testdata = [0] * (10**9)", "syntax error here (",
                                      "\0", "(" * 300])
def test_a_hostile_data_folder_test_file_is_one_line(tmp_path, appended):
    copy = tmp_path / "data" / "quixbugs"
    shutil.copytree(data_root() / "quixbugs", copy)
    tests = copy / "python_testcases" / "test_gcd.py"
    tests.write_text(tests.read_text() + "\n" + appended + "\n")
    result = run_measured("evaluate", "--plugin", "quixbugs", "--data-dir",
                          str(tmp_path / "data"), "--problem", "gcd", "--candidate",
                          str(copy / "correct_python_programs" / "gcd.py"), env=base_env(),
                          timeout=120)
    _refused(result, "gcd")
    assert result.peak_mib < 1000, result


def test_resuming_a_store_whose_generation_rows_were_deleted_is_one_line(run_copy, env):
    """A red-team pass: the resume generated the sample again, then failed to record its
    score beside the old one (an IntegrityError traceback)."""
    run_dir = _unfinished(run_copy)
    with contextlib.closing(sqlite3.connect(run_dir / "coral.sqlite")) as db, db:
        db.execute("DELETE FROM generations WHERE rowid = (SELECT MIN(rowid) FROM generations)")
    before = (run_dir / "coral.sqlite").read_bytes()
    _refused(run_measured("run", "--resume", str(run_dir), env=env),
             "1 evaluation(s) whose generation is gone")
    assert (run_dir / "coral.sqlite").read_bytes() == before


@pytest.mark.parametrize("state", ['{"state": 5, "told": 0}', "[1]", '"x"',
                                   '{"state": {}, "told": "x"}', '{"state": null, "told": 99}',
                                   '{"state": {"version": 1}, "told": 0}'])
def test_resuming_a_damaged_search_state_is_one_line(run_copy, env, state):
    run_dir = _unfinished(run_copy)
    with contextlib.closing(sqlite3.connect(run_dir / "coral.sqlite")) as db, db:
        db.execute("INSERT OR REPLACE INTO meta VALUES ('strategy', ?)", (state,))
    result = run_measured("run", "--resume", str(run_dir), env=env)
    _refused(result, "search state")


def test_a_summary_with_huge_numbers_still_reports(run_copy, env):
    summary = json.loads((run_copy / "summary.json").read_text())
    summary["fitness"] = 1e300
    summary["problems"][0]["fitness"] = 1e308
    (run_copy / "summary.json").write_text(json.dumps(summary))
    result = run_measured("report", str(run_copy), env=env)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert "1e+300" in result.stdout


def test_a_lone_surrogate_in_a_completion_is_kept_in_the_results(tmp_path, env):
    samples, results = tmp_path / "s.jsonl", tmp_path / "r.jsonl"
    samples.write_text('{"task_id": "gcd", "completion": "\\ud800"}\n')
    result = run_measured("evaluate", "--plugin", "quixbugs", "--samples", str(samples),
                          "--results", str(results), env=env)
    assert result.returncode == 0, result.stderr
    line = json.loads(results.read_text())
    assert line["completion"] == "\ud800" and line["passed"] is False


def test_one_data_sets_fetch_leaves_anothers_scratch_alone(tmp_path):
    from coral_core.data.fetch import _remove_stale

    (tmp_path / ".humaneval-infilling.scratch-live").mkdir()
    (tmp_path / ".humaneval.scratch-dead").mkdir()
    _remove_stale(tmp_path, "humaneval")
    assert [p.name for p in tmp_path.iterdir()] == [".humaneval-infilling.scratch-live"]


def test_a_link_planted_in_the_fim_cache_is_replaced_not_read(tmp_path, monkeypatch):
    from coral_plugins.datasets.fim import default_set

    monkeypatch.setenv("CORAL_CACHE_DIR", str(tmp_path / "cache"))
    path = default_set("line", 3, 0)
    outside = tmp_path / "outside.jsonl"
    outside.write_text('{"prefix": "a", "suffix": "b", "groundtruth": "c"}\n')
    path.unlink()
    path.symlink_to(outside)
    assert default_set("line", 3, 0) == path and not path.is_symlink()
    assert outside.read_text().count("\n") == 1 and path.read_text().count("\n") == 3


def test_no_output_replaces_a_runs_own_files_or_the_commands_inputs(run_copy, tmp_path, env):
    """`coral export RUN -o RUN/coral.sqlite` once replaced the run it read with its
    export: an output that names a file of a run (however the path is spelled), or an
    input of the same command, is one line, and every file is left as it was."""
    (tmp_path / "alias").symlink_to(run_copy)
    samples = tmp_path / "s.jsonl"
    samples.write_text(json.dumps({"task_id": "gcd", "solution": "def gcd(a, b):\n"
                                   "    return 1\n"}) + "\n")
    source = tmp_path / "src"
    source.mkdir()
    (source / "mod.py").write_text("def f(x):\n    y = x + 1\n    return y\n")
    files = {p: p.read_bytes() for p in [*run_copy.iterdir(), samples, source / "mod.py"]}
    cases = [
        (("export", str(run_copy), "-o", str(run_copy / "coral.sqlite")), "a file of the run"),
        (("export", str(run_copy), "-o", str(tmp_path / "alias" / "summary.json")),
         "a file of the run"),
        (("export", str(run_copy), "-o", f"{run_copy}/../run/config.toml"), "a file of the run"),
        (("export", str(run_copy), "-o", str(run_copy / "heatmap.png")), "a file of the run"),
        (("evaluate", "--plugin", "quixbugs", "--samples", str(samples), "--results",
          str(run_copy / "coral.sqlite-wal")), "a file of the run"),
        (("evaluate", "--plugin", "quixbugs", "--samples", str(samples), "--results",
          str(samples)), "is the --samples file"),
        (("fim", "build", str(source), "--out", str(run_copy / ".lock")), "a file of the run"),
        (("fim", "build", str(source), "--out", str(source / "mod.py")), "source files"),
    ]
    for args, words in cases:
        _refused(run_measured(*args, env=env), words)
    assert {p: p.read_bytes() for p in files} == files
    assert sorted(run_copy.iterdir()) == sorted(p for p in files if p.parent == run_copy)
    beside = run_measured("export", str(run_copy), "-o", str(run_copy / "samples.jsonl"),
                          env=env)
    assert beside.returncode == 0, beside.stderr
    assert json.loads((run_copy / "samples.jsonl").read_text().splitlines()[0])["task"]


def test_an_output_that_is_a_device_fifo_or_link_is_written_through(run_copy, tmp_path, env):
    """`--results /dev/null` and `export -o /dev/stdout` replaced the node with a regular
    file (as root, the system's own /dev/null; found by a fuzzing pass). A device or FIFO
    is written to as it is, a link's file is replaced and the link kept, a folder refused."""
    samples = tmp_path / "s.jsonl"
    samples.write_text(json.dumps({"task_id": "gcd", "solution": "def gcd(a, b):\n"
                                   "    return 1\n"}) + "\n")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    done = run_measured("evaluate", "--plugin", "quixbugs", "--samples", str(samples),
                        "--results", str(fifo), env=env)
    reader.join(timeout=60)
    assert done.returncode == 0, done.stderr
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and b'"passed": false' in received[0]
    target = tmp_path / "target.jsonl"
    target.write_text("old\n")
    target.chmod(0o600)  # a private file stays private (it became 0644: a red-team pass)
    (tmp_path / "link.jsonl").symlink_to(target)
    done = run_measured("export", str(run_copy), "-o", str(tmp_path / "link.jsonl"), env=env)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "link.jsonl").is_symlink() and '"task"' in target.read_text()
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    if os.geteuid() == 0:
        node = tmp_path / "null"
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        for args in (("export", str(run_copy), "-o", str(node)),
                     ("evaluate", "--plugin", "quixbugs", "--samples", str(samples),
                      "--results", str(node))):
            done = run_measured(*args, env=env)
            assert done.returncode == 0, done.stderr
            assert stat.S_ISCHR(node.lstat().st_mode), args
    (tmp_path / "folder").mkdir()
    _refused(run_measured("fim", "build", str(run_copy), "--out", str(tmp_path / "folder"),
                          env=env), "is a folder")
    # a red-team pass: `--results` replaced a mutation session with JSON Lines
    session = tmp_path / "calc.sqlite"
    with sqlite3.connect(session) as db:
        db.execute("CREATE TABLE kept (x)")
    before = session.read_bytes()
    _refused(run_measured("evaluate", "--plugin", "quixbugs", "--samples", str(samples),
                          "--results", str(session), env=env), "is an SQLite database")
    assert session.read_bytes() == before


def test_a_refused_relocation_is_not_kept(run_copy, tmp_path, env):
    """`--resume RUN --data-dir WRONG` was refused, but WRONG was already written into
    config.toml, and every later resume failed on a --data-dir nobody gave (a fuzzing
    pass)."""
    run = _unfinished(run_copy)
    before = (run / "config.toml").read_bytes()
    _refused(run_measured("run", "--resume", str(run), "--data-dir", str(tmp_path), env=env),
             "has no 'quixbugs' folder")
    assert (run / "config.toml").read_bytes() == before
    resumed = run_measured("run", "--resume", str(run), "--json", env=env)
    assert resumed.returncode == 0, resumed.stderr


def test_a_summary_that_is_a_folder_is_refused_before_any_work(run_copy, env):
    """It was a 47-line traceback at the end of the resumed run, which stayed `running`."""
    run = _unfinished(run_copy)
    (run / "summary.json").unlink(missing_ok=True)
    (run / "summary.json").mkdir()
    _refused(run_measured("run", "--resume", str(run), env=env), "summary.json is not a file")
    # a red-team pass: a grid's heatmap.png as a folder failed the run after all its work
    (run / "summary.json").rmdir()
    (run / "heatmap.png" / "x").mkdir(parents=True)
    _refused(run_measured("run", "--resume", str(run), env=env), "heatmap.png is not a file")


def test_an_emptied_store_is_refused_without_being_written(run_copy, env):
    """Resuming a run whose store was truncated blamed an edited config.toml and wrote a
    fresh schema into the damaged file (a fuzzing pass)."""
    for suffix in ("-wal", "-shm"):
        (run_copy / f"coral.sqlite{suffix}").unlink(missing_ok=True)
    (run_copy / "coral.sqlite").write_bytes(b"")
    _refused(run_measured("run", "--resume", str(run_copy), env=env), "cannot be resumed")
    assert (run_copy / "coral.sqlite").stat().st_size == 0


def test_an_export_to_a_terminal_shows_control_characters_as_escapes():
    """A red-team reply's escape sequences cleared the screen of whoever exported its run
    as CSV to a terminal; to a file or a pipe the text is kept as it is."""
    import io

    from coral_core.results.export import FIELDS, write

    row = {**dict.fromkeys(FIELDS), "reply": "ok\x1b[2J\x1b]0;pwned\x07\u202e",
           "objectives": {"a": 1.0}, "tests": None}
    for fmt in ("csv", "jsonl"):
        shown, kept = io.StringIO(), io.StringIO()
        write(iter([dict(row)]), shown, fmt, terminal=True)
        write(iter([dict(row)]), kept, fmt)
        assert "\x1b" not in shown.getvalue() and "\u202e" not in shown.getvalue()
        assert "\\x1b[2J" in shown.getvalue() or "\\u001b[2J" in shown.getvalue()
        assert "\u202e" in kept.getvalue()


@pytest.mark.parametrize("width", [200, 20])  # a whole table, and one block per row
def test_a_report_on_a_terminal_shows_control_characters_as_escapes(width):
    """A red-team summary.json held terminal escape sequences in a problem's name and the
    model's: `coral report` wrote them to the terminal as they were."""
    import io

    from rich.console import Console

    from cli.output import show
    from coral_core.results.grids import Column, Grid

    evil = "sie\x1b]0;pwned\x07\x1b[2J\u202eve"
    grid = Grid(evil, (Column("problem", key=True), Column("model")), ((evil, evil),),
                caption=evil)
    buffer = io.StringIO()
    show(grid, Console(file=buffer, force_terminal=True, width=width))
    shown = buffer.getvalue()
    assert "\x1b]0;" not in shown and "\x1b[2J" not in shown and "\u202e" not in shown
    assert "pwned" in shown  # shown, escaped (folded where the terminal is narrow)
