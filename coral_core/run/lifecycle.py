"""Lifecycle hooks during a run: a plugin's exception is recorded and the run goes on,
or, with `[run] fail_fast`, stops the run with one line.

Failures are counted in the run store (meta `hook_errors`), so the count in the summary
covers a resumed run's earlier processes too; each (plugin, hook) is warned about once
per process.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from coral_core import plugins
from coral_core.files.decoding import json_value
from coral_core.errors import UserError
from coral_core.run.store import RunStore, RunStoreError

log = logging.getLogger(__name__)
KEPT = 20  # distinct failure messages kept in the store


class Lifecycle:
    def __init__(self, store: RunStore, fail_fast: bool):
        self.store = store
        self.fail_fast = fail_fast
        self.count, self.errors = _saved(store)
        self._warned: set[tuple[str, str]] = set()

    def notify(self, hook_name: str, **kwargs: Any) -> None:
        for failure in plugins.notify(hook_name, **kwargs):
            line = f"plugin '{failure.plugin}' failed in {failure.hook}: {failure.error}"
            if self.fail_fast:
                raise UserError(f"{line} (stopped by --fail-fast)")
            self.count += 1
            if line not in self.errors and len(self.errors) < KEPT:
                self.errors.append(line)
            self.store.set_meta("hook_errors", json.dumps({"count": self.count,
                                                           "errors": self.errors}))
            if (failure.plugin, failure.hook) not in self._warned:
                self._warned.add((failure.plugin, failure.hook))
                log.warning("%s; the run goes on (counted in the summary's hook_errors; "
                            "--fail-fast stops instead)", line)


def hook_errors(store: RunStore) -> int:
    """How many lifecycle hook calls raised in this run so far."""
    return _saved(store)[0]


def _saved(store: RunStore) -> tuple[int, list[str]]:
    """(count, distinct messages) kept in the store's meta table, checked."""
    where = f"{store.path}: hook_errors"
    saved = json_value(store.meta("hook_errors") or "null", where)
    if saved is None:
        return 0, []
    count, errors = (saved.get("count"), saved.get("errors")) if isinstance(saved, dict) \
        else (None, None)
    if (not isinstance(count, int) or isinstance(count, bool) or not isinstance(errors, list)
            or not all(isinstance(e, str) for e in errors)):
        raise RunStoreError(f"{where} has the wrong shape; the store is damaged")
    return count, errors
