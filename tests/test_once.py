"""coral_core.once.Once: a value per key, computed by one thread while the others wait."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from coral_core.once import Once


def test_threads_asking_at_once_share_one_computation():
    calls, started = [], threading.Event()

    def slow():
        calls.append(1)
        started.set()
        time.sleep(0.2)  # the other threads ask while this runs
        return "value"

    table: Once[str] = Once()
    with ThreadPoolExecutor(8) as pool:
        values = list(pool.map(lambda _: table.get("k", slow), range(8)))
    assert values == ["value"] * 8 and len(calls) == 1
    assert table.get("other", lambda: "second") == "second"


def test_an_error_reaches_every_waiter_and_is_kept_unless_retried():
    attempts = []

    def broken():
        attempts.append(1)
        raise RuntimeError("lost")

    kept: Once[int] = Once()
    for _ in range(2):
        with pytest.raises(RuntimeError, match="lost"):
            kept.get("k", broken)
    assert len(attempts) == 1  # the key's answer is the error
    retried: Once[int] = Once(retry_errors=True)
    with pytest.raises(RuntimeError):
        retried.get("k", broken)
    assert retried.get("k", lambda: 5) == 5 and len(attempts) == 2


def test_a_value_keep_refuses_is_returned_then_computed_again():
    answers = iter([None, 7, 9])
    table: Once[int | None] = Once()
    keep = (lambda value: value is not None)
    assert table.get("k", lambda: next(answers), keep) is None
    assert table.get("k", lambda: next(answers), keep) == 7
    assert table.get("k", lambda: next(answers), keep) == 7  # kept from here on
