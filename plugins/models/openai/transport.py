"""An httpx client whose every attempt runs under a deadline covering the whole exchange.

httpx's `timeout` bounds each socket operation, not a request: a server that sends one byte
per second (in the headers or the body) never trips a 5 s read timeout and can hold a
request for hours. Here the network backend under httpx's connection pool clamps the timeout
of every connect, TLS handshake, send and receive to the time left before the deadline of
the attempt running on the calling thread (`deadline(seconds)`), and fails once it has
passed. httpx's sync client does its I/O on the caller's thread, so a thread-local deadline
is exactly the attempt's. Name resolution (getaddrinfo) is the one step it cannot bound.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from contextlib import contextmanager
from typing import Any, Iterable, Iterator
from urllib.parse import urlsplit

import httpcore
import httpx

_local = threading.local()


@contextmanager
def deadline(seconds: float) -> Iterator[float]:
    """Run the block's HTTP I/O on this thread under a deadline `seconds` from now."""
    previous = getattr(_local, "at", None)
    _local.at = time.monotonic() + seconds
    try:
        yield _local.at
    finally:
        _local.at = previous


def time_left() -> float | None:
    """Seconds left before this thread's deadline (None outside `deadline`)."""
    at = getattr(_local, "at", None)
    return None if at is None else at - time.monotonic()


def _clamp(timeout: float | None, error: type[Exception]) -> float | None:
    left = time_left()
    if left is None:
        return timeout
    if left <= 0:
        raise error("the deadline of this attempt has passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose reads and writes never outlast the current attempt's deadline."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _clamp(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _clamp(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.start_tls(
            ssl_context, server_hostname, _clamp(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's network backend, wrapped so that every operation respects `deadline`."""

    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.connect_tcp(
            host, port, _clamp(timeout, httpcore.ConnectTimeout), local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None
                            ) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.connect_unix_socket(
            path, _clamp(timeout, httpcore.ConnectTimeout), socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def environment_proxy(url: str) -> str | None:
    """The proxy the environment names for `url` (http_proxy, https_proxy, no_proxy...).

    httpx reads these itself only when it builds its own transport; this client brings
    its own, so it asks the standard library the same question.
    """
    parts = urlsplit(url)
    proxies = urllib.request.getproxies()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return proxy


def deadline_client(*, base_url: str, timeout: float, connections: int, auth: httpx.Auth,
                    headers: dict[str, str]) -> httpx.Client:
    """An httpx client over a `DeadlineBackend`; redirects are not followed."""
    transport = httpx.HTTPTransport(
        limits=httpx.Limits(max_connections=connections,
                            max_keepalive_connections=connections),
        proxy=environment_proxy(base_url),
    )
    pool = getattr(transport, "_pool", None)
    if not hasattr(pool, "_network_backend"):  # an httpx/httpcore release changed its layout
        raise RuntimeError("httpx transport has no network backend to wrap; the per-attempt "
                           "deadline cannot be enforced with this httpx version")
    pool._network_backend = DeadlineBackend(pool._network_backend)  # type: ignore[union-attr]
    # A query in the base URL (`?api-version=...`) goes on every request's URL, after its
    # path: httpx appends the path to the base URL's raw path, query included, which sent
    # a red-team's requests to /v1?api-version=2024-06-01/chat/completions.
    url = httpx.URL(base_url)
    return httpx.Client(base_url=url.copy_with(query=None), params=url.params,
                        timeout=httpx.Timeout(timeout), transport=transport, auth=auth,
                        headers=headers, follow_redirects=False)
