"""The environment a user's shell hands Coral: closed or broken standard streams, an
encoding that cannot hold a file name, a deleted working folder, a full disk. Each was a
traceback, a stopped run or a lock file full of stderr (a red-team pass)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import coral_env

CORAL = str(Path(sys.executable).with_name("coral"))
CONFIG = '[dataset]\nproblems = ["sieve"]\n[run]\nsamples = 2\n'


def _run_args(tmp_path: Path, out: Path) -> list[str]:
    config = tmp_path / "run.toml"
    config.write_text(CONFIG)
    return [CORAL, "run", "--plugin", "quixbugs", "--model", "reference", "--config",
            str(config), "--out", str(out)]


def _finished(out: Path) -> dict:
    done = subprocess.run([CORAL, "report", str(out), "--json"], capture_output=True,
                          text=True, env=coral_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_run_with_stderr_closed_finishes_and_keeps_its_lock_file_clean(tmp_path, data_dir):
    out = tmp_path / "run"
    done = subprocess.run(" ".join(map(repr, _run_args(tmp_path, out))) + " 2>&-", shell=True,
                          env=coral_env(data_dir), capture_output=True, timeout=300)
    assert done.returncode == 0
    assert _finished(out)["status"] == "finished"
    assert (out / ".lock").read_text().strip().isdigit()  # its pid, and nothing else


def test_a_run_whose_stderr_reader_goes_away_finishes(tmp_path, data_dir):
    out = tmp_path / "run"
    process = subprocess.Popen(_run_args(tmp_path, out), stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, env=coral_env(data_dir))
    assert process.stderr is not None
    process.stderr.read(5)
    process.stderr.close()  # like `2>&1 | head -c 5`
    assert process.wait(timeout=300) == 0
    assert _finished(out)["status"] == "finished"


def test_a_name_the_output_encoding_cannot_hold_is_written_escaped(tmp_path, data_dir):
    candidate = tmp_path / "sïeve.py"
    candidate.write_text("def sieve(max):\n    return []\n")
    done = subprocess.run([CORAL, "evaluate", "--plugin", "quixbugs", "--candidate",
                           str(candidate), "--problem", "sieve"], capture_output=True,
                          env=coral_env(data_dir, PYTHONIOENCODING="ascii"), timeout=300)
    assert done.returncode == 0, done.stderr
    assert b"s\\xefeve.py - sieve: FAILED" in done.stdout


def test_a_deleted_working_folder_is_one_line(tmp_path, data_dir):
    gone = tmp_path / "gone"
    gone.mkdir()
    done = subprocess.run(f"cd {gone} && rmdir {gone} && {CORAL} datasets list", shell=True,
                          env=coral_env(data_dir), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "coral: error: the current folder no longer exists (it was deleted); cd to one that "
        "does"]


def test_an_out_path_that_is_not_utf8_is_refused_before_the_run(tmp_path, data_dir):
    out = os.fsencode(tmp_path) + b"/r\xff"
    done = subprocess.run([os.fsencode(a) for a in _run_args(tmp_path, tmp_path)[:-1]]
                          + [out], env=coral_env(data_dir), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "holds bytes that are not UTF-8" in done.stderr
    assert not os.path.exists(out)


def test_a_memory_limit_too_low_for_a_thread_stops_the_trial_in_one_line(tmp_path, data_dir):
    """Under `ulimit -v 200000` the sandbox's thread could not start: the sample was scored
    0 with "can't start new thread", then closing the pool crashed on the thread."""
    out = tmp_path / "run"
    args = " ".join(map(repr, _run_args(tmp_path, out)))
    done = subprocess.run(f"ulimit -v 200000; {args}", shell=True, env=coral_env(data_dir),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 2) and "Traceback" not in done.stderr, done.stderr
    if done.returncode == 2:  # (0 where this machine's threads fit in the limit)
        last = done.stderr.strip().splitlines()[-1]
        # Which thread fails first moves with the address space's layout: one before the
        # run, or the sandbox's in a trial (then the run is resumable, and says so).
        assert last.startswith(("coral: error: cannot start a thread: this process's "
                                "limits are too low", "coral: error: trial 0 failed: the "
                                "sandbox cannot start a thread")), last
        assert "limits are too low (ulimit -v, -u)" in last
        if "trial 0 failed" in last:
            assert f"coral run --resume {out}" in last


def test_a_full_standard_output_is_one_line_and_the_run_is_complete(tmp_path, data_dir):
    """stdout on a full device (/dev/full): every command that prints says so in one line,
    exit status 2, whether its output went through print, rich, click or --json; a run
    that finished before its summary could be printed is complete on disk."""
    out = tmp_path / "run"
    commands = [_run_args(tmp_path, out) + ["--json"], [CORAL, "report", str(out)],
                [CORAL, "report", str(out), "--json"], [CORAL, "export", str(out)],
                [CORAL, "datasets", "list"], [CORAL, "--help"], [CORAL, "--version"]]
    for command in commands:
        with open("/dev/full", "w") as full:
            done = subprocess.run(command, stdout=full, stderr=subprocess.PIPE, text=True,
                                  env=coral_env(data_dir), timeout=300)
        assert done.returncode == 2, (command, done.stderr)
        lines = [line for line in done.stderr.splitlines() if line.startswith("coral:")]
        assert lines == ["coral: error: cannot write to standard output: No space left on "
                         "device"], (command, done.stderr)
        assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
    assert _finished(out)["status"] == "finished"
