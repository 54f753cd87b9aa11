"""The run store: SQLite in WAL mode, one row per generation and per evaluation.

Every row is committed as soon as it is known, so a kill loses at most the work in flight;
primary keys make a duplicate impossible, so a resumed run cannot write one twice. Only
the driver process writes it. `RunStore.read_only` opens a run for reading without
touching the folder (no -wal/-shm files created, no change to its mtime).
"""

from __future__ import annotations

import json
import math
import os
import re
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coral_core.files import decoding
from coral_core.files import fileio
from coral_core.errors import UserError

SCHEMA_VERSION = "2"


TRIAL_STATUSES = ("pending", "finished", "failed")


class RunStoreError(UserError):
    """The store cannot be read or written: the run cannot go on."""


_TABLES = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS trials (
    trial INTEGER PRIMARY KEY, batch INTEGER NOT NULL, overrides TEXT NOT NULL,
    config_digest TEXT NOT NULL, status TEXT NOT NULL, result TEXT, error TEXT
);
CREATE TABLE IF NOT EXISTS tasks (
    trial INTEGER NOT NULL, task_id TEXT NOT NULL, split TEXT NOT NULL,
    seen_in_training INTEGER NOT NULL, has_success INTEGER NOT NULL,
    prompt_digest TEXT NOT NULL, PRIMARY KEY (trial, task_id)
);
CREATE TABLE IF NOT EXISTS prompts (
    prompt_digest TEXT PRIMARY KEY, prompt TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS generations (
    trial INTEGER NOT NULL, task_id TEXT NOT NULL, sample INTEGER NOT NULL,
    request_digest TEXT NOT NULL, prompt_digest TEXT NOT NULL, params TEXT NOT NULL,
    text TEXT NOT NULL, prompt_tokens INTEGER, completion_tokens INTEGER,
    seconds REAL NOT NULL, finish_reason TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (trial, task_id, sample)
);
CREATE TABLE IF NOT EXISTS evaluations (
    trial INTEGER NOT NULL, task_id TEXT NOT NULL, sample INTEGER NOT NULL,
    code_sha TEXT NOT NULL, passed INTEGER, objectives TEXT NOT NULL,
    fitness REAL NOT NULL, details TEXT NOT NULL, seconds REAL NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (trial, task_id, sample)
);
"""


@dataclass(frozen=True)
class GenerationRecord:
    trial: int
    task_id: str
    sample: int
    request_digest: str
    prompt_digest: str
    params: dict[str, Any]
    text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    seconds: float
    finish_reason: str


@dataclass(frozen=True)
class ScoreRecord:
    """One scored sample. `passed` is None where the task defines no success."""

    trial: int
    task_id: str
    sample: int
    code_sha: str
    passed: bool | None
    objectives: dict[str, float]
    fitness: float
    details: dict[str, Any]
    seconds: float


@dataclass(frozen=True)
class TaskRecord:
    """What a report needs of a task without loading its data set."""

    trial: int
    task_id: str
    split: str
    seen_in_training: bool
    has_success: bool
    prompt_digest: str


@dataclass(frozen=True)
class TrialRecord:
    trial: int
    batch: int
    overrides: dict[str, Any]
    config_digest: str
    status: str  # one of TRIAL_STATUSES
    result: dict[str, Any] | None
    error: str | None


_NUMBER = (int, float)
_OPTIONAL_INT = (int, type(None))


def _checked(rows: list[tuple[Any, ...]], kinds: tuple[Any, ...], table: str,
             path: Path) -> list[tuple[Any, ...]]:
    """Rows as their columns' types say (SQLite stores whatever a writer gave it: a store
    edited by hand must fail in one line, not deep inside a report)."""
    for row in rows:
        for value, kind in zip(row, kinds):
            if not isinstance(value, kind):
                raise RunStoreError(f"{path}: a row of '{table}' holds a value of the wrong "
                                    f"type ({type(value).__name__}); the store is damaged")
            if isinstance(value, float) and not math.isfinite(value):  # Coral writes none
                raise RunStoreError(f"{path}: a row of '{table}' holds {value}, not a finite "
                                    "number; the store is damaged")
    return rows


def _json_column(text: Any, kind: type, table: str, path: Path) -> Any:
    value = decoding.json_value(text, f"{path}: a row of '{table}'")
    if not isinstance(value, kind):
        raise RunStoreError(f"{path}: a row of '{table}' holds JSON of the wrong shape "
                            f"({type(value).__name__}, expected {kind.__name__}); the store "
                            "is damaged")
    return value


_SURROGATE = re.compile("[\ud800-\udfff]")


def _text(value: str) -> str:
    """Text SQLite can store: a lone surrogate (a server's reply may hold one; UTF-8 cannot)
    is U+FFFD."""
    return _SURROGATE.sub("\ufffd", value)


def _finite_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str, allow_nan=False)


def _bounded_int(value: Any) -> int | None:
    """Token counts from a backend: an int that SQLite can hold, else unknown."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2 ** 62:
        return None
    return value


def _finite(value: float) -> float:
    return float(value) if math.isfinite(value) else 0.0


class RunStore:
    """Thread-safe; one connection, a lock, and a commit per record."""

    FILENAME = "coral.sqlite"

    def __init__(self, path: Path, *, read_only: bool = False):
        self.path = Path(path)
        self._lock = threading.Lock()
        self.read_only = read_only
        fileio.check_sqlite_files(self.path, "run store file")
        try:
            if read_only:
                self._db = fileio.open_sqlite_read_only(self.path)
            else:
                self._db = sqlite3.connect(self.path, check_same_thread=False,
                                           isolation_level=None)
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.executescript(_TABLES)
                self._db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)",
                                 (SCHEMA_VERSION,))
            version = self._db.execute(
                "SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.DatabaseError as error:
            raise UserError(f"{self.path} is not a readable Coral run store ({error})") from None
        if version is None or version[0] != SCHEMA_VERSION:
            found = version[0] if version else "none"
            self._db.close()
            raise UserError(f"{self.path} was written by another Coral version (store schema "
                            f"{found}, this Coral reads {SCHEMA_VERSION})")
        self._identity = self._file_identity()

    @classmethod
    def holds_work(cls, path: Path) -> bool:
        """Whether the store at `path` holds a trial, a generation or an evaluation (or
        cannot be read as one: then it is kept, as work). An empty file holds none: SQLite
        makes one at a connect, before the first table."""
        try:
            if Path(path).stat().st_size == 0:
                return False
            db = fileio.open_sqlite_read_only(Path(path))
            try:
                return any(db.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone()  # nosec B608
                           for table in ("trials", "generations", "evaluations"))
            finally:
                db.close()
        except sqlite3.DatabaseError:
            return True
        except FileNotFoundError:
            return False

    @classmethod
    def in_run(cls, run_dir: Path, *, read_only: bool = False) -> "RunStore":
        return cls(Path(run_dir) / cls.FILENAME, read_only=read_only)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _file_identity(self) -> tuple[int, int] | None:
        try:
            stat = os.stat(self.path)
        except OSError:
            return None
        return (stat.st_dev, stat.st_ino)

    def _write(self, sql: str, params: tuple[Any, ...]) -> None:
        with self._lock:
            # A write into a store whose file was deleted or replaced would vanish.
            if self._file_identity() != self._identity:
                raise RunStoreError(f"{self.path} was removed or replaced while the run "
                                    "was writing to it; its results since then are lost")
            try:
                self._db.execute(sql, params)
            except sqlite3.DatabaseError as error:  # a full disk, a damaged page...
                raise RunStoreError(f"cannot write to {self.path}: {error}") from None
            except UnicodeEncodeError:  # a lone surrogate in a str column: one line, not a
                raise RunStoreError(f"cannot write to {self.path}: a value holds text that "
                                    "UTF-8 cannot hold (a lone surrogate)") from None

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return self._db.execute(sql, params).fetchall()
            except sqlite3.DatabaseError as error:
                raise RunStoreError(f"cannot read {self.path}: {error}") from None

    def check_intact(self) -> None:
        """Refuse a store whose pages are damaged (SQLite's quick_check), before a resume
        writes anything: else it failed at its first write, half-way through starting."""
        found = self._rows("PRAGMA quick_check(1)")
        if not found or found[0][0] != "ok":
            said = found[0][0] if found else "no answer"
            raise RunStoreError(f"{self.path} is damaged (SQLite's check: {said}); resume a "
                                "copy made before the damage, or start a new run")

    def evaluations_without_generations(self) -> int:
        """Evaluations whose generation row is gone: no run writes them (a generation is
        committed before its evaluation), and a resume would generate the sample again and
        fail to record it beside the old score."""
        return self._rows("SELECT COUNT(*) FROM evaluations e WHERE NOT EXISTS (SELECT 1 "
                          "FROM generations g WHERE g.trial = e.trial AND g.task_id = "
                          "e.task_id AND g.sample = e.sample)")[0][0]

    # -- meta
    def set_meta(self, key: str, value: str) -> None:
        self._write("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def meta(self, key: str, default: str | None = None) -> str | None:
        rows = self._rows("SELECT value FROM meta WHERE key = ?", (key,))
        return rows[0][0] if rows else default

    # -- trials
    def add_trials(self, batch: int, trials: list[tuple[int, dict[str, Any], str]],
                   strategy_state: str) -> None:
        """A batch the strategy proposed, with its state after the ask, in one commit."""
        with self._lock:
            if self._file_identity() != self._identity:
                raise RunStoreError(f"{self.path} was removed or replaced during the run")
            with self._db:
                self._db.execute("BEGIN")
                for trial, overrides, digest in trials:
                    self._db.execute(
                        "INSERT INTO trials VALUES (?, ?, ?, ?, 'pending', NULL, NULL)",
                        (trial, batch, _finite_json(overrides), digest))
                self._db.execute("INSERT OR REPLACE INTO meta VALUES ('strategy', ?)",
                                 (strategy_state,))

    def finish_trial(self, trial: int, status: str, result: dict[str, Any] | None,
                     error: str | None = None) -> None:
        self._write("UPDATE trials SET status = ?, result = ?, error = ? WHERE trial = ?",
                    (status, _finite_json(result) if result is not None else None, error,
                     trial))

    def trials(self) -> list[TrialRecord]:
        rows = _checked(self._rows("SELECT trial, batch, overrides, config_digest, status, "
                                   "result, error FROM trials ORDER BY trial"),
                        (int, int, str, str, str, (str, type(None)), (str, type(None))),
                        "trials", self.path)
        for row in rows:  # an edited status was resumed and summarised as a finished run
            if row[4] not in TRIAL_STATUSES:
                raise RunStoreError(f"{self.path}: trial {row[0]} has status {row[4][:40]!r}, "
                                    f"not one of {', '.join(TRIAL_STATUSES)}; the store is "
                                    "damaged")
        return [TrialRecord(r[0], r[1], _json_column(r[2], dict, "trials", self.path), r[3],
                            r[4], _json_column(r[5], dict, "trials", self.path) if r[5]
                            else None, r[6]) for r in rows]

    # -- tasks
    def add_tasks(self, records: list[TaskRecord]) -> None:
        for r in records:
            self._write("INSERT OR IGNORE INTO tasks VALUES (?, ?, ?, ?, ?, ?)",
                        (r.trial, r.task_id, r.split, int(r.seen_in_training),
                         int(r.has_success), r.prompt_digest))

    def tasks(self, trial: int) -> list[TaskRecord]:
        rows = _checked(self._rows("SELECT trial, task_id, split, seen_in_training, "
                                   "has_success, prompt_digest FROM tasks WHERE trial = ? "
                                   "ORDER BY rowid", (trial,)),
                        (int, str, str, int, int, str), "tasks", self.path)
        return [TaskRecord(r[0], r[1], r[2], bool(r[3]), bool(r[4]), r[5]) for r in rows]

    # -- prompts (by digest: what `coral export` shows beside each sample)
    def add_prompts(self, prompts: dict[str, dict[str, Any]]) -> None:
        """{digest: the prompt as plain data}; a digest already stored is kept."""
        for digest, prompt in prompts.items():
            self._write("INSERT OR IGNORE INTO prompts VALUES (?, ?)",
                        (digest, _text(json.dumps(prompt, ensure_ascii=False))))

    def prompts(self) -> dict[str, dict[str, Any]]:
        try:
            rows = self._rows("SELECT prompt_digest, prompt FROM prompts")
        except RunStoreError:  # a store made before prompts were kept
            return {}
        rows = _checked(rows, (str, str), "prompts", self.path)
        return {digest: _json_column(text, dict, "prompts", self.path) for digest, text in rows}

    # -- generations
    def add_generation(self, record: GenerationRecord) -> None:
        self._write(
            "INSERT INTO generations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (record.trial, record.task_id, record.sample, record.request_digest,
             record.prompt_digest, _finite_json(record.params), _text(record.text),
             _bounded_int(record.prompt_tokens), _bounded_int(record.completion_tokens),
             _finite(record.seconds), _text(str(record.finish_reason)), time.time()),
        )

    def generations(self, trial: int) -> dict[tuple[str, int], GenerationRecord]:
        rows = _checked(self._rows(
            "SELECT trial, task_id, sample, request_digest, prompt_digest, params, text, "
            "prompt_tokens, completion_tokens, seconds, finish_reason FROM generations "
            "WHERE trial = ?", (trial,),
        ), (int, str, int, str, str, str, str, _OPTIONAL_INT, _OPTIONAL_INT, _NUMBER, str),
            "generations", self.path)
        return {
            (r[1], r[2]): GenerationRecord(r[0], r[1], r[2], r[3], r[4],
                                           _json_column(r[5], dict, "generations", self.path),
                                           *r[6:])
            for r in rows
        }

    # -- evaluations
    def add_evaluation(self, record: ScoreRecord) -> None:
        passed = None if record.passed is None else int(record.passed)
        self._write(
            "INSERT INTO evaluations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (record.trial, record.task_id, record.sample, record.code_sha, passed,
             _finite_json(record.objectives), _finite(record.fitness),
             json.dumps(record.details, sort_keys=True, default=str), _finite(record.seconds),
             time.time()),
        )

    def evaluations(self, trial: int) -> dict[tuple[str, int], ScoreRecord]:
        rows = _checked(self._rows(
            "SELECT trial, task_id, sample, code_sha, passed, objectives, fitness, details, "
            "seconds FROM evaluations WHERE trial = ?", (trial,),
        ), (int, str, int, str, _OPTIONAL_INT, str, _NUMBER, str, _NUMBER), "evaluations",
            self.path)
        return {
            (r[1], r[2]): ScoreRecord(r[0], r[1], r[2], r[3],
                                      None if r[4] is None else bool(r[4]),
                                      _objectives(r[5], self.path), r[6],
                                      _json_column(r[7], dict, "evaluations", self.path), r[8])
            for r in rows
        }


def _objectives(text: str, path: Path) -> dict[str, float]:
    value = _json_column(text, dict, "evaluations", path)
    if not all(isinstance(v, _NUMBER) and not isinstance(v, bool) for v in value.values()):
        raise RunStoreError(f"{path}: a row of 'evaluations' holds objectives that are not "
                            "numbers; the store is damaged")
    return value
