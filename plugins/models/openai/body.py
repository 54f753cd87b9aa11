"""Reading a streamed reply body under a byte cap, inflating gzip/deflate under the same cap.

httpx would read a whole body into memory and inflate each received chunk without limit (a
64 KiB gzip chunk of zeros inflates to 64 MiB). Here the raw bytes are counted as they
arrive, and decompression is asked for at most the room left under the cap, so memory stays
within the cap whatever the server sends: an endless or oversized body, or a gzip bomb, ends
the attempt with `BodyTooLarge` as soon as it crosses the cap.
"""

from __future__ import annotations

import zlib
from typing import Iterable

import httpx

from .transport import time_left

CHUNK = 64 * 1024


class BodyTooLarge(Exception):
    """The reply (as sent, or inflated) is over the cap."""


class BadEncoding(Exception):
    """The body is compressed with an unknown coding, or its compressed stream is corrupt."""


class _Inflater:
    """gzip or zlib/raw deflate, handing out at most `room` bytes per call."""

    def __init__(self, coding: str) -> None:
        self.coding = coding
        self._raw_fallback = coding == "deflate"  # servers send zlib-wrapped or raw deflate
        wbits = 16 + zlib.MAX_WBITS if coding in ("gzip", "x-gzip") else zlib.MAX_WBITS
        self._engine = zlib.decompressobj(wbits)
        self._started = False

    def feed(self, data: bytes, room: int) -> bytes:
        """Inflate `data`; more than `room` bytes of output means over the cap."""
        out = bytearray()
        while data:
            if self._engine.eof:
                if data.strip(b"\0\r\n "):
                    raise BadEncoding(f"data after the end of the {self.coding} stream")
                return bytes(out)
            try:
                piece = self._engine.decompress(data, max(room - len(out), 0) + 1)
            except zlib.error as error:
                if self._raw_fallback and not self._started:
                    self._raw_fallback, self._engine = False, zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                raise BadEncoding(f"corrupt {self.coding} body ({error})") from None
            self._started = True
            out += piece
            if len(out) > room:
                raise BodyTooLarge("inflated")
            data = self._engine.unconsumed_tail
        return bytes(out)

    def finish(self) -> None:
        if not self._engine.eof:
            raise BadEncoding(f"the {self.coding} body ended before its end marker")


def content_coding(response: httpx.Response) -> str:
    """The response's Content-Encoding, lower-cased ("identity" when absent)."""
    codings = [c.strip().lower() for c in response.headers.get("content-encoding", "").split(",")]
    codings = [c for c in codings if c and c != "identity"]
    if len(codings) > 1:
        raise BadEncoding(f"stacked content encodings ({', '.join(codings[:4])})")
    return codings[0] if codings else "identity"


def read_capped(response: httpx.Response, cap: int, *, truncate: bool = False) -> bytes:
    """The decoded body of a streamed `response`, at most `cap` bytes.

    Over the cap (raw or inflated): `BodyTooLarge`, or with `truncate` the first `cap`
    bytes (for error excerpts). Checks the thread's deadline between chunks as well.
    """
    declared = response.headers.get("content-length", "")
    if not truncate and declared.isdigit() and int(declared) > cap:
        raise BodyTooLarge(f"declared {declared} bytes")
    coding = content_coding(response)
    if coding not in ("identity", "gzip", "x-gzip", "deflate"):
        raise BadEncoding(f"unsupported content encoding {coding[:40]!r}")
    inflater = None if coding == "identity" else _Inflater(coding)
    body = bytearray()
    raw = 0
    chunks: Iterable[bytes] = response.iter_raw(CHUNK)
    for chunk in chunks:
        left = time_left()
        if left is not None and left <= 0:
            raise httpx.ReadTimeout("the deadline of this attempt has passed")
        raw += len(chunk)
        try:
            if raw > cap:
                raise BodyTooLarge("sent")
            body += chunk if inflater is None else inflater.feed(chunk, cap - len(body))
            if len(body) > cap:
                raise BodyTooLarge("inflated")
        except BodyTooLarge:
            if truncate:
                return bytes(body[:cap])
            raise
    if inflater is not None:
        inflater.finish()
    return bytes(body)
