"""Run directories a user can trust: locked, checked on resume, relocatable, read-only
reports, and one-line errors for every way a user can break one."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coral_core.run.store import RunStore

from conftest import coral_env, run_coral, store_sql
from plugin_kit import echo_model_distribution


@pytest.fixture(scope="module")
def env(tmp_path_factory, data_dir):
    site = echo_model_distribution(tmp_path_factory.mktemp("site"))
    return coral_env(data_dir, PYTHONPATH=str(site), CORAL_PLUGINS="echo")


CONFIG = '[dataset]\nproblems = ["sieve", "wrap"]\n[run]\nsamples = 3\n'


def _config(tmp_path: Path, text: str = CONFIG) -> Path:
    path = tmp_path / "experiment.toml"
    path.write_text(text)
    return path


def _start(tmp_path: Path, env, out: Path, *extra: str, delay: float = 0.3,
           samples: int = 20) -> subprocess.Popen:
    config = _config(tmp_path, CONFIG + f"[model.options]\ndelay = {delay}\n")
    command = [str(Path(sys.executable).with_name("coral")), "run", "--plugin", "quixbugs",
               "--model", "echo", "--config", str(config), "--samples", str(samples),
               "--out", str(out), *extra]
    # Ctrl-C is the run's to handle whatever started the tests: a background job of a
    # non-interactive shell inherits SIGINT ignored, and the run would never see it
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=_default_sigint)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _count(run_dir: Path, table: str) -> int:
    try:
        return store_sql(run_dir / "coral.sqlite", f"SELECT COUNT(*) FROM {table}",
                         read_only=True)[0][0]
    except sqlite3.Error:
        return 0


def _wait_for(run_dir: Path, table: str, rows: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while _count(run_dir, table) < rows:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the run never got going"
        time.sleep(0.05)


def _one_line_error(result, fragment: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def _finished_run(tmp_path: Path, env, name: str = "run", *extra: str) -> Path:
    out = tmp_path / name
    result = run_coral("run", "--plugin", "quixbugs", "--model", "echo", "--config",
                       str(_config(tmp_path)), "--out", str(out), *extra, env=env)
    assert result.returncode == 0, result.stderr
    return out


def _interrupted_run(tmp_path: Path, env, name: str = "run") -> Path:
    out = tmp_path / name
    process = _start(tmp_path, env, out, delay=0.05)
    _wait_for(out, "evaluations", 2, process)
    process.kill()
    process.wait()
    return out


def test_resume_refuses_an_edited_config(tmp_path, env):
    run_dir = _interrupted_run(tmp_path, env)
    config = run_dir / "config.toml"
    config.write_text(config.read_text().replace("samples = 20", "samples = 3"))
    _one_line_error(run_coral("run", "--resume", str(run_dir), env=env), "was edited")


def test_a_run_directory_is_never_made_in_a_data_set_folder(tmp_path, env, data_dir):
    """A red-team pass ran with --out inside the QuixBugs folder the run read."""
    shutil.copytree(data_dir / "quixbugs", tmp_path / "data" / "quixbugs")
    out = tmp_path / "data" / "quixbugs" / "python_programs" / "run"
    for extra in (["--dry-run"], []):
        _one_line_error(run_coral("run", "--plugin", "quixbugs", "--model", "echo",
                                  "--config", str(_config(tmp_path)), "--data-dir",
                                  str(tmp_path / "data"), "--out", str(out), *extra, env=env),
                        "which Coral reads (a data set or its cache)")
        assert not out.exists()


def test_a_finished_run_that_lost_its_summary_is_resumed_to_write_it(tmp_path, env):
    """A red-team pass deleted summary.json: the report said to resume, resume refused a
    finished run, and nothing could write it again."""
    from coral_core.results.reporting import timeless

    run_dir = _finished_run(tmp_path, env)
    before = json.loads((run_dir / "summary.json").read_text())
    (run_dir / "summary.json").unlink()
    resumed = run_coral("run", "--resume", str(run_dir), env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert timeless(json.loads((run_dir / "summary.json").read_text())) == timeless(before)
    _one_line_error(run_coral("run", "--resume", str(run_dir), env=env), "is a finished run")


def test_out_naming_a_dangling_link_says_so(tmp_path, env):
    link = tmp_path / "dangling"
    link.symlink_to(tmp_path / "nowhere")
    _one_line_error(run_coral("run", "--plugin", "quixbugs", "--model", "echo", "--config",
                              str(_config(tmp_path)), "--out", str(link), env=env),
                    "which does not exist; give a folder")


def test_out_under_a_file_names_the_file(tmp_path, env):
    (tmp_path / "afile").write_text("mine\n")
    out = tmp_path / "afile" / "sub" / "run"
    _one_line_error(run_coral("run", "--plugin", "quixbugs", "--model", "echo", "--config",
                              str(_config(tmp_path)), "--out", str(out), env=env),
                    f"{tmp_path / 'afile'} is a file, not a folder")
    assert (tmp_path / "afile").read_text() == "mine\n"


def test_a_start_stopped_before_its_config_is_replaced_not_resumed(tmp_path, env):
    """A red-team pass: a run killed while its folder was made (a store, no config.toml)
    was "not a run" to --resume and "already a run" to --out: a dead end."""
    out = tmp_path / "half"
    out.mkdir()
    store = RunStore.in_run(out)
    store.set_meta("status", "running")
    store.close()
    _one_line_error(run_coral("run", "--resume", str(out), env=env),
                    "was stopped while its run was being made and holds no work")
    made = run_coral("run", "--plugin", "quixbugs", "--model", "echo", "--config",
                     str(_config(tmp_path)), "--out", str(out), env=env)
    assert made.returncode == 0, made.stderr
    assert (out / "config.toml").is_file() and (out / "summary.json").is_file()
    (out / "config.toml").unlink()  # now the store holds work: never replaced
    _one_line_error(run_coral("run", "--plugin", "quixbugs", "--model", "echo", "--config",
                              str(_config(tmp_path)), "--out", str(out), env=env),
                    "holds a run's store with work in it but no config.toml")
    # stopped as SQLite made the store file, before its first table (or another process
    # connected to it then): an empty file, no work (a CI rehearsal refused it as work)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "coral.sqlite").touch()
    made = run_coral("run", "--plugin", "quixbugs", "--model", "echo", "--config",
                     str(_config(tmp_path)), "--out", str(empty), env=env)
    assert made.returncode == 0, made.stderr
    assert (empty / "config.toml").is_file() and (empty / "summary.json").is_file()
    # an empty store among someone's files: their folder, refused and left as it was (a
    # reviewer's pass: the store and its journal were deleted first)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    for name, text in (("coral.sqlite", ""), ("coral.sqlite-journal", "abc"),
                       ("notes.txt", "mine")):
        (theirs / name).write_text(text)
    _one_line_error(run_coral("run", "--plugin", "quixbugs", "--model", "echo", "--config",
                              str(_config(tmp_path)), "--out", str(theirs), env=env),
                    "exists and is not an empty folder")
    assert sorted(p.name for p in theirs.iterdir()) == [
        "coral.sqlite", "coral.sqlite-journal", "notes.txt"]
    assert (theirs / "coral.sqlite-journal").read_text() == "abc"


def test_resume_refuses_a_switch_that_changes_results(tmp_path, env):
    """A run begun with mutation testing is not resumed without it (a red-team pass mixed
    testgen scores with and without it in one summary), and the other way round."""
    without = {**env, "SKIP_MUTATION": "0"}
    run_dir = _interrupted_run(tmp_path, without)
    _one_line_error(run_coral("run", "--resume", str(run_dir),
                              env={**env, "SKIP_MUTATION": "1"}),
                    "began with SKIP_MUTATION=0 and would be resumed with SKIP_MUTATION=1")
    skipped = _interrupted_run(tmp_path, {**env, "SKIP_MUTATION": "yes"}, "skipped")
    _one_line_error(run_coral("run", "--resume", str(skipped), env=without),
                    "resume it with SKIP_MUTATION=1")
    resumed = run_coral("run", "--resume", str(skipped), env={**env, "SKIP_MUTATION": "1"})
    assert resumed.returncode == 0, resumed.stderr


def test_resume_refuses_a_damaged_store_before_writing_anything(tmp_path, env):
    """A page of the store overwritten (a red-team pass: the resume failed at its first
    write with a traceback, after it had marked the run running and rewritten its
    config.toml), and a switches record of the wrong shape (it was skipped): one line each,
    and the folder as it was."""
    run_dir = _interrupted_run(tmp_path, env)
    broken = shutil.copytree(run_dir, tmp_path / "broken",
                             ignore=shutil.ignore_patterns("*-shm", ".lock"))
    store_sql(broken / "coral.sqlite", "PRAGMA wal_checkpoint(TRUNCATE)")  # a few pages
    page = store_sql(broken / "coral.sqlite", "PRAGMA page_size")[0][0]
    pages = store_sql(broken / "coral.sqlite", "PRAGMA page_count")[0][0]
    assert pages > 4
    with open(broken / "coral.sqlite", "r+b") as handle:
        handle.seek(2 * page + 100)
        handle.write(b"\0" * (page - 200))
    kept = ("config.toml", "coral.sqlite")  # the lock and SQLite's -shm are rewritten
    before = [(broken / name).read_bytes() for name in kept]
    _one_line_error(run_coral("run", "--resume", str(broken), env=env), "is damaged")
    assert [(broken / name).read_bytes() for name in kept] == before
    switches = store_sql(run_dir / "coral.sqlite",
                         "SELECT value FROM meta WHERE key = 'switches'")[0][0]
    for record in ('{"SKIP_MUTATION": "yes"}', "[]", '"x"'):
        store_sql(run_dir / "coral.sqlite",
                  "UPDATE meta SET value = ? WHERE key = 'switches'", (record,))
        _one_line_error(run_coral("run", "--resume", str(run_dir), env=env),
                        "the store is damaged")
    # a bad-input pass: a trial's status edited to 'bogus' was resumed and summarised as a
    # finished run with no problems
    store_sql(run_dir / "coral.sqlite", "UPDATE meta SET value = ? WHERE key = 'switches'",
              (switches,))
    store_sql(run_dir / "coral.sqlite", "UPDATE trials SET status = 'bogus'")
    _one_line_error(run_coral("run", "--resume", str(run_dir), env=env),
                    "has status 'bogus', not one of pending, finished, failed")
    assert not (run_dir / "summary.json").exists()


@pytest.mark.parametrize("edited", ["python_programs/sieve.py", "json_testcases/sieve.json"])
def test_resume_refuses_a_task_that_changed_since_the_run_began(
        tmp_path, env, data_dir, edited):
    """The program (the prompt changes) or its test cases (a red-team pass: the prompt
    unchanged, the rest of the samples were scored against other tests and pass@k mixed
    the two) edited between an interrupt and the resume; as it was, the run goes on."""
    copy = tmp_path / "data"
    shutil.copytree(data_dir / "quixbugs", copy / "quixbugs")
    run_dir = tmp_path / "run"
    process = _start(tmp_path, env, run_dir, "--data-dir", str(copy), delay=0.05)
    _wait_for(run_dir, "evaluations", 2, process)
    process.kill()
    process.wait()
    path = copy / "quixbugs" / edited
    original = path.read_text()
    path.write_text(("[[3], [2, 3]]\n" + original) if edited.endswith(".json")
                    else original + "\n# edited\n")
    _one_line_error(run_coral("run", "--resume", str(run_dir), env=env),
                    "task 'sieve' of trial 0 is not what it was when the run began")
    # a red-team pass: refused, a resume with another --data-dir had still written it into
    # config.toml, and every later resume read the edited copy
    before = (run_dir / "config.toml").read_bytes()
    shutil.copytree(copy / "quixbugs", tmp_path / "moved" / "quixbugs")
    _one_line_error(run_coral("run", "--resume", str(run_dir), "--data-dir",
                              str(tmp_path / "moved"), env=env),
                    "task 'sieve' of trial 0 is not what it was when the run began")
    assert (run_dir / "config.toml").read_bytes() == before
    path.write_text(original)
    resumed = run_coral("run", "--resume", str(run_dir), "--json", env=env)
    assert resumed.returncode == 0, resumed.stderr


def test_paths_are_stored_absolute_and_data_dir_may_relocate(tmp_path, env, data_dir):
    work = tmp_path / "work"
    (work / "data").mkdir(parents=True)
    shutil.copytree(data_dir / "quixbugs", work / "data" / "quixbugs")
    out = tmp_path / "run"
    config = _config(tmp_path, CONFIG + "[model.options]\ndelay = 0.05\n")
    command = [str(Path(sys.executable).with_name("coral")), "run", "--plugin", "quixbugs",
               "--model", "echo", "--config", str(config), "--samples", "20",
               "--data-dir", "data", "--out", "../run"]
    process = subprocess.Popen(command, env=env, cwd=work, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    _wait_for(out, "evaluations", 2, process)
    process.kill()
    process.wait()
    stored = (out / "config.toml").read_text()
    assert f'data_dir = "{work / "data"}"' in stored
    assert f'out = "{out}"' in stored

    # the data moved: --data-dir relocates the run; other flags are refused, not ignored
    shutil.move(work / "data", tmp_path / "moved")
    refused = run_coral("run", "--resume", str(out), "--samples", "3", env=env)
    _one_line_error(refused, "drop --samples")
    resumed = run_coral("run", "--resume", "run", "--data-dir", "moved", "--json", env=env,
                        cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert f'data_dir = "{tmp_path / "moved"}"' in (out / "config.toml").read_text()
    log = json.loads(store_sql(out / "coral.sqlite",
                               "SELECT value FROM meta WHERE key = 'relocations'")[0][0])
    assert log[-1]["dataset.data_dir"] == str(tmp_path / "moved")
    assert json.loads(resumed.stdout)["problems"][0]["n"] == 20


def test_a_copied_run_resumed_from_its_new_folder_names_it(tmp_path, env):
    """A fuzzing pass: a copy of an interrupted run, resumed, still said `out = "OLD"` in
    its config.toml; the folder it was resumed from is written back, as a relocation."""
    original = _interrupted_run(tmp_path, env)
    copy = tmp_path / "copy"
    shutil.copytree(original, copy)
    resumed = run_coral("run", "--resume", str(copy), "--json", env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert f'out = "{copy}"' in (copy / "config.toml").read_text()
    assert f'out = "{original}"' in (original / "config.toml").read_text()
    log = json.loads(store_sql(copy / "coral.sqlite",
                               "SELECT value FROM meta WHERE key = 'relocations'")[0][0])
    assert log[-1]["run.out"] == str(copy)


def test_a_second_process_is_refused_while_one_works(tmp_path, env):
    """The first run has minutes of work (it is killed below): on a busy machine the
    second command may take many seconds to start, and must still find it working."""
    out = tmp_path / "run"
    process = _start(tmp_path, env, out, samples=400)
    try:
        _wait_for(out, "generations", 1, process)
        second = run_coral("run", "--resume", str(out), env=env)
        _one_line_error(second, f"in use by another Coral process (pid {process.pid})")
        report = run_coral("report", str(out), "--json", env=env)
        assert report.returncode == 0, report.stderr
        document = json.loads(report.stdout)
        assert document["partial"] is True and document["process_alive"] is True
        assert document["pid"] == process.pid
    finally:
        process.kill()
        process.wait()
    # the lock died with its holder: the killed run's report says so, and resume works
    report = json.loads(run_coral("report", str(out), "--json", env=env).stdout)
    assert report["process_alive"] is False and report["status"] == "stopped"


def test_ctrl_c_abandons_work_in_flight_and_says_how_to_resume(tmp_path, env):
    """Ctrl-C stops at once: no evaluation is recorded after it, nothing queued is run (the
    queue holds far more than a second's work), and the last line is the resume command."""
    out = tmp_path / "run"
    # 0.05 s per generation: at least 20 s of work, so that a busy machine's slow signal
    # delivery cannot let the run finish first
    process = _start(tmp_path, env, out, delay=0.05, samples=200)
    _wait_for(out, "evaluations", 5, process)
    process.send_signal(signal.SIGINT)
    at_signal = _count(out, "evaluations")
    _, stderr = process.communicate(timeout=60)  # a hang guard, not a speed claim
    assert process.returncode == 130
    assert stderr.strip().splitlines()[-1].endswith(f"coral run --resume {out}")
    in_flight = 2 * 2 * (os.cpu_count() or 1)  # jobs the evaluation threads hold at once
    assert _count(out, "evaluations") <= at_signal + in_flight
    report = json.loads(run_coral("report", str(out), "--json", env=env).stdout)
    assert report["status"] == "interrupted" and report["partial"] is True
    assert report["counts"]["samples_scored"] < 400
    resumed = run_coral("run", "--resume", str(out), "--json", env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["problems"][0]["n"] == 200


def test_report_is_read_only(tmp_path, env):
    run_dir = _interrupted_run(tmp_path, env)
    before = {p.name: p.stat().st_mtime_ns for p in run_dir.iterdir()}
    folder_mtime = run_dir.stat().st_mtime_ns
    # a read-only mount: bubblewrap binds the run read-only, as on read-only media
    coral = str(Path(sys.executable).with_name("coral"))
    command = ["bwrap", "--dev-bind", "/", "/", "--ro-bind", str(run_dir), str(run_dir),
               coral, "report", str(run_dir), "--json"]
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["partial"] is True and document["counts"]["samples_scored"] >= 2
    assert {p.name: p.stat().st_mtime_ns for p in run_dir.iterdir()} == before
    assert run_dir.stat().st_mtime_ns == folder_mtime


def test_report_of_an_interrupted_train_run_keeps_seen_in_training(tmp_path, env):
    out = tmp_path / "run"
    config = _config(tmp_path, '[dataset]\nsplit = "train"\nproblems = ["gcd", "sqrt"]\n'
                               '[model.options]\ndelay = 0.05\n')
    process = subprocess.Popen(
        [str(Path(sys.executable).with_name("coral")), "run", "--plugin", "quixbugs",
         "--model", "echo", "--config", str(config), "--samples", "20", "--out", str(out)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for(out, "evaluations", 2, process)
    process.kill()
    process.wait()
    report = json.loads(run_coral("report", str(out), "--json", env=env).stdout)
    assert report["problems"] and all(p["seen_in_training"] for p in report["problems"])


def test_corrupt_store_is_one_line(tmp_path, env):
    run_dir = _interrupted_run(tmp_path, env)
    (run_dir / "coral.sqlite").write_bytes(b"this is not a database" * 100)
    for name in ("coral.sqlite-wal", "coral.sqlite-shm"):
        (run_dir / name).unlink(missing_ok=True)
    _one_line_error(run_coral("report", str(run_dir), env=env), "not a readable Coral run store")
    _one_line_error(run_coral("run", "--resume", str(run_dir), env=env),
                    "not a readable Coral run store")


@pytest.mark.parametrize("where", ["read-only folder", "/proc"])
def test_unwritable_run_directory_is_one_line(tmp_path, env, where):
    if where == "/proc":
        out = Path("/proc/coral-run")
    else:
        folder = tmp_path / "ro"
        folder.mkdir()
        out = folder / "run"
        if os.geteuid() == 0:  # root ignores permissions: mount the folder read-only
            coral = str(Path(sys.executable).with_name("coral"))
            command = ["bwrap", "--dev-bind", "/", "/", "--ro-bind", str(folder), str(folder),
                       coral, "run", "--plugin", "quixbugs", "--model", "echo", "--config",
                       str(_config(tmp_path)), "--out", str(out)]
            result = subprocess.run(command, env=env, capture_output=True, text=True,
                                    timeout=120)
            _one_line_error(result, "cannot create the run directory")
            return
        folder.chmod(0o555)
    result = run_coral("run", "--plugin", "quixbugs", "--model", "echo", "--config",
                       str(_config(tmp_path)), "--out", str(out), env=env)
    _one_line_error(result, "cannot create the run directory")


def test_run_folder_removed_mid_run_is_one_line(tmp_path, env):
    out = tmp_path / "run"
    process = _start(tmp_path, env, out, delay=0.1)
    _wait_for(out, "evaluations", 2, process)
    shutil.rmtree(out)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 2, stderr
    assert "removed or replaced" in stderr and "Traceback" not in stderr


@pytest.mark.parametrize("toml, fragment", [
    ('[dataset]\nproblems = ["sieve", "sieve"]\n', "lists 'sieve' twice"),
    ('[evaluators.weights]\nbugfix = nan\n', "finite"),
    ('[execution]\ntest_timeout = inf\n', "finite"),
    ('[model]\nadapter = "/tmp/some-adapter"\n', "cannot apply adapters"),
])
def test_bad_configuration_is_refused_before_the_run_directory(tmp_path, env, toml, fragment):
    out = tmp_path / "run"
    result = run_coral("run", "--plugin", "quixbugs", "--config", str(_config(tmp_path, toml)),
                       "--out", str(out), env=env)
    _one_line_error(result, fragment)
    assert not out.exists()


def test_two_runs_made_in_one_folder_at_once_leave_the_winners_run(tmp_path, monkeypatch):
    """A red-team pass: two `coral run --out D` at once. The loser had seen no folder, so it
    took D for its own and, refused the lock, removed the winner's locked run. Here the
    winner makes its whole run at the moment the loser makes the folder."""
    from coral_core.config import experiment as configuration
    from coral_core.errors import UserError
    from coral_core.run import rundir

    config = configuration.merge({"dataset": {"name": "quixbugs"}})
    out = tmp_path / "d"
    real_mkdir = Path.mkdir
    held = []

    def racing_mkdir(self, *args, **kwargs):
        if self == out and not held:
            held.append(None)
            held[0] = rundir.create_run(config, out)  # the winner, all made and locked
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", racing_mkdir)
    with pytest.raises(UserError, match="in use by another Coral process"):
        rundir.create_run(config, out)
    monkeypatch.setattr(Path, "mkdir", real_mkdir)
    info, lock = held[0]
    try:
        assert rundir.is_run_dir(out) and (out / ".lock").is_file()
        assert rundir.read_config(out)["run"]["out"] == str(out)
    finally:
        lock.release()
    with pytest.raises(UserError, match="already holds a run"):
        rundir.create_run(config, out)  # later, the lock free: the run is still refused
    assert rundir.is_run_dir(out)
