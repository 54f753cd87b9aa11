"""Run directories: made whole or not at all, locked while a process works on them, and
refused on resume when what is on disk is not what the configuration says.

Layout: config.toml (the resolved configuration), coral.sqlite (the run store), .lock
(flock held by the working process, which writes its pid there), summary.json (at the
end). The lock is an OS lock: it dies with its holder, so a killed run never blocks its
resume.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from coral_core import __version__
from coral_core.config import experiment as configuration
from coral_core.files.atomic import write_text_atomic
from coral_core.files.decoding import json_value
from coral_core.errors import UserError
from coral_core.files.fileio import CONFIG_BYTES, open_plain, read_text
from coral_core.files.outputs import refuse_read_folders
from coral_core.results.heatmap import HEATMAP_FILE
from coral_core.run.store import RunStore
from coral_core.switches import result_switches

CONFIG_FILE = "config.toml"
SUMMARY_FILE = "summary.json"
LOCK_FILE = ".lock"


@dataclass(frozen=True)
class RunInfo:
    """What lifecycle hooks receive."""

    run_dir: Path
    config: Mapping[str, Any]
    resumed: bool


def _os_error(action: str, path: Path, error: OSError) -> UserError:
    return UserError(f"cannot {action} {path}: {error.strerror or error}")


def _file_in_the_way(path: Path) -> Path | None:
    """The first of `path`'s folders that is a file (mkdir then says only "File exists")."""
    for folder in reversed(path.parents):
        if not folder.is_dir():
            return folder if folder.exists() else None
    return None


class LockBusy(UserError):
    """Another process holds the run's lock."""


class RunLock:
    """An exclusive flock on RUN_DIR/.lock, holding the owner's pid."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> "RunLock":
        fd = open_plain(self.path, "lock file")  # never a link: nothing outside is touched
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            os.close(fd)
            if error.errno not in (errno.EAGAIN, errno.EACCES):
                raise _os_error("lock", self.path.parent, error) from None
            pid = _read_pid(self.path)
            for _ in range(10):  # the holder writes its pid just after taking the lock
                if pid:
                    break
                time.sleep(0.02)
                pid = _read_pid(self.path)
            raise LockBusy(f"{self.path.parent} is in use by another Coral process "
                           f"(pid {pid or 'unknown'}); wait for it or stop it") from None
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except OSError as error:  # a full disk (a red-team pass: a traceback)
            os.close(fd)
            raise _os_error("write", self.path, error) from None
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None


def _read_pid(path: Path) -> int | None:
    try:
        text = read_text(path, limit=64, what="lock file", within=path.parent).strip()
    except UserError:
        return None
    return int(text) if text.isdigit() else None


def holder(run_dir: Path) -> int | None:
    """The pid of the live process working on a run, or None (read-only: takes no lock
    and creates nothing)."""
    path = Path(run_dir) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return _read_pid(path) or -1
    finally:
        os.close(fd)
    return None


def default_run_dir(config: Mapping[str, Any]) -> Path:
    """runs/DATASET-MODEL-TIMESTAMP under the current folder (`--out` or `[run] out` names
    the run directory itself instead)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    model = label(config["model"]["spec"])
    base = Path("runs").absolute() / f"{config['dataset']['name']}-{model}-{stamp}"
    path, number = base, 1
    while path.exists():
        number += 1
        path = Path(f"{base}-{number}")
    return path


def label(spec: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in spec)[-40:] or "model"


def run_files() -> tuple[str, ...]:
    """The names of a run's own files in its directory."""
    store = RunStore.FILENAME
    return (CONFIG_FILE, SUMMARY_FILE, HEATMAP_FILE, LOCK_FILE, store, f"{store}-wal",
            f"{store}-shm", f"{store}-journal")


def refuse_run_file(path: Path, flag: str) -> None:
    """An output (`flag` names it) may not replace a file of a run (its store, its
    configuration, lock or summary), however the path is spelled: `coral export RUN -o
    RUN/coral.sqlite` would replace the run it reads with its own export."""
    real = Path(os.path.realpath(Path(path).absolute()))  # an output follows a link
    folder = real.parent
    if real.name in run_files() and (
            (folder / RunStore.FILENAME).exists() or (folder / CONFIG_FILE).exists()):
        raise UserError(f"{flag} {path} is a file of the run in {folder}; write elsewhere "
                        "(it would replace the run's own)")


def unfinished_start(run_dir: Path) -> bool:
    """A store without its config.toml, holding no work, beside nothing but a run's
    files: a run stopped while it was made (config.toml is written last), which a new run
    may replace. A folder with anything else in it is someone's, and is not touched (an
    empty coral.sqlite among their files was deleted before the folder was refused)."""
    store = run_dir / RunStore.FILENAME
    return (not (run_dir / CONFIG_FILE).exists() and store.is_file()
            and all(entry.name in run_files() for entry in run_dir.iterdir())
            and not RunStore.holds_work(store))


def check_new_run_dir(run_dir: Path, locked: bool = False) -> None:
    """A run may be made here: no folder, or an empty one (but for a lock file, left by
    an attempt that failed or held by one in progress, which the lock then refuses, and
    a start that was stopped half-way, which the run that holds the lock removes)."""
    if unfinished_start(run_dir):
        if not locked:
            return
        for name in run_files():
            if name not in (CONFIG_FILE, LOCK_FILE, SUMMARY_FILE):
                (run_dir / name).unlink(missing_ok=True)
    if (run_dir / CONFIG_FILE).exists() and not (run_dir / RunStore.FILENAME).exists():
        raise UserError(f"{run_dir} holds a {CONFIG_FILE} but no run store, so it is no run "
                        "to resume; give an empty or new folder")
    if (run_dir / CONFIG_FILE).exists():
        raise UserError(f"{run_dir} already holds a run; use --resume {run_dir} to continue it")
    if (run_dir / RunStore.FILENAME).exists() and RunStore.holds_work(
            run_dir / RunStore.FILENAME):
        raise UserError(f"{run_dir} holds a run's store with work in it but no {CONFIG_FILE}, "
                        "so it can be neither resumed nor replaced; move it away")
    if run_dir.exists() and (not run_dir.is_dir() or any(
            entry.name != LOCK_FILE for entry in run_dir.iterdir())):
        raise UserError(f"{run_dir} exists and is not an empty folder")


def create_run(config: dict[str, Any], run_dir: Path) -> tuple[RunInfo, RunLock]:
    """Make the run directory, locked, with its config.toml and an empty store. A folder
    this made is removed again if any step fails, so nothing half-made is left."""
    run_dir = Path(os.path.abspath(run_dir))
    check_new_run_dir(run_dir)
    refuse_read_folders(run_dir, "--out")  # the data sets the run reads are found by now
    if run_dir.is_symlink() and not run_dir.exists():  # mkdir said "File exists"
        raise UserError(f"--out {run_dir} is a link to {os.readlink(run_dir)}, which does "
                        "not exist; give a folder")
    try:
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        try:
            run_dir.mkdir()
            made = True  # by this process: another that finds it never removes it
        except FileExistsError:
            made = False
    except OSError as error:
        blocker = _file_in_the_way(run_dir)
        if blocker is not None:
            raise UserError(f"cannot create the run directory {run_dir}: {blocker} is a "
                            "file, not a folder") from None
        raise _os_error("create the run directory", run_dir, error) from None
    lock, ours = RunLock(run_dir), False  # ours: locked, and no other run was made in it
    try:
        lock.acquire()
        check_new_run_dir(run_dir, locked=True)  # another `--out` of it may have won the race
        ours = True
        config = {**config, "run": {**config["run"], "out": str(run_dir)}}
        store = RunStore.in_run(run_dir)
        try:
            store.set_meta("status", "running")
            store.set_meta("coral_version", __version__)
            store.set_meta("config_digest", configuration.digest(config))
            store.set_meta("switches", json.dumps(result_switches(), sort_keys=True))
        finally:
            store.close()
        try:  # last: with it the folder is a run (a start stopped before it is replaceable)
            write_text_atomic(run_dir / CONFIG_FILE, configuration.dump(config))
        except OSError as error:
            raise _os_error("write", run_dir / CONFIG_FILE, error) from None
    except BaseException as error:
        # removed while locked (no other run can be started in it), or never locked for a
        # reason other than another process holding it (a full disk)
        if made and (ours or not isinstance(error, LockBusy)):
            shutil.rmtree(run_dir, ignore_errors=True)
        lock.release()
        raise
    return RunInfo(run_dir, config, resumed=False), lock


def read_config(run_dir: Path) -> dict[str, Any]:
    path = Path(run_dir) / CONFIG_FILE
    text = read_text(path, limit=CONFIG_BYTES, what="run configuration", within=run_dir)
    return configuration.loads_resolved(text, str(path))


def is_run_dir(run_dir: Path) -> bool:
    return (Path(run_dir) / CONFIG_FILE).is_file() and (Path(run_dir) / RunStore.FILENAME).is_file()


def open_run(run_dir: Path, relocate: Mapping[tuple[str, str], str] | None = None,
             ) -> tuple[RunInfo, RunLock]:
    """An interrupted run to resume, locked. Refused: a finished run, a folder that is
    not a run, a config.toml edited since the run began. `relocate` sets relocatable keys
    (data_dir, base_url) in the config returned; `record_relocation` writes them back to
    config.toml and logs them in the store once the run has accepted them (a refused
    `--data-dir` was kept, and every later resume failed on it)."""
    run_dir = Path(os.path.abspath(run_dir))
    if not is_run_dir(run_dir):
        if unfinished_start(run_dir):
            raise UserError(f"{run_dir} was stopped while its run was being made and holds no "
                            f"work; start the run again (coral run ... --out {run_dir})")
        raise UserError(f"{run_dir} is not a Coral run directory (no {CONFIG_FILE} and "
                        f"{RunStore.FILENAME})")
    summary = run_dir / SUMMARY_FILE
    for written in (summary, run_dir / HEATMAP_FILE):  # at the end: refused now, not then
        if written.exists() and not written.is_symlink() and not written.is_file():
            raise UserError(f"{written} is not a file (the run writes it at the end); move "
                            "it away and resume")
    lock = RunLock(run_dir).acquire()
    try:
        config = read_config(run_dir)
        _has_a_run(run_dir)
        store = RunStore.in_run(run_dir)
        try:
            store.check_intact()
            if store.meta("status") == "finished" and summary.exists():
                raise UserError(f"{run_dir} is a finished run; see 'coral report {run_dir}'")
            # finished, but its summary.json was lost: resuming runs nothing and writes it
            # again (nothing could, and the report said to resume)
            if store.meta("config_digest") != configuration.digest(config):
                raise UserError(f"{run_dir / CONFIG_FILE} was edited after the run began; "
                                "restore it, or start a new run with --config")
            _same_switches(run_dir, store.meta("switches"))
            relocate = {**moved_run(config, run_dir), **(relocate or {})}
            if relocate:
                config = {section: dict(values) for section, values in config.items()}
                for (section, key), value in relocate.items():
                    config[section][key] = value
        finally:
            store.close()
    except BaseException:
        lock.release()
        raise
    return RunInfo(run_dir, config, resumed=True), lock


def _same_switches(run_dir: Path, stored: str | None) -> None:
    """The switches that change results are as the run began with them (a run made before
    they were recorded is not checked)."""
    if stored is None:
        return
    began = json_value(stored, f"{run_dir / RunStore.FILENAME}: switches")
    if not (isinstance(began, dict) and all(type(v) is bool for v in began.values())):
        raise UserError(f"{run_dir / RunStore.FILENAME}: its record of the switches the run "
                        "began with is not a table of true/false values; the store is damaged")
    for name, now in result_switches().items():
        if name in began and began[name] != now:
            raise UserError(f"{run_dir} began with {name}={int(bool(began[name]))} and would "
                            f"be resumed with {name}={int(now)}, mixing results of both; "
                            f"resume it with {name}={int(bool(began[name]))}")


def moved_run(config: Mapping[str, Any], run_dir: Path) -> dict[tuple[str, str], str]:
    """`run.out` where a run was copied or moved and is resumed from its new folder (the
    stored one named the old; a fuzzing pass resumed a copy)."""
    out = config.get("run", {}).get("out")
    return {("run", "out"): str(run_dir)} if out and out != str(run_dir) else {}


def _has_a_run(run_dir: Path) -> None:
    """The store holds a run, read without writing: opening an emptied store to resume it
    wrote a fresh schema into it, and the refusal blamed an edited config.toml."""
    try:
        store = RunStore.in_run(run_dir, read_only=True)
    except UserError as error:
        raise UserError(f"{error}; the run cannot be resumed") from None
    try:
        digest = store.meta("config_digest")
        orphans = store.evaluations_without_generations() if digest is not None else 0
    finally:
        store.close()
    if digest is None:
        raise UserError(f"{run_dir / RunStore.FILENAME} holds no run (it is empty or was "
                        "damaged); the run cannot be resumed")
    if orphans:
        raise UserError(f"{run_dir / RunStore.FILENAME} holds {orphans} evaluation(s) whose "
                        "generation is gone (the store was edited or damaged); the run "
                        "cannot be resumed")


def record_relocation(info: RunInfo, relocate: Mapping[tuple[str, str], str]) -> None:
    """Mark a resumed run running, with its accepted relocations written to config.toml
    and logged in the store (the caller holds its lock)."""
    relocate = {**moved_run(read_config(info.run_dir), info.run_dir), **relocate}
    store = RunStore.in_run(info.run_dir)
    try:
        if relocate:
            write_text_atomic(info.run_dir / CONFIG_FILE, configuration.dump(info.config))
            log = json_value(store.meta("relocations") or "[]", f"{store.path}: relocations")
            if not isinstance(log, list):
                raise UserError(f"{store.path}: relocations has the wrong shape; the store "
                                "is damaged")
            log.append({"time": time.time(),
                        **{f"{s}.{k}": v for (s, k), v in relocate.items()}})
            store.set_meta("relocations", json.dumps(log))
        store.set_meta("status", "running")
    finally:
        store.close()
