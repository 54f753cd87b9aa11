"""A hostile OpenAI-compatible server on loopback: every way a reply can hurt a client.

The behaviour is chosen per request by the `model` the client names (`openai:MODE`), so one
server serves every mode. It speaks HTTP/1.1 on raw asyncio streams (so it can lie about
lengths, dribble bytes and never finish), runs its loop on a daemon thread, binds only to
127.0.0.1, and stops itself after `lifetime` seconds if a test forgets to.

Modes: see `MODES`. Oversized, endless and bomb bodies are generated as they are sent, so
the server itself stays small whatever it claims to send.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import zlib
from collections import Counter
from typing import Any, Awaitable, Callable
from urllib.parse import parse_qs, urlsplit

TEXT = "def f(x):\n    return x + 1\n"
MiB = 1 << 20


def _chat(content: Any, **extra: Any) -> dict:
    choice = {"index": 0, "message": {"role": "assistant", "content": content},
              "finish_reason": "stop"}
    return {"object": "chat.completion", "choices": [choice],
            "usage": {"prompt_tokens": 7, "completion_tokens": 5}, **extra}


def _with(path: str, value: Any, reply: dict | None = None) -> dict:
    """A valid chat reply with the value at `path` (dotted, list indices as numbers) replaced."""
    reply = json.loads(json.dumps(reply or _chat(TEXT)))
    keys = [int(k) if k.isdigit() else k for k in path.split(".")]
    target = reply
    for key in keys[:-1]:
        target = target[key]
    target[keys[-1]] = value
    return reply


# Modes that answer 200 with a JSON document (object or raw text).
SHAPES: dict[str, Any] = {
    "ok": _chat(TEXT),
    "parts": _chat([{"type": "text", "text": "def f(x):\n"},
                    {"type": "refusal", "refusal": "I will not"},
                    {"type": "text", "text": "    return x + 1\n"}]),
    "choices_dict": _with("choices", {"0": _chat(TEXT)["choices"][0]}),
    "choices_string": _with("choices", "def f(x): pass"),
    "choice_string": _with("choices", ["def f(x): pass"]),
    "no_choices": _with("choices", []),
    "message_string": _with("choices.0.message", "def f(x): pass"),
    "content_dict": _with("choices.0.message.content", {"text": TEXT}),
    "content_int": _with("choices.0.message.content", 42),
    "content_nan": json.dumps(_with("choices.0.message.content", "@@")).replace('"@@"', "NaN"),
    "usage_list": _with("usage", [7, 5]),
    "tokens_huge": _with("usage.prompt_tokens", 2 ** 70),
    "tokens_dict": _with("usage.completion_tokens", {"n": 5}),
    "tokens_inf": json.dumps(_with("usage.prompt_tokens", "@@")).replace('"@@"', "1e999"),
    "tokens_lots": _with("usage.prompt_tokens", "lots"),
    "tokens_negative": _with("usage.prompt_tokens", -3),
    "finish_dict": _with("choices.0.finish_reason", {"why": "stop"}),
    "finish_escape": _with("choices.0.finish_reason", "stop\x1b[31m"),
    "deep": '{"choices": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "html": "<html><body>502 Bad Gateway</body></html>",
}
# Modes with their own handlers (below).
SPECIAL = ("oversized", "endless", "slow_body", "slow_headers", "gzip_bomb", "bad_gzip",
           "truncated_gzip", "key_echo", "key_echo_400", "redirect", "short_body",
           "escape_error")
MODES = tuple(SHAPES) + SPECIAL


class HostileServer:
    """Use as a context manager; `url` ends in /v1. The mode is the request's `model`, or a
    `mode=` query parameter (a GET has no body). `counts` counts requests per mode,
    `targets` records each request line's method and target."""

    def __init__(self, *, lifetime: float = 600.0, oversized_bytes: int = 300 * MiB) -> None:
        self.lifetime = lifetime
        self.oversized_bytes = oversized_bytes
        self.counts: Counter[str] = Counter()
        self.sent: Counter[str] = Counter()  # body bytes written per mode
        self.targets: list[str] = []
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.base_events.Server | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> "HostileServer":
        ready = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._connection, "127.0.0.1", 0))
            self.port = self._server.sockets[0].getsockname()[1]
            self._loop.call_later(self.lifetime, self._loop.stop)
            ready.set()
            self._loop.run_forever()
            self._server.close()
            self._loop.run_until_complete(_cancel_all())
            self._loop.close()

        self._thread = threading.Thread(target=run, name="hostile-server", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("hostile server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._thread is not None:
            try:
                self._loop.call_soon_threadsafe(self._loop.stop)
            except RuntimeError:  # already stopped by its lifetime
                pass
            self._thread.join(10)

    # ----- one connection -----

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip()
                       for k, _, v in (line.partition(":") for line in lines[1:] if line)}
            length = min(int(headers.get("content-length", "0")), MiB)
            raw = await reader.readexactly(length)
            request = json.loads(raw) if raw else {}
            method, target = lines[0].split()[:2]
            self.targets.append(f"{method} {target}")
            query = parse_qs(urlsplit(target).query)
            mode = query["mode"][0] if "mode" in query else str(request.get("model", "ok"))
            self.counts[mode] += 1
            await self._serve(mode, headers, raw, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError,
                asyncio.LimitOverrunError):
            return
        finally:
            if not writer.transport.is_closing():
                writer.close()

    async def _serve(self, mode: str, headers: dict[str, str], raw: bytes,
                     writer: asyncio.StreamWriter) -> None:
        if mode in SHAPES:
            shape = SHAPES[mode]
            body = (shape if isinstance(shape, str) else json.dumps(shape)).encode()
            await self._reply(writer, 200, body, mode=mode)
            return
        handler: Callable[..., Awaitable[None]] = getattr(self, f"_mode_{mode}", self._unknown)
        await handler(writer, headers, raw, mode)

    async def _reply(self, writer: asyncio.StreamWriter, status: int, body: bytes,
                     headers: dict[str, str] | None = None, *, mode: str = "") -> None:
        writer.write(self._head(status, {"Content-Length": str(len(body)), **(headers or {})}))
        writer.write(body)
        self.sent[mode] += len(body)
        await writer.drain()

    @staticmethod
    def _head(status: int, headers: dict[str, str], reason: str = "Status") -> bytes:
        lines = [f"HTTP/1.1 {status} {reason}", "Content-Type: application/json",
                 "Connection: close"] + [f"{k}: {v}" for k, v in headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def _stream(self, writer: asyncio.StreamWriter, mode: str, first: bytes,
                      chunk: bytes, limit: int | None = None, chunked: bool = False) -> None:
        """Write `first`, then `chunk` over and over (until `limit` bytes, or forever)."""
        sent = 0
        for piece in _pieces(first, chunk, limit):
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            sent += len(piece)
            self.sent[mode] += len(piece)
            await writer.drain()

    async def _unknown(self, writer: asyncio.StreamWriter, headers: dict[str, str],
                       raw: bytes, mode: str) -> None:
        await self._reply(writer, 404, b'{"error": {"message": "unknown mode"}}', mode=mode)

    # ----- the special modes -----

    async def _mode_oversized(self, writer, headers, raw, mode) -> None:
        """A valid reply of `oversized_bytes`, with a true Content-Length."""
        prefix = b'{"choices": [{"index": 0, "message": {"content": "'
        suffix = b'"}}]}'
        size = self.oversized_bytes
        writer.write(self._head(200, {"Content-Length": str(len(prefix) + size + len(suffix))}))
        await self._stream(writer, mode, prefix, b"A" * MiB, size)
        writer.write(suffix)
        await writer.drain()

    async def _mode_endless(self, writer, headers, raw, mode) -> None:
        """A chunked reply that never ends."""
        writer.write(self._head(200, {"Transfer-Encoding": "chunked"}))
        await self._stream(writer, mode, b'{"choices": [{"message": {"content": "',
                           b"A" * (256 * 1024), chunked=True)

    async def _mode_slow_body(self, writer, headers, raw, mode) -> None:
        """Headers at once, then the body one byte per second."""
        body = json.dumps(_chat(TEXT)).encode()
        writer.write(self._head(200, {"Content-Length": str(len(body))}))
        for byte in body:
            writer.write(bytes([byte]))
            self.sent[mode] += 1
            await writer.drain()
            await asyncio.sleep(1.0)

    async def _mode_slow_headers(self, writer, headers, raw, mode) -> None:
        """The status line and headers one byte per second (they never end: 600 of them)."""
        head = self._head(200, {f"X-Slow-{i}": "x" for i in range(600)})
        for byte in head:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(1.0)

    async def _mode_gzip_bomb(self, writer, headers, raw, mode) -> None:
        """gzip of a valid reply whose text never ends: ~1 MiB sent per GiB inflated."""
        head, block = _bomb_parts()
        writer.write(self._head(200, {"Content-Encoding": "gzip", "Transfer-Encoding": "chunked"}))
        await self._stream(writer, mode, head, block, chunked=True)

    async def _mode_bad_gzip(self, writer, headers, raw, mode) -> None:
        await self._reply(writer, 200, b"\x1f\x8b\x08\x00garbage that is not deflate" * 10,
                          {"Content-Encoding": "gzip"}, mode=mode)

    async def _mode_truncated_gzip(self, writer, headers, raw, mode) -> None:
        body = zlib.compress(json.dumps(_chat(TEXT)).encode(), wbits=31)
        await self._reply(writer, 200, body[: len(body) // 2], {"Content-Encoding": "gzip"},
                          mode=mode)

    async def _mode_short_body(self, writer, headers, raw, mode) -> None:
        """Content-Length promises more than is sent, then the connection closes."""
        body = json.dumps(_chat(TEXT)).encode()
        writer.write(self._head(200, {"Content-Length": str(len(body) * 2)}) + body)
        await writer.drain()

    async def _mode_key_echo(self, writer, headers, raw, mode, status: int = 503) -> None:
        """An error reply that echoes the request back: headers (the key) and body."""
        echo = {"error": {"message": f"bad request from {headers.get('authorization')}",
                          "headers": headers, "request": raw.decode("utf-8", "replace")}}
        await self._reply(writer, status, json.dumps(echo).encode(),
                          {"X-Echo": headers.get("authorization", "")}, mode=mode)

    async def _mode_key_echo_400(self, writer, headers, raw, mode) -> None:
        await self._mode_key_echo(writer, headers, raw, mode, status=400)

    async def _mode_escape_error(self, writer, headers, raw, mode) -> None:
        """A 400 whose message would clear the screen and recolour the terminal."""
        body = b'{"error": "\x1b[2J\x1b[31mpwned\x1b[0m\r\nline two"}' + b"x" * (10 * MiB)
        await self._reply(writer, 400, body, mode=mode)

    async def _mode_redirect(self, writer, headers, raw, mode) -> None:
        await self._reply(writer, 302, b"", {"Location": f"http://127.0.0.1:{self.port}/v2"},
                          mode=mode)


async def _cancel_all() -> None:
    tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _pieces(first: bytes, chunk: bytes, limit: int | None):
    yield first
    sent = 0
    while limit is None or sent < limit:
        piece = chunk if limit is None else chunk[: limit - sent]
        sent += len(piece)
        yield piece


_BOMB: tuple[bytes, bytes] | None = None


def _bomb_parts() -> tuple[bytes, bytes]:
    """gzip header + reply prefix, and a block that inflates to 64 MiB of "A" each time it
    is sent (after a full flush the compressor starts afresh, so one block repeats)."""
    global _BOMB
    if _BOMB is None:
        packer = zlib.compressobj(9, zlib.DEFLATED, 31)
        head = packer.compress(b'{"choices": [{"message": {"content": "')
        head += packer.flush(zlib.Z_FULL_FLUSH)
        block = packer.compress(b"A" * (64 * MiB)) + packer.flush(zlib.Z_FULL_FLUSH)
        _BOMB = (head, block)
    return _BOMB


if __name__ == "__main__":  # a server to try by hand: python tests/hostile_server.py
    with HostileServer() as server:
        print(f"hostile server on {server.url}; modes: {', '.join(MODES)}")
        time.sleep(server.lifetime)
