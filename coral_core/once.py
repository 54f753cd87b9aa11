"""Once: each key's value computed by whichever thread asks first, the others waiting for it
(a task's reference run, a canonical solution's CPU time, a HumanEval check of a program
already seen)."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Callable, Generic, Hashable, TypeVar

V = TypeVar("V")


class Once(Generic[V]):
    """A table of values computed once per key. An exception reaches every thread waiting
    for that key; with `retry_errors` (a failure that says nothing about the key, like a
    lost sandbox worker) it is also forgotten, as is a value `keep` refuses, so that a
    later call computes again."""

    def __init__(self, retry_errors: bool = False) -> None:
        self.retry_errors = retry_errors
        self._lock = threading.Lock()
        self._futures: dict[Hashable, Future] = {}

    def get(self, key: Hashable, compute: Callable[[], V],
            keep: Callable[[V], bool] | None = None) -> V:
        with self._lock:
            future = self._futures.get(key)
            owner = future is None
            if owner:
                future = self._futures[key] = Future()
        if owner:
            try:
                value = compute()
            except BaseException as error:  # noqa: B902 - every waiter sees it
                if self.retry_errors:
                    self._forget(key)
                future.set_exception(error)
            else:
                if keep is not None and not keep(value):
                    self._forget(key)
                future.set_result(value)
        return future.result()

    def _forget(self, key: Hashable) -> None:
        with self._lock:
            self._futures.pop(key, None)
