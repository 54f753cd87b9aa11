"""The run store: SQLite in WAL mode, one row per generation and per evaluation.

Every row is committed as soon as it is known, so a kill loses at most the work in flight;
primary keys make a duplicate impossible, so a resumed run cannot write one twice.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

SCHEMA_VERSION = "1"

_TABLES = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS generations (
    trial INTEGER NOT NULL, task_id TEXT NOT NULL, sample INTEGER NOT NULL,
    prompt_digest TEXT NOT NULL, params TEXT NOT NULL, text TEXT NOT NULL,
    prompt_tokens INTEGER, completion_tokens INTEGER, seconds REAL NOT NULL,
    finish_reason TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (trial, task_id, sample)
);
CREATE TABLE IF NOT EXISTS evaluations (
    trial INTEGER NOT NULL, task_id TEXT NOT NULL, sample INTEGER NOT NULL,
    code_sha TEXT NOT NULL, passed INTEGER NOT NULL, objectives TEXT NOT NULL,
    fitness REAL NOT NULL, details TEXT NOT NULL, seconds REAL NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (trial, task_id, sample)
);
CREATE TABLE IF NOT EXISTS trials (
    trial INTEGER PRIMARY KEY, overrides TEXT NOT NULL, status TEXT NOT NULL,
    objectives TEXT
);
CREATE TABLE IF NOT EXISTS reference_runs (
    task_id TEXT PRIMARY KEY, seconds REAL NOT NULL, step_seconds TEXT NOT NULL
);
"""


@dataclass(frozen=True)
class GenerationRecord:
    trial: int
    task_id: str
    sample: int
    prompt_digest: str
    params: dict[str, Any]
    text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    seconds: float
    finish_reason: str


@dataclass(frozen=True)
class ScoreRecord:
    trial: int
    task_id: str
    sample: int
    code_sha: str
    passed: bool
    objectives: dict[str, float]
    fitness: float
    details: dict[str, Any]
    seconds: float


class RunStore:
    """Thread-safe; one connection, a lock, and a commit per record."""

    FILENAME = "coral.sqlite"

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_TABLES)
        self._db.execute(
            "INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (SCHEMA_VERSION,)
        )

    @classmethod
    def in_run(cls, run_dir: Path) -> "RunStore":
        return cls(Path(run_dir) / cls.FILENAME)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _write(self, sql: str, params: tuple[Any, ...]) -> None:
        with self._lock:
            self._db.execute(sql, params)

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    # -- meta
    def set_meta(self, key: str, value: str) -> None:
        self._write("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def meta(self, key: str, default: str | None = None) -> str | None:
        rows = self._rows("SELECT value FROM meta WHERE key = ?", (key,))
        return rows[0][0] if rows else default

    # -- generations
    def add_generation(self, record: GenerationRecord) -> None:
        self._write(
            "INSERT INTO generations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (record.trial, record.task_id, record.sample, record.prompt_digest,
             json.dumps(record.params, sort_keys=True), record.text, record.prompt_tokens,
             record.completion_tokens, record.seconds, record.finish_reason, time.time()),
        )

    def generations(self, trial: int) -> dict[tuple[str, int], GenerationRecord]:
        rows = self._rows(
            "SELECT trial, task_id, sample, prompt_digest, params, text, prompt_tokens, "
            "completion_tokens, seconds, finish_reason FROM generations WHERE trial = ?",
            (trial,),
        )
        return {
            (r[1], r[2]): GenerationRecord(r[0], r[1], r[2], r[3], json.loads(r[4]), *r[5:])
            for r in rows
        }

    # -- evaluations
    def add_evaluation(self, record: ScoreRecord) -> None:
        self._write(
            "INSERT INTO evaluations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (record.trial, record.task_id, record.sample, record.code_sha, int(record.passed),
             json.dumps(record.objectives, sort_keys=True), record.fitness,
             json.dumps(record.details, sort_keys=True, default=str), record.seconds,
             time.time()),
        )

    def evaluations(self, trial: int) -> dict[tuple[str, int], ScoreRecord]:
        rows = self._rows(
            "SELECT trial, task_id, sample, code_sha, passed, objectives, fitness, details, "
            "seconds FROM evaluations WHERE trial = ?", (trial,),
        )
        return {
            (r[1], r[2]): ScoreRecord(r[0], r[1], r[2], r[3], bool(r[4]), json.loads(r[5]),
                                           r[6], json.loads(r[7]), r[8])
            for r in rows
        }

    def iter_evaluations(self) -> Iterator[ScoreRecord]:
        for trial, in self._rows("SELECT DISTINCT trial FROM evaluations ORDER BY trial"):
            yield from self.evaluations(trial).values()

    # -- trials
    def set_trial(self, trial: int, overrides: dict[str, Any], status: str,
                  objectives: dict[str, float] | None = None) -> None:
        self._write(
            "INSERT OR REPLACE INTO trials VALUES (?, ?, ?, ?)",
            (trial, json.dumps(overrides, sort_keys=True), status,
             json.dumps(objectives) if objectives is not None else None),
        )

    def trials(self) -> list[tuple[int, dict[str, Any], str, dict[str, float] | None]]:
        rows = self._rows("SELECT trial, overrides, status, objectives FROM trials ORDER BY trial")
        return [(r[0], json.loads(r[1]), r[2], json.loads(r[3]) if r[3] else None) for r in rows]

    # -- reference timings (kept so that a resumed run scores runtime against the same ones)
    def set_reference(self, task_id: str, seconds: float, step_seconds: list[float]) -> None:
        self._write("INSERT OR REPLACE INTO reference_runs VALUES (?, ?, ?)",
                    (task_id, seconds, json.dumps(step_seconds)))

    def reference(self, task_id: str) -> tuple[float, list[float]] | None:
        rows = self._rows("SELECT seconds, step_seconds FROM reference_runs WHERE task_id = ?",
                          (task_id,))
        return (rows[0][0], json.loads(rows[0][1])) if rows else None
