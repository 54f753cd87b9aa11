"""The session file: a real cosmic-ray WorkDB (`cr-report`, `cr-rate`, `cr-html` read it),
plus Coral's own tables beside cosmic-ray's (cosmic-ray ignores them):

- `coral_meta` (key, value): what the session was made from (module, tests, digests);
- `coral_mutants` (job_id, seconds, mode, tests_run, timeout): how each verdict was reached;
- `coral_kills` (job_id, test, how): the test x mutant kill matrix ("failed" or "timeout");
- `coral_baseline` (test, seconds, lines): the unmutated run;
- `coral_fingerprints` (job_id, key, deps): each mutant's key and what its verdict rests
  on (coral_core.mutation.fingerprint), so a later `--resume` reuses what still holds;
- `coral_earlier` (key, deps, verdict): the verdicts an incremental `--resume` may reuse,
  kept until `--fresh`, so that one interrupted before it reused them loses nothing.

The work items are made by cosmic-ray's own `init` (its operators, its enumeration), so the
(module, operator, occurrence) keys are cosmic-ray's. Coral's rows for a mutant and its
WorkDB result are written in one transaction (with those of the verdicts completed beside
it), so a result present means everything about it is stored: `--resume` redoes only the
mutants without a result.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coral_core.files.decoding import json_value
from coral_core.files.fileio import check_sqlite_files, open_sqlite_read_only
from coral_core.errors import UserError

TABLES = """
CREATE TABLE IF NOT EXISTS coral_meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS coral_mutants (job_id TEXT PRIMARY KEY, seconds REAL, mode TEXT,
    tests_run INTEGER, timeout INTEGER);
CREATE TABLE IF NOT EXISTS coral_kills (job_id TEXT, test TEXT, how TEXT,
    PRIMARY KEY (job_id, test));
CREATE TABLE IF NOT EXISTS coral_baseline (test TEXT PRIMARY KEY, seconds REAL, lines TEXT);
CREATE TABLE IF NOT EXISTS coral_fingerprints (job_id TEXT PRIMARY KEY, key TEXT, deps TEXT);
CREATE TABLE IF NOT EXISTS coral_earlier (key TEXT PRIMARY KEY, deps TEXT, verdict TEXT);
"""


def _verdict_row(verdict: "Verdict") -> dict:
    result = verdict.result
    return {"job_id": verdict.job_id, "worker_outcome": result.worker_outcome.name,
            "output": result.output, "diff": result.diff,
            "test_outcome": result.test_outcome.name if result.test_outcome else None,
            "seconds": verdict.seconds, "mode": verdict.mode, "tests_run": verdict.tests_run,
            "timeout": verdict.timeout, "kills": [list(k) for k in verdict.kills]}


@dataclass(frozen=True)
class Verdict:
    """One mutant's verdict as a session stores it."""

    job_id: str
    result: Any  # cosmic-ray's WorkResult
    seconds: float
    mode: str
    tests_run: int
    timeout: bool
    kills: tuple[tuple[str, str], ...]


def _foreign_tables(path: Path) -> list[str]:
    """The tables of an existing SQLite file that are neither cosmic-ray's nor Coral's: a
    session must not be written into a user's own database."""
    if not path.is_file() or path.stat().st_size == 0:
        return []
    try:
        # (a plain read-only connection to a WAL database leaves -wal and -shm behind)
        with contextlib.closing(open_sqlite_read_only(path)) as db:
            rows = db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            names = [row[0] for row in rows]
    except sqlite3.DatabaseError:
        return []  # not SQLite at all: WorkDB's own error says so
    ours = {"work_items", "mutation_specs", "work_results"}
    return sorted(n for n in names if n not in ours and not n.startswith(("coral_", "sqlite_")))


class Session:
    """A cosmic-ray WorkDB opened through cosmic-ray's API, with Coral's tables beside it."""

    def __init__(self, path: Path):
        from cosmic_ray.work_db import WorkDB

        self.path = path
        if not path.is_dir():  # (a folder is said below, as the database's error)
            check_sqlite_files(path, "session file")  # never written through a link
        foreign = _foreign_tables(path)
        if foreign:
            raise UserError(f"{path} is a database of something else (tables: "
                            f"{', '.join(foreign[:3])}): give --session a new file")
        try:
            self.db = WorkDB(str(path), WorkDB.Mode.create)
        except Exception as error:  # noqa: B902 - sqlalchemy's errors: one line for the user
            cause = getattr(error, "orig", None) or error  # the database's, without the SQL
            text = str(cause).strip()
            why = text.splitlines()[0] if text else type(cause).__name__
            raise UserError(f"cannot open session {path}"
                            f"{' (a folder)' if path.is_dir() else ''}: {why}") from None
        self.sql = sqlite3.connect(str(path), timeout=30)
        self.sql.executescript(TABLES)
        self.sql.commit()

    def close(self) -> None:
        self.sql.close()
        self.db.close()

    # -- meta ------------------------------------------------------------------------------
    def meta(self) -> dict:
        return {key: json_value(value, f"{self.path}: coral_meta '{key}'")
                for key, value in self.sql.execute("SELECT key, value FROM coral_meta")}

    def set_meta(self, values: dict) -> None:
        with self.sql:
            self.sql.executemany("INSERT OR REPLACE INTO coral_meta VALUES (?, ?)",
                                 [(k, json.dumps(v)) for k, v in values.items()])

    # -- work ------------------------------------------------------------------------------
    def init(self, modules: list[Path], keep_earlier: bool = False) -> None:
        """Clear the session and enumerate cosmic-ray's mutants of `modules` (its `init`);
        `keep_earlier`: the reusable verdicts stay (an incremental resume)."""
        import importlib

        with self.sql:
            for table in ("coral_meta", "coral_mutants", "coral_kills", "coral_baseline",
                          "coral_fingerprints") + (() if keep_earlier else ("coral_earlier",)):
                self.sql.execute(f"DELETE FROM {table}")
        init = importlib.import_module("cosmic_ray.commands.init")
        enumerate_all = getattr(init, "_all_work_items", None)
        if enumerate_all is None:  # another cosmic-ray: its own init, through its ORM
            init.init(list(modules), self.db, {})
            return
        # cosmic-ray's enumeration, stored as its ORM stores it but in one executemany: the
        # ORM's inserts were 15 s of a 28,000-mutant module's start (a red-team pass)
        rows = [(str(spec.module_path), spec.operator_name,
                 json.dumps(json.dumps(spec.operator_args)), spec.occurrence,
                 spec.start_pos[0], spec.start_pos[1], spec.end_pos[0], spec.end_pos[1],
                 spec.definition_name, item.job_id)
                for item in enumerate_all(list(modules), {}) for spec in item.mutations]
        with self.sql:
            for table in ("work_results", "mutation_specs", "work_items"):
                self.sql.execute(f"DELETE FROM {table}")
            self.sql.executemany("INSERT INTO work_items (job_id) VALUES (?)",
                                 [(job_id,) for job_id in dict.fromkeys(r[-1] for r in rows)])
            self.sql.executemany(
                "INSERT INTO mutation_specs (module_path, operator_name, operator_args, "
                "occurrence, start_pos_row, start_pos_col, end_pos_row, end_pos_col, "
                "definition_name, job_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)

    def items(self) -> list:
        """cosmic-ray's WorkItems, read with one query: its ORM loads each item's mutation
        lazily, one query each (17 s of a 28,000-mutant session's start, read 3 times)."""
        from cosmic_ray.work_item import MutationSpec, WorkItem

        found: dict[str, list] = {job_id: [] for (job_id,) in self.sql.execute(
            "SELECT job_id FROM work_items ORDER BY rowid")}
        for (job_id, module, operator, args, occurrence, start_row, start_col, end_row,
             end_col, definition) in self.sql.execute(
                "SELECT job_id, module_path, operator_name, operator_args, occurrence, "
                "start_pos_row, start_pos_col, end_pos_row, end_pos_col, definition_name "
                "FROM mutation_specs ORDER BY rowid"):
            arguments = json.loads(args) if args is not None else {}
            if isinstance(arguments, str):  # cosmic-ray stores json.dumps in a JSON column
                arguments = json.loads(arguments)
            if job_id in found:
                found[job_id].append(MutationSpec(
                    module_path=module, operator_name=operator, occurrence=occurrence,
                    start_pos=(start_row, start_col), end_pos=(end_row, end_col),
                    operator_args=arguments, definition_name=definition))
        return [WorkItem(job_id=job_id, mutations=specs) for job_id, specs in found.items()]

    def has_items(self) -> bool:
        return self.sql.execute("SELECT 1 FROM work_items LIMIT 1").fetchone() is not None

    def done(self) -> set[str]:
        return {job_id for job_id, _ in self.db.results}

    def results(self) -> dict:
        return dict(self.db.results)

    def record_many(self, verdicts: list[Verdict]) -> None:
        """Coral's rows and cosmic-ray's results in one transaction: a verdict is stored
        whole or not at all, and verdicts that complete together cost one commit. The
        result row is what cosmic-ray's `WorkDB.set_result` writes (its enums by name;
        tests/test_mutation.py reads sessions back with cosmic-ray and `cr-report`)."""
        if not verdicts:
            return
        with self.sql:
            for v in verdicts:
                self.sql.execute("DELETE FROM coral_kills WHERE job_id = ?", (v.job_id,))
                self.sql.execute("INSERT OR REPLACE INTO coral_mutants VALUES (?, ?, ?, ?, ?)",
                                 (v.job_id, v.seconds, v.mode, v.tests_run, int(v.timeout)))
                self.sql.executemany("INSERT OR REPLACE INTO coral_kills VALUES (?, ?, ?)",
                                     [(v.job_id, test, how) for test, how in v.kills])
                result = v.result
                self.sql.execute(
                    "INSERT OR REPLACE INTO work_results (worker_outcome, output, test_outcome,"
                    " diff, job_id) VALUES (?, ?, ?, ?, ?)",
                    (result.worker_outcome.name, result.output,
                     result.test_outcome.name if result.test_outcome is not None else None,
                     result.diff, v.job_id))

    def mutant_rows(self) -> dict[str, tuple]:
        return {row[0]: row[1:] for row in self.sql.execute("SELECT * FROM coral_mutants")}

    def kills(self) -> list[tuple[str, str, str]]:
        return list(self.sql.execute("SELECT job_id, test, how FROM coral_kills"))

    def set_fingerprints(self, prints: dict[str, tuple[str, str | None]]) -> None:
        with self.sql:
            self.sql.executemany("INSERT OR REPLACE INTO coral_fingerprints VALUES (?, ?, ?)",
                                 [(job_id, key, deps) for job_id, (key, deps) in prints.items()])

    def fingerprints(self) -> dict[str, tuple[str, str | None]]:
        return {row[0]: (row[1], row[2])
                for row in self.sql.execute("SELECT * FROM coral_fingerprints")}

    def save_earlier(self, earlier: dict[str, tuple[str, Verdict]]) -> None:
        """Keep `earlier` ({key: (deps, verdict)}) for incremental resumes, whatever
        happens to the session's own rows."""
        with self.sql:
            self.sql.execute("DELETE FROM coral_earlier")
            self.sql.executemany("INSERT INTO coral_earlier VALUES (?, ?, ?)", [
                (key, deps, json.dumps(_verdict_row(verdict)))
                for key, (deps, verdict) in earlier.items()])

    def saved_earlier(self) -> dict[str, tuple[str, Verdict]]:
        from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult

        found = {}
        for key, deps, text in self.sql.execute("SELECT * FROM coral_earlier"):
            row = json_value(text, f"{self.path}: coral_earlier")
            try:
                result = WorkResult(
                    worker_outcome=WorkerOutcome[row["worker_outcome"]], output=row["output"],
                    test_outcome=TestOutcome[row["test_outcome"]] if row["test_outcome"]
                    else None, diff=row["diff"])
                found[key] = (deps, Verdict(row["job_id"], result, float(row["seconds"]),
                                            row["mode"], int(row["tests_run"]),
                                            bool(row["timeout"]),
                                            tuple(tuple(k) for k in row["kills"])))
            except (KeyError, TypeError, ValueError):
                continue  # a damaged row is only a verdict not reused
        return found

    def set_baseline(self, rows: list[dict]) -> None:
        with self.sql:
            self.sql.execute("DELETE FROM coral_baseline")
            self.sql.executemany("INSERT INTO coral_baseline VALUES (?, ?, ?)",
                                 [(r["test"], r["seconds"], json.dumps(r.get("lines", [])))
                                  for r in rows])
