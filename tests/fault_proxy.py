"""A loopback HTTP reverse proxy that injects faults between a client and a real server.

It speaks HTTP/1.1 with keep-alive on raw asyncio streams (so it can reset a connection
with a real TCP RST, which an ASGI framework cannot) and forwards the requests it lets
through to the upstream server with httpx. It runs its event loop on a background thread
and records what it did, so tests can assert on counts instead of trusting the client.

Faults, drawn with a seeded RNG at `rate` (or taken in order from `script` first):
  "500"   HTTP 500 with a JSON error body
  "429"   HTTP 429 with `Retry-After: <retry_after>`
  "reset" the connection is aborted with RST after the request arrives
  "drop"  the connection is closed (FIN) without a reply
  "slow"  no reply for `slow_seconds` (longer than the client's timeout), then close

Server behaviours it can add: `reject_n` (a status) answers n > 1 with that status and
llama.cpp's message "Only one completion choice is allowed" (400 or 500 by version);
`honour_n` makes a server that ignores `n` (transformers serve) return n choices, by
asking upstream n times with seeds seed, seed + 1, ... and merging the replies.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import struct
import threading
from collections import Counter
from typing import Sequence

import httpx

FAULTS = ("500", "429", "reset", "drop", "slow")
DEFAULT_FAULTS = ("500", "429", "reset", "slow")
_REASONS = {200: "OK", 400: "Bad Request", 429: "Too Many Requests", 500: "Internal Server Error"}


class FaultProxy:
    """Use as a context manager; `url` is the proxy's base URL (same path layout as upstream)."""

    def __init__(
        self,
        upstream: str,
        *,
        rate: float = 0.3,
        seed: int = 0,
        faults: Sequence[str] = DEFAULT_FAULTS,
        script: Sequence[str] = (),
        slow_seconds: float = 5.0,
        retry_after: int = 1,
        latency: float = 0.0,
        reject_n: int | None = None,
        honour_n: bool = False,
    ) -> None:
        unknown = (set(faults) | set(script)) - {"ok"}
        if unknown - set(FAULTS):
            raise ValueError(f"unknown faults: {sorted(unknown - set(FAULTS))}")
        self.upstream = upstream.rstrip("/")
        self.rate, self.faults, self.script = rate, tuple(faults), list(script)
        self.slow_seconds, self.retry_after = slow_seconds, retry_after
        self.latency, self.reject_n, self.honour_n = latency, reject_n, honour_n
        self._rng = random.Random(seed)  # nosec B311 - seeded fault schedule, not security
        self.counts: Counter[str] = Counter()  # "ok", "reject_n" or a fault name
        self.attempts_per_call: Counter[str] = Counter()  # by X-Coral-Call-Id
        self.bodies: list[dict] = []  # every request body received, in arrival order
        self.headers: list[dict[str, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.base_events.Server | None = None
        self._client: httpx.AsyncClient | None = None
        self.port = 0

    @property
    def url(self) -> str:
        path = httpx.URL(self.upstream).path.rstrip("/")
        return f"http://127.0.0.1:{self.port}{path}"

    @property
    def requests(self) -> int:
        return sum(self.counts.values())

    @property
    def injected(self) -> int:
        return sum(count for kind, count in self.counts.items() if kind in FAULTS)

    # ----- lifecycle -----

    def __enter__(self) -> "FaultProxy":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> "FaultProxy":
        ready = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self._open())
            ready.set()
            self._loop.run_forever()
            self._loop.run_until_complete(self._close())
            self._loop.close()

        self._thread = threading.Thread(target=run, name="fault-proxy", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("fault proxy did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop = self._thread = None

    async def _open(self) -> None:
        self._client = httpx.AsyncClient(base_url=httpx.URL(self.upstream).copy_with(path="/"),
                                         timeout=120.0)
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _close(self) -> None:
        assert self._server is not None and self._client is not None
        self._server.close()
        tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._client.aclose()

    # ----- per connection -----

    def _choose(self) -> str:
        if self.script:
            return self.script.pop(0)
        if self._rng.random() < self.rate:
            return self._rng.choice(self.faults)
        return "ok"

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                request_line, *header_lines = head.decode("latin-1").split("\r\n")
                method, target, _ = request_line.split(" ", 2)
                headers = {}
                for line in header_lines:
                    if ":" in line:
                        name, value = line.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
                try:
                    if not await self._serve(method, target, headers, body, reader, writer):
                        return
                finally:
                    self.in_flight -= 1
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            return  # a cancelled handler would make asyncio log an error at shutdown
        finally:
            if not writer.transport.is_closing():
                writer.close()

    async def _serve(self, method: str, target: str, headers: dict[str, str], body: bytes,
                     reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Handle one request; False when the connection is finished."""
        self.headers.append(headers)
        parsed = json.loads(body) if body else {}
        if method == "POST":
            self.bodies.append(parsed)
        call_id = headers.get("x-coral-call-id")
        if call_id:
            self.attempts_per_call[call_id] += 1
        fault = self._choose() if method == "POST" else "ok"
        if fault == "ok" and self.reject_n is not None and parsed.get("n", 1) > 1:
            fault = "reject_n"
        self.counts[fault] += 1
        if fault == "reset":
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return False
        if fault == "drop":
            writer.close()
            return False
        if fault == "slow":
            # Wait for the client to give up (EOF) or for slow_seconds, then hang up.
            try:
                await asyncio.wait_for(reader.read(1), self.slow_seconds)
            except asyncio.TimeoutError:
                pass
            writer.close()
            return False
        if fault == "500":
            await self._reply(writer, 500, {"error": {"message": "injected fault"}})
        elif fault == "429":
            await self._reply(writer, 429, {"error": {"message": "rate limited (injected)"}},
                              {"Retry-After": str(self.retry_after)})
        elif fault == "reject_n":
            await self._reply(writer, self.reject_n, {
                "error": {"message": "Only one completion choice is allowed (injected)"}})
        else:
            if self.latency:
                await asyncio.sleep(self.latency)
            n = parsed.get("n", 1) if method == "POST" else 1
            if self.honour_n and n > 1:
                status, content = await self._fan_out(target, parsed, n)
            else:
                status, content = await self._forward(method, target, body)
            await self._reply(writer, status, content)
        return True

    async def _forward(self, method: str, target: str, body: bytes) -> tuple[int, bytes]:
        assert self._client is not None
        upstream = await self._client.request(
            method, target, content=body, headers={"content-type": "application/json"})
        return upstream.status_code, upstream.content

    async def _fan_out(self, target: str, parsed: dict, n: int) -> tuple[int, bytes]:
        merged: dict | None = None
        for index in range(n):
            single = {**parsed, "n": 1, "seed": parsed.get("seed", 0) + index}
            status, content = await self._forward("POST", target, json.dumps(single).encode())
            if status != 200:
                return status, content
            reply = json.loads(content)
            choice = {**reply["choices"][0], "index": index}
            if merged is None:
                merged = {**reply, "choices": [choice]}
            else:
                merged["choices"].append(choice)
                merged["usage"]["completion_tokens"] += reply["usage"]["completion_tokens"]
                merged["usage"]["total_tokens"] += reply["usage"]["completion_tokens"]
        return 200, json.dumps(merged).encode()

    @staticmethod
    async def _reply(writer: asyncio.StreamWriter, status: int, payload: dict | bytes,
                     headers: dict[str, str] | None = None) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}",
                 f"Content-Length: {len(data)}", "Connection: keep-alive"]
        all_headers = {"Content-Type": "application/json", **(headers or {})}
        lines += [f"{name}: {value}" for name, value in all_headers.items() if value]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data)
        await writer.drain()
